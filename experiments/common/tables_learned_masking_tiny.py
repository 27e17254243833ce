"""experiments/learned-masking-tiny/README.md's tables (RESULTS section 3: nine masking arms on real text, `tiny`,
600 steps, 3 paired seeds, plateau era), from the files kept beside it:

- `learned-masking-tiny-final`: final held-out loss per set (mean ± half the 95% t-interval over seeds, 3 decimals)
  and accuracy on the mixed set (percent ± points), from results.json;
- `learned-masking-tiny-paired`: the paired differences to uniform (arm − uniform per seed), seeds whose final mixed
  loss is below uniform's, steps to uniform's final mean mixed loss on the mean curve (with its share of the run's
  steps where reached) and per seed ("–": not reached), from results.json;
- `learned-masking-tiny-curves`: a sentence, the mean mixed-set curves of uniform, uniform@0.3 and mapnet-ht at every
  evaluation, from results.json;
- `learned-masking-tiny-costs`: the idle step-cost benchmark, bench_strategies.txt (two printouts: all arms, then
  uniform@0.3 beside a second uniform), ms per step and the ratio the benchmark printed, at `tiny` and `mini`;
- `learned-masking-tiny-mass`: the expected mask share by frequency group on held-out books and each arm's final
  loss on those groups, mass_by_frequency-seed0.txt (seed 0); uniform and stratified share one row when their shares
  are equal (the loss printed is uniform's).

Bold, by rule: the arms whose Δ mixed interval lies below zero (every cell of their rows but the per-seed steps).
The variance table and the synthetic table stay hand-written: part of their cells have no kept source (the
registry, tests/prose_figures/experiments__learned-masking-tiny__README.toml, says which).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from functools import partial

import bench_printout
from compare_tables import REPO, load, markdown, strategy
from tables_learned_masking_mini import final_losses, paired

HERE = "experiments/learned-masking-tiny"
RESULTS = f"{HERE}/results.json"
BENCH = f"{HERE}/bench_strategies.txt"
MASS = f"{HERE}/mass_by_frequency-seed0.txt"
LABEL = {"mapnet": "mapnet (paper)"}
SETS = ("eval_loss", "eval_loss@books", "eval_loss@wiki")


def curves() -> str:
    doc = load(RESULTS)
    steps = doc["eval_steps"]
    parts = []
    for name in ("uniform", "uniform@0.3", "mapnet-ht"):
        a = strategy(doc, name)
        parts.append(
            f"{name} " + ", ".join(f"{a['curve']['eval_loss'][a['steps'].index(s)]['mean']:.3f}" for s in steps)
        )
    first = f"{steps[0]}, {steps[1]}, …, {steps[-1]}"
    return f"Mean curves, mixed set (steps {first}): " + "; ".join(parts) + "."


COST_LABEL = {
    "mapnet": "mapnet (paper)",
    "mapnet-ht": "mapnet-ht (gradnorm)",
    "mapnet-ht-1layer": "mapnet-ht, 1-block proposal",
}
COST_ORDER = ["uniform", "uniform@0.3", "stratified", "frequency-ht", "mapnet", "mapnet-ht", "mapnet-ht-learnability",
              "mapnet-ht-1layer"]  # fmt: skip


def costs() -> str:
    first, second = bench_printout.read(REPO / BENCH)
    body = []
    for arm in COST_ORDER:
        if arm in first.presets["tiny"]:
            cells = []
            for preset in ("tiny", "mini"):
                ms, ratio = first.presets[preset][arm]
                cells += [f"{ms:.1f}", f"{ratio:.2f}×"]
            body.append([COST_LABEL.get(arm, arm), *cells])
        else:  # measured in the second printout, beside its own uniform
            cells = []
            for preset in ("tiny", "mini"):
                ms, ratio = second.presets[preset][arm]
                cells += [f"{ms:.1f} vs {second.presets[preset]['uniform'][0]:.1f}", f"{ratio:.2f}×"]
            body.append([f"{arm} (second run, beside uniform)", *cells])
    return markdown(["arm", "`tiny` ms/step", "vs uniform", "`mini` ms/step", "vs uniform"], body)


MASS_LINE = re.compile(r"^\s+(?P<arm>\S+)\s+mask share (?P<shares>.*?) \| loss (?P<losses>.*)$")
MASS_ORDER = ["uniform", "mapnet", "mapnet-uncompressed", "mapnet-ht", "mapnet-ht-loss", "mapnet-ht-learnability",
              "frequency-ht"]  # fmt: skip
MASS_LABEL = {"mapnet": "mapnet (paper)", "mapnet-ht": "mapnet-ht (gradnorm)"}


def mass_rows(heldout: str = "heldout-books") -> dict[str, tuple[list[str], list[str]]]:
    """{arm: (its three mask shares as printed, its three losses as printed)} of one held-out set's block."""
    rows, inside = {}, False
    for line in (REPO / MASS).read_text(encoding="utf-8").splitlines():
        if line and not line.startswith(" "):
            inside = line.startswith(heldout + ":")
        elif inside and (m := MASS_LINE.match(line)):
            shares = re.findall(r"([\d.]+%) ± [\d.]+%", m["shares"])
            losses = re.findall(r"([\d.]+) ± [\d.]+", m["losses"])
            rows[m["arm"]] = (shares, losses)
    if not rows:
        raise SystemExit(f"{MASS}: no {heldout} block")
    return rows


def mass() -> str:
    rows = mass_rows()
    body = []
    for arm in MASS_ORDER:
        shares, losses = rows[arm]
        loss = " / ".join(losses)
        label = MASS_LABEL.get(arm, arm)
        if arm == "uniform":
            if rows["stratified"][0] != shares:
                raise SystemExit(f"{MASS}: stratified's shares differ from uniform's; give it its own row")
            label, loss = "uniform, stratified", loss + " (uniform)"
        body.append([label, *shares, loss])
    return markdown(["arm", "top-100 types", "types 101–1000", "rarer", "its final loss on those groups"], body)


TABLES: dict[str, Callable[[], str]] = {
    "learned-masking-tiny-final": partial(final_losses, RESULTS, LABEL),
    "learned-masking-tiny-paired": partial(paired, RESULTS, LABEL, "seeds below uniform"),
    "learned-masking-tiny-curves": curves,
    "learned-masking-tiny-costs": costs,
    "learned-masking-tiny-mass": mass,
}

if __name__ == "__main__":
    for name, fn in TABLES.items():
        print(f"<!-- {name} -->\n{fn()}\n")
