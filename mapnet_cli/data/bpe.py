"""The BPE tokenizer: train on preprocessed sentences, or load and check an existing one.

Word boundaries use Metaspace (a space becomes "▁" glued to the next word) with
the matching decoder, so `decode(encode(line)) == line` for every
preprocessed line whose characters the vocabulary knows (all of them, for the
corpus it was trained on). A trained tokenizer has the special tokens at ids 0..4; a reused one
(BPE or a BERT's WordPiece) keeps its own ids, which `shard` reads from it.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from ..atomic import atomic_file, sha256_file
from ..errors import MapnetError

SPECIAL_TOKENS = ("[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]")  # ids 0..4, in this order
METASPACE = "\u2581"


def _metaspace():
    from tokenizers import decoders, pre_tokenizers

    return (
        pre_tokenizers.Metaspace(replacement=METASPACE, prepend_scheme="always"),
        decoders.Metaspace(replacement=METASPACE, prepend_scheme="always"),
    )


def train_tokenizer(files: Iterable[str | Path], vocab_size: int, min_frequency: int):
    """Train a BPE tokenizer on text files (one sentence per line; empty lines are ignored)."""
    from tokenizers import Tokenizer, models, normalizers, trainers

    tok = Tokenizer(models.BPE(unk_token="[UNK]"))
    # Training reads lines with their "\n"; Strip keeps it out of the vocabulary. Output lines
    # never start or end with whitespace, so Strip changes nothing at encode time.
    tok.normalizer = normalizers.Strip()
    tok.pre_tokenizer, tok.decoder = _metaspace()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size, min_frequency=min_frequency, special_tokens=list(SPECIAL_TOKENS), show_progress=False
    )
    tok.train([str(f) for f in files], trainer)
    check_specials(tok, "the trained tokenizer")
    return tok


def load_tokenizer(path: str | Path):
    """Load a tokenizer.json to reuse: BPE (mapnet's own) or WordPiece (a Hugging Face BERT's), with
    the five special tokens wherever its vocabulary puts them (BERT's: [PAD] 0, [UNK] 100, [CLS] 101 ...);
    `shard` reads their ids from it."""
    from tokenizers import Tokenizer, models

    path = Path(path)
    if not path.is_file():
        raise MapnetError(f"tokenizer not found: {path}")
    try:
        tok = Tokenizer.from_file(str(path))
    except Exception as exc:  # tokenizers raises a bare Exception for malformed files
        raise MapnetError(f"{path} is not a tokenizers tokenizer.json ({exc})") from None
    if not isinstance(tok.model, (models.BPE, models.WordPiece)):
        raise MapnetError(f"{path}: expected a BPE or WordPiece tokenizer, got {type(tok.model).__name__}")
    special_ids(tok, path)
    return tok


def special_ids(tok, path: str | Path) -> dict[str, int]:
    """{token: id} of the five special tokens in `tok`, the tokenizer read from `path`, or one line naming the
    file and every missing token. Each reader calls this right after loading a tokenizer, before anything is
    built on the ids (a TemplateProcessing given no id for "[CLS]" fails inside tokenizers, not in one line)."""
    ids = {name: tok.token_to_id(name) for name in SPECIAL_TOKENS}
    missing = [name for name, i in ids.items() if i is None]
    if missing:
        raise MapnetError(
            f"{path}: lacks the special token(s) {', '.join(missing)} (mapnet needs {', '.join(SPECIAL_TOKENS)})"
        )
    return ids


def role_ids(tok, path: str | Path) -> dict[str, int]:
    """`special_ids` keyed by role ("pad", "unk", "cls", "sep", "mask": the keys of a shard manifest's
    `special_ids` and of the masking code), refusing a tokenizer that gives two roles one id (masking could not
    tell padding from [MASK]). Ids are as the tokenizer has them: mapnet's BPE 0..4, BERT's WordPiece 0, 100..103."""
    ids = {name.strip("[]").lower(): i for name, i in special_ids(tok, path).items()}
    if len(set(ids.values())) != len(ids):
        raise MapnetError(f"{path}: two special tokens share one id ({ids})")
    return ids


def check_fits(tok, path: str | Path, rows: int, table: str) -> None:
    """Refuse `tok` (read from `path`) where an id it can give is no row of the embedding table it will index
    (`rows`, the model's vocabulary; `table` names the model): torch would raise IndexError on the first sentence
    that meets such an id, after every model before it was scored. Called before any model runs."""
    ids = tok.get_vocab(with_added_tokens=True).values()
    top = max(ids, default=-1)
    if top >= rows:
        raise MapnetError(
            f"{path} gives token ids up to {top} ({tok.get_vocab_size(with_added_tokens=True)} tokens), "
            f"but {table} has {rows} embedding rows (ids 0-{rows - 1}): the tokenizer is not the one the "
            "model was trained with; put back the model's own tokenizer.json"
        )


def is_wordpiece(tok) -> bool:
    from tokenizers import models

    return isinstance(tok.model, models.WordPiece)


def check_specials(tok, source: str) -> None:
    wrong = [
        f"{name} is {tok.token_to_id(name)}, expected {i}"
        for i, name in enumerate(SPECIAL_TOKENS)
        if tok.token_to_id(name) != i
    ]
    if wrong:
        raise MapnetError(f"{source}: special token ids are wrong: {'; '.join(wrong)}")


def save_tokenizer(tok, path: str | Path) -> None:
    with atomic_file(path, "w") as fh:
        fh.write(tok.to_str(pretty=True))


def tokenizer_sha256(path: str | Path) -> str:
    """Identity of a tokenizer: the sha256 of its tokenizer.json bytes."""
    return sha256_file(path)
