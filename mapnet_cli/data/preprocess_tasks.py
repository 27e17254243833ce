"""`preprocess --engine dask`: the spaCy + Moses stage as tasks, one per group of input files (or, with more
tasks than files, per byte range of a text file).

    stage = engine_sentences(files, settings, marker, writer, out, address=None)   # from run_preprocess

Each task reads its own input files (on a cluster: from a shared filesystem), splits and cleans them exactly as
the local pool does, and writes its sentences, in the part files' own format (a sentence a line, a blank line
after each document), to `.<out>.tasks/task-NNNNN.txt` beside the output; its record `task-NNNNN.json`, written
last, is the task's done-marker. The main process then streams the task files, in input order, through the same
`PartWriter` the local pool feeds: the part files, hence the tokenizer and the manifest, are the same bytes for
any number of tasks.

A task whose record is there (same inputs, same settings, same output bytes) is not run again: a run that was
interrupted goes on from its finished tasks when the same command is started again. The tasks folder is removed
once the output is published.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np

from ..atomic import atomic_file, make_dirs, sha256_file, write_json
from ..errors import MapnetError
from ..settings import Settings
from .engine import balanced_groups, dask_engine, import_distributed
from .inputs import InputFile, ReadStats, invalid_utf8_count
from .readers import InputReader
from .textproc import TextProcessor

TASK_SCHEMA = "mapnet.preprocess-task/1"
BATCH_CHARS = 128 * 1024  # text per spaCy call, as the local pool's batches
# Settings that do not change a sentence: a rerun that changes only these keeps the finished tasks.
_NOT_IN_SENTENCES = (
    "vocab_size",
    "min_frequency",
    "tokenizer",
    "tokenizer_sample_bytes",
    "workers",
    "sentences_per_part",
)

# Test hook: called with the task index when a task starts real work (not when it is found done).
before_task: Callable[[int], None] | None = None


@dataclass(frozen=True)
class TaskSpec:
    index: int
    first: int  # index of its first file in the run's input list
    files: tuple[InputFile, ...]  # with absolute paths: a worker's working folder is not the command's
    names: tuple[str, ...]  # the paths as given, which the manifest records
    settings: Settings
    marker: str | None
    folder: str  # the tasks folder (on a cluster: a path every worker sees)
    fingerprint: str
    part: tuple[int, int] = (0, 1)  # (k, K): of its one file, the documents that start in the k-th of K byte ranges

    @property
    def text_path(self) -> Path:
        return Path(self.folder) / f"task-{self.index:05d}.txt"

    @property
    def record_path(self) -> Path:
        return Path(self.folder) / f"task-{self.index:05d}.json"


def tasks_folder(out: Path) -> Path:
    """Beside the output, hidden, and the same for every run of the same command (so a rerun finds it)."""
    return out.parent / f".{out.name}.tasks"


def plan(files: list[InputFile], tasks: int) -> list[tuple[range, tuple[int, int]]]:
    """(input indices, part) of each task: contiguous groups of whole files while there are at least as many
    files as tasks (0: one task per file); with more tasks than files, each text file is cut into byte ranges
    in proportion to its size, its documents going to the range they start in (`_owned`). Synthetic,
    Parquet and Arrow inputs are never cut (their reading has no byte position)."""
    if tasks <= len(files):
        return [(group, (0, 1)) for group in balanced_groups([f.size for f in files], tasks)]
    total = sum(f.size for f in files) or 1
    out = []
    for j, f in enumerate(files):
        parts = max(1, round(tasks * f.size / total)) if f.format not in _UNCUT and f.size else 1
        out.extend((range(j, j + 1), (k, parts)) for k in range(parts))
    return out


_UNCUT = ("synthetic", "parquet", "arrow")


def fingerprint(
    files: tuple[InputFile, ...], settings: Settings, marker: str | None, part: tuple[int, int] = (0, 1)
) -> str:
    """What a task's sentences depend on: its files (path, size, mtime) and the settings that shape sentences."""
    described = []
    for f in files:
        if f.format == "synthetic":
            described.append([f.path, f.format, settings.synthetic.__repr__()])
        else:
            st = os.stat(f.path)
            described.append([f.path, f.format, f.compression, f.explicit, st.st_size, st.st_mtime_ns])
    pre = {k: v for k, v in settings.to_dict()["preprocess"].items() if k not in _NOT_IN_SENTENCES}
    blob = json.dumps(
        {"schema": TASK_SCHEMA, "files": described, "preprocess": pre, "marker": marker, "part": list(part)},
        sort_keys=True,
    )
    return hashlib.sha256(blob.encode()).hexdigest()


def finished(spec: TaskSpec) -> dict | None:
    """The task's record when it finished with these inputs and settings and its text is intact; else None."""
    try:
        record = json.loads(spec.record_path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(record, dict) or record.get("fingerprint") != spec.fingerprint:
        return None
    try:
        if spec.text_path.stat().st_size != record["bytes"]:
            return None
    except (OSError, KeyError):
        return None
    return record


# ---------------------------------------------------------------- one task (runs on a worker)
_local = threading.local()


def _processor(settings, marker) -> TextProcessor:
    # One per worker thread, kept between tasks: building spaCy's pipeline takes a while.
    key = (settings, marker)
    if getattr(_local, "key", None) != key:
        _local.key, _local.processor = key, TextProcessor(settings, marker)
    return _local.processor


def run_task(spec: TaskSpec) -> dict:
    """Sentences of the task's files -> task-NNNNN.txt, then its record (the done-marker) -> task-NNNNN.json."""
    done = finished(spec)
    if done is not None:
        return done
    if before_task is not None:
        before_task(spec.index)
    started = time.perf_counter()
    processor = _processor(spec.settings.preprocess, spec.marker)
    stats = ReadStats()
    owned = {"chunks_cut": 0, "text_bytes": 0, "invalid_utf8_replaced": 0}
    inputs = []
    counts = {"documents": 0, "sentences": 0, "words": 0, "sentences_cut": 0}
    digest = hashlib.sha256()
    nbytes = 0
    with atomic_file(spec.text_path, "wb") as fh:

        def write(data: bytes) -> None:
            nonlocal nbytes
            fh.write(data)
            digest.update(data)
            nbytes += len(data)

        for position, (inp, name) in enumerate(zip(spec.files, spec.names)):
            reader = InputReader(inp, spec.settings, stats)
            documents = 0
            doc_sentences = 0
            synthetic = hashlib.sha256() if inp.format == "synthetic" else None
            synthetic_bytes = 0
            batch: list[str | None] = []
            chars = 0

            def flush(batch: list[str | None] = batch) -> None:  # this document's batch
                nonlocal documents, doc_sentences
                texts = [t for t in batch if t is not None]
                results = iter(processor.process(texts) if texts else [])
                for item in batch:
                    if item is not None:
                        result = next(results)
                        counts["sentences_cut"] += result.sentences_cut
                        lines = result.sentences
                        if lines:  # as PartWriter.write_sentences
                            write(("\n".join(lines) + "\n").encode("utf-8", "replace"))
                            doc_sentences += len(lines)
                            counts["sentences"] += len(lines)
                            counts["words"] += sum(line.count(" ") + 1 for line in lines)
                    elif doc_sentences:  # as PartWriter.end_document: a document without sentences leaves no trace
                        write(b"\n")
                        documents += 1
                        doc_sentences = 0
                batch.clear()

            for item in _owned(reader, stats, spec.part, inp.size, owned):
                if synthetic is not None and item is not None:
                    data = item.encode("utf-8")
                    synthetic.update(data)
                    synthetic_bytes += len(data)
                batch.append(item)
                if item is not None:
                    chars += len(item)
                    if chars >= BATCH_CHARS:
                        flush()
                        chars = 0
            flush()
            if doc_sentences:  # readers end every document; kept as PartWriter.close() would
                write(b"\n")
                documents += 1
            counts["documents"] += documents
            if spec.part[0] > 0:  # the file's first part describes it
                described = None
            elif synthetic is not None:
                described = {
                    "path": name,
                    "bytes": synthetic_bytes,
                    "sha256": synthetic.hexdigest(),
                    "format": "synthetic",
                }
            elif reader.skipped:
                described = {"path": name}
            else:
                described = {
                    "path": name,
                    "bytes": inp.size,
                    "sha256": sha256_file(inp.path),
                    "format": reader.format + (f"+{inp.compression}" if inp.compression else ""),
                }
            inputs.append(
                {
                    "index": spec.first + position,
                    "describe": described,
                    "skipped": reader.skipped,
                    "documents": documents,
                }
            )
    record = {
        "schema": TASK_SCHEMA,
        "fingerprint": spec.fingerprint,
        "index": spec.index,
        "first_input": spec.first,
        "inputs": inputs,
        "part": list(spec.part),
        "skipped_binary": [
            name for f, name in zip(spec.files, spec.names) if f.path in stats.skipped_binary and spec.part[0] == 0
        ],
        **owned,
        "bytes": nbytes,
        "sha256": digest.hexdigest(),
        "seconds": round(time.perf_counter() - started, 3),
        **counts,
    }
    write_json(spec.record_path, record)  # last: the task's done-marker
    return record


def _owned(reader: InputReader, seen: ReadStats, part: tuple[int, int], size: int, owned: dict) -> Iterator[str | None]:
    """The reader's items of the documents this part of the file owns: those whose first piece is read at an
    on-disk position in the k-th of K equal byte ranges (the whole file when K is 1). The reading from one
    document's start to the next's (pieces cut, text bytes, invalid UTF-8) is charged to the first, in
    `owned`: every part reads the file the same way up to where it stops, so the parts' charges add up to
    the whole file's."""
    k, parts = part
    hi = (k + 1) * size // parts
    lo, last = k * size // parts, k == parts - 1
    mark = (seen.chunks_cut, seen.text_bytes, invalid_utf8_count())
    mine = k == 0  # what is read before any document (or in a file without one) is the first part's

    def charge() -> None:
        nonlocal mark
        now = (seen.chunks_cut, seen.text_bytes, invalid_utf8_count())
        if mine:
            for key, before, after in zip(("chunks_cut", "text_bytes", "invalid_utf8_replaced"), mark, now):
                owned[key] += after - before
        mark = now

    items = iter(reader)
    at_start, any_document = True, False
    try:
        for item in items:
            if item is not None and at_start:
                at_start = False
                position = reader.position()
                if any_document:
                    charge()  # the previous document's reading is complete
                any_document = True
                if not last and position >= hi:
                    return  # the rest of the file is later parts'
                mine = k == 0 or position >= lo
            elif item is None:
                at_start = True
            if mine:
                yield item
        charge()  # the last document's reading, through the end of the file
    finally:
        items.close()


# ---------------------------------------------------------------- the driver (runs in `mapnet preprocess`)
class TaskFeed:
    """The tasks' account of their inputs, in the shape run_preprocess's local `_Feed` gives it."""

    def __init__(self, records: list[dict], count: int):
        self.inputs = [{"describe": None, "skipped": False, "documents": 0} for _ in range(count)]
        for entry in (e for r in records for e in r["inputs"]):  # a file cut into parts has an entry per part
            merged = self.inputs[entry["index"]]
            merged["documents"] += entry["documents"]
            if entry["describe"] is not None:
                merged["describe"], merged["skipped"] = entry["describe"], entry["skipped"]
        self.skipped = [inp["skipped"] for inp in self.inputs]

    def describe(self, idx: int, documents: int) -> dict:
        return {**self.inputs[idx]["describe"], "documents": documents}


@dataclass
class EngineStage:
    feed: TaskFeed
    stats: ReadStats
    sentences_cut: int
    docs_per_input: list[int]
    invalid_utf8_replaced: int
    workers: int
    tasks: int
    tasks_resumed: int


def engine_sentences(
    files: list[InputFile],
    settings: Settings,
    marker: str | None,
    writer,
    out: Path,
    address: str | None = None,
    on_progress: Callable[[int, int, int], None] | None = None,
) -> EngineStage:
    """Run the sentence stage as engine tasks and feed their output, in order, to `writer` (a PartWriter).

    `on_progress(input bytes done, text bytes done, sentences)` after each merged task.
    """
    import_distributed()  # a missing extra is one line before anything is written
    workers = settings.preprocess.workers or os.cpu_count() or 1
    with dask_engine(settings.engine, address, workers) as engine:  # a scheduler out of reach: before any folder
        return _engine_sentences(engine, files, settings, marker, writer, out, on_progress)


def _engine_sentences(
    engine,
    files: list[InputFile],
    settings: Settings,
    marker: str | None,
    writer,
    out: Path,
    on_progress: Callable[[int, int, int], None] | None,
) -> EngineStage:
    folder = make_dirs(tasks_folder(out))
    specs = []
    for i, (group, part) in enumerate(plan(files, settings.engine.tasks)):
        chosen = tuple(
            f if f.format == "synthetic" else replace(f, path=os.path.abspath(f.path))
            for f in files[group.start : group.stop]
        )
        specs.append(
            TaskSpec(
                i,
                group.start,
                chosen,
                tuple(f.path for f in files[group.start : group.stop]),
                settings,
                marker,
                str(folder.resolve()),
                fingerprint(chosen, settings, marker, part),
                part,
            )
        )
    done = {s.index: r for s in specs if (r := finished(s)) is not None}
    todo = [s for s in specs if s.index not in done]
    records: list[dict] = []
    stats = ReadStats()
    input_bytes = 0
    workers = engine.workers
    results = engine.run(run_task, todo, "preprocess")
    try:
        for spec in specs:
            record = done[spec.index] if spec.index in done else next(results)
            _merge(spec.text_path, record, writer)
            records.append(record)
            stats.chunks_cut += record["chunks_cut"]
            stats.text_bytes += record["text_bytes"]
            stats.skipped_binary.extend(record["skipped_binary"])
            k, parts = spec.part
            input_bytes += sum(f.size * (k + 1) // parts - f.size * k // parts for f in spec.files)
            if on_progress is not None:
                on_progress(input_bytes, stats.text_bytes, writer.sentences)
    finally:
        results.close()  # while the client is still open
    feed = TaskFeed(records, len(files))
    return EngineStage(
        feed=feed,
        stats=stats,
        sentences_cut=sum(r["sentences_cut"] for r in records),
        docs_per_input=[inp["documents"] for inp in feed.inputs],
        invalid_utf8_replaced=sum(r["invalid_utf8_replaced"] for r in records),
        workers=workers,
        tasks=len(specs),
        tasks_resumed=len(done),
    )


def _merge(path: Path, record: dict, writer, block_bytes: int = 16 << 20) -> None:
    """A task's sentences into the part files, whole documents at a time, as the local pool writes them.

    A document ends at a blank line (two newlines in a row: sentences are never empty), its sentences its other
    lines and its words the spaces plus the sentences (as PartWriter counts them): found with numpy, so
    the bytes are copied, never decoded, and the merge keeps up with many workers.
    """
    digest = hashlib.sha256()
    tail = b""
    with open(path, "rb") as fh:
        while block := fh.read(block_bytes):
            digest.update(block)
            data = tail + block
            arr = np.frombuffer(data, np.uint8)
            newlines = np.flatnonzero(arr == 10)
            blanks = newlines[1:][np.diff(newlines) == 1]  # the newline of each document's blank line
            if not len(blanks):
                tail = data
                continue
            ends = blanks + 1
            lines_before = np.searchsorted(
                newlines, blanks
            )  # newlines before each blank: its sentences + earlier blanks
            sentences_through = lines_before - np.arange(len(blanks))
            doc_sentences = np.diff(sentences_through, prepend=0)
            words = int(np.count_nonzero(arr[: ends[-1]] == 32)) + int(sentences_through[-1])
            writer.write_documents(data, ends.tolist(), doc_sentences.tolist(), words)
            tail = data[ends[-1] :]
    if tail or digest.hexdigest() != record["sha256"]:
        raise MapnetError(
            f"{path} does not match its task record (changed while the run was merging it?); run the same command again"
        )


def remove_tasks_folder(out: Path) -> None:
    """After publishing: the task files are copies of the parts' text."""
    shutil.rmtree(tasks_folder(out), ignore_errors=True)
