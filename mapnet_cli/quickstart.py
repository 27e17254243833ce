"""The main job: the whole chain on the embedded synthetic corpus, in minutes on a laptop CPU.

    mapnet quickstart                       # -> runs/quickstart/{corpus,shards,run}
    mapnet quickstart --masking mapnet --out runs/quickstart-mapnet

synthetic corpus -> preprocess -> shard -> pretrain `tiny` (settings: data_recipes/tiny.toml),
then a summary of the held-out evaluation. Stages whose output is already complete
(its manifest exists) are reused, so a rerun after an interruption picks up where it stopped.
A stage is reused only if it was made with the settings asked for now (else a one-line
error), and each masking strategy trains in its own folder (run/, run-mapnet/), so
`--masking mapnet` after a uniform quickstart trains MAP-Net instead of showing the uniform run.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from . import settings as settings_mod
from .errors import MapnetError
from .metrics_file import read_lines, read_metrics

RECIPE_NAME = "tiny.toml"


def recipe_path() -> Path:
    """The tiny recipe: inside the installed package (wheel), else in the source checkout."""
    for candidate in (
        Path(__file__).parent / "data_recipes" / RECIPE_NAME,
        Path(__file__).resolve().parents[1] / "data_recipes" / RECIPE_NAME,
    ):
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
    def under(cls, out: Path, strategy: str = "uniform") -> Stages:
        """Corpus and shards are shared; the run folder is the strategy's own (run/ for uniform)."""
        return cls(out / "corpus", out / "shards", out / ("run" if strategy == "uniform" else f"run-{strategy}"))


# Settings that do not change what a stage produces: a stage made with others is still reused.
# train.steps is the exception that is honoured, not ignored: a shorter run is resumed to the new length.
NO_EFFECT = {"preprocess.workers", "shard.workers", "shard.verify", "logging.progress", "train.steps", "train.device"}


def check_reuse(folder: Path, recorded: Path, settings, sections: tuple[str, ...]) -> None:
    """Refuse to reuse `folder` when the settings it was made with (`recorded`, a settings.toml)
    differ from `settings` in `sections`: its output would be shown as the answer to another question."""
    import tomllib

    try:
        made = settings_mod.from_dict(tomllib.loads(recorded.read_text(encoding="utf-8")), str(recorded))
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise MapnetError(
            f"cannot tell how {folder} was made ({recorded}: {exc}); pass --overwrite to start over"
        ) from None
    old, new = settings_mod.flat(made.to_dict()), settings_mod.flat(settings.to_dict())
    diffs = [
        f"{key} = {old.get(key)!r}, asked {value!r}"
        for key, value in new.items()
        if key.split(".")[0] in sections and key not in NO_EFFECT and old.get(key) != value
    ]
    if diffs:
        raise MapnetError(
            f"{folder} was made with other settings ({'; '.join(diffs)}); pass --overwrite to start "
            "over, or choose another --out"
        )


def prepare_data(stages: Stages, settings, log: Callable[[str], None]) -> None:
    """Preprocess and shard the synthetic corpus, reusing complete outputs."""
    from .data.preprocess import run_preprocess
    from .data.shard_writer import run_shard

    if (stages.corpus / "manifest.json").is_file():
        check_reuse(stages.corpus, stages.corpus / "settings.toml", settings, ("synthetic", "preprocess"))
        log(f"reusing {stages.corpus}")
    else:
        result = run_preprocess(
            ["synthetic:"],
            stages.corpus,
            settings,
            overwrite=stages.corpus.exists(),
            recipe={"name": "tiny", "path": str(recipe_path())},
        )
        log(
            f"preprocess: {result.documents:,} documents, {result.sentences:,} sentences, "
            f"{result.words:,} words in {result.seconds:.1f} s -> {stages.corpus}"
        )
    if (stages.shards / "manifest.json").is_file():
        check_reuse(stages.shards, stages.shards / "settings.toml", settings, ("synthetic", "preprocess", "shard"))
        log(f"reusing {stages.shards}")
    else:
        summary = run_shard(stages.corpus, stages.shards, settings, overwrite=stages.shards.exists())
        splits = summary["manifest"]["splits"]
        log(
            f"shard: {splits['train']['sequences']:,} train / {splits['valid']['sequences']:,} validation "
            f"sequences of {settings.shard.max_seq_len} tokens -> {stages.shards}"
        )


def run_stage(stages: Stages, settings) -> str:
    """ "done" (reuse the finished run), "resume" (continue its newest checkpoint) or "fresh".

    A checkpoint made with other settings (but train.steps) is refused, not summarised or continued.
    """
    from .model import checkpoint

    latest = checkpoint.latest_checkpoint(stages.run)
    if latest is None:
        return "fresh"
    check_reuse(
        stages.run,
        latest / checkpoint.SETTINGS,
        settings,
        tuple(sec for sec in settings_mod.SECTIONS if sec not in ("finetune", "variance")),
    )
    return "done" if checkpoint.read_config(latest)["step"] >= settings.train.steps else "resume"


def eval_history(run: Path, metrics_file: str = "metrics.jsonl") -> list[dict]:
    """The held-out evaluations of a run, in step order (later lines win for a repeated step)."""
    path = run / metrics_file
    if not path.is_file():
        return []
    return read_metrics(path)[0]


def mapnet_history(run: Path, metrics_file: str = "metrics.jsonl") -> list[dict]:
    """Training lines that carry MAP-Net statistics (empty for a uniform run)."""
    path = run / metrics_file
    if not path.is_file():
        return []
    return [r for _, r in read_lines(path) if r.get("kind") == "train" and any(k.startswith("mapnet/") for k in r)]


__all__ = [
    "recipe_path",
    "resolve_settings",
    "Stages",
    "check_reuse",
    "prepare_data",
    "run_stage",
    "eval_history",
    "mapnet_history",
]
