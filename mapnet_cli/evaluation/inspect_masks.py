"""What a trained MAP-Net proposes, or an adaptive table masks: per-token probabilities, sampled masks,
word-type preferences (and, for the table, the vocabulary entries it masks most and least).

    result = inspect_masks("runs/mapnet", text="The computer computes a computation.", seed=0)
    result.sequences[0].tokens, result.sequences[0].probabilities, result.sequences[0].masked
    result.most, result.least          # word types masked most / least often relative to uniform
    result = inspect_masks("runs/amlm")                     # --masking adaptive: result.strategy == "adaptive"
    result.tokens_most, result.tokens_least                 # table entries over the base rate, highest / lowest

The library half of `mapnet inspect-masks` (the rich rendering lives in `commands/inspect_masks.py`; the guide:
docs/masking.md#mapnet-inspect-masks). A run folder means its newest complete checkpoint; a checkpoint with
neither a MAP-Net nor an adaptive table is refused with one line. Inputs: free text, processed the way
`mapnet preprocess` processes a corpus (one row per sentence), or by default the run's first validation
sequences. Masks are drawn as in training (K = round(mask_prob x n)); where the weights come from, how each draw
is made and what `relative` and the table ranks mean: docs/internals.md#evaluationinspect_maskspy.
"""

from __future__ import annotations

import dataclasses
import io
import json
from collections.abc import Iterable, Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np
import torch

from ..errors import MapnetError
from ..masking.adaptive import AdaptiveTable
from ..masking.mapnet.sampling import gumbel_top_k
from ..masking.strategy import frequency_masks
from ..masking.uniform import eligible_positions, mask_counts
from ..model import checkpoint
from ..train.run_loader import load_run, recorded_shards, weight_names

SCHEMA = "mapnet.inspect-masks/1"
METASPACE = "\u2581"  # the BPE word-start marker (data/bpe.py)


@dataclass
class SequenceView:
    tokens: list[str]  # BPE pieces, "▁" marking a word start
    ids: list[int]
    probabilities: list[float | None]  # p_prop per token; None where the token cannot be masked
    masked: list[int]  # positions of one sampled mask
    k: int
    eligible: int
    entropy: float  # proposal entropy / log n (1 = uniform)


@dataclass
class WordStat:
    word: str
    occurrences: int  # token positions of this word type across the shown rows
    mask_rate: float  # how often a token of it was masked, over all samples
    relative: float  # mask_rate / the uniform rate at the same positions


@dataclass
class TokenStat:
    token: str
    id: int
    relative: float  # the adaptive table's weight over the base rate (1 = uniform)
    observed: int  # times the token was masked in training (the evidence behind its weight)


@dataclass
class Inspection:
    checkpoint: str
    step: int
    source: str  # "text", "file", "stdin" or "valid"
    seed: int
    samples: int
    mask_prob: float
    sequences: list[SequenceView]
    most: list[WordStat] = field(default_factory=list)
    least: list[WordStat] = field(default_factory=list)
    min_count: int = 1  # word types seen fewer times than this are left out of most / least
    left_out: int = 0  # how many word types that was
    strategy: str = "mapnet"  # what proposes the masks: "mapnet" or "adaptive"
    tokens_most: list[TokenStat] = field(default_factory=list)  # adaptive: the table's highest entries
    tokens_least: list[TokenStat] = field(default_factory=list)  # adaptive: its lowest
    updates: int | None = None  # adaptive: table updates so far

    def to_json(self) -> dict:
        return {"schema": SCHEMA, **asdict(self)}


# ---------------------------------------------------------------- loading
def load_table(run) -> AdaptiveTable | None:
    """The adaptive table of a loaded run (`load_run`), or None when it has none (no adaptive.* weights)."""
    if not any(name.startswith("adaptive.") for name in weight_names(run.checkpoint / checkpoint.WEIGHTS)):
        return None
    m = run.settings.masking
    table = AdaptiveTable(
        run.model.cfg.vocab_size, m.mask_prob, decay=m.adaptive.decay, every=m.adaptive.every, score=m.adaptive.score
    )
    run.load_into({"adaptive": table})
    return table


# ---------------------------------------------------------------- inputs
def text_pieces(text: str, settings) -> Iterator[str]:
    """--text or stdin cut as `mapnet preprocess` cuts a plain-text file (`data/documents.py`): blank lines end
    paragraphs, single line breaks are soft wraps, and no piece is longer than preprocess.max_chunk_chars, which
    spaCy's max_length is set above (one whole 1.2 MB line was spaCy's E088)."""
    from ..data.documents import Assembler, line_fragments, text_documents
    from ..data.inputs import ReadStats

    limit = settings.preprocess.max_chunk_chars
    pieces = text_documents(line_fragments(io.StringIO(text), limit), "blank_line", Assembler(limit, ReadStats()))
    return (p for p in pieces if p is not None)


def check_file(file: str | Path) -> Path:
    """--file must name one readable text file: a folder, a missing file, damaged compressed data or a binary file
    is refused before the checkpoint is loaded (its first bytes, decompressed, by preprocess's own `Source`)."""
    from ..data.inputs import Source, discover, is_binary
    from ..settings import PreprocessSettings

    path = Path(file)
    if path.is_dir():
        raise MapnetError(f"--file {path} is a folder: give one text file")
    if not path.is_file():
        raise MapnetError(f"cannot read {path}: no such file")
    (inp,) = discover([path], PreprocessSettings())
    if inp.format in ("parquet", "arrow"):  # columns of text, read as preprocess reads them (`file_pieces`)
        return path
    source = Source(inp)
    try:
        binary = is_binary(source.head)
    finally:
        source.close()
    if binary:
        raise _binary(path)
    return path


def _binary(path: Path) -> MapnetError:
    from ..data.inputs import SNIFF_BYTES

    return MapnetError(
        f"--file {path} looks binary (NUL bytes in its first {SNIFF_BYTES} bytes, after "
        "decompressing): inspect-masks reads text, as preprocess does"
    )


def file_pieces(path: Path, settings) -> Iterator[str]:
    """--file read by preprocess's own reader (`data/readers.py` InputReader): .gz, .bz2 and .xz decompressed,
    the format by extension and first bytes (text, jsonl, parquet, ...), invalid UTF-8 replaced, pieces under
    preprocess.max_chunk_chars. A binary file is refused (it read as text, bytes and all)."""
    from ..data.inputs import ReadStats, discover
    from ..data.readers import InputReader

    (inp,) = discover([path], settings.preprocess)
    # explicit=False: the reader skips a binary file and says so, rather than suggest preprocess.on_binary.
    reader = InputReader(dataclasses.replace(inp, explicit=False), settings, ReadStats())
    for piece in reader:
        if piece is not None:
            yield piece
    if reader.skipped:  # `check_file` looked already; the run's settings may read the file otherwise
        raise _binary(path)


def text_rows(pieces: Iterable[str], tokenizer, preprocess_settings, max_len: int, limit: int) -> list[list[int]]:
    """[CLS] + the BPE ids of one processed sentence + [SEP], per sentence, at most `limit` rows; `pieces` are read
    only until there are enough."""
    from ..data.cleaning import word_marker
    from ..data.textproc import TextProcessor  # spaCy + sacremoses: only when free text is given

    processor = TextProcessor(preprocess_settings, word_marker(tokenizer))  # split as preprocess did, then cleaned
    rows = []
    for piece in (p for p in pieces if p.strip()):
        for sentence in processor.process([piece])[0].sentences:
            # No post-processor: a BERT tokenizer's own [CLS]/[SEP] would be doubled.
            ids = tokenizer.encode(sentence, add_special_tokens=False).ids[: max_len - 2]
            rows.append([tokenizer.token_to_id("[CLS]"), *ids, tokenizer.token_to_id("[SEP]")])
            if len(rows) >= limit:
                return rows
    if not rows:
        raise MapnetError("the input text holds no sentence to inspect")
    return rows


def validation_rows(ckpt: Path, limit: int, shards: str | Path | None = None) -> list[list[int]]:
    """The first `limit` validation sequences of the run's shards (from run.json, or `shards`), padding dropped."""
    from ..data.shards import ShardReader

    if shards is None:
        run_json = ckpt.parent.parent / "run.json"
        shards = recorded_shards(run_json)
        if shards is None:
            raise MapnetError(
                f"no input: give --text, --file or stdin, or --shards (no {run_json} names the run's shards)"
            )
    valid = ShardReader(shards, "valid", verify="size")
    check_shards_tokenizer(ckpt, valid, shards)
    if len(valid) == 0:
        raise MapnetError(f"{shards} has no validation sequences; give --text, --file or stdin")
    block = valid.take(np.arange(min(limit, len(valid))))
    pad = valid.special_ids["pad"]
    return [[int(t) for t in row if t != pad] for row in block]


def check_shards_tokenizer(ckpt: Path, valid, shards: str | Path) -> None:
    """Refuse shards of another tokenizer than the checkpoint's before any id reaches the model: ids past its
    embedding table were torch's IndexError, and ids within it would silently mean other words."""
    from ..train.init_from import same_encoding

    rows = int(checkpoint.read_config(ckpt)["model"]["vocab_size"])
    if valid.vocab_size <= rows and same_encoding(valid.tokenizer_path, ckpt / checkpoint.TOKENIZER):
        return
    raise MapnetError(
        f"shards {shards} were encoded with another tokenizer ({valid.vocab_size} tokens, "
        f"{valid.tokenizer_path}) than {ckpt} was trained with ({rows} embedding rows, its "
        f"{checkpoint.TOKENIZER}): their ids would mean other words; give the run's own shards "
        "(--shards), or --text / --file"
    )


# ---------------------------------------------------------------- the inspection
@torch.no_grad()
def inspect_masks(
    path: str | Path,
    *,
    text: str | None = None,
    source: str = "text",
    sentences: int = 4,
    seed: int = 0,
    samples: int = 200,
    top: int = 10,
    min_count: int = 5,
    shards: str | Path | None = None,
    device: str | torch.device = "cpu",
    file: str | Path | None = None,
) -> Inspection:
    """Proposal probabilities, one sampled mask per row, and the word-type table (see the module doc).
    `file`: a text file read as preprocess reads an input (`file_pieces`), in place of `text`."""
    from ..data.bpe import load_tokenizer, role_ids

    if text is not None and file is not None:
        raise MapnetError("give --text or --file, not both")
    if file is not None:
        file, source = check_file(file), "file"
    if sentences < 1 or samples < 1:
        raise MapnetError("--sentences and the number of samples must be >= 1")
    if min_count < 1:
        raise MapnetError(f"--min-count must be >= 1 (got {min_count})")
    if seed < 0:  # as every seed of mapnet's (settings/field.seed_setting)
        raise MapnetError(f"--seed must be >= 0 (got {seed})")
    run = load_run(path, device=device)
    table = load_table(run) if run.proposal is None else None
    if run.proposal is None and table is None:
        raise MapnetError(
            f"{run.checkpoint} has no proposal network (no mapnet.* weights) and no adaptive table (no "
            "adaptive.* weights): it was trained with uniform masking; inspect-masks needs a run trained "
            "with --masking mapnet or --masking adaptive"
        )
    ckpt, meta, settings = run.checkpoint, run.meta, run.settings
    tokenizer = load_tokenizer(ckpt / checkpoint.TOKENIZER)
    max_len = run.model.cfg.max_position
    if text is not None or file is not None:
        pieces = file_pieces(file, settings) if file is not None else text_pieces(text, settings)
        rows = text_rows(pieces, tokenizer, settings.preprocess, max_len, sentences)
    else:
        rows, source = validation_rows(ckpt, sentences, shards), "valid"
        rows = [r[:max_len] for r in rows]
    special = role_ids(tokenizer, ckpt / checkpoint.TOKENIZER)

    T = max(len(r) for r in rows)
    ids = torch.full((len(rows), T), special["pad"], dtype=torch.long)
    for i, r in enumerate(rows):
        ids[i, : len(r)] = torch.tensor(r)
    attn = ids != special["pad"]
    eligible = eligible_positions(ids, special) & attn
    n = eligible.sum(1)
    k = mask_counts(n, settings.masking.mask_prob)
    # samples x rows draws at once: row r of draw s is row (s * B + r).
    g = torch.Generator().manual_seed(seed)
    B = len(rows)
    if table is None:
        proposal = run.proposal.eval()
        log_p = proposal(ids.to(device), attn.to(device), eligible.to(device)).cpu().double()
        probs = log_p.exp()
        reps = log_p.repeat(samples, 1)
        chosen = gumbel_top_k(reps, k.repeat(samples), torch.rand(reps.shape, generator=g, dtype=torch.float64))
    else:  # as `AdaptiveTraining.micro_batch` draws them, from the table of the step after the checkpoint
        m = settings.masking
        scores = table.scores_for(int(meta.get("step", 0)))
        reps, eligible_reps = ids.repeat(samples, 1), eligible.repeat(samples, 1)
        order = torch.rand(reps.shape, generator=g)
        start = torch.rand(len(reps), generator=g, dtype=torch.float64)
        chosen, _, pi = frequency_masks(reps, eligible_reps, scores, m.mask_prob, m.mix_uniform, order, start)
        probs = pi[:B] / k.clamp(min=1)[:, None].double()
    freq = chosen.view(samples, B, T).double().mean(0)  # per-position masking frequency
    shown = chosen[:B]

    views = []
    for i, r in enumerate(rows):
        L = len(r)
        p_row = [float(probs[i, j]) if eligible[i, j] else None for j in range(L)]
        ent = _normalised_entropy(probs[i, :L], eligible[i, :L])
        views.append(
            SequenceView(
                tokens=[tokenizer.id_to_token(t) or "?" for t in r],
                ids=list(r),
                probabilities=p_row,
                masked=[int(j) for j in shown[i].nonzero().flatten()],
                k=int(k[i]),
                eligible=int(n[i]),
                entropy=ent,
            )
        )
    most, least, left_out = _word_table(views, freq, k, n, top, min_count, continuation_prefix(tokenizer))
    result = Inspection(
        checkpoint=str(ckpt),
        step=int(meta.get("step", 0)),
        source=source,
        seed=seed,
        samples=samples,
        mask_prob=settings.masking.mask_prob,
        sequences=views,
        most=most,
        least=least,
        min_count=min_count,
        left_out=left_out,
    )
    if table is not None:
        result.strategy, result.updates = "adaptive", int(table.updates)
        result.tokens_most, result.tokens_least = _token_table(table, tokenizer, top, min_count)
    return result


def _token_table(table: AdaptiveTable, tokenizer, top: int, min_count: int) -> tuple[list[TokenStat], list[TokenStat]]:
    """The vocabulary entries masked at least `min_count` times in training, by table weight over the base
    rate: the `top` highest (most, descending) and lowest (least, ascending), never the same entry twice."""
    rel, observed = table.relative().tolist(), table.observed.tolist()
    ranked = sorted((v for v in range(len(rel)) if observed[v] >= min_count), key=lambda v: (-rel[v], v))
    top = min(top, len(ranked) // 2)

    def stat(v: int) -> TokenStat:
        return TokenStat(tokenizer.id_to_token(v) or "?", v, rel[v], observed[v])

    return [stat(v) for v in ranked[:top]], [stat(v) for v in reversed(ranked[len(ranked) - top :])] if top else []


def _normalised_entropy(p: torch.Tensor, eligible: torch.Tensor) -> float:
    n = int(eligible.sum())
    if n < 2:
        return 1.0
    q = p[eligible]
    q = q[q > 0]
    return float(-(q * q.log()).sum() / np.log(n))


def words_of(tokens: list[str], continuation: str | None = None) -> list[int]:
    """Word index per token. mapnet's BPE (Metaspace): a piece starting with "▁" starts a new word.
    A WordPiece vocabulary (`continuation`, e.g. "##"): every piece starts a word except those with the
    continuation prefix. A special token is always a word of its own."""
    out, w, after_special = [], -1, True
    for tok in tokens:
        special = tok.startswith("[") and tok.endswith("]")
        starts = not tok.startswith(continuation) if continuation else tok.startswith(METASPACE)
        if starts or special or after_special:
            w += 1
        out.append(w)
        after_special = special
    return out


def continuation_prefix(tokenizer) -> str | None:
    """The WordPiece continuation prefix ("##") of a `tokenizers.Tokenizer`, None for BPE/Metaspace."""
    spec = json.loads(tokenizer.to_str())
    model = spec.get("model") or {}
    return (model.get("continuing_subword_prefix") or "##") if model.get("type") == "WordPiece" else None


def _word_table(
    views: list[SequenceView],
    freq: torch.Tensor,
    k: torch.Tensor,
    n: torch.Tensor,
    top: int,
    min_count: int,
    continuation: str | None = None,
) -> tuple[list[WordStat], list[WordStat], int]:
    """Per word type: sum of masking frequencies of its tokens vs the uniform K/n at the same positions.

    Only word types with at least `min_count` tokens in the shown rows are ranked: a word seen once or twice
    sits at the top or bottom by the accident of its one context, not by a preference. Returns (most, least,
    number of word types left out)."""
    masked_sum: dict[str, float] = {}
    uniform_sum: dict[str, float] = {}
    count: dict[str, int] = {}
    seen: dict[str, int] = {}  # occurrences of the word (count is its tokens: a word may be several BPE pieces)
    for i, v in enumerate(views):
        rate = float(k[i]) / max(int(n[i]), 1)
        word_ids = words_of(v.tokens, continuation)
        words: dict[int, list[int]] = {}
        for j, w in enumerate(word_ids):
            words.setdefault(w, []).append(j)
        for positions in words.values():
            if any(v.probabilities[j] is None for j in positions):
                continue  # special tokens are never masked
            word = "".join(v.tokens[j] for j in positions).lstrip(METASPACE) or METASPACE
            masked_sum[word] = masked_sum.get(word, 0.0) + sum(float(freq[i, j]) for j in positions)
            uniform_sum[word] = uniform_sum.get(word, 0.0) + rate * len(positions)
            count[word] = count.get(word, 0) + len(positions)
            seen[word] = seen.get(word, 0) + 1
    stats = [
        WordStat(w, count[w], masked_sum[w] / count[w], masked_sum[w] / uniform_sum[w])
        for w in count
        if seen[w] >= min_count and uniform_sum[w] > 0
    ]
    left_out = sum(1 for w in count if uniform_sum[w] > 0) - len(stats)
    stats.sort(key=lambda s: (-s.relative, s.word))
    top = min(top, len(stats) // 2)  # the two tables never share a word
    most = stats[:top]
    least = sorted(stats[len(stats) - top :], key=lambda s: (s.relative, s.word)) if top else []
    return most, least, left_out


__all__ = [
    "SCHEMA",
    "SequenceView",
    "WordStat",
    "TokenStat",
    "Inspection",
    "load_table",
    "text_pieces",
    "file_pieces",
    "text_rows",
    "validation_rows",
    "inspect_masks",
    "words_of",
]
