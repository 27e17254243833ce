"""`shard --engine dask`: the tokenizer pass as tasks, one per group of part files.

    with engine_encoded(corpus, settings, out, address, workers) as encoder:   # from run_shard
        for chunk, flat, lengths in encoder.chunks(): ...                       # as the local pool's `_encoded`

Encoding is the part of `shard` that is per file; packing carries a sequence over from one
chunk to the next, so it stays one pass in the main process, reading the tasks' ids in
corpus order with the very chunk boundaries the local path has: the shards and their
manifest are the same bytes for any number of tasks. Each task writes the ids of each of
its parts to `.<out>.tasks/part-NNNNN.npz` beside the output (plain arrays, read back
without pickle), then its record `task-NNNNN.json`, last, as its done-marker; a rerun of
the same command skips the tasks whose record is there. The folder is removed once the
shards are published.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ..atomic import atomic_file, make_dirs, sha256_file, write_json
from ..errors import MapnetError
from ..settings import Settings
from .engine import balanced_groups, dask_engine, import_distributed
from .preprocess_tasks import remove_tasks_folder, tasks_folder
from .preprocessed import Chunk, Preprocessed
from .token_ids import encode_lines

TASK_SCHEMA = "mapnet.shard-task/1"
ARRAYS = ("ids", "lengths", "doc_end", "chunk_sentences", "chunk_nbytes")

# Test hook: called with the task index when a task starts real work (not when it is found done).
before_task: Callable[[int], None] | None = None

__all__ = ["engine_encoded", "remove_tasks_folder", "run_task"]


@dataclass(frozen=True)
class TaskSpec:
    index: int
    corpus: str  # the preprocessed folder (on a cluster: a path every worker sees)
    parts: tuple  # (position in the manifest, the manifest's part entry), in order
    folder: str
    fingerprint: str

    def ids_path(self, position: int) -> Path:
        return Path(self.folder) / f"part-{position:05d}.npz"

    @property
    def record_path(self) -> Path:
        return Path(self.folder) / f"task-{self.index:05d}.json"


def finished(spec: TaskSpec) -> dict | None:
    """The task's record when it finished for this corpus and its id files are intact in size; else None."""
    try:
        record = json.loads(spec.record_path.read_text(encoding="utf-8"))
        if record.get("fingerprint") != spec.fingerprint:
            return None
        for position, _ in spec.parts:
            if spec.ids_path(position).stat().st_size != record["files"][str(position)]["bytes"]:
                return None
    except (OSError, ValueError, KeyError, AttributeError, TypeError):
        return None
    return record


def run_task(spec: TaskSpec) -> dict:
    """Encode the task's parts, chunk by chunk as `Preprocessed.chunks` cuts them; one .npz per part."""
    done = finished(spec)
    if done is not None:
        return done
    if before_task is not None:
        before_task(spec.index)
    started = time.perf_counter()
    # One core per worker, as the local pool's workers: the tokenizers thread pool would oversubscribe the node.
    os.environ["TOKENIZERS_PARALLELISM"] = "false"
    corpus = Preprocessed(Path(spec.corpus), {}, "")
    tokenizer = str(corpus.tokenizer_path)
    files = {}
    for position, part in spec.parts:
        arrays: dict[str, list] = {name: [] for name in ARRAYS}
        # chunks() of a one-part corpus: the same blocks, checks (sha256, counts) and errors as the local path
        for chunk in Preprocessed(corpus.path, {"parts": [part]}, "").chunks():
            flat, lengths = (
                encode_lines(tokenizer, chunk.lines) if chunk.lines else (np.zeros(0, np.uint32), np.zeros(0, np.int64))
            )
            arrays["ids"].append(flat)
            arrays["lengths"].append(lengths)
            arrays["doc_end"].append(chunk.doc_end)
            arrays["chunk_sentences"].append([len(chunk.lines)])
            arrays["chunk_nbytes"].append([chunk.nbytes])
        path = spec.ids_path(position)
        with atomic_file(path, "wb") as fh:
            np.savez(
                fh,
                ids=np.concatenate(arrays["ids"]).astype(np.uint32),
                lengths=np.concatenate(arrays["lengths"]).astype(np.int64),
                doc_end=np.concatenate(arrays["doc_end"]).astype(bool),
                chunk_sentences=np.array([n for [n] in arrays["chunk_sentences"]], np.int64),
                chunk_nbytes=np.array([n for [n] in arrays["chunk_nbytes"]], np.int64),
            )
        files[str(position)] = {"bytes": path.stat().st_size, "sha256": sha256_file(path)}
    record = {
        "schema": TASK_SCHEMA,
        "fingerprint": spec.fingerprint,
        "index": spec.index,
        "files": files,
        "seconds": round(time.perf_counter() - started, 3),
    }
    write_json(spec.record_path, record)  # last: the task's done-marker
    return record


# ---------------------------------------------------------------- the driver (runs in `mapnet shard`)
class EngineEncoder:
    def __init__(self, engine, specs: list[TaskSpec], first_docs: list[int]):
        self.engine, self.specs, self.first_docs = engine, specs, first_docs
        self.workers = engine.workers
        self.tasks = len(specs)
        self.done = {s.index: r for s in specs if (r := finished(s)) is not None}

    def chunks(self) -> Iterator[tuple[Chunk, np.ndarray, np.ndarray]]:
        """(chunk, flat ids, lengths) in corpus order, as the local `_encoded` gives them (chunk.lines left empty)."""
        todo = [s for s in self.specs if s.index not in self.done]
        results = self.engine.run(run_task, todo, "shard")
        try:
            for spec in self.specs:
                record = self.done[spec.index] if spec.index in self.done else next(results)
                for position, _ in spec.parts:
                    yield from _replay(
                        spec.ids_path(position), record["files"][str(position)], self.first_docs[position]
                    )
        finally:
            results.close()  # while the client is still open


def _replay(path: Path, expected: dict, first_doc: int) -> Iterator[tuple[Chunk, np.ndarray, np.ndarray]]:
    if sha256_file(path) != expected["sha256"]:
        raise MapnetError(f"{path} does not match its task record (changed since?); run the same command again")
    with np.load(path, allow_pickle=False) as data:  # never unpickled: plain arrays only
        ids, lengths, doc_end = data["ids"], data["lengths"], data["doc_end"]
        chunk_sentences, chunk_nbytes = data["chunk_sentences"], data["chunk_nbytes"]
    sentence = token = 0
    doc = first_doc
    for n, nbytes in zip(chunk_sentences.tolist(), chunk_nbytes.tolist()):
        lens = lengths[sentence : sentence + n]
        ends = doc_end[sentence : sentence + n]
        tokens = int(lens.sum())
        # as preprocessed._parse: the document of a sentence is the count of document ends before it
        before = np.concatenate([[0], np.cumsum(ends)[:-1]]).astype(np.int64) if n else np.zeros(0, np.int64)
        yield Chunk([], ends, doc + before, nbytes), ids[token : token + tokens], lens
        doc += int(ends.sum())
        sentence += n
        token += tokens


def fingerprint(corpus: Preprocessed) -> str:
    """A task's ids depend on the corpus (its manifest names every part's sha256 and the tokenizer's) alone."""
    return hashlib.sha256(
        json.dumps({"schema": TASK_SCHEMA, "manifest_sha256": corpus.manifest_sha256}).encode()
    ).hexdigest()


@contextlib.contextmanager
def engine_encoded(
    corpus: Preprocessed, settings: Settings, out: Path, address: str | None, workers: int
) -> Iterator[EngineEncoder]:
    import_distributed()  # a missing extra is one line before anything is written
    parts = corpus.manifest["parts"]
    with dask_engine(settings.engine, address, workers or os.cpu_count() or 1) as engine:  # reached before any folder
        folder = make_dirs(tasks_folder(out))
        first_docs = np.concatenate([[0], np.cumsum([p["documents"] for p in parts])]).astype(int).tolist()
        specs = [
            TaskSpec(
                i,
                str(corpus.path.resolve()),
                tuple((j, parts[j]) for j in group),
                str(folder.resolve()),
                fingerprint(corpus),
            )
            for i, group in enumerate(balanced_groups([p["bytes"] for p in parts], settings.engine.tasks))
        ]
        yield EngineEncoder(engine, specs, first_docs)
