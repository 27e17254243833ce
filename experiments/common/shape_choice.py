"""Section G's amendment, applied: which of the hour's two shapes the `hour` recipe takes, from their 60-minute runs.

    uv run python experiments/common/shape_choice.py runs/hour-recipe runs/hour-recipe-L4H192

Each OUT is `hour_cpu.sh`'s folder for one shape (runs/seed-K, each a 60-minute budget run of the recipe with that
shape, and blimp-shape.json: `hour_cpu.sh OUT shape`, BLiMP on 200 pairs a paradigm at each seed's budget-end
checkpoint, as the search scored its arms, with each seed's random weights). The rule, written before the runs
(experiments/hour-levers/README.md, "Amendment: the shape is chosen at the hour"): the recipe takes the shape with
the higher mean BLiMP over the seeds; a difference within 0.5 points is a tie, and a tie goes to the lower mean
held-out loss (both shapes train on the same shards and are scored on the same validation set, so their losses
compare). The seeds are paired (same data order, evaluation masks and seed), so the difference is also given per
seed with a 95% t-interval: one interval, one comparison per seed.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from hour_table import final_scores, fmt, metrics, read

from mapnet_cli.intervals import mean_ci

TIE_POINTS = 0.5  # the amendment's tie: BLiMP points, mean over the seeds


def shape_name(run: Path) -> str:
    """L{layers}/H{hidden} of the run's model (run.json), `tiny`'s named: L2/H128 (`tiny`)."""
    model = read(run / "run.json")["model"]
    name = f"L{model['layers']}/H{model['hidden']}"
    return f"{name} (`tiny`)" if (model["layers"], model["hidden"]) == (2, 128) else name


def shape_rows(out: Path) -> dict:
    """One shape's seeds: {seed name: (steps, held-out loss, BLiMP, random weights' BLiMP)}, and the shape's name."""
    trained, random, _ = final_scores(read(out / "blimp-shape.json"))
    seeds = {}
    for run in sorted((out / "runs").glob("seed-*")):
        budget = read(run / "run.json")["budget"]
        if not budget["finished"]:
            raise SystemExit(f"{run} has not spent its budget")
        accuracy = next((a for name, a in trained.items() if Path(name).name == run.name or name == str(run)), None)
        if accuracy is None:
            raise SystemExit(f"{out / 'blimp-shape.json'} has no score for {run}")
        loss = [m["eval_loss"] for m in metrics(run) if m.get("kind") == "eval"][-1]
        control = next((a for name, a in random.items() if Path(name).name == run.name or name == str(run)), None)
        seeds[run.name] = (budget["steps"], loss, accuracy, control)
    return seeds


def choose(shapes: dict[str, dict]) -> tuple[str, str]:
    """(the chosen shape, why), by the amendment's rule over two shapes' seed rows."""
    (a, ra), (b, rb) = shapes.items()
    blimp = {n: 100 * sum(r[2] for r in rows.values()) / len(rows) for n, rows in shapes.items()}
    loss = {n: sum(r[1] for r in rows.values()) / len(rows) for n, rows in shapes.items()}
    if abs(blimp[a] - blimp[b]) > TIE_POINTS:
        winner = max(blimp, key=blimp.get)
        return (
            winner,
            f"its mean BLiMP is higher by {abs(blimp[a] - blimp[b]):.1f} points (more than the {TIE_POINTS} of a tie)",
        )
    winner = min(loss, key=loss.get)
    return winner, (
        f"the mean BLiMP differs by {abs(blimp[a] - blimp[b]):.1f} points (a tie: {TIE_POINTS} or less), "
        f"and its mean held-out loss is lower ({loss[winner]:.3f} against {max(loss.values()):.3f})"
    )


def table(outs: list[Path]) -> str:
    shapes = {}
    for out in outs:
        rows = shape_rows(out)
        shapes[shape_name(out / "runs" / next(iter(rows)))] = rows
    if len(shapes) != 2:
        raise SystemExit(f"two shapes are compared, got {len(shapes)}: {', '.join(shapes)}")
    lines = [
        "| shape | steps bought | held-out loss, per seed | BLiMP (200 pairs), per seed | mean | random weights |",
        "|---|---|---|---|---|---|",
    ]
    for name, rows in shapes.items():
        seeds = sorted(rows)
        steps = sorted({rows[s][0] for s in seeds})
        controls = [rows[s][3] for s in seeds if rows[s][3] is not None]
        lines.append(
            f"| {name} | {' / '.join(f'{n:,}' for n in steps)} | {' / '.join(f'{rows[s][1]:.3f}' for s in seeds)} | "
            f"{' / '.join(f'{100 * rows[s][2]:.1f}' for s in seeds)} | "
            f"{100 * sum(rows[s][2] for s in seeds) / len(seeds):.1f} | "
            f"{' / '.join(f'{100 * c:.1f}' for c in controls) or '–'} |"
        )
    (a, ra), (b, rb) = shapes.items()
    paired = [rb[s][2] - ra[s][2] for s in sorted(ra) if s in rb]
    winner, why = choose(shapes)
    lines.append(
        f"\n{b} − {a}, BLiMP paired by seed: {', '.join(f'{100 * d:+.1f}' for d in paired)}; "
        f"{fmt(mean_ci(paired), f='+.1f')} (95% t-interval over {len(paired)} paired seeds: {len(paired)} "
        "comparisons, one interval)."
    )
    lines.append(f"\n**The `hour` recipe takes {winner}:** {why}.")
    return "\n".join(lines)


RAW = Path(__file__).resolve().parents[1] / "hour-recipe" / "raw"


def kept() -> str:
    """doc_tables' `hour-shape-choice`: the rule over the two shapes' kept raw files (hour-recipe/raw/shape-*)."""
    return table([RAW / "shape-tiny", RAW / "shape-L4H192"])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("outs", type=Path, nargs=2, help="hour_cpu.sh's folders of the two shapes")
    print(table(ap.parse_args().outs))


if __name__ == "__main__":
    main()
