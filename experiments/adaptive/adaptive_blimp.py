"""BLiMP at the end of each compared run, paired by seed against uniform (experiments/adaptive/adaptive_cpu.sh).

    uv run python experiments/adaptive/adaptive_blimp.py OUT/arms-tiny/blimp.json OUT/arms-tiny [--json FILE]

Reads `mapnet blimp`'s document (schema mapnet.blimp/1) over the final checkpoints of a `compare` folder
and finds each run's newest checkpoint (COMPARE/runs/<arm>/seed-<k>/checkpoints/step-N) in it by the
sha256 of its weights (`mapnet blimp` scores identical weights once, under the first path that had them);
the random-weight and unigram controls it also scored are listed as they are. Per arm: the mean BLiMP accuracy over seeds with its 95% t-interval, and the paired
difference to uniform (per seed index, arm minus uniform, then a t-interval over seeds: one independent
comparison per seed). Prints a markdown table; --json writes the same numbers.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from mapnet_cli.atomic import sha256_file
from mapnet_cli.intervals import mean_ci

def per_seed(doc: dict, compare: Path) -> tuple[dict[str, dict[int, float]], list[dict]]:
    """({arm: {seed: BLiMP accuracy of the run's newest checkpoint}}, the controls' entries)."""
    scored = {m["sha256"]: float(m["accuracy"]) for m in doc["models"] if m.get("init") == "pretrained"}
    arms: dict[str, dict[int, float]] = {}
    for run in sorted((compare / "runs").glob("*/seed-*")):
        steps = sorted((run / "checkpoints").glob("step-*"))
        if not steps:
            continue
        sha = sha256_file(steps[-1] / "model.safetensors")
        if sha not in scored:
            raise SystemExit(f"{steps[-1]} was not scored in this BLiMP document")
        arms.setdefault(run.parent.name, {})[int(run.name.split("-")[1])] = scored[sha]
    return arms, [m for m in doc["models"] if m.get("init") != "pretrained"]


def table(doc: dict, compare: Path) -> dict:
    arms, controls = per_seed(doc, compare)
    base = arms.get("uniform", {})
    rows = {}
    for arm, seeds in arms.items():
        row = {"seeds": sorted(seeds), "accuracy": mean_ci([seeds[k] for k in sorted(seeds)])}
        paired = [seeds[k] - base[k] for k in sorted(seeds) if k in base]
        if arm != "uniform" and paired:
            row["vs_uniform"] = mean_ci(paired)
            row["independent_comparisons"] = len(paired)
        rows[arm] = row
    return {"arms": rows, "controls": [{"label": c.get("label"), "init": c.get("init"), "accuracy": c.get("accuracy")}
                                       for c in controls],
            "method": doc.get("method"), "suite": doc.get("suite")}


def fmt(ci: dict, scale: float = 100.0) -> str:
    if ci.get("ci95") is None:
        return f"{ci['mean'] * scale:+.2f}" if scale else f"{ci['mean']:.4f}"
    half = (ci["ci95"][1] - ci["ci95"][0]) / 2
    return f"{ci['mean'] * scale:.2f} ± {half * scale:.2f}"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("blimp", type=Path, help="the document `mapnet blimp --out` wrote")
    ap.add_argument("compare", type=Path, help="the compare folder whose runs were scored")
    ap.add_argument("--json", type=Path, default=None, help="also write the numbers here")
    args = ap.parse_args()
    if not args.blimp.is_file():
        raise SystemExit(f"{args.blimp}: no such file (run `mapnet blimp ... --out {args.blimp}` first)")
    doc = json.loads(args.blimp.read_text(encoding="utf-8"))
    if not doc.get("complete", False):
        raise SystemExit(f"{args.blimp} is not complete (mapnet blimp was stopped before its last model)")
    out = table(doc, args.compare)
    print("| arm | seeds | BLiMP accuracy (%) | Δ vs uniform, paired (points) | independent comparisons |")
    print("|---|---|---|---|---|")
    for arm, row in sorted(out["arms"].items(), key=lambda item: (item[0] != "uniform", item[0])):
        vs = fmt(row["vs_uniform"]) if "vs_uniform" in row else "–"
        print(f"| {arm} | {len(row['seeds'])} | {fmt(row['accuracy'])} | {vs} | {row.get('independent_comparisons', '–')} |")
    for c in out["controls"]:
        print(f"| control: {c['label']} ({c['init']}) | – | {100 * c['accuracy']:.2f} | – | – |")
    if args.json:
        args.json.write_text(json.dumps(out, indent=2) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
