"""Read packed shards: memory-mapped, verified against their manifest, O(1) access.

    reader = ShardReader("shards/", split="train")          # checks sizes + sha256
    len(reader), reader.max_seq_len, reader.special_ids["mask"]
    seq = reader[12345]                                      # np.ndarray[max_seq_len]
    batch = reader.take(np.array([7, 3, 99]))                # np.ndarray[3, max_seq_len]

The on-disk layout (Arrow IPC files + manifest.json) is described in
docs/formats.md; the writer is `mapnet_cli.data.shard_writer`. Every Arrow
record batch is memory-mapped and viewed as a 2-D numpy array without a copy,
so opening a shard costs only the verification, and memory does not grow with
the corpus (the OS pages sequences in as they are read).
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.ipc as ipc

from ..atomic import sha256_file
from ..errors import MapnetError

SCHEMA = "mapnet.shards/1"
MANIFEST = "manifest.json"
COLUMN = "input_ids"
SPLITS = ("train", "valid")
SPECIAL_NAMES = ("pad", "unk", "cls", "sep", "mask")


def find_shard_dir(path: str | Path) -> Path:
    """The shard folder for `path`: the folder itself, the folder of a file in it, or the
    shards a pretraining run folder was trained on (its run.json's `shards.path`)."""
    path = Path(path)
    if path.is_file():  # manifest.json or one of the .arrow files was named
        path = path.parent
    if not path.is_dir():
        raise MapnetError(f"shard folder not found: {path}")
    if not (path / MANIFEST).is_file() and (path / "run.json").is_file():
        try:
            recorded = json.loads((path / "run.json").read_text(encoding="utf-8"))["shards"]["path"]
        except (OSError, ValueError, KeyError, TypeError):
            raise MapnetError(f"{path / 'run.json'} does not name the shards of the run (shards.path)") from None
        if not (Path(recorded) / MANIFEST).is_file():
            raise MapnetError(f"run {path} was trained on {recorded}, which is not a finished shard folder (moved?)")
        return Path(recorded)
    if not (path / MANIFEST).is_file():
        raise MapnetError(f"{path} is not a finished shard folder (no {MANIFEST}; run `mapnet shard` to make one)")
    return path


def load_manifest(shard_dir: Path) -> dict:
    try:
        manifest = json.loads((shard_dir / MANIFEST).read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise MapnetError(f"{shard_dir / MANIFEST} is unreadable: {exc}") from None
    if not isinstance(manifest, dict) or manifest.get("schema") != SCHEMA:
        got = manifest.get("schema") if isinstance(manifest, dict) else type(manifest).__name__
        raise MapnetError(f"{shard_dir / MANIFEST} is not a shard manifest (schema {got!r}, expected {SCHEMA!r})")
    missing = [
        k
        for k in ("max_seq_len", "dtype", "vocab_size", "special_ids", "tokenizer_sha256", "files", "splits")
        if k not in manifest
    ]
    if missing:
        raise MapnetError(f"{shard_dir / MANIFEST} lacks {', '.join(missing)}")
    return manifest


def verify_file(path: Path, entry: dict, full: bool) -> None:
    """Refuse a missing, truncated or edited file, naming it."""
    try:
        size = path.stat().st_size
    except FileNotFoundError:
        raise MapnetError(f"shard file missing: {path}") from None
    if size != entry["bytes"]:
        raise MapnetError(
            f"shard file {path} has {size} bytes, manifest says {entry['bytes']} (truncated or replaced?)"
        )
    if full and sha256_file(path) != entry["sha256"]:
        raise MapnetError(f"shard file {path} does not match its sha256 in the manifest (edited or corrupt)")


class ShardReader:
    """Random access to one split of a shard folder.

    `verify="full"` hashes every file of the split (and the tokenizer) before
    use; `"size"` only compares sizes, for quick starts on trusted disks. An
    empty split (e.g. `valid` when shard.valid_fraction was 0) opens with
    length 0.
    """

    def __init__(self, shard_dir: str | Path, split: str = "train", verify: str = "full"):
        if split not in SPLITS:
            raise MapnetError(f"unknown shard split {split!r} (choose from {', '.join(SPLITS)})")
        if verify not in ("full", "size"):
            raise MapnetError(f"shard verify must be 'full' or 'size' (got {verify!r})")
        self.dir = find_shard_dir(shard_dir)
        self.split = split
        self.manifest = load_manifest(self.dir)
        m = self.manifest
        self.max_seq_len = int(m["max_seq_len"])
        self.vocab_size = int(m["vocab_size"])
        self.dtype = np.dtype(m["dtype"])
        self.special_ids = {k: int(m["special_ids"][k]) for k in SPECIAL_NAMES}
        self.tokenizer_path = self.dir / "tokenizer.json"
        if not self.tokenizer_path.is_file():
            raise MapnetError(f"shard folder {self.dir} lacks tokenizer.json")
        if verify == "full" and sha256_file(self.tokenizer_path) != m["tokenizer_sha256"]:
            raise MapnetError(f"{self.tokenizer_path} does not match tokenizer_sha256 in the manifest (edited?)")
        self._blocks: list[np.ndarray] = []  # one [rows, L] zero-copy view per record batch
        self._sources: list[pa.MemoryMappedFile] = []
        for entry in (e for e in m["files"] if e["split"] == split):
            path = self.dir / entry["name"]
            verify_file(path, entry, full=verify == "full")
            blocks = self._map(path)
            rows = sum(len(b) for b in blocks)
            if rows != entry["sequences"]:
                raise MapnetError(f"shard file {path} holds {rows} sequences, manifest says {entry['sequences']}")
            self._blocks.extend(b for b in blocks if len(b))
        # starts[k] = global index of block k's first row; searchsorted maps an index to its block.
        lengths = np.array([len(b) for b in self._blocks], dtype=np.int64)
        self._starts = np.concatenate([[0], np.cumsum(lengths)])
        self._len = int(self._starts[-1])
        self.token_kinds = self._load_kinds()

    @property
    def tokenizer_sha256(self) -> str:
        """The tokenizer's hash, as the manifest records it (checked against the file when verify is "full")."""
        return self.manifest["tokenizer_sha256"]

    def _map(self, path: Path) -> list[np.ndarray]:
        try:
            source = pa.memory_map(str(path), "r")
            reader = ipc.open_file(source)
            field = reader.schema.field(COLUMN)
            ok = (
                pa.types.is_fixed_size_list(field.type)
                and field.type.list_size == self.max_seq_len
                and field.type.value_type == pa.from_numpy_dtype(self.dtype)
            )
            if not ok:
                raise MapnetError(
                    f"shard file {path}: column {COLUMN} has type {field.type}, expected "
                    f"fixed_size_list<{self.dtype}>[{self.max_seq_len}]"
                )
            blocks = []
            for i in range(reader.num_record_batches):
                column = reader.get_batch(i).column(COLUMN)
                flat = column.flatten().to_numpy(zero_copy_only=True)
                blocks.append(flat.reshape(len(column), self.max_seq_len))
        except (pa.ArrowException, KeyError, ValueError) as exc:
            raise MapnetError(f"shard file {path} is not a readable Arrow file: {exc}") from None
        self._sources.append(source)
        return blocks

    def _load_kinds(self) -> dict[str, np.ndarray] | None:
        path = self.dir / "token_kinds.json"
        if not path.is_file():
            return None
        try:
            raw = json.loads(path.read_text(encoding="utf-8"))
            return {kind: np.asarray(ids, dtype=np.int64) for kind, ids in raw.items()}
        except (OSError, ValueError, AttributeError, TypeError) as exc:
            raise MapnetError(f"{path} is unreadable: {exc}") from None

    def __len__(self) -> int:
        return self._len

    def _locate(self, i: int) -> tuple[int, int]:
        if not -self._len <= i < self._len:
            raise IndexError(f"sequence {i} out of range for {self._len} {self.split} sequences")
        i %= self._len
        block = int(np.searchsorted(self._starts, i, side="right")) - 1
        return block, i - int(self._starts[block])

    def __getitem__(self, i: int) -> np.ndarray:
        """Sequence `i` of the split, a fresh array (the mapped file stays read-only)."""
        block, row = self._locate(int(i))
        return self._blocks[block][row].copy()

    def take(self, indices, dtype=None) -> np.ndarray:
        """Gather sequences by global index into one [len(indices), max_seq_len] array.

        Indices are grouped by record batch so each block is indexed once with
        a vectorised gather, whatever order the sampler produced.
        """
        idx = np.asarray(indices, dtype=np.int64).reshape(-1)
        out = np.empty((len(idx), self.max_seq_len), dtype=dtype or self.dtype)
        if not len(idx):
            return out
        if idx.min() < -self._len or idx.max() >= self._len:
            raise IndexError(f"index out of range for {self._len} {self.split} sequences")
        idx = idx % self._len
        blocks = np.searchsorted(self._starts, idx, side="right") - 1
        order = np.argsort(blocks, kind="stable")
        sorted_blocks = blocks[order]
        cuts = np.flatnonzero(np.diff(sorted_blocks)) + 1
        for group in np.split(order, cuts):
            b = int(blocks[group[0]])
            out[group] = self._blocks[b][idx[group] - self._starts[b]]
        return out

    def __iter__(self):
        for block in self._blocks:
            for row in block:
                yield row.copy()

    def __getstate__(self) -> dict:
        # Memory maps do not pickle; a copy sent to a worker process re-opens the same files.
        return {"dir": self.dir, "split": self.split}

    def __setstate__(self, state: dict) -> None:
        self.__init__(state["dir"], state["split"], verify="size")  # the parent verified them

    def close(self) -> None:
        self._blocks.clear()
        for source in self._sources:
            source.close()
        self._sources.clear()

    def __enter__(self) -> ShardReader:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def __repr__(self) -> str:
        return (
            f"ShardReader({os.fspath(self.dir)!r}, split={self.split!r}, sequences={self._len}, "
            f"max_seq_len={self.max_seq_len})"
        )


__all__ = ["ShardReader", "find_shard_dir", "load_manifest", "verify_file", "SCHEMA", "COLUMN", "SPLITS"]
