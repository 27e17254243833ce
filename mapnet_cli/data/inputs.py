"""Input files: finding them, opening them (decompressed, binary refused), counting invalid UTF-8.

    files = discover(["corpus/", "extra.txt.gz"], settings.preprocess)   # sorted, hidden names skipped
    source = Source(files[0])                                            # .text: a UTF-8 text handle

Formats are decided here from the extension (`preprocess.input_format = auto`); text files
are told apart later from their first bytes (`documents.sniff_format`). Invalid UTF-8 becomes
U+FFFD and is counted (`invalid_utf8_count`), never an error.
"""

from __future__ import annotations

import bz2
import codecs
import fnmatch
import gzip
import io
import lzma
import os
import re
import threading
import zlib
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from .. import artefacts
from ..errors import MapnetError
from ..settings import PreprocessSettings

SYNTHETIC = "synthetic:"
SNIFF_BYTES = 8192
_COMPRESSED = {".gz": "gzip", ".bz2": "bz2", ".xz": "xz"}
_BY_EXTENSION = {
    ".jsonl": "jsonl",
    ".ndjson": "jsonl",
    ".parquet": "parquet",
    ".arrow": "arrow",
    ".feather": "arrow",
    ".ipc": "arrow",
}
CORRUPT = (EOFError, zlib.error, lzma.LZMAError, gzip.BadGzipFile)  # what damaged compressed data raises

# ---------------------------------------------------------------- invalid UTF-8, counted
# Per thread: engine tasks may read inputs in threads of one process, each counting its own.
_counter = threading.local()


def _add_invalid(n: int) -> None:
    _counter.value = getattr(_counter, "value", 0) + n


def _count_and_replace(exc: UnicodeDecodeError):
    _add_invalid(exc.end - exc.start)
    return "\ufffd", exc.end


codecs.register_error("mapnet-count-replace", _count_and_replace)


_LONE_SURROGATE = re.compile("[\ud800-\udfff]")


def without_lone_surrogates(text: str) -> str:
    """JSON can escape half a UTF-16 pair ("\\ud800"): not text, and not encodable as UTF-8 further on.
    Each becomes U+FFFD and is counted with the invalid UTF-8 bytes."""
    if text.isascii() or not _LONE_SURROGATE.search(text):
        return text
    _add_invalid(len(_LONE_SURROGATE.findall(text)))
    return _LONE_SURROGATE.sub("\ufffd", text)


def invalid_utf8_count() -> int:
    """Bytes replaced by U+FFFD so far in this thread (callers take differences)."""
    return getattr(_counter, "value", 0)


# ---------------------------------------------------------------- discovery
@dataclass(frozen=True)
class InputFile:
    path: str
    format: str  # text | wikiextractor | wikitext | jsonl | parquet | arrow | synthetic
    explicit: bool  # named on the command line (binary -> error) rather than found in a folder
    compression: str = ""  # "", gzip, bz2, xz

    @property
    def size(self) -> int:
        return 0 if self.format == "synthetic" else os.path.getsize(self.path)


@dataclass
class ReadStats:
    chunks_cut: int = 0
    text_bytes: int = 0
    skipped_binary: list[str] = field(default_factory=list)


def discover(inputs: Iterable[str | os.PathLike], settings: PreprocessSettings) -> list[InputFile]:
    """Expand files and folders (recursive, sorted, hidden names skipped) into input files."""
    out: list[InputFile] = []
    for raw in inputs:
        if str(raw) == SYNTHETIC:
            out.append(InputFile(SYNTHETIC, "synthetic", True))
            continue
        path = Path(raw)
        if not path.exists():
            raise MapnetError(f"input not found: {path}")
        if not os.access(path, os.R_OK) or (path.is_dir() and not os.access(path, os.X_OK)):
            raise MapnetError(f"cannot read input {path}: permission denied")
        if path.is_dir():
            out.extend(_input_file(p, settings, explicit=False) for p in _walk(path, settings.exclude))
        elif path.is_file():
            out.append(_input_file(path, settings, explicit=True))
        else:
            raise MapnetError(f"input is not a regular file or folder: {path}")
    return out


def _walk(root: Path, exclude: tuple[str, ...]) -> list[Path]:
    def fail(err: OSError):
        raise MapnetError(f"cannot read folder {err.filename}: {err.strerror}")

    found = []
    for dirpath, dirnames, filenames in os.walk(root, onerror=fail):
        made = artefacts.kind_of(Path(dirpath))
        if made is not None:  # its tokenizer.json, manifest and sentence parts are not documents
            raise MapnetError(
                f"input {dirpath} is a {made.noun} written by mapnet, not raw text: preprocess would "
                "read its files as documents; give only the folders of raw text"
            )
        dirnames[:] = sorted(d for d in dirnames if not d.startswith("."))
        for name in sorted(filenames):
            if name.startswith(".") or any(fnmatch.fnmatch(name, pat) for pat in exclude):
                continue
            path = Path(dirpath) / name
            if not os.access(path, os.R_OK):
                raise MapnetError(f"cannot read input {path}: permission denied")
            found.append(path)
    return found


def _input_file(path: Path, settings: PreprocessSettings, explicit: bool) -> InputFile:
    suffix = path.suffix.lower()
    compression = _COMPRESSED.get(suffix, "")
    stem_suffix = Path(path.stem).suffix.lower() if compression else suffix
    fmt = settings.input_format
    if fmt == "auto":
        fmt = _BY_EXTENSION.get(stem_suffix, "text")
    if fmt in ("parquet", "arrow") and compression:
        raise MapnetError(f"{path}: compressed {fmt} files are not supported (their columns are compressed already)")
    return InputFile(str(path), fmt, explicit, compression)


# ---------------------------------------------------------------- opening text streams
def open_binary(inp: InputFile):
    """The decompressed byte stream of a file; the caller closes it."""
    try:
        raw = open(inp.path, "rb")
    except PermissionError:
        raise MapnetError(f"cannot read input {inp.path}: permission denied") from None
    except OSError as exc:
        raise MapnetError(f"cannot read input {inp.path}: {exc.strerror}") from None
    if inp.compression == "gzip":
        return gzip.GzipFile(fileobj=raw, mode="rb"), raw
    if inp.compression == "bz2":
        return bz2.BZ2File(raw, "rb"), raw
    if inp.compression == "xz":
        return lzma.LZMAFile(raw, "rb"), raw
    return raw, raw


def is_binary(head: bytes) -> bool:
    """NUL bytes never occur in UTF-8 text; they do in nearly every binary format."""
    return b"\0" in head


class Source:
    """An opened input file: text handle plus the raw handle (for progress by on-disk bytes)."""

    def __init__(self, inp: InputFile):
        self.inp = inp
        self.stream, self.raw = open_binary(inp)
        try:
            self.head = self.stream.read(SNIFF_BYTES)
            self.stream.seek(0)
        except CORRUPT + (OSError,) as exc:
            self.close()
            raise corrupt_error(inp, exc) from None
        self.text = io.TextIOWrapper(self.stream, encoding="utf-8", errors="mapnet-count-replace", newline=None)

    def position(self) -> int:
        try:
            return self.raw.tell()
        except (OSError, ValueError):
            return 0

    def close(self) -> None:
        self.stream.close()
        self.raw.close()


def corrupt_error(inp: InputFile, exc: BaseException) -> MapnetError:
    kind = inp.compression or "input"
    return MapnetError(f"{inp.path}: corrupt or truncated {kind} data ({type(exc).__name__}: {exc})")
