"""Input files -> a stream of text pieces and document ends.

    for item in InputReader(inp, settings, stats):  # str: a piece of text, None: the document ended
        ...

Every reader streams: files are read in bounded `readline` fragments (a 50 MB line never sits in memory whole),
Parquet/Arrow in record batches. A piece is one paragraph, or a part of one cut at whitespace so that it stays
under `preprocess.max_chunk_chars`; a piece boundary is also a sentence boundary. Finding and opening the files
is `inputs.py`, cutting text formats into pieces `documents.py`; this module reads one input of any format.

Formats (`preprocess.input_format`, auto-detected by default): text, wikiextractor, wikitext, jsonl / parquet /
arrow (one document per record, text in `preprocess.text_field`) and `synthetic:` (`mapnet_cli.data.synthetic`).
What a document and a paragraph are in each: docs/internals.md#datareaderspy.
"""

from __future__ import annotations

import io
import json
from collections.abc import Iterator

from ..errors import MapnetError
from ..settings import PreprocessSettings
from .documents import (
    Assembler,
    line_fragments,
    record_documents,
    sniff_format,
    strip_gutenberg,
    text_documents,
    wikiextractor_documents,
    wikitext_documents,
)
from .inputs import (
    CORRUPT,
    SNIFF_BYTES,
    InputFile,
    ReadStats,
    Source,
    corrupt_error,
    is_binary,
    without_lone_surrogates,
)


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
                        'pass text, or set preprocess.on_binary="skip"'
                    )
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
        except CORRUPT as exc:
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
            yield without_lone_surrogates(value)

    def _columnar_texts(self) -> Iterator[str]:
        import pyarrow as pa

        key = self.pre.text_field
        try:
            batches, names = _open_columnar(self.inp, key)
            if key not in names:
                raise MapnetError(
                    f"{self.inp.path}: no column {key!r} (columns: {', '.join(names)}; set preprocess.text_field)"
                )
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
