"""Section I's tables (experiments/hour-masking, issue 45 part 4), made from its kept raw files by doc_tables.py:

- `costs`: a `benchmarks/step_costs.py` output as it was written (the arms' costs for the modelled clock, or the
  precision measurement): each arm's ratio to the reference in lock-step, its range over the rounds, the costs a
  modelled run counts, and where, when and under what load it was measured.
- `runs`: every finished run of the comparison as it lands in raw/runs/ARM/seed-K (hour_table.runs_table, one
  table per arm, in the order the costs name the arms): the steps its time bought and its final held-out loss.
- `scored`: the latest `masking_cpu.sh OUT score` kept in raw/score/seeds-N (the most seeds): arms_table's loss
  and paired-difference tables of its results.json, and each arm's BLiMP beside its controls.
"""

from __future__ import annotations

import contextlib
import io
from pathlib import Path

import arms_table
from hour_table import read, runs_table

RAW = Path(__file__).resolve().parents[2] / "experiments" / "hour-masking" / "raw"


def costs(path: Path = RAW / "costs.json") -> str:
    doc = read(path)
    ref, pinned = doc["reference"], doc["reference_pinned"]
    seconds = doc["reference_seconds"]
    load = lambda xs: " / ".join(f"{x:.2f}" for x in xs)  # noqa: E731
    lines = [
        f"`raw/{path.name}` ({doc['cpu']}; {doc['cores']} cores, {doc['omp_num_threads']} threads; "
        f"{doc['when']}): each arm in lock-step with `{ref}`, {doc['rounds_run']} rounds of {doc['steps']} short + "
        f"{doc['steps']} whole steps (the first {doc['skip']} of each left out), the ratio's median and its range; "
        f"`{ref}`'s costs {'pinned' if pinned else 'measured alone'} ({seconds['full']:.4g} s, short "
        f"{seconds['short']:.4g} s), an arm's modelled cost is those times its ratio. Load average (1 / 5 / 15 "
        f"min) {load(doc['load_before'])} before, {load(doc['load_after'])} after.",
        "",
        "| arm | × reference, whole step (range) | × reference, short step (range) | s a step | short |",
        "|---|---|---|---|---|",
    ]
    for arm in [a["name"] for a in doc["arms_given"]]:
        a = doc["arms"][arm]
        ratio = lambda kind, arm=arm, a=a: (
            "1"
            if arm == ref
            else f"{a['ratio'][kind]:.3f} ({a['ratio_range'][kind][0]:.3f}–{a['ratio_range'][kind][1]:.3f})"
        )
        lines.append(
            f"| {arm} | {ratio('full')} | {ratio('short')} | {a['step_seconds']:.4g} | {a['short_step_seconds']:.4g} |"
        )
    return "\n".join(lines)


def runs(raw: Path = RAW) -> str:
    order = [a["name"] for a in read(raw / "costs.json")["arms_given"]]
    done = (
        {p.name: sorted(p.glob("seed-*")) for p in (raw / "runs").iterdir() if p.is_dir()}
        if (raw / "runs").is_dir()
        else {}
    )
    parts = [f"**{arm}**\n\n{runs_table(done[arm])}" for arm in order if done.get(arm)]
    return "\n\n".join(parts) if parts else "*No run finished yet.*"


def scored(raw: Path = RAW) -> str:
    kept = sorted((raw / "score").glob("seeds-*/results.json"), key=lambda p: int(p.parent.name.split("-")[1]))
    if not kept:
        return "*No seed scored yet.*"
    path = kept[-1]
    doc = read(path)
    agg, control = doc["aggregate"]["strategies"], doc["aggregate"]["blimp_control"]
    n = len(doc["seeds"])
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        arms_table.main(str(path))
    blimp = ", ".join(f"{arm} {100 * a['blimp']['mean']:.1f}" for arm, a in agg.items())
    head = (
        f"`raw/score/{path.parent.name}/results.json`: {', '.join(doc['strategies'])}, seed"
        f"{'s' if n > 1 else ''} {', '.join(map(str, doc['seeds']))} ({n} paired comparison{'s' if n > 1 else ''} "
        f"per arm and measure{'; one seed gives no interval' if n == 1 else ''}); held-out loss in nats, Δ = arm − "
        "uniform on the same seed."
    )
    tail = (
        f"BLiMP (PLL, {doc['blimp']['paradigms']} paradigms × {doc['blimp']['pairs_per_paradigm']} pairs): {blimp}; "
        f"random weights {100 * control['random_init']['mean']:.1f}, the unigram model {100 * control['unigram']:.1f}."
    )
    return f"{head}\n\n{out.getvalue().rstrip()}\n\n{tail}"
