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
- `learned-masking-tiny-synthetic`: the synthetic corpus's arms (3 seeds, the section-1 settings; the rerun kept in
  experiments/synthetic-tiny/rerun-2026-12-03): final held-out loss, Δ to uniform paired by seed, and at the last
  step each proposal's mass per token kind and normalised entropy (means over seeds of the training metrics);
- `learned-masking-tiny-variance`: the mask variance tr E_x Var(g|x) of each scheme (estimate [95% bootstrap interval],
  one decimal) and its ratio to the same document's uniform scheme (two decimals), from the three kept variance
  documents: uniform-step00000600-oracle-gradient.json (uniform seed 0, step 600: uniform and the exact-gradient
  oracle), mapnet-ht.json and mapnet.json (seed 0, step 600). The clipped scheme's label carries its constant weight
  (`weights.mean`). The same checkpoint's stratified, frequency and proxy-oracle document was not kept, so those rows
  are not in the table.

Bold, by rule: the arms whose Δ mixed interval lies below zero (every cell of their rows but the per-seed steps) in
`learned-masking-tiny-final` and `learned-masking-tiny-paired`.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from functools import partial

import bench_printout
import tables_synthetic_tiny
from arms_table import pm
from compare_tables import REPO, load, markdown, strategy
from tables_learned_masking_mini import final_losses, paired

from mapnet_cli.intervals import mean_ci

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


SYNTH_ROWS = [
    ("uniform", "uniform"),
    ("mapnet (paper)", "mapnet"),
    ("mapnet-ht (gradnorm)", "mapnet-ht"),
    ("mapnet-ht-loss", "mapnet-ht-loss"),
    ("mapnet-ht-learnability", "mapnet-ht-learnability"),
]


def synthetic() -> str:
    """The synthetic corpus's arms (experiments/synthetic-tiny/rerun-2026-12-03, 3 seeds): final held-out loss, the
    paired difference to uniform, and at the last step each arm's proposal mass per token kind and its normalised
    entropy (means over seeds of the training metrics; uniform has no proposal)."""
    doc = load(tables_synthetic_tiny.RESULTS)
    last = doc["eval_steps"][-1]
    kinds = tables_synthetic_tiny.KINDS

    def mean(name: str, key: str) -> float:
        return mean_ci(tables_synthetic_tiny.over_seeds(name, "train", last, key))["mean"]

    body = []
    for label, name in SYNTH_ROWS:
        a = strategy(doc, name)
        if name == "uniform":
            delta, proposal = "–", ["–"] * (len(kinds) + 1)
        else:
            delta = pm(a["paired_vs_uniform"]["eval_loss"], "+.3f").replace("-", "−")
            proposal = [f"{mean(name, f'mapnet/mass/{k}'):.3f}" for k in kinds]
            proposal.append(f"{mean(name, 'mapnet/entropy'):.2f}")
        body.append([label, pm(a["final"]["eval_loss"], ".3f"), delta, *proposal])
    headings = [f"mass: {k.replace('_', '-')}" for k in kinds]
    return markdown(["arm", "held-out loss", "Δ vs uniform", *headings, "entropy"], body)


VARIANCE = [
    ("uniform-step00000600-oracle-gradient.json", "uniform seed 0, step 600",
     [("uniform", "uniform"), ("oracle", "oracle, π ∝ the exact per-position gradient norm (1 round)")]),
    ("mapnet-ht.json", "mapnet-ht seed 0, step 600",
     [("uniform", "uniform"), ("ht", "ht (its own proposal)"), ("oracle", "oracle (proxy)")]),
    ("mapnet.json", "mapnet (paper) seed 0, step 600",
     [("uniform", "uniform"), ("mapnet_clipped", "mapnet_clipped (all weights {w:.1f})"),
      ("mapnet_unweighted", "mapnet_unweighted (the same masks)")]),
]  # fmt: skip


def variance() -> str:
    body = []
    for file, checkpoint, schemes in VARIANCE:
        doc = json.loads((REPO / HERE / file).read_text(encoding="utf-8"))
        if doc["checkpoint"]["step"] != 600 or "seed-0" not in doc["checkpoint"]["path"]:
            raise SystemExit(f"{file}: not a seed-0 step-600 checkpoint: {doc['checkpoint']}")
        base = doc["schemes"]["uniform"]["mask_variance"]["estimate"]
        for i, (key, label) in enumerate(schemes):
            s = doc["schemes"][key]
            v = s["mask_variance"]
            lo, hi = v["ci95"]
            ratio = "1" if key == "uniform" else f"{v['estimate'] / base:.2f}"
            shown = label.format(w=s["weights"]["mean"])
            body.append([checkpoint if i == 0 else "", shown, f"{v['estimate']:.1f} [{lo:.1f}, {hi:.1f}]", ratio])
    return markdown(["checkpoint", "scheme", "mask variance", "vs uniform"], body)


TABLES: dict[str, Callable[[], str]] = {
    "learned-masking-tiny-final": partial(final_losses, RESULTS, LABEL),
    "learned-masking-tiny-paired": partial(paired, RESULTS, LABEL, "seeds below uniform"),
    "learned-masking-tiny-curves": curves,
    "learned-masking-tiny-costs": costs,
    "learned-masking-tiny-mass": mass,
    "learned-masking-tiny-synthetic": synthetic,
    "learned-masking-tiny-variance": variance,
}

if __name__ == "__main__":
    for name, fn in TABLES.items():
        print(f"<!-- {name} -->\n{fn()}\n")
