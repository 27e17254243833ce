"""Text streams -> pieces of text and document ends, per text format; Project Gutenberg boilerplate.

    frags = line_fragments(source.text, limit)          # bounded readline fragments, never a whole long line
    for item in text_documents(frags, "blank_line", Assembler(limit, stats)):   # str: a piece, None: a document ended
        ...

The formats themselves are described in `readers.py`.
"""

from __future__ import annotations

import io
import re
from collections.abc import Iterable, Iterator

from .inputs import ReadStats
from .textproc import cut_at_whitespace


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
            part = line[i : i + limit]
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
