"""Training the planned runs: reuse a finished run, resume a stopped one, refuse one trained otherwise."""

from __future__ import annotations

import shutil
import tomllib
from collections.abc import Callable
from pathlib import Path

from .. import settings as settings_mod
from ..errors import MapnetError
from .plan import PlannedRun
from .records import budget_record


def pretraining_part(values: dict) -> dict:
    """The settings a finished run's outcome depends on: fine-tuning and variance are post hoc, progress is display,
    and the engine only says where it trained (a run is the same run on either)."""
    out = {k: v for k, v in values.items() if k not in ("finetune", "variance", "engine")}
    # Only these logging keys change what a run records; the rest (progress, TensorBoard, W&B) is display.
    out["logging"] = {k: v for k, v in out.get("logging", {}).items() if k in ("log_every", "metrics_file")}
    # How the step executes, not what it computes (compile's "auto" was `false` before it existed; prefetching
    # leaves every number bitwise the same).
    out["train"] = {
        k: v
        for k, v in out.get("train", {}).items()
        if k not in ("compile", "compile_scope", "compile_mode", "prefetch")
    }
    return out


def changed_keys(before: dict, now: dict) -> list[str]:
    """The dotted key of every setting whose value differs between two `to_dict()` trees."""
    before, now = settings_mod.flat(before), settings_mod.flat(now)
    return [key for key in sorted(set(before) | set(now)) if before.get(key) != now.get(key)]


def recorded_settings(path: Path) -> dict:
    """A run's settings.toml read back through the settings tree, so it compares with a plan's
    `Settings.to_dict()` value for value (TOML's spelling of a value never makes a run look different)."""
    try:
        values = tomllib.loads((path / "settings.toml").read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise MapnetError(f"{path / 'settings.toml'} is unreadable ({exc})") from None
    return settings_mod.from_dict(values, str(path / "settings.toml")).to_dict()


def finished(pr: PlannedRun, done: dict) -> bool:
    """Whether a run holds its final checkpoint: train.steps's, or, with a train.time_budget, the one at the
    step its run.json says the budget ended at (a run stopped inside its budget says it is not finished)."""
    if not pr.settings.train.time_budget:
        return pr.settings.train.steps in done
    budget = budget_record(pr)
    return bool(budget and budget["finished"] and budget["steps"] in done)


def runs_to_train(
    plan: list[PlannedRun], note: Callable[[str], None] = lambda _: None
) -> list[tuple[PlannedRun, bool]]:
    """(run, resume) of every planned run that lacks its final checkpoint, in the plan's order; a finished run is
    reused (noted), a folder that never reached a checkpoint removed. Every earlier run in --out is checked first."""
    from ..model import checkpoint  # torch-heavy: only when the command runs, not for `mapnet --help`

    # Every earlier run in --out is checked before the first one trains: found as each turn came, a run trained
    # otherwise was refused after every run before it had trained. All of them named, in one line.
    found, problems = {}, []
    for pr in plan:
        found[pr.label] = done = dict(checkpoint.list_checkpoints(pr.path)) if pr.path.is_dir() else {}
        if done:
            try:
                changed = changed_keys(
                    pretraining_part(recorded_settings(pr.path)), pretraining_part(pr.settings.to_dict())
                )
            except MapnetError as exc:
                problems.append(str(exc))
                continue
            if changed:
                problems.append(
                    f"{pr.path} was trained with other settings than this comparison asks for "
                    f"({', '.join(changed[:5])}{' ...' if len(changed) > 5 else ''})"
                )
    if problems:
        raise MapnetError("; ".join(problems) + "; choose another --out or remove those runs")
    todo = []
    for pr in plan:
        done = found[pr.label]
        if not done and pr.path.exists():
            shutil.rmtree(pr.path)  # never reached a checkpoint: nothing worth keeping, and stale metrics lines
        if finished(pr, done):
            note(f"reusing {pr.label} ({pr.path})")
        else:
            todo.append((pr, bool(done)))
    return todo


def run_all(
    plan: list[PlannedRun],
    shards: Path,
    train_fn: Callable[[PlannedRun, bool], None],
    note: Callable[[str], None] = lambda _: None,
) -> dict[str, bool]:
    """Train every run that lacks its final checkpoint, one after another; returns {label: reused}."""
    todo = runs_to_train(plan, note)
    for pr, resume in todo:
        note(f"{'resuming' if resume else 'training'} {pr.label} -> {pr.path}")
        train_fn(pr, resume)
    return reused_of(plan, todo)


def reused_of(plan: list[PlannedRun], todo: list[tuple[PlannedRun, bool]]) -> dict[str, bool]:
    """{label: reused} of the plan: a run not trained now was reused."""
    trained = {pr.label for pr, _ in todo}
    return {pr.label: pr.label not in trained for pr in plan}
