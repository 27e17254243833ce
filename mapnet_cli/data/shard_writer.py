"""Preprocessed sentences -> packed, split, verified Arrow shards (`mapnet shard`).

    summary = run_shard("prep/", "shards/", settings, progress=bar.advance)

Streaming all the way: ~1 MB of sentences is read, encoded (by
`shard.workers` tokenizer processes, a bounded number of chunks in flight),
packed and written before the next is read, so memory does not grow with
the corpus. Output layout and manifest: docs/formats.md; reader:
`mapnet_cli.data.shards.ShardReader`.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import time
from collections import deque
from collections.abc import Callable, Iterator
from concurrent.futures import ProcessPoolExecutor
from datetime import UTC, datetime
from multiprocessing import get_context
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.ipc as ipc

from .. import __version__, artefacts
from ..atomic import sha256_file, staged_output, write_json, write_text
from ..errors import MapnetError
from ..output_paths import check_output
from ..settings import Settings
from .bpe import role_ids
from .packing import Packer
from .preprocessed import Chunk, Preprocessed, open_preprocessed
from .shards import COLUMN, MANIFEST, SCHEMA
from .token_ids import encode_lines, load_tokenizer

MIN_BYTES_PER_WORKER = 4 << 20  # below ~4 MB of sentences per worker, spawning (~0.5 s each) costs more than it saves
BATCH_ROWS = 4096  # rows per Arrow record batch: a few MB, so writing never holds a whole file


# ---------------------------------------------------------------- tokenisation (also runs in workers)
def _init_worker() -> None:
    # Each worker is one process on one core; the tokenizers thread pool would oversubscribe.
    os.environ["TOKENIZERS_PARALLELISM"] = "false"


def _encoded(corpus: Preprocessed, workers: int) -> Iterator[tuple[Chunk, np.ndarray, np.ndarray]]:
    """(chunk, flat ids, lengths) in corpus order, encoding up to 2*workers chunks ahead."""
    tok = str(corpus.tokenizer_path)
    if workers <= 1:
        for chunk in corpus.chunks():
            yield (chunk, *encode_lines(tok, chunk.lines))
        return
    window: deque = deque()
    with ProcessPoolExecutor(workers, mp_context=get_context("spawn"), initializer=_init_worker) as pool:
        for chunk in corpus.chunks():
            window.append((chunk, pool.submit(encode_lines, tok, chunk.lines)))
            if len(window) >= 2 * workers:  # bounded look-ahead: memory stays flat
                c, fut = window.popleft()
                yield (c, *fut.result())
        while window:
            c, fut = window.popleft()
            yield (c, *fut.result())


# ---------------------------------------------------------------- split assignment
def unit_hash(seed: int, index: np.ndarray) -> np.ndarray:
    """Uniform [0, 1) per index from (seed, index) alone: splitmix64, vectorised."""
    x = np.asarray(index, dtype=np.uint64) + np.uint64((seed * 0x9E3779B97F4A7C15 + 1) % (1 << 64))
    x = (x ^ (x >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    x = (x ^ (x >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    x = x ^ (x >> np.uint64(31))
    return (x >> np.uint64(11)).astype(np.float64) / float(1 << 53)


def is_valid(seed: int, index: np.ndarray, fraction: float) -> np.ndarray:
    return unit_hash(seed, index) < fraction


def _check_document_split(documents: int, seed: int, fraction: float) -> None:
    if fraction <= 0:
        return
    valid = sum(
        int(is_valid(seed, np.arange(lo, min(lo + (1 << 20), documents)), fraction).sum())
        for lo in range(0, documents, 1 << 20)
    )
    if valid == 0:
        raise MapnetError(
            f"no document of {documents} landed in validation with shard.valid_fraction={fraction}; "
            'use shard.split_unit="sequence" or a larger shard.valid_fraction'
        )
    # is_valid is hash < fraction with hashes in [0, 1): 1.0 holds out every document by design
    # (an evaluation-only set); anything less that still takes them all is a mis-set fraction.
    if valid == documents and fraction < 1.0:
        raise MapnetError(f"all {documents} documents landed in validation; lower shard.valid_fraction")


# ---------------------------------------------------------------- Arrow output
class SplitWriter:
    """Writes one split's blocks into `<split>-NNNNN.arrow` files of `per_file` sequences."""

    def __init__(self, folder: Path, split: str, seq_len: int, dtype, per_file: int, pad_id: int, sep_id: int):
        self.folder, self.split, self.per_file = folder, split, per_file
        self.pad_id, self.sep_id = pad_id, sep_id
        self.type = pa.list_(pa.from_numpy_dtype(dtype), seq_len)
        self.schema = pa.schema([pa.field(COLUMN, self.type, nullable=False)])
        self.files: list[dict] = []
        self.buffer: list[np.ndarray] = []
        self.buffered = 0
        self.writer = None
        self.in_file = 0
        self.seq_len = seq_len
        self.sequences = self.tokens = self.documents = 0

    def write(self, blocks: np.ndarray) -> None:
        if len(blocks):
            self.buffer.append(blocks)
            self.buffered += len(blocks)
        while self.buffered >= min(BATCH_ROWS, self.per_file - self.in_file):
            self._flush_batch(min(BATCH_ROWS, self.per_file - self.in_file))

    def _flush_batch(self, rows: int) -> None:
        data = np.concatenate(self.buffer) if len(self.buffer) > 1 else self.buffer[0]
        batch, rest = data[:rows], data[rows:]
        self.buffer, self.buffered = ([rest] if len(rest) else []), len(rest)
        if self.writer is None:
            name = f"{self.split}-{len(self.files):05d}.arrow"
            self.files.append({"name": name, "split": self.split, "sequences": 0, "tokens": 0})
            self.writer = ipc.new_file(str(self.folder / name), self.schema)
        values = pa.array(batch.reshape(-1))
        self.writer.write_batch(
            pa.record_batch([pa.FixedSizeListArray.from_arrays(values, self.seq_len)], schema=self.schema)
        )
        entry = self.files[-1]
        tokens = int(np.count_nonzero(batch != self.pad_id))
        entry["sequences"] += len(batch)
        entry["tokens"] += tokens
        self.sequences += len(batch)
        self.tokens += tokens
        self.documents += int(np.count_nonzero(batch == self.sep_id))  # one [SEP] per document end
        self.in_file += len(batch)
        if self.in_file == self.per_file:
            self._close_file()

    def _close_file(self) -> None:
        self.writer.close()
        self.writer, self.in_file = None, 0
        entry = self.files[-1]
        path = self.folder / entry["name"]
        entry["bytes"] = path.stat().st_size
        entry["sha256"] = sha256_file(path)

    def close(self) -> dict:
        while self.buffered:
            self._flush_batch(min(self.buffered, BATCH_ROWS, self.per_file - self.in_file))
        if self.writer is not None:
            self._close_file()
        cells = self.sequences * self.seq_len
        return {
            "sequences": self.sequences,
            "tokens": self.tokens,
            "documents": self.documents,
            "padding_fraction": round(1 - self.tokens / cells, 6) if cells else 0.0,
        }


# ---------------------------------------------------------------- the command's library call
def token_kinds(tokenizer, word_kinds: dict[str, str]) -> tuple[dict[str, list[int]], list[str]]:
    """{kind: sorted token ids} for words that are one token; and the words that are not."""
    words = sorted(word_kinds)
    kinds: dict[str, set[int]] = {}
    split_words = []
    for word, enc in zip(words, tokenizer.encode_batch(words, add_special_tokens=False)):
        if len(enc.ids) == 1:
            kinds.setdefault(word_kinds[word], set()).add(enc.ids[0])
        else:
            split_words.append(word)
    return {k: sorted(v) for k, v in sorted(kinds.items())}, split_words


def run_shard(
    preprocessed: str | Path | Preprocessed,
    out: str | Path,
    settings: Settings,
    overwrite: bool = False,
    progress: Callable[[int], None] | None = None,
    engine_address: str | None = None,
) -> dict:
    """Encode, pack, split and write shards; returns a summary (the manifest plus timings).

    `progress(n)` is called with the bytes of part files consumed so far, chunk by chunk.
    With `engine.name = "dask"` the encoding runs as tasks on the Dask cluster at `engine_address`
    (else DASK_SCHEDULER_ADDRESS, else a local one).
    """
    cfg = settings.shard
    out = Path(out)
    corpus = preprocessed if isinstance(preprocessed, Preprocessed) else open_preprocessed(preprocessed)
    check_output(out, [corpus.path], kind=artefacts.SHARDS, overwrite=overwrite)
    tokenizer = load_tokenizer(corpus.tokenizer_path)
    special = role_ids(tokenizer, corpus.tokenizer_path)
    vocab_size = tokenizer.get_vocab_size(with_added_tokens=True)
    dtype = np.dtype(np.uint16 if vocab_size <= 1 << 16 else np.uint32)
    if cfg.split_unit == "document":
        _check_document_split(corpus.documents, cfg.split_seed, cfg.valid_fraction)
    workers = cfg.workers or os.cpu_count() or 1
    workers = max(1, min(workers, corpus.total_bytes // MIN_BYTES_PER_WORKER))

    started = time.time()
    engine = {"engine": settings.engine.name}
    with contextlib.ExitStack() as engine_scope, staged_output(out, overwrite) as stage:
        if settings.engine.name == "dask":  # encoding as tasks on a Dask cluster (shard_tasks); packing stays here
            from .shard_tasks import engine_encoded

            encoder = engine_scope.enter_context(engine_encoded(corpus, settings, out, engine_address, workers))
            encoded, workers = encoder.chunks(), encoder.workers
            engine_scope.callback(encoded.close)  # on a failure too, before the engine's client closes
            engine |= {"tasks": encoder.tasks, "tasks_resumed": len(encoder.done)}
        else:
            encoded = _encoded(corpus, workers)
        writers = {
            s: SplitWriter(stage, s, cfg.max_seq_len, dtype, cfg.sequences_per_file, special["pad"], special["sep"])
            for s in ("train", "valid")
        }
        stats = _pack_all(encoded, cfg, special, dtype, writers, progress)
        splits = {s: w.close() for s, w in writers.items()}
        if cfg.valid_fraction > 0 and splits["valid"]["sequences"] == 0:
            raise MapnetError(
                f"no sequence landed in validation with shard.valid_fraction={cfg.valid_fraction}; "
                "use a larger shard.valid_fraction"
            )
        # Every corpus token and [SEP] is in a block exactly once: blocks hold them plus one [CLS] each.
        packed = sum(s["tokens"] - s["sequences"] for s in splits.values())
        if packed != stats["tokens"]:
            raise RuntimeError(f"packing lost tokens: {stats['tokens']} in, {packed} out")  # a bug, not user input
        shutil.copyfile(corpus.tokenizer_path, stage / "tokenizer.json")
        kinds_info = None
        if (corpus.path / "word_kinds.json").is_file():
            word_kinds = json.loads((corpus.path / "word_kinds.json").read_text(encoding="utf-8"))
            kinds, split_words = token_kinds(tokenizer, word_kinds)
            write_json(stage / "token_kinds.json", kinds)
            kinds_info = {"words": len(word_kinds), "multi_token_words": len(split_words), "examples": split_words[:10]}
        write_text(stage / "settings.toml", settings.to_toml())
        files = writers["train"].files + writers["valid"].files
        manifest = {
            "schema": SCHEMA,
            "created": datetime.now(UTC).isoformat(timespec="seconds"),
            "mapnet_version": __version__,
            "max_seq_len": cfg.max_seq_len,
            "dtype": dtype.name,
            "vocab_size": vocab_size,
            "special_ids": special,
            "tokenizer_sha256": sha256_file(stage / "tokenizer.json"),
            "packing": cfg.packing,
            "files": files,
            "splits": splits,
            "source": {"path": str(corpus.path.resolve()), "manifest_sha256": corpus.manifest_sha256},
            "settings": settings.to_dict()["shard"],
        }
        write_json(stage / MANIFEST, manifest)  # last: its presence marks the folder finished
    if settings.engine.name == "dask":
        from .shard_tasks import remove_tasks_folder

        remove_tasks_folder(out)  # only once published: until then it is what a rerun goes on from
    return {
        "out": str(out),
        "manifest": manifest,
        "token_kinds": kinds_info,
        "workers": workers,
        "seconds": time.time() - started,
        "bytes": corpus.total_bytes,
        **stats,
        **engine,
    }


def _pack_all(
    encoded: Iterator[tuple[Chunk, np.ndarray, np.ndarray]],
    cfg,
    special: dict,
    dtype,
    writers: dict[str, SplitWriter],
    progress,
) -> dict:
    packers = {s: Packer(cfg.max_seq_len, cfg.packing, special["cls"], special["pad"], dtype) for s in writers}
    by_document = cfg.split_unit == "document"
    tokens = sentences = 0
    next_sequence = 0  # global index of the next packed sequence (sequence-level split)

    def emit_stream(blocks: np.ndarray) -> None:
        nonlocal next_sequence
        if by_document or not len(blocks):
            return
        valid = is_valid(cfg.split_seed, np.arange(next_sequence, next_sequence + len(blocks)), cfg.valid_fraction)
        next_sequence += len(blocks)
        writers["valid"].write(blocks[valid])
        writers["train"].write(blocks[~valid])

    for chunk, flat, lengths in encoded:
        if len(lengths):
            # [SEP] goes right after the last token of each document's last sentence.
            flat = np.insert(flat, np.cumsum(lengths)[chunk.doc_end], special["sep"])
            lengths = lengths + chunk.doc_end
            tokens += int(lengths.sum())
            sentences += len(lengths)
            if by_document:
                valid = is_valid(cfg.split_seed, chunk.doc_index, cfg.valid_fraction)
                token_valid = np.repeat(valid, lengths)
                writers["valid"].write(packers["valid"].add(flat[token_valid], lengths[valid]))
                writers["train"].write(packers["train"].add(flat[~token_valid], lengths[~valid]))
            else:
                emit_stream(packers["train"].add(flat, lengths))
        if progress is not None:
            progress(chunk.nbytes)
    if by_document:
        for split, packer in packers.items():
            writers[split].write(packer.finish())
    else:
        emit_stream(packers["train"].finish())
    return {"tokens": tokens, "sentences": sentences}


__all__ = ["run_shard", "token_kinds", "unit_hash", "is_valid", "encode_lines", "load_tokenizer", "SplitWriter"]
