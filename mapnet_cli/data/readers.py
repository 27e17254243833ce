"""Input files -> a stream of text pieces and document ends.

    for item in read_input(inp, settings, stats):   # str: a piece of text, None: the document ended
        ...

Every reader streams: files are read in bounded `readline` fragments (a 50 MB
line never sits in memory whole), Parquet/Arrow in record batches. A piece is
one paragraph, or a part of one cut at whitespace so that it stays under
`preprocess.max_chunk_chars`; a piece boundary is also a sentence boundary.

Formats (`preprocess.input_format`, auto-detected by default):
- text: documents separated as `preprocess.doc_separator` says; inside a
  document, blank lines separate paragraphs and single line breaks are soft
  wraps (joined with a space).
- wikiextractor: `<doc id=.. url=.. title=..>` ... `</doc>`; the first line
  inside repeats the title and is dropped; every line is a paragraph.
- wikitext: raw WikiText; ` = Title = ` starts an article, deeper ` = = X = = `
  headings are dropped; every line is a paragraph.
- jsonl / parquet / arrow: one document per record, text in `preprocess.text_field`.
- `synthetic:`: the embedded synthetic corpus (`mapnet_cli.data.synthetic`).
"""

from __future__ import annotations

import bz2
import codecs
import fnmatch
import gzip
import io
import json
import lzma
import os
import re
import zlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable, Iterator

from ..errors import MapnetError
from ..settings import PreprocessSettings
from .textproc import cut_at_whitespace

SYNTHETIC = "synthetic:"
SNIFF_BYTES = 8192
_COMPRESSED = {".gz": "gzip", ".bz2": "bz2", ".xz": "xz"}
_BY_EXTENSION = {".jsonl": "jsonl", ".ndjson": "jsonl", ".parquet": "parquet", ".arrow": "arrow", ".feather": "arrow", ".ipc": "arrow"}
_CORRUPT = (EOFError, zlib.error, lzma.LZMAError, gzip.BadGzipFile)

# ---------------------------------------------------------------- invalid UTF-8, counted
_invalid_bytes = [0]


def _count_and_replace(exc: UnicodeDecodeError):
    _invalid_bytes[0] += exc.end - exc.start
    return "\ufffd", exc.end


codecs.register_error("mapnet-count-replace", _count_and_replace)


_LONE_SURROGATE = re.compile("[\ud800-\udfff]")


def _without_lone_surrogates(text: str) -> str:
    """JSON can escape half a UTF-16 pair ("\\ud800"): not text, and not encodable as UTF-8 further on.
    Each becomes U+FFFD and is counted with the invalid UTF-8 bytes."""
    if text.isascii() or not _LONE_SURROGATE.search(text):
        return text
    _invalid_bytes[0] += len(_LONE_SURROGATE.findall(text))
    return _LONE_SURROGATE.sub("\ufffd", text)


def invalid_utf8_count() -> int:
    """Bytes replaced by U+FFFD so far in this process (callers take differences)."""
    return _invalid_bytes[0]


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
        except _CORRUPT + (OSError,) as exc:
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


def sniff_format(head: bytes) -> str:
    """Decide among the text formats from a file's first bytes."""
    text = head.decode("utf-8", errors="replace").lstrip("\ufeff")
    if text.lstrip().startswith("<doc "):
        return "wikiextractor"
    for line in text.splitlines()[:20]:
        if line.strip():
            return "wikitext" if _WIKITEXT_TITLE.match(line) else "text"
    return "text"


# ---------------------------------------------------------------- line fragments and pieces
def line_fragments(fh: io.TextIOBase, limit: int) -> Iterator[tuple[str, bool]]:
    """(text, line_complete) fragments of at most `limit` characters; the newline is stripped."""
    while True:
        frag = fh.readline(limit)
        if not frag:
            return
        if frag.endswith("\n"):
            yield frag[:-1], True
        else:
            yield frag, False


class Assembler:
    """Collects text into pieces of at most `limit` characters, cutting at whitespace when forced."""

    def __init__(self, limit: int, stats: ReadStats):
        self.limit = limit
        self.stats = stats
        self.buf: list[str] = []
        self.size = 0

    def add(self, text: str, sep: str = "") -> list[str]:
        if self.buf and sep:
            self.buf.append(sep)
            self.size += len(sep)
        self.buf.append(text)
        self.size += len(text)
        if self.size <= self.limit:
            return []
        pieces = cut_at_whitespace("".join(self.buf), self.limit)
        keep = pieces.pop() if pieces else ""
        self.buf, self.size = [keep], len(keep)
        self.stats.chunks_cut += len(pieces)
        return self._count(pieces)

    def flush(self) -> list[str]:
        text = "".join(self.buf).strip()
        self.buf, self.size = [], 0
        return self._count([text]) if text else []

    def _count(self, pieces: list[str]) -> list[str]:
        for p in pieces:
            self.stats.text_bytes += len(p.encode("utf-8"))
        return pieces


def text_documents(frags: Iterable[tuple[str, bool]], separator: str, asm: Assembler) -> Iterator[str | None]:
    """Plain text: pieces and document ends (None) by `separator` (blank_line | line | file)."""
    at_line_start = True
    in_doc = False
    for frag, complete in frags:
        blank = at_line_start and complete and not frag.strip()
        if blank:
            yield from asm.flush()
            if separator == "blank_line" and in_doc:
                in_doc = False
                yield None
        else:
            if frag.strip():
                in_doc = True
            # a new line inside a paragraph is a soft wrap: join with a space
            yield from asm.add(frag, " " if at_line_start else "")
            if complete and separator == "line":
                yield from asm.flush()
                if in_doc:
                    in_doc = False
                    yield None
        at_line_start = complete
    yield from asm.flush()
    if in_doc:
        yield None


def wikiextractor_documents(frags: Iterable[tuple[str, bool]], asm: Assembler) -> Iterator[str | None]:
    """WikiExtractor output: each `<doc ...>` element is a document, each line a paragraph."""
    at_line_start = True
    state = "outside"  # outside | title | body
    for frag, complete in frags:
        if at_line_start and frag.startswith("<doc ") and state == "outside":
            state = "title"
        elif at_line_start and frag.rstrip() == "</doc>" and state != "outside":
            yield from asm.flush()
            yield None
            state = "outside"
        elif state == "title":
            if complete and frag.strip():
                state = "body"  # the first line repeats the title: dropped
        elif state == "body":
            yield from asm.add(frag)
            if complete:
                yield from asm.flush()
        at_line_start = complete
    if state != "outside":  # a truncated last element still holds text
        yield from asm.flush()
        yield None


_WIKITEXT_TITLE = re.compile(r"^ = [^=].*[^=] = $|^ = [^=] = $")
_WIKITEXT_HEADING = re.compile(r"^ (= )+.*( =)+ $")


_WIKITEXT_JOINERS = {" @-@ ": "-", " @,@ ": ",", " @.@ ": "."}


def _unwikitext(text: str) -> str:
    """Undo WikiText's number/hyphen splitting ("1 @,@ 000" -> "1,000"); Moses re-splits what it should."""
    if "@" in text:
        for marker, joiner in _WIKITEXT_JOINERS.items():
            text = text.replace(marker, joiner)
    return text


def wikitext_documents(frags: Iterable[tuple[str, bool]], asm: Assembler) -> Iterator[str | None]:
    """Raw WikiText: ` = Title = ` starts an article; ` = = Heading = = ` lines are dropped."""
    at_line_start = True
    in_doc = False
    for frag, complete in frags:
        if at_line_start and complete and _WIKITEXT_TITLE.match(frag):
            yield from asm.flush()
            if in_doc:
                yield None
            in_doc = True
        elif at_line_start and complete and _WIKITEXT_HEADING.match(frag):
            yield from asm.flush()
        elif frag.strip() or not complete:
            in_doc = True
            yield from asm.add(_unwikitext(frag))
            if complete:
                yield from asm.flush()
        at_line_start = complete
    yield from asm.flush()
    if in_doc:
        yield None


def record_documents(texts: Iterable[str], asm: Assembler) -> Iterator[str | None]:
    """One document per record (JSONL, Parquet, Arrow, synthetic); blank lines split paragraphs."""
    for text in texts:
        yield from text_documents(_string_fragments(text, asm.limit), "file", asm)


def _string_fragments(text: str, limit: int) -> Iterator[tuple[str, bool]]:
    for line in text.split("\n"):
        for i in range(0, max(len(line), 1), limit):
            part = line[i:i + limit]
            yield part, i + limit >= len(line)


# ---------------------------------------------------------------- Project Gutenberg boilerplate
_PG_START = re.compile(
    r"^\*\*\*\s*START OF (THE|THIS) PROJECT GUTENBERG"  # modern: *** START OF THIS PROJECT GUTENBERG EBOOK X ***
    r"|^\*END\*?\s*THE SMALL PRINT"  # 1990s etexts: the licence "small print" ends the header
    r"|^\*+\s*SMALL PRINT! FOR __ COMPLETE SHAKESPEARE",  # the Complete Shakespeare etexts
    re.IGNORECASE,
)
_PG_END = re.compile(
    r"^\*\*\*\s*END OF (THE|THIS) PROJECT GUTENBERG"
    r"|^End of (the |this )?Project Gutenb[eu]rg"
    r"|^End of (the |this )?(Project Gutenb[eu]rg )?E-?text",
    re.IGNORECASE,
)
# Headers are at most a few hundred lines; a file without a marker this early has no header.
_PG_WINDOW_LINES = 1500
_PG_WINDOW_CHARS = 256 * 1024


def strip_gutenberg(frags: Iterable[tuple[str, bool]]) -> Iterator[tuple[str, bool]]:
    """Drop the Project Gutenberg header (up to its start marker) and footer (from its end marker).

    Text without a start marker in its first lines passes unchanged; the footer
    is looked for only after a header was found, so ordinary text is never cut.
    """
    head: list[tuple[str, bool]] | None = []
    head_chars = 0
    found = False
    tail = 0
    at_line_start = True
    for frag, complete in frags:
        if head is not None:
            if at_line_start and _PG_START.match(frag):
                head, found = None, True
                # "*** START OF ... EBOOK A LONG\nTITLE ***" wraps: drop lines up to the closing stars
                tail = 0 if frag.rstrip().endswith("***") or not frag.startswith("***") else 3
                at_line_start = complete
                continue
            head.append((frag, complete))
            head_chars += len(frag)
            if len(head) > _PG_WINDOW_LINES or head_chars > _PG_WINDOW_CHARS:
                yield from head
                head = None
        elif tail:
            tail = 0 if frag.rstrip().endswith("***") else tail - 1
        elif found and at_line_start and _PG_END.match(frag):
            return
        else:
            yield frag, complete
        at_line_start = complete
    if head:
        yield from head


# ---------------------------------------------------------------- one input
class InputReader:
    """Iterate one input's pieces (str) and document ends (None).

    After iteration, `format` is the format actually read and `skipped` says
    whether the file was skipped as binary.
    """

    def __init__(self, inp: InputFile, settings, stats: ReadStats):
        self.inp = inp
        self.settings = settings  # the full Settings: synthetic input needs its own section
        self.pre: PreprocessSettings = settings.preprocess
        self.stats = stats
        self.format = inp.format
        self.skipped = False
        self._source: Source | None = None

    def position(self) -> int:
        """On-disk bytes read so far (for progress)."""
        return self._source.position() if self._source is not None else 0

    def __iter__(self) -> Iterator[str | None]:
        asm = Assembler(self.pre.max_chunk_chars, self.stats)
        if self.inp.format == "synthetic":
            from . import synthetic  # written alongside; loaded only when asked for

            yield from record_documents(synthetic.generate_documents(self.settings.synthetic), asm)
        elif self.inp.format in ("parquet", "arrow"):
            yield from record_documents(self._columnar_texts(), asm)
        else:
            yield from self._text_items(asm)

    def _text_items(self, asm: Assembler) -> Iterator[str | None]:
        inp = self.inp
        self._source = source = Source(inp)
        try:
            if is_binary(source.head):
                if inp.explicit and self.pre.on_binary == "error":
                    raise MapnetError(
                        f"{inp.path} looks binary (NUL bytes in its first {SNIFF_BYTES} bytes); "
                        "pass text, or set preprocess.on_binary=\"skip\"")
                self.skipped = True
                self.stats.skipped_binary.append(inp.path)
                return
            if self.format == "text" and self.pre.input_format == "auto":
                self.format = sniff_format(source.head)
            frags = line_fragments(source.text, self.pre.max_chunk_chars)
            if self.pre.strip_gutenberg and self.format == "text":
                frags = strip_gutenberg(frags)
            if self.format == "wikiextractor":
                yield from wikiextractor_documents(frags, asm)
            elif self.format == "wikitext":
                yield from wikitext_documents(frags, asm)
            elif self.format == "jsonl":
                yield from record_documents(self._jsonl_texts(source.text), asm)
            else:
                yield from text_documents(frags, self.pre.doc_separator, asm)
        except _CORRUPT as exc:
            raise corrupt_error(inp, exc) from None
        except OSError as exc:  # includes "Not a gzipped file" and bz2's "Invalid data stream"
            if inp.compression:
                raise corrupt_error(inp, exc) from None
            raise MapnetError(f"cannot read input {inp.path}: {exc}") from None
        finally:
            source.close()
            self._source = None

    def _jsonl_texts(self, fh: io.TextIOBase) -> Iterator[str]:
        key = self.pre.text_field
        for lineno, line in enumerate(fh, 1):
            if not line.strip():
                continue
            try:
                record = json.loads(line)
            except json.JSONDecodeError as exc:
                raise MapnetError(f"{self.inp.path}:{lineno}: not valid JSON ({exc.msg})") from None
            except RecursionError:  # [[[[... deeper than Python's recursion limit
                raise MapnetError(f"{self.inp.path}:{lineno}: not valid JSON (nested too deeply)") from None
            if not isinstance(record, dict) or key not in record:
                raise MapnetError(f"{self.inp.path}:{lineno}: no {key!r} field (set preprocess.text_field)")
            value = record[key]
            if not isinstance(value, str):
                raise MapnetError(f"{self.inp.path}:{lineno}: field {key!r} is {type(value).__name__}, not text")
            yield _without_lone_surrogates(value)

    def _columnar_texts(self) -> Iterator[str]:
        import pyarrow as pa

        key = self.pre.text_field
        try:
            batches, names = _open_columnar(self.inp, key)
            if key not in names:
                raise MapnetError(f"{self.inp.path}: no column {key!r} (columns: {', '.join(names)}; set preprocess.text_field)")
            for batch in batches:
                column = batch.column(batch.schema.get_field_index(key))
                if not (pa.types.is_string(column.type) or pa.types.is_large_string(column.type)):
                    raise MapnetError(f"{self.inp.path}: column {key!r} is {column.type}, not text")
                # small slices: a file written as one huge batch is still converted a bit at a time
                for start in range(0, len(column), 256):
                    for value in column.slice(start, 256).to_pylist():
                        if value:
                            yield value
        except (pa.ArrowException, OSError) as exc:
            raise MapnetError(f"{self.inp.path}: not a readable {self.inp.format} file ({exc})") from None


def _open_columnar(inp: InputFile, key: str):
    """(record batches, column names) of a Parquet or Arrow IPC (file or stream) input, streamed."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    if inp.format == "parquet":
        pf = pq.ParquetFile(inp.path)
        names = pf.schema_arrow.names
        return pf.iter_batches(batch_size=1024, columns=[key] if key in names else None), names
    source = pa.memory_map(inp.path)
    try:
        reader = pa.ipc.open_file(source)
        return (reader.get_batch(i) for i in range(reader.num_record_batches)), reader.schema.names
    except pa.ArrowInvalid:  # not the random-access file format: try the streaming format
        source.seek(0)
        reader = pa.ipc.open_stream(source)
        return iter(reader), reader.schema.names
