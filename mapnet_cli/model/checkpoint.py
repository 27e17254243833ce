"""Self-describing, crash-safe checkpoints.

    RUN/checkpoints/step-00001000/
        model.safetensors   encoder + MLM head (MAP-Net, when trained, under "mapnet.")
        state.pt            optimizer, scheduler, RNG states, data position, step
        config.json         schema, step, model config, tokenizer sha256
        settings.toml       the run's resolved settings
        tokenizer.json      the tokenizer the data was encoded with
        manifest.json       bytes and sha256 of each file above, checked on load
        COMPLETE            written last: a folder without it never counts

Assembled in a hidden staging folder beside its final name (`.step-00001000.XXXX.tmp-<pid>`, `atomic.py`), renamed
into place in one `os.replace`: a killed run leaves a finished checkpoint or a hidden leftover the next run removes.
`state.pt` is read with `torch.load(weights_only=True)` (tensors and primitives): loading never runs pickled code.
Each file is verified against `manifest.json` as shards are: docs/reliability.md#checkpoints-verified-like-shards.
"""

from __future__ import annotations

import json
import os
import pickle
import random
import re
import shutil
import struct
import tomllib
from collections.abc import Iterable, Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np
import torch
from safetensors import SafetensorError, safe_open
from safetensors.torch import save_file
from torch import nn

from .. import atomic
from ..errors import MapnetError
from .bert import BertConfig, BertForMLM
from .hf_layout import folder_kind, read_json_object

SCHEMA = "mapnet.checkpoint/1"
MANIFEST_SCHEMA = "mapnet.checkpoint-manifest/1"
MARKER, MANIFEST = "COMPLETE", "manifest.json"
WEIGHTS, STATE, CONFIG, SETTINGS, TOKENIZER = (
    "model.safetensors",
    "state.pt",
    "config.json",
    "settings.toml",
    "tokenizer.json",
)
FILES = (WEIGHTS, STATE, CONFIG, SETTINGS, TOKENIZER)
_STEP_RE = re.compile(r"^step-(\d{8,})$")


def step_name(step: int) -> str:
    return f"step-{step:08d}"


# ---------------------------------------------------------------- weights
def _prefixed(modules: Mapping[str, nn.Module]) -> dict[str, torch.Tensor]:
    return {(f"{name}.{k}" if name else k): v for name, m in modules.items() for k, v in m.state_dict().items()}


def save_weights(path: Path, modules: Mapping[str, nn.Module]) -> None:
    """One safetensors file for several modules: module "" un-prefixed, others as "<name>.<key>".

    A tensor shared between modules (MAP-Net borrowing the token embedding) is
    stored once; the other names are recorded as aliases in the metadata.
    """
    tensors, aliases, first = {}, {}, {}
    for key, value in _prefixed(modules).items():
        ptr = (value.data_ptr(), value.shape, value.dtype, value.device)
        if ptr in first:
            aliases[key] = first[ptr]
            continue
        first[ptr] = key
        tensors[key] = value.detach().to("cpu").contiguous()
    save_file(tensors, str(path), metadata={"schema": SCHEMA, "aliases": json.dumps(aliases, sort_keys=True)})
    sort_metadata(path)


def sort_metadata(path: Path) -> None:
    """Rewrite a safetensors header with its metadata keys sorted, in place.

    safetensors writes the metadata from a Rust HashMap, whose order changes from
    one call to the next: equal weights would get different bytes and a different
    sha256 (GLUE results are keyed by it). The sorted header has the same length
    (same keys, same separators), so the tensor data does not move.
    """
    with open(path, "r+b") as fh:
        (size,) = struct.unpack("<Q", fh.read(8))
        header = json.loads(fh.read(size))
        meta = dict(sorted((header.pop("__metadata__", None) or {}).items()))
        text = json.dumps(
            {"__metadata__": meta, **header} if meta else header, separators=(",", ":"), ensure_ascii=False
        ).encode("utf-8")
        if len(text) > size:  # not expected (serde_json writes the same JSON); never corrupt the file
            raise RuntimeError(f"{path}: the sorted safetensors header is longer than the original")
        fh.seek(8)
        fh.write(text + b" " * (size - len(text)))


def load_weights(path: Path, modules: Mapping[str, nn.Module]) -> None:
    """Load every parameter and buffer of `modules` from `path` (a missing or
    mis-shaped one is an error). Keys of other modules — MAP-Net's, when only
    the encoder is wanted — are ignored. A truncated or garbage file is a
    one-line error, not a traceback."""
    try:
        _load_weights(path, modules)
    except (SafetensorError, OSError, ValueError) as exc:
        raise MapnetError(f"{path} is not a readable safetensors file ({exc}); truncated or corrupt?") from None


def _load_weights(path: Path, modules: Mapping[str, nn.Module]) -> None:
    with safe_open(str(path), framework="pt") as fh:
        aliases = json.loads((fh.metadata() or {}).get("aliases", "{}"))
        stored = set(fh.keys())
        for name, module in modules.items():
            prefix = f"{name}." if name else ""
            wanted = module.state_dict()
            missing = [k for k in wanted if prefix + k not in stored and prefix + k not in aliases]
            if missing:
                raise MapnetError(
                    f"{path} lacks {len(missing)} weights of {name or 'the model'} (e.g. {missing[0]}); "
                    "it was written for a different model"
                )
            loaded = {}
            for k, ref in wanted.items():
                t = fh.get_tensor(aliases.get(prefix + k, prefix + k))
                if t.shape != ref.shape:
                    raise MapnetError(
                        f"{path}: {prefix + k} has shape {tuple(t.shape)}, the model expects {tuple(ref.shape)}"
                    )
                loaded[k] = t
            module.load_state_dict(loaded, strict=True)


# ---------------------------------------------------------------- RNG state as tensors and primitives
def rng_state() -> dict[str, Any]:
    _, keys, pos, has_gauss, gauss = np.random.get_state()
    version, py_state, py_gauss = random.getstate()
    state = {
        "torch": torch.get_rng_state(),
        "numpy": {
            "keys": torch.from_numpy(np.asarray(keys, dtype=np.int64)),
            "pos": int(pos),
            "has_gauss": int(has_gauss),
            "gauss": float(gauss),
        },
        "python": {"version": int(version), "state": torch.tensor(py_state, dtype=torch.int64), "gauss": py_gauss},
    }
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        state["cuda"] = torch.cuda.get_rng_state_all()
    return state


def set_rng_state(state: Mapping[str, Any]) -> None:
    """Restore `rng_state()`'s states, whatever device `torch.load` mapped them to (torch takes CPU byte tensors
    only)."""
    torch.set_rng_state(state["torch"].cpu())
    n = state["numpy"]
    np.random.set_state(("MT19937", n["keys"].cpu().numpy().astype(np.uint32), n["pos"], n["has_gauss"], n["gauss"]))
    p = state["python"]
    random.setstate((p["version"], tuple(int(x) for x in p["state"].cpu().tolist()), p["gauss"]))
    if "cuda" in state and torch.cuda.is_available():
        cuda = state["cuda"][: torch.cuda.device_count()]
        torch.cuda.set_rng_state_all([s.cpu() for s in cuda])


# ---------------------------------------------------------------- saving
def save_checkpoint(
    run_dir: Path,
    step: int,
    modules: Mapping[str, nn.Module],
    state: dict[str, Any],
    model_config: BertConfig,
    settings_toml: str,
    tokenizer_path: Path,
    tokenizer_sha256: str,
    extra: Mapping[str, Any] | None = None,
) -> Path:
    """Write `RUN/checkpoints/step-XXXXXXXX/` atomically and return its path.

    `state` must hold only tensors and primitives (optimizer/scheduler
    state_dicts, `rng_state()`, counters): it is checked by reading it back
    with weights_only=True before the folder is published.
    """
    final = Path(run_dir) / "checkpoints" / step_name(step)
    with atomic.staged_output(final, overwrite=True) as staging:
        save_weights(staging / WEIGHTS, modules)
        # Through a Python file: a full disk then stays an OSError (errno 28); torch's own file writer drops it.
        with open(staging / STATE, "wb") as fh:
            torch.save({**state, "step": step}, fh)
        torch.load(staging / STATE, weights_only=True)  # fail now, not at resume time
        atomic.write_json(
            staging / CONFIG,
            {
                "schema": SCHEMA,
                "step": step,
                "model": model_config.to_dict(),
                "tokenizer_sha256": tokenizer_sha256,
                "created": datetime.now(UTC).isoformat(timespec="seconds"),
                **(extra or {}),
            },
        )
        atomic.write_text(staging / SETTINGS, settings_toml)
        shutil.copyfile(tokenizer_path, staging / TOKENIZER)
        write_manifest(staging)
        atomic.write_text(staging / MARKER, f"{step}\n")  # last: a checkpoint counts only with it
    return final


# ---------------------------------------------------------------- the manifest
def write_manifest(ckpt: Path) -> None:
    """manifest.json: bytes and sha256 of every checkpoint file, as a shard folder's manifest has."""
    files = [
        {"name": name, "bytes": (ckpt / name).stat().st_size, "sha256": atomic.sha256_file(ckpt / name)}
        for name in FILES
    ]
    atomic.write_json(ckpt / MANIFEST, {"schema": MANIFEST_SCHEMA, "files": files})


_VERIFIED: dict[tuple, str] = {}  # (path, size, mtime, inode) -> sha256: several loads of one file hash it once


def _sha256(path: Path, stat: os.stat_result) -> str:
    key = (str(path.resolve()), stat.st_size, stat.st_mtime_ns, stat.st_ino)
    if key not in _VERIFIED:
        _VERIFIED[key] = atomic.sha256_file(path)
    return _VERIFIED[key]


def verify(ckpt: Path, mode: str = "full") -> None:
    """Refuse a checkpoint whose files do not match its manifest, naming the file.

    `mode` as shard.verify: "full" compares sha256 (each file hashed once per
    process), "size" only sizes. A checkpoint without a manifest is refused.
    """
    ckpt = Path(ckpt)
    if not (ckpt / MANIFEST).is_file():
        raise MapnetError(
            f"{ckpt} has no {MANIFEST}, which every mapnet checkpoint has: it cannot be verified "
            "(damaged, or not written by mapnet)"
        )
    try:
        manifest = json.loads((ckpt / MANIFEST).read_text(encoding="utf-8"))
        entries = {e["name"]: e for e in manifest["files"]}
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise MapnetError(f"{ckpt / MANIFEST} is unreadable ({exc}); the checkpoint cannot be verified") from None
    if manifest.get("schema") != MANIFEST_SCHEMA or set(FILES) - set(entries):
        raise MapnetError(
            f"{ckpt / MANIFEST} is not a checkpoint manifest ({MANIFEST_SCHEMA} listing {', '.join(FILES)})"
        )
    for name in FILES:
        path, entry = ckpt / name, entries[name]
        try:
            stat = path.stat()
        except FileNotFoundError:
            raise MapnetError(f"checkpoint file missing: {path}") from None
        if stat.st_size != entry["bytes"]:
            raise MapnetError(
                f"checkpoint file {path} has {stat.st_size} bytes, {MANIFEST} says {entry['bytes']} "
                "(truncated or replaced?)"
            )
        if mode == "full" and _sha256(path, stat) != entry["sha256"]:
            raise MapnetError(f"checkpoint file {path} does not match its sha256 in {MANIFEST} (edited or corrupt)")


def remove_checkpoint(path: Path) -> None:
    """Hide first (one rename), then delete: a kill mid-delete leaves no half folder named step-*."""
    trash = path.with_name(f".{path.name}.old-{os.getpid()}")
    os.replace(path, trash)
    shutil.rmtree(trash, ignore_errors=True)


def clean_leftovers(run_dir: Path) -> None:
    """Remove staging and half-deleted folders left by killed runs (their process is gone)."""
    root = Path(run_dir) / "checkpoints"
    for cand in root.glob(".step-*"):
        pid = cand.name.rsplit("-", 1)[-1]
        if pid.isdigit() and int(pid) != os.getpid() and atomic._alive(int(pid)):
            continue
        shutil.rmtree(cand, ignore_errors=True)


def prune(run_dir: Path, keep_last: int, keep_steps: Iterable[int]) -> list[Path]:
    """Delete periodic checkpoints beyond the newest `keep_last`; `keep_steps` stay for good."""
    keep_steps = set(keep_steps)
    periodic = [(s, p) for s, p in list_checkpoints(run_dir) if s not in keep_steps]
    doomed = [p for _, p in periodic[:-keep_last]] if keep_last > 0 else [p for _, p in periodic]
    for p in doomed:
        remove_checkpoint(p)
    return doomed


# ---------------------------------------------------------------- finding and loading
def read_config(ckpt: Path) -> dict:
    try:
        cfg = json.loads((ckpt / CONFIG).read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise MapnetError(f"{ckpt / CONFIG} is unreadable: {exc}") from None
    if cfg.get("schema") != SCHEMA:
        raise MapnetError(f"{ckpt} is not a mapnet checkpoint (schema {cfg.get('schema')!r}, expected {SCHEMA!r})")
    return cfg


def list_checkpoints(run_dir: Path) -> list[tuple[int, Path]]:
    """Complete checkpoints of a run as (step, path), oldest first; the step comes from config.json."""
    root = Path(run_dir) / "checkpoints"
    found = []
    for p in root.glob("step-*") if root.is_dir() else ():
        if _STEP_RE.match(p.name) and (p / MARKER).is_file():
            found.append((int(read_config(p)["step"]), p))
    return sorted(found)


def latest_checkpoint(run_dir: Path) -> Path | None:
    found = list_checkpoints(run_dir)
    return found[-1][1] if found else None


def resolve_checkpoint(path: str | os.PathLike, mode: str = "full") -> Path:
    """A checkpoint folder, or a run folder meaning its newest complete checkpoint, verified (`verify`)."""
    found = _find(Path(path))
    verify(found, mode)
    return found


def _find(path: Path) -> Path:
    """The checkpoint folder `path` names (itself, or a run's newest complete one), not yet verified."""
    if not path.is_dir():
        raise MapnetError(f"checkpoint not found: {path} (give a run folder or a step-XXXXXXXX folder)")
    if (path / CONFIG).is_file() or _STEP_RE.match(path.name):
        if not (path / MARKER).is_file():
            if folder_kind(path) == "huggingface":  # a config.json that is not JSON is named there
                raise MapnetError(
                    f"{path} is a Hugging Face model folder (an export), not a mapnet run or checkpoint; "
                    "this command reads mapnet checkpoints (blimp and --init-from read exported folders)"
                )
            if (path / CONFIG).is_file() and "schema" not in read_json_object(path / CONFIG):
                raise MapnetError(
                    f"{path / CONFIG} is neither a mapnet checkpoint's (no schema) nor a Hugging Face "
                    "model's (no model_type or architectures): not a model folder mapnet can read"
                )
            raise MapnetError(
                f"{path} is an incomplete checkpoint (no {MARKER} marker: the run stopped while writing it)"
            )
        read_config(path)
        return path
    if (path / "checkpoints").is_dir():
        latest = latest_checkpoint(path)
        if latest is None:
            raise MapnetError(f"run folder {path} has no complete checkpoint yet")
        return latest
    raise MapnetError(f"{path} is neither a run folder nor a checkpoint folder")


def load_state(ckpt: Path, map_location: str | torch.device = "cpu") -> dict[str, Any]:
    try:
        return torch.load(Path(ckpt) / STATE, map_location=map_location, weights_only=True)
    except (OSError, RuntimeError, EOFError, pickle.UnpicklingError) as exc:
        first = (str(exc).strip().splitlines() or [type(exc).__name__])[0][:200]  # torch's messages run to pages
        raise MapnetError(f"{Path(ckpt) / STATE} is unreadable ({first}); truncated or corrupt?") from None


def load_settings(ckpt: Path):
    from .. import settings as settings_mod

    path = Path(ckpt) / SETTINGS
    try:
        values = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:  # bytes that are not UTF-8 too
        raise MapnetError(f"{path} is unreadable: {exc}") from None
    return settings_mod.from_dict(values, str(path))


def load_model(
    path: str | os.PathLike, device: str | torch.device = "cpu", mode: str = "full"
) -> tuple[BertForMLM, dict]:
    """The encoder + MLM head of a checkpoint (or a run's newest), with its config.json (`mode` as `verify`).
    Commands open checkpoints through `train.run_loader.load_run`, which builds MAP-Net and finds the shards too."""
    ckpt = resolve_checkpoint(path, mode)
    meta = read_config(ckpt)
    model = BertForMLM(BertConfig.from_dict(meta["model"]))
    load_weights(ckpt / WEIGHTS, {"": model})
    return model.to(device), {**meta, "path": str(ckpt)}


__all__ = [
    "SCHEMA",
    "MARKER",
    "step_name",
    "save_weights",
    "load_weights",
    "rng_state",
    "set_rng_state",
    "save_checkpoint",
    "write_manifest",
    "verify",
    "sort_metadata",
    "remove_checkpoint",
    "clean_leftovers",
    "prune",
    "read_config",
    "list_checkpoints",
    "latest_checkpoint",
    "resolve_checkpoint",
    "load_state",
    "load_settings",
    "load_model",
]
