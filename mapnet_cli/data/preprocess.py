"""Raw corpora -> cleaned sentence files + BPE tokenizer (the paper's preprocessing).

    result = run_preprocess(["data/enwiki/text", "data/books"], "corpus", settings)

The main process reads documents (`readers`) and writes results in input
order; worker processes (`preprocess.workers`) split sentences with spaCy and
tokenise with Moses (`textproc`), a bounded number of batches in flight, so
memory does not grow with the corpus. Output is built in a hidden staging
folder and published by one rename after `manifest.json` is written (layout:
docs/formats.md).
"""

from __future__ import annotations

import hashlib
import multiprocessing
import os
import platform
import shutil
import signal
import time
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass, field
from datetime import UTC, datetime
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

from .. import __version__, artefacts
from ..atomic import sha256_file, staged_output, write_json, write_text
from ..errors import MapnetError
from ..output_paths import check_output
from ..settings import PreprocessSettings, Settings
from . import bpe, synthetic
from .cleaning import METASPACE, word_marker
from .export_record import refuse_cleaning_twice
from .inputs import SYNTHETIC, InputFile, ReadStats, discover, invalid_utf8_count
from .readers import InputReader
from .textproc import TextProcessor, import_spacy

SCHEMA = "mapnet.preprocess/1"
BATCH_CHARS = 128 * 1024  # text per worker task: big enough to amortise IPC, small enough to bound memory
BATCH_PIECES = 1024


@dataclass
class Progress:
    """A snapshot passed to `on_progress` after every written batch."""

    stage: str  # "sentences" | "tokenizer" | "done"
    input_bytes: int  # on-disk bytes read so far
    input_bytes_total: int  # on-disk size of all inputs (0 when unknown: synthetic)
    text_bytes: int  # UTF-8 text handed to the workers
    documents: int
    sentences: int


@dataclass
class PreprocessResult:
    out: Path
    inputs: int
    documents: int
    sentences: int
    words: int
    parts: int
    text_bytes: int
    invalid_utf8_replaced: int
    skipped_binary: list[str]
    chunks_cut: int
    sentences_cut: int
    tokenizer_trained: bool
    vocab_size: int
    workers: int
    seconds: float
    sentence_seconds: float  # the spaCy+Moses stage alone (what the throughput target is about)
    engine: str = "local"
    tasks: int = 0  # engine tasks (0: the local pool)
    tasks_resumed: int = 0  # of them, found finished by an earlier run of the same command


# ---------------------------------------------------------------- output parts
class PartWriter:
    """sentences/part-NNNNN.txt files; a new part starts only at a document end."""

    def __init__(self, folder: Path, sentences_per_part: int):
        self.folder = folder
        self.limit = sentences_per_part
        folder.mkdir(parents=True, exist_ok=True)
        self.parts: list[dict] = []
        self._fh = None
        self.doc_sentences = 0  # sentences of the document being written
        self.documents = self.sentences = self.words = 0

    def write_sentences(self, lines: list[str]) -> None:
        if not lines:
            return
        if self._fh is None:
            self._open()
        data = ("\n".join(lines) + "\n").encode("utf-8", "replace")
        self._write(data)
        part = self.parts[-1]
        part["sentences"] += len(lines)
        self.doc_sentences += len(lines)
        self.sentences += len(lines)
        self.words += sum(line.count(" ") + 1 for line in lines)

    def end_document(self) -> bool:
        """Close the current document; False when it had no sentences (nothing is written)."""
        if not self.doc_sentences:
            return False
        self._write(b"\n")
        self.parts[-1]["documents"] += 1
        self.documents += 1
        self.doc_sentences = 0
        if self.parts[-1]["sentences"] >= self.limit:
            self._close()
        return True

    def write_documents(self, data: bytes, doc_ends: list[int], doc_sentences: list[int], words: int) -> None:
        """Whole documents already in the part format (sentence lines, then a blank line each), as engine
        tasks write them: `doc_ends[i]` is the end of document i in `data`, `doc_sentences[i]` its sentence
        count. Written as `write_sentences` + `end_document` would write them, new parts at the same places,
        but copied, not parsed: merging runs at disk speed, ahead of any number of workers."""
        assert not self.doc_sentences, "write_documents takes whole documents only"
        start = k = 0
        while k < len(doc_ends):
            if self._fh is None:
                self._open()
            part = self.parts[-1]
            room, taken = self.limit - part["sentences"], 0
            last = k
            while last < len(doc_ends) - 1 and taken + doc_sentences[last] < room:  # end_document's check, in advance
                taken += doc_sentences[last]
                last += 1
            taken += doc_sentences[last]
            self._write(data[start : doc_ends[last]])
            part["sentences"] += taken
            part["documents"] += last + 1 - k
            self.sentences += taken
            self.documents += last + 1 - k
            if part["sentences"] >= self.limit:
                self._close()
            start, k = doc_ends[last], last + 1
        self.words += words

    def close(self) -> None:
        self.end_document()
        self._close()

    def _open(self) -> None:
        name = f"part-{len(self.parts):05d}.txt"
        self._fh = open(self.folder / name, "wb")
        self._sha = hashlib.sha256()
        self.parts.append(
            {"name": f"{self.folder.name}/{name}", "documents": 0, "sentences": 0, "bytes": 0, "sha256": ""}
        )

    def _write(self, data: bytes) -> None:
        self._fh.write(data)
        self._sha.update(data)
        self.parts[-1]["bytes"] += len(data)

    def _close(self) -> None:
        if self._fh is not None:
            self._fh.flush()
            os.fsync(self._fh.fileno())
            self._fh.close()
            self.parts[-1]["sha256"] = self._sha.hexdigest()
            self._fh = None


# ---------------------------------------------------------------- workers
_settings: PreprocessSettings | None = None
_marker: str | None = None
_processor: TextProcessor | None = None


def _init_worker(settings: PreprocessSettings, marker: str | None) -> None:
    # Ctrl-C goes to the whole process group: the main process alone decides how to stop.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    global _settings, _marker, _processor
    _settings, _marker, _processor = settings, marker, None  # a forked worker must not reuse the parent's processor


def _work(texts: list[str]) -> tuple[list[list[str]], int]:
    global _processor
    if _processor is None:
        # Built on first use, not in the initializer: a failure here reaches the main process
        # as this task's exception (with its message) instead of a bare "pool is broken".
        _processor = TextProcessor(_settings, _marker)
    results = _processor.process(texts)
    return [r.sentences for r in results], sum(r.sentences_cut for r in results)


@dataclass
class _Batch:
    items: list = field(default_factory=list)  # (input index, text) for a piece, (input index, None) for a document end
    chars: int = 0

    @property
    def texts(self) -> list[str]:
        return [text for _, text in self.items if text is not None]


def _batches(items: Iterator[tuple[int, str | None]]) -> Iterator[_Batch]:
    batch = _Batch()
    pieces = 0
    for idx, text in items:
        batch.items.append((idx, text))
        if text is not None:
            batch.chars += len(text)
            pieces += 1
        if batch.chars >= BATCH_CHARS or pieces >= BATCH_PIECES:
            yield batch
            batch, pieces = _Batch(), 0
    if batch.items:
        yield batch


def _ordered_results(batches: Iterator[_Batch], settings: PreprocessSettings, marker: str | None, workers: int):
    """(batch, (sentences per piece, cut count)) in input order, at most 2 x workers batches in flight."""
    if workers == 1:  # in-process: no pickling, easy to profile
        global _settings, _marker, _processor
        _settings, _marker, _processor = settings, marker, None
        for batch in batches:
            try:
                result = _work(batch.texts)
            except MapnetError:
                raise
            except Exception as exc:
                raise MapnetError(f"preprocessing failed: {type(exc).__name__}: {exc}") from exc
            yield batch, result
        return
    # fork, not spawn/forkserver: those re-import the __main__ module in every worker, and the
    # `mapnet` entry point imports torch (seconds and ~500 MB per worker). spaCy is imported
    # here once so that workers inherit it. Callers must not run threads that the workers
    # would need (the CLI's progress bar refreshes from the main thread for this reason).
    import_spacy()
    ctx = multiprocessing.get_context("fork" if "fork" in multiprocessing.get_all_start_methods() else "spawn")
    pool = ProcessPoolExecutor(workers, mp_context=ctx, initializer=_init_worker, initargs=(settings, marker))
    pending: deque = deque()
    try:
        for batch in batches:
            pending.append((batch, pool.submit(_work, batch.texts)))
            if len(pending) >= 2 * workers:
                yield _result(*pending.popleft())
        while pending:
            yield _result(*pending.popleft())
    finally:
        pool.shutdown(wait=True, cancel_futures=True)


def _result(batch: _Batch, future):
    try:
        return batch, future.result()
    except MapnetError:
        raise
    except BrokenProcessPool:
        raise MapnetError(
            "a preprocess worker process died (killed, or out of memory?); nothing was published"
        ) from None
    except Exception as exc:
        raise MapnetError(f"a preprocess worker failed: {type(exc).__name__}: {exc}") from None


# ---------------------------------------------------------------- the pipeline
def run_preprocess(
    inputs: Iterable[str | os.PathLike],
    out: str | os.PathLike,
    settings: Settings,
    *,
    overwrite: bool = False,
    on_progress: Callable[[Progress], None] | None = None,
    recipe: dict | None = None,
    engine_address: str | None = None,
) -> PreprocessResult:
    """Preprocess `inputs` into the folder `out` (see docs/formats.md); returns counts.

    Raises `MapnetError` for bad input; on any failure nothing is published.
    `recipe` (name, path, url, sha256 ...) is recorded in the manifest as given.
    With `engine.name = "dask"` the sentence stage runs as tasks on the Dask cluster at
    `engine_address` (else DASK_SCHEDULER_ADDRESS, else a local one): `preprocess_tasks`.
    """
    started = time.perf_counter()
    pre = settings.preprocess
    out = Path(out)
    inputs = list(inputs)
    # `preprocess DIR --out DIR --overwrite` would delete the raw text it reads; `--out DIR/p` would read its own
    # output.
    check_output(
        out,
        [*(i for i in inputs if str(i) != SYNTHETIC), pre.tokenizer or None],
        kind=artefacts.CORPUS,
        overwrite=overwrite,
    )
    files = discover(inputs, pre)
    if not files:
        raise MapnetError("no input files found in " + ", ".join(map(str, inputs)))
    reused = bpe.load_tokenizer(pre.tokenizer) if pre.tokenizer else None  # fail before hours of work
    if reused is not None:
        refuse_cleaning_twice(Path(pre.tokenizer), pre)
    marker = word_marker(reused) if reused is not None else METASPACE  # a trained tokenizer is Metaspace BPE
    workers = pre.workers or os.cpu_count() or 1

    with staged_output(out, overwrite) as staging:
        stats = ReadStats()
        invalid_before = invalid_utf8_count()
        writer = PartWriter(staging / "sentences", pre.sentences_per_part)
        feed = _Feed(files, settings, stats)
        total_bytes = sum(f.size for f in files)
        sentences_cut = 0
        docs_per_input = [0] * len(files)
        stage = None
        if settings.engine.name == "dask":
            from .preprocess_tasks import engine_sentences

            def engine_progress(done_bytes: int, text_bytes: int, sentences: int) -> None:
                if on_progress:
                    on_progress(Progress("sentences", done_bytes, total_bytes, text_bytes, writer.documents, sentences))

            stage = engine_sentences(files, settings, marker, writer, out, engine_address, engine_progress)
            feed, stats, sentences_cut, docs_per_input = (
                stage.feed,
                stage.stats,
                stage.sentences_cut,
                stage.docs_per_input,
            )
            invalid_before -= stage.invalid_utf8_replaced  # counted by the tasks, not in this process
            workers = stage.workers
        else:
            # The generated corpus needs neither spaCy nor Moses: its sentences are known (the same bytes).
            generated = all(f.format == "synthetic" for f in files) and synthetic.cleans_like_this(pre)
            sentences_cut = _local_sentences(
                feed, pre, marker, workers, writer, docs_per_input, on_progress, total_bytes, generated
            )
        writer.close()
        sentence_seconds = time.perf_counter() - started
        if writer.sentences == 0:
            raise MapnetError(
                f"no sentences found in the inputs ({len(files)} file(s) read, {len(stats.skipped_binary)} skipped as "
                "binary)"
            )

        if on_progress:
            on_progress(
                Progress("tokenizer", total_bytes, total_bytes, stats.text_bytes, writer.documents, writer.sentences)
            )
        tok = _tokenizer(staging, writer.parts, pre, reused)

        extra = {}
        if any(f.format == "synthetic" for f in files):
            write_json(staging / "word_kinds.json", synthetic.word_kinds())
            extra["word_kinds"] = "word_kinds.json"
        write_text(staging / "settings.toml", settings.to_toml())
        invalid = invalid_utf8_count() - invalid_before
        manifest = {
            "schema": SCHEMA,
            "created": datetime.now(UTC).isoformat(timespec="seconds"),
            "mapnet_version": __version__,
            "inputs": [feed.describe(i, docs_per_input[i]) for i in range(len(files)) if not feed.skipped[i]],
            "skipped_binary_files": stats.skipped_binary,
            "counts": {
                "documents": writer.documents,
                "sentences": writer.sentences,
                "words": writer.words,
                "invalid_utf8_replaced": invalid,
                "skipped_binary": len(stats.skipped_binary),
                "chunks_cut": stats.chunks_cut,
                "sentences_cut": sentences_cut,
            },
            "parts": writer.parts,
            "tokenizer": {
                "sha256": bpe.tokenizer_sha256(staging / "tokenizer.json"),
                "vocab_size": tok.get_vocab_size(),
                "trained": reused is None,
                **({"source": str(pre.tokenizer)} if reused is not None else {}),
            },
            "settings": settings.to_dict()["preprocess"],
            "versions": _versions(),
            **extra,
            **({"recipe": recipe} if recipe else {}),
        }
        write_json(staging / "manifest.json", manifest)  # last: its presence marks the folder complete

    if stage is not None:
        from .preprocess_tasks import remove_tasks_folder

        remove_tasks_folder(out)  # only once published: until then it is what a rerun goes on from
    if on_progress:
        on_progress(Progress("done", total_bytes, total_bytes, stats.text_bytes, writer.documents, writer.sentences))
    return PreprocessResult(
        out=out,
        inputs=len(files) - len(stats.skipped_binary),
        documents=writer.documents,
        sentences=writer.sentences,
        words=writer.words,
        parts=len(writer.parts),
        text_bytes=stats.text_bytes,
        invalid_utf8_replaced=invalid,
        skipped_binary=list(stats.skipped_binary),
        chunks_cut=stats.chunks_cut,
        sentences_cut=sentences_cut,
        tokenizer_trained=reused is None,
        vocab_size=tok.get_vocab_size(),
        workers=workers,
        seconds=time.perf_counter() - started,
        sentence_seconds=sentence_seconds,
        engine=settings.engine.name,
        tasks=stage.tasks if stage else 0,
        tasks_resumed=stage.tasks_resumed if stage else 0,
    )


def _local_sentences(
    feed: _Feed,
    pre,
    marker: str,
    workers: int,
    writer: PartWriter,
    docs_per_input: list[int],
    on_progress,
    total_bytes: int,
    generated: bool = False,
) -> int:
    """The sentence stage in this process's worker pool, in input order, into `writer`; the sentences cut.
    `generated`: every input is the synthetic corpus, whose sentences `synthetic.sentences` gives in this process."""
    sentences_cut = 0
    batches = _batches(iter(feed))
    if generated:
        results = ((b, ([synthetic.sentences(t) for t in b.texts], 0)) for b in batches)
    else:
        results = _ordered_results(batches, pre, marker, workers)
    for batch, (sentences, cut) in results:
        sentences_cut += cut
        results = iter(sentences)
        for idx, text in batch.items:
            if text is not None:
                writer.write_sentences(next(results))
            elif writer.end_document():
                docs_per_input[idx] += 1
        if on_progress:
            on_progress(
                Progress(
                    "sentences", feed.position(), total_bytes, feed.stats.text_bytes, writer.documents, writer.sentences
                )
            )
    return sentences_cut


def _tokenizer(staging: Path, parts: list[dict], pre, reused):
    """The corpus's tokenizer, in staging/tokenizer.json: the one given (`preprocess.tokenizer`), or BPE trained on
    the parts (or a sample of them)."""
    if reused is not None:
        shutil.copyfile(pre.tokenizer, staging / "tokenizer.json")
        return reused
    sample = _tokenizer_sample(staging, parts, pre.tokenizer_sample_bytes)
    tok = bpe.train_tokenizer(sample, pre.vocab_size, pre.min_frequency)
    bpe.save_tokenizer(tok, staging / "tokenizer.json")
    if sample[0].parent == staging:
        sample[0].unlink()
    return tok


def _tokenizer_sample(staging: Path, parts: list[dict], sample_bytes: int) -> list[Path]:
    """The files to train the tokenizer on: every part, or (`preprocess.tokenizer_sample_bytes` > 0 and
    smaller than the corpus) one file of the same leading share of each part, cut at a line end.

    A function of the part files alone, so it is the same whatever ran the sentence stage.
    """
    paths = [staging / p["name"] for p in parts]
    total = sum(p["bytes"] for p in parts)
    if sample_bytes <= 0 or sample_bytes >= total:
        return paths
    sample = staging / "tokenizer-sample.txt"  # removed once the tokenizer is trained
    with open(sample, "wb") as out:
        for path, part in zip(paths, parts):
            want = part["bytes"] * sample_bytes // total
            with open(path, "rb") as fh:
                block = b"\n"
                while want > 0 and block:
                    block = fh.read(min(want, 1 << 20))
                    out.write(block)
                    want -= len(block)
                if not block.endswith(b"\n"):  # finish the sentence the share ends in
                    out.write(fh.readline())
    return [sample]


class _Feed:
    """All inputs as one stream of (input index, piece or None); remembers what each input was."""

    def __init__(self, files: list[InputFile], settings: Settings, stats: ReadStats):
        self.files = files
        self.settings = settings
        self.stats = stats
        self.formats = [f.format for f in files]
        self.skipped = [False] * len(files)
        self.synthetic_sha: dict[int, tuple[str, int]] = {}
        self._done_bytes = 0
        self._reader: InputReader | None = None

    def __iter__(self) -> Iterator[tuple[int, str | None]]:
        for idx, inp in enumerate(self.files):
            self._reader = reader = InputReader(inp, self.settings, self.stats)
            if inp.format == "synthetic":
                digest, size = hashlib.sha256(), 0
                for item in reader:
                    if item is not None:
                        data = item.encode("utf-8")
                        digest.update(data)
                        size += len(data)
                    yield idx, item
                self.synthetic_sha[idx] = (digest.hexdigest(), size)
            else:
                for item in reader:
                    yield idx, item
            self.formats[idx] = reader.format
            self.skipped[idx] = reader.skipped
            self._done_bytes += inp.size
            self._reader = None

    def position(self) -> int:
        return self._done_bytes + (self._reader.position() if self._reader else 0)

    def describe(self, idx: int, documents: int) -> dict:
        inp = self.files[idx]
        if inp.format == "synthetic":
            sha, size = self.synthetic_sha[idx]  # of the generated text pieces, in order
            return {"path": inp.path, "bytes": size, "sha256": sha, "format": "synthetic", "documents": documents}
        return {
            "path": inp.path,
            "bytes": inp.size,
            "sha256": sha256_file(inp.path),
            "format": self.formats[idx] + (f"+{inp.compression}" if inp.compression else ""),
            "documents": documents,
        }


def _versions() -> dict[str, str]:
    out = {"python": platform.python_version(), "mapnet": __version__}
    for name in ("spacy", "sacremoses", "tokenizers", "pyarrow"):
        try:
            out[name] = version(name)
        except PackageNotFoundError:
            out[name] = "not installed"
    return out
