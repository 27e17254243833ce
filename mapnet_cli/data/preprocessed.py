"""Open a preprocessed corpus folder and stream its sentences, verified on the way.

    corpus = open_preprocessed("prep/")
    for chunk in corpus.chunks():       # Chunk(lines, doc_end, doc_index, nbytes)
        ...

Parts are read in ~1 MB blocks and hashed while they are read, so the
sha256 check against the manifest costs no second pass; sizes and the
per-part sentence/document counts are checked too. The format is the one in
docs/formats.md (schema mapnet.preprocess/1).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ..atomic import sha256_file
from ..errors import MapnetError

SCHEMA = "mapnet.preprocess/1"
BLOCK_BYTES = 1 << 20


@dataclass
class Chunk:
    lines: list[str]  # sentences, in corpus order
    doc_end: np.ndarray  # bool per sentence: the document ends after it
    doc_index: np.ndarray  # int64 per sentence: global index of its document
    nbytes: int  # bytes of the part files this chunk consumed (for progress)


@dataclass
class Preprocessed:
    path: Path
    manifest: dict
    manifest_sha256: str

    @property
    def tokenizer_path(self) -> Path:
        return self.path / "tokenizer.json"

    @property
    def documents(self) -> int:
        return int(sum(p["documents"] for p in self.manifest["parts"]))

    @property
    def total_bytes(self) -> int:
        return int(sum(p["bytes"] for p in self.manifest["parts"]))

    def part_path(self, part: dict) -> Path:
        name = part["name"]
        return self.path / (name if "/" in name else f"sentences/{name}")

    def chunks(self) -> Iterator[Chunk]:
        """Sentences of every part in order; raises MapnetError at the first mismatch."""
        doc = 0
        for part in self.manifest["parts"]:
            path = self.part_path(part)
            digest = hashlib.sha256()
            sentences = documents = 0
            tail = b""
            with open(path, "rb") as fh:
                while True:
                    block = fh.read(BLOCK_BYTES)
                    digest.update(block)
                    data = tail + block
                    cut = data.rfind(b"\n") + 1 if block else len(data)
                    data, tail = data[:cut], data[cut:]
                    if data:
                        chunk = _parse(data, doc, path)
                        sentences += len(chunk.lines)
                        documents += int(chunk.doc_end.sum())
                        doc += int(chunk.doc_end.sum())
                        chunk.nbytes = len(block)
                        yield chunk
                    elif block:
                        yield Chunk([], np.zeros(0, bool), np.zeros(0, np.int64), len(block))
                    if not block:
                        break
            if digest.hexdigest() != part["sha256"]:
                raise MapnetError(f"{path} does not match its sha256 in the preprocess manifest (edited or corrupt)")
            if (sentences, documents) != (part["sentences"], part["documents"]):
                raise MapnetError(
                    f"{path} holds {sentences} sentences in {documents} documents, "
                    f"manifest says {part['sentences']} in {part['documents']}"
                )


def _parse(data: bytes, first_doc: int, path: Path) -> Chunk:
    """Lines of whole lines of a part: an empty line ends the document before it."""
    try:
        raw = data.decode("utf-8").split("\n")
    except UnicodeDecodeError as exc:
        raise MapnetError(f"{path} is not valid UTF-8 ({exc.reason} at byte {exc.start} of a block)") from None
    if raw[-1] == "":  # the newline that ends the last line
        raw.pop()
    lines: list[str] = []
    ends: list[bool] = []
    for line in raw:
        if line:
            lines.append(line)
            ends.append(False)
        elif ends:  # a blank line after a sentence closes that sentence's document
            ends[-1] = True
        # A blank line right after another (an empty document) adds nothing.
    doc_end = np.array(ends, dtype=bool)
    # Document of sentence i = first_doc + number of document ends strictly before i.
    before = np.concatenate([[0], np.cumsum(doc_end)[:-1]]) if len(ends) else np.zeros(0, np.int64)
    return Chunk(lines, doc_end, first_doc + before.astype(np.int64), 0)


def open_preprocessed(path: str | Path) -> Preprocessed:
    """Check a preprocessed folder's manifest, part sizes and tokenizer hash."""
    path = Path(path)
    if not path.is_dir():
        raise MapnetError(f"preprocessed folder not found: {path}")
    mpath = path / "manifest.json"
    if not mpath.is_file():
        raise MapnetError(f"{path} is not a finished preprocess output (no manifest.json; run `mapnet preprocess`)")
    try:
        manifest = json.loads(mpath.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise MapnetError(f"{mpath} is unreadable: {exc}") from None
    if not isinstance(manifest, dict) or manifest.get("schema") != SCHEMA:
        got = manifest.get("schema") if isinstance(manifest, dict) else None
        raise MapnetError(f"{mpath} is not a preprocess manifest (schema {got!r}, expected {SCHEMA!r})")
    for key in ("parts", "tokenizer"):
        if key not in manifest:
            raise MapnetError(f"{mpath} lacks {key!r}")
    corpus = Preprocessed(path, manifest, sha256_file(mpath))
    for part in manifest["parts"]:
        p = corpus.part_path(part)
        if not p.is_file():
            raise MapnetError(f"part file missing: {p}")
        if p.stat().st_size != part["bytes"]:
            raise MapnetError(f"part file {p} has {p.stat().st_size} bytes, manifest says {part['bytes']} (truncated?)")
    tok = corpus.tokenizer_path
    if not tok.is_file():
        raise MapnetError(f"{path} lacks tokenizer.json")
    if manifest["tokenizer"].get("sha256") and sha256_file(tok) != manifest["tokenizer"]["sha256"]:
        raise MapnetError(f"{tok} does not match the sha256 in the preprocess manifest (edited?)")
    return corpus
