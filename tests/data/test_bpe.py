"""The special-token check is one function (`bpe.special_ids`), and every reader of a tokenizer calls it before
building on the ids (issue 44): `mapnet export` before TemplateProcessing, which otherwise fails inside tokenizers
("Expected Union[Tuple[str, int], ...]"), `finetune-glue`/`probe` (TextEncoder), `blimp` on an exported folder,
`preprocess --tokenizer`. Real tokenizer files, each lacking [CLS] and [MASK]."""

from __future__ import annotations

from pathlib import Path

import pytest

from mapnet_cli.data import bpe
from mapnet_cli.errors import MapnetError
from mapnet_cli.evaluation.blimp.models import hf_text
from mapnet_cli.evaluation.glue.encode import TextEncoder
from mapnet_cli.export import write_tokenizer
from mapnet_cli.settings import Settings


def write_without(path: Path, absent: set[str]) -> Path:
    """A BPE tokenizer.json (the model mapnet trains; preprocess reuses BPE or WordPiece) with the special tokens
    but `absent`, and a few words."""
    from tokenizers import Tokenizer, models, pre_tokenizers

    specials = [t for t in bpe.SPECIAL_TOKENS if t not in absent]
    vocab = {t: i for i, t in enumerate([*specials, "the", "cat", "sat", "."])}
    tok = Tokenizer(models.BPE(vocab, [], unk_token="[UNK]" if "[UNK]" in vocab else None))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    tok.add_special_tokens(specials)
    path.parent.mkdir(parents=True, exist_ok=True)
    tok.save(str(path))
    return path


def test_every_reader_names_the_file_and_each_missing_token_before_using_the_ids(tmp_path):
    folder = tmp_path / "hf"
    path = write_without(folder / "tokenizer.json", {"[CLS]", "[MASK]"})
    expected = f"{path}: lacks the special token(s) [CLS], [MASK] (mapnet needs [PAD], [UNK], [CLS], [SEP], [MASK])"
    readers = {
        "export": lambda: write_tokenizer(path, tmp_path / "out" / "tokenizer.json", Settings().preprocess),
        "finetune-glue, probe": lambda: TextEncoder(path, Settings().preprocess, max_len=128),
        "blimp on an exported folder": lambda: hf_text(folder, 64),
        "preprocess --tokenizer": lambda: bpe.load_tokenizer(path),
    }
    for name, read in readers.items():
        with pytest.raises(MapnetError) as exc:
            read()
        assert str(exc.value) == expected, name
    assert not (tmp_path / "out" / "tokenizer.json").exists()


def test_a_tokenizer_past_the_embedding_table_is_refused_naming_both_sizes(tmp_path):
    """`check_fits`, which blimp and probe call before any model runs: an id without an embedding row was torch's
    IndexError, after the models before it had been scored."""
    from tokenizers import Tokenizer

    path = write_without(tmp_path / "tokenizer.json", set())  # ids 0-8
    tok = Tokenizer.from_file(str(path))
    bpe.check_fits(tok, path, 9, "the model in hf")
    with pytest.raises(MapnetError) as exc:
        bpe.check_fits(tok, path, 6, "the model in hf")
    assert str(exc.value) == (
        f"{path} gives token ids up to 8 (9 tokens), but the model in hf has 6 embedding rows "
        "(ids 0-5): the tokenizer is not the one the model was trained with; put back the "
        "model's own tokenizer.json"
    )


def test_special_ids_returns_each_tokens_id_and_lists_all_that_are_missing(tmp_path):
    complete = write_without(tmp_path / "complete.json", set())
    from tokenizers import Tokenizer

    assert bpe.special_ids(Tokenizer.from_file(str(complete)), complete) == {
        "[PAD]": 0,
        "[UNK]": 1,
        "[CLS]": 2,
        "[SEP]": 3,
        "[MASK]": 4,
    }
    bare = write_without(tmp_path / "bare.json", set(bpe.SPECIAL_TOKENS))
    with pytest.raises(
        MapnetError, match=r"bare\.json: lacks the special token\(s\) \[PAD\], \[UNK\], \[CLS\], \[SEP\], \[MASK\]"
    ):
        bpe.special_ids(Tokenizer.from_file(str(bare)), bare)


def test_role_ids_keys_the_ids_by_role_and_refuses_two_roles_on_one_id(tmp_path):
    """`shard` and `inspect-masks` read the special ids by role (a manifest's keys); one function for both, the
    same missing-token line as every other reader, and a tokenizer that gives [PAD] and [MASK] one id
    refused (masking would replace padding)."""
    from tokenizers import Tokenizer

    complete = write_without(tmp_path / "complete.json", set())
    assert bpe.role_ids(Tokenizer.from_file(str(complete)), complete) == {
        "pad": 0,
        "unk": 1,
        "cls": 2,
        "sep": 3,
        "mask": 4,
    }
    partial = write_without(tmp_path / "partial.json", {"[SEP]"})
    with pytest.raises(MapnetError, match=r"partial\.json: lacks the special token\(s\) \[SEP\] \(mapnet needs"):
        bpe.role_ids(Tokenizer.from_file(str(partial)), partial)

    # tokenizers keeps one token per id when it reads a file, so two roles on one id come only from an object that
    # answers token_to_id so (a hand-built tokenizer, a wrapper): the check stays, tested on such an answer.
    class SharedId:
        def token_to_id(self, token):
            return {"[PAD]": 0, "[UNK]": 1, "[CLS]": 2, "[SEP]": 3, "[MASK]": 0}[token]

    with pytest.raises(MapnetError, match=r"shared\.json: two special tokens share one id"):
        bpe.role_ids(SharedId(), tmp_path / "shared.json")
