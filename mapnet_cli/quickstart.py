"""The main job: the whole chain on the embedded synthetic corpus, in minutes on a laptop CPU.

    mapnet quickstart                       # -> runs/quickstart/{corpus,shards,run}
    mapnet quickstart --masking mapnet --out runs/quickstart-mapnet

synthetic corpus -> preprocess -> shard -> pretrain `tiny` (settings: data_recipes/tiny.toml),
then a summary of the held-out evaluation. Stages whose output is already complete
(its manifest exists) are reused, so a rerun after an interruption picks up where it stopped.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from . import settings as settings_mod
from .errors import MapnetError

RECIPE_NAME = "tiny.toml"


def recipe_path() -> Path:
    """The tiny recipe: inside the installed package (wheel), else in the source checkout."""
    for candidate in (Path(__file__).parent / "data_recipes" / RECIPE_NAME,
                      Path(__file__).resolve().parents[1] / "data_recipes" / RECIPE_NAME):
        if candidate.is_file():
            return candidate
    raise MapnetError(f"the embedded recipe {RECIPE_NAME} is missing from this installation")


def resolve_settings(overrides: dict, assignments: list[str], config: Path | None = None):
    """defaults < preset < the tiny recipe < --config < flags."""
    configs = [recipe_path()] + ([config] if config else [])
    return settings_mod.resolve(configs, overrides, assignments, extra_sections=("recipe",))


@dataclass(frozen=True)
class Stages:
    corpus: Path
    shards: Path
    run: Path

    @classmethod
    def under(cls, out: Path) -> "Stages":
        return cls(out / "corpus", out / "shards", out / "run")


def prepare_data(stages: Stages, settings, log: Callable[[str], None]) -> None:
    """Preprocess and shard the synthetic corpus, reusing complete outputs."""
    from .data.preprocess import run_preprocess
    from .data.shard_writer import run_shard

    if (stages.corpus / "manifest.json").is_file():
        log(f"reusing {stages.corpus}")
    else:
        result = run_preprocess(["synthetic:"], stages.corpus, settings, overwrite=stages.corpus.exists(),
                                recipe={"name": "tiny", "path": str(recipe_path())})
        log(f"preprocess: {result.documents:,} documents, {result.sentences:,} sentences, "
            f"{result.words:,} words in {result.seconds:.1f} s -> {stages.corpus}")
    if (stages.shards / "manifest.json").is_file():
        log(f"reusing {stages.shards}")
    else:
        summary = run_shard(stages.corpus, stages.shards, settings, overwrite=stages.shards.exists())
        splits = summary["manifest"]["splits"]
        log(f"shard: {splits['train']['sequences']:,} train / {splits['valid']['sequences']:,} validation "
            f"sequences of {settings.shard.max_seq_len} tokens -> {stages.shards}")


def eval_history(run: Path, metrics_file: str = "metrics.jsonl") -> list[dict]:
    """The held-out evaluations of a run, in step order (later lines win for a repeated step)."""
    path = run / metrics_file
    if not path.is_file():
        return []
    by_step = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        record = json.loads(line)
        if record.get("kind") == "eval":
            by_step[record["step"]] = record
    return [by_step[k] for k in sorted(by_step)]


def mapnet_history(run: Path, metrics_file: str = "metrics.jsonl") -> list[dict]:
    """Training lines that carry MAP-Net statistics (empty for a uniform run)."""
    path = run / metrics_file
    if not path.is_file():
        return []
    lines = (json.loads(line) for line in path.read_text(encoding="utf-8").splitlines())
    return [r for r in lines if r.get("kind") == "train" and any(k.startswith("mapnet/") for k in r)]


__all__ = ["recipe_path", "resolve_settings", "Stages", "prepare_data", "eval_history", "mapnet_history"]
