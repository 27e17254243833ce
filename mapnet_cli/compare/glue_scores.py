"""GLUE fine-tuning of the compared runs, and one random-init control per pretraining seed."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from .plan import PlannedRun, split_name


def control_label(seed_index: int) -> str:
    """The GLUE random-init control of pretraining seed index k (a row of the tables, a key of `glue_results`)."""
    return f"random-init/seed-{seed_index}"


def glue_results(
    plan: list[PlannedRun],
    tasks: list[str],
    glue_data: Path,
    out: Path,
    ft,
    events=None,
    every_checkpoint: bool = False,
    preset: str | None = None,
    spread=None,
) -> dict:
    """The GLUE sweep (settings.finetune) on every run's final checkpoint, or on all its kept
    checkpoints (`every_checkpoint`: a GLUE-vs-step curve); {label: {entries, score, curve}}.

    Plus one random-init control per pretraining seed index k, under `control_label(k)`: seed k's
    uniform run (else its first strategy) gives the architecture, tokenizer and pretraining seed
    (`evaluation.glue.pretrained.random_init_ref`), so controls of different seeds are independent draws and
    the margin over them can be paired by pretraining seed (`aggregate`).
    """
    from ..evaluation.glue.pretrained import find_checkpoints, random_init_ref
    from ..evaluation.glue.sweep import run_sweep

    # Every run folder is called seed-k: label checkpoints by strategy too, or the tables mix them up.
    refs = {
        pr.label: [
            replace(ref, run=pr.label)
            for ref in (find_checkpoints(every=[pr.path]) if every_checkpoint else find_checkpoints([pr.path]))
        ]
        for pr in plan
    }
    controls = {}
    for k in sorted({pr.index for pr in plan}):
        mine = [pr for pr in plan if pr.index == k]
        source = next((pr for pr in mine if split_name(pr.strategy) == ("uniform", None)), mine[0])
        final = max(refs[source.label], key=lambda ref: ref.step)
        controls[k] = random_init_ref(final, run=control_label(k))
    of = {ref.key: controls[pr.index].key for pr in plan for ref in refs[pr.label]}
    doc = run_sweep(
        [*(ref for mine in refs.values() for ref in mine), *controls.values()],
        tasks,
        glue_data,
        out / "glue",
        ft,
        events,
        controls=of,
        preset=preset,
        spread=spread,
    )
    by_sha = {ck["sha256"]: ck for ck in doc["summary"]["checkpoints"]}
    results = {}
    for pr in plan:
        mine = sorted(refs[pr.label], key=lambda ref: ref.step)
        final = by_sha[mine[-1].sha]
        results[pr.label] = {
            "entries": final["entries"],
            "score": final["glue"]["score"],
            "score_entries": final["glue"]["entries"],
            "curve": [{"step": ref.step, "score": by_sha[ref.sha]["glue"]["score"]} for ref in mine],
        }
    for k, ref in controls.items():
        ck = by_sha[ref.sha]
        results[control_label(k)] = {
            "seed_index": k,
            "init": "random",
            "pretraining_seed": ref.init_seed,
            "entries": ck["entries"],
            "score": ck["glue"]["score"],
            "score_entries": ck["glue"]["entries"],
        }
    return results


def glue_controls(glue: dict | None) -> dict[int, dict]:
    """{seed index: that seed's random-init control record} from `glue_results`' answer."""
    return {rec["seed_index"]: rec for label, rec in (glue or {}).items() if label.startswith("random-init/seed-")}
