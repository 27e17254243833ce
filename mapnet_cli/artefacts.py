"""What mapnet wrote: each kind of output recognised by its own marker, and the entries that are its own.

`--overwrite` may replace only an output of the kind the command writes, holding nothing but its own
entries (`output_paths.check_output`); no output goes inside a folder mapnet prunes (a run's checkpoints)
or over a file another artefact owns (a corpus's settings.toml); and `preprocess` refuses to read an
earlier output as raw text (`data/inputs.py`). Markers are what the writers already write (formats.md):
a manifest's `schema`, a checkpoint's `config.json`, `mapnet_export.json`, a JSON document's `schema`, the
PMI vocabulary's first line, the mark `plotting.save_figure` puts in an image's metadata.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

PLOT_MARK = "mapnet.plot/1"  # in the image's metadata (PNG tEXt, PDF/SVG creator, JPEG comment)


@dataclass(frozen=True)
class Kind:
    """A kind of output: `noun` names it in messages; `folder`: a folder (else one file)."""

    noun: str
    folder: bool = True


CORPUS = Kind("preprocessed corpus")
SHARDS = Kind("shard folder")
EXPORT = Kind("Hugging Face export")
RUN = Kind("run folder")
CHECKPOINT = Kind("checkpoint")
CHECKPOINTS = Kind("checkpoints folder of a run")
QUICKSTART = Kind("quickstart folder")
COMPARISON = Kind("comparison folder")
GLUE = Kind("GLUE results folder")
CACHE = Kind("token cache")
PMI_VOCAB = Kind("PMI vocabulary", folder=False)
BLIMP = Kind("BLiMP results file", folder=False)
PROBE = Kind("probe results file", folder=False)
PLOT = Kind("plot", folder=False)
STEP_COSTS = Kind("step-costs file", folder=False)  # benchmarks/step_costs.py's

# What a run folder holds besides its checkpoints: record, settings, metrics and the trackers' files
# (train/record.py, train/tracking.py), and what compare and the evaluations cache there.
RUN_ENTRIES = {
    "run.json",
    "settings.toml",
    "metrics.jsonl",
    "checkpoints",
    "tb",
    "wandb-run.json",
    "wandb",
    "compare-blimp.json",
}
EXPORT_ENTRIES = {
    "config.json",
    "model.safetensors",
    "tokenizer.json",
    "tokenizer_config.json",
    "special_tokens_map.json",
    "mapnet_export.json",
}
_JSON_SCHEMAS = {BLIMP: "mapnet.blimp/1", PROBE: "mapnet.probe/1", STEP_COSTS: "mapnet.step-costs/1"}


def _json(path: Path) -> dict:
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return doc if isinstance(doc, dict) else {}


def _schema(path: Path) -> str | None:
    return _json(path).get("schema") if path.is_file() else None


def kind_of(path: Path) -> Kind | None:
    """The kind of mapnet output `path` is, by its marker; None for anything else (or nothing there)."""
    path = Path(path)
    if path.is_symlink() or not path.exists():
        return None
    if path.is_file():
        return _file_kind(path)
    schema = _schema(path / "manifest.json")
    if schema == "mapnet.preprocess/1":
        return CORPUS
    if schema == "mapnet.shards/1":
        return SHARDS
    if schema == "mapnet.checkpoint-manifest/1" or _schema(path / "config.json") == "mapnet.checkpoint/1":
        return CHECKPOINT
    if (path / "mapnet_export.json").is_file():
        return EXPORT
    if path.name == "checkpoints" and (
        (path.parent / "run.json").is_file() or any((p / "COMPLETE").is_file() for p in path.glob("step-*"))
    ):
        return CHECKPOINTS
    if (path / "run.json").is_file() or (path / "checkpoints").is_dir():
        return RUN
    if _schema(path / "results.json") == "mapnet.compare/1":
        return COMPARISON
    if _schema(path / "results.json") == "mapnet.glue/1":
        return GLUE
    if _is_quickstart(path):
        return QUICKSTART
    return None


def _file_kind(path: Path) -> Kind | None:
    if path.suffix == ".json":
        doc = _json(path)
        if doc.get("schema") is None and {"reference", "reference_seconds", "arms"} <= doc.keys():
            return STEP_COSTS  # written before the benchmark named its schema (the kept experiments' files)
        return next((kind for kind, s in _JSON_SCHEMAS.items() if s == doc.get("schema")), None)
    try:
        with open(path, "rb") as fh:
            head = fh.read(1 << 16)
    except OSError:
        return None
    if head.startswith(b"# mapnet.pmi-vocab/"):
        return PMI_VOCAB
    # A mapnet image carries its mark in its metadata, near the start (PNG, JPEG) or at the end (PDF, SVG).
    if PLOT_MARK.encode() in head or PLOT_MARK.encode() in _tail(path):
        return PLOT
    return None


def _tail(path: Path, size: int = 1 << 16) -> bytes:
    with open(path, "rb") as fh:
        fh.seek(max(0, path.stat().st_size - size))
        return fh.read()


_STAGES = {"corpus": CORPUS, "shards": SHARDS}


def _stage_kind(name: str) -> Kind | None:
    """What quickstart writes under `name` (quickstart.Stages): corpus/, shards/, run/ and run-STRATEGY/."""
    return _STAGES.get(name) or (RUN if name == "run" or name.startswith("run-") else None)


def _is_quickstart(path: Path) -> bool:
    """Nothing but quickstart's stages, each the kind it should be: a folder of the user's that holds a corpus
    beside other things is not one."""
    names = visible(path)
    return bool(names) and all(_stage_kind(n) is not None and kind_of(path / n) is _stage_kind(n) for n in names)


def visible(folder: Path) -> list[str]:
    """The entries of `folder` a user sees: hidden ones are mapnet's locks and staging folders, or nobody's."""
    return sorted(p.name for p in folder.iterdir() if not p.name.startswith("."))


def own_entries(path: Path, kind: Kind) -> set[str]:
    """The names directly inside the output `path` of `kind` that its writer wrote (its manifest says which)."""
    if kind is CORPUS:
        return {"manifest.json", "settings.toml", "tokenizer.json", "word_kinds.json", "sentences"}
    if kind is SHARDS:
        files = _json(path / "manifest.json").get("files") or []
        listed = {f.get("name") for f in files if isinstance(f, dict)}
        return {"manifest.json", "settings.toml", "tokenizer.json", "token_kinds.json", *listed}
    if kind is EXPORT:
        return set(EXPORT_ENTRIES)
    if kind is RUN:
        return set(RUN_ENTRIES)
    if kind is QUICKSTART:
        return set(visible(path))  # what recognises it: its stages, nothing else
    return set()


def foreign_entries(path: Path, kind: Kind) -> list[str]:
    """What `path` (an output of `kind`) holds that its writer did not write: a user's files, another command's
    output, an unknown file in a corpus's sentences/ — all of which replacing it would delete."""
    own = own_entries(path, kind)
    found = [n for n in visible(path) if n not in own]
    if kind is CORPUS and (path / "sentences").is_dir():
        parts = {p.get("name") for p in _json(path / "manifest.json").get("parts") or [] if isinstance(p, dict)}
        found += [f"sentences/{n}" for n in visible(path / "sentences") if f"sentences/{n}" not in parts]
    if kind is QUICKSTART:
        found += [f"{n}/{f}" for n in sorted(own) for f in foreign_entries(path / n, _stage_kind(n))]
    return found


def enclosing(path: Path) -> tuple[Path, Kind, str] | None:
    """The nearest existing folder above `path` that is a mapnet output, its kind, and the name directly
    inside it that `path` is or lies under; None when no folder above is one."""
    path = Path(path)
    for parent in path.parents:  # `path` absolute, links resolved: the folders it really lies in
        kind = kind_of(parent) if parent.is_dir() else None
        if kind is not None:
            return parent, kind, path.relative_to(parent).parts[0]
    return None
