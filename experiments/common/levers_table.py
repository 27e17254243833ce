"""The lever table of experiments/hour-levers (issue 45): each lever against the baseline at equal wall time.

    uv run python experiments/common/levers_table.py runs/hour-levers/arms           # from a search's OUT/arms
    uv run python experiments/common/levers_table.py experiments/hour-levers/results/series-2   # a kept series
    uv run python experiments/common/levers_table.py experiments/hour-levers/results/series-2 runs/hour-levers/arms
                                                          # both: a later folder's arm over a kept one

Each arm is one `mapnet compare` folder (its results.json; kept as results/series-N/ARM.json), trained to the same
train.time_budget with the same seeds as the baseline (`baseline`). Per arm, paired by seed index (same data
order and masks, where the lever leaves them alone; one comparison per seed): Δ BLiMP (accuracy points) and Δ
held-out loss (nats, the main held-out set with its fixed all-[MASK] masks at 15%) vs the baseline's same seed,
mean ± 95% t-interval, and n, the number of independent comparisons. A loss is only compared on the same
held-out questions (every run's eval_sha256: shards rebuilt from the same text qualify): an arm on other shards
(another vocabulary, other sequence lengths) predicts other tokens, so its
Δ loss is not given (BLiMP, which scores sentences, still is). "Left the plateau": the run's final held-out
loss is at least 1 nat under its training tokens' unigram entropy (as experiments/blimp-arms). "What it
changes" is read from the runs' recorded settings, so it cannot drift from what ran.

The kept results are split into series (levers_series.py: one sitting's baseline and the arms paired with it,
results/series-N/ARM.json); the kept table shows every series, each arm against its own series' baseline, and
each later baseline against the first one: the same settings and seeds in another sitting, so its Δ is the drift
that a comparison across sittings would carry.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import levers_series

from mapnet_cli.intervals import mean_ci
from mapnet_cli.settings import Settings, flat
from mapnet_cli.settings.moved import migrate

REPO = Path(__file__).resolve().parents[2]
KEPT = REPO / "experiments" / "hour-levers" / "results"
BASELINE = "baseline"
# Settings that differ between arms without being the lever (or that follow from the shards given).
# The modelled clock's costs are each arm's own measured step costs (levers_costs.py), not a lever: the series says
# which clock counted.
NOT_A_LEVER = {
    "train.seed",
    "train.keep_steps",
    "train.checkpoint_every",
    "shard.max_seq_len",
    "train.step_seconds",
    "train.short_step_seconds",
}


def load(*folders: Path) -> dict[str, dict]:
    """{arm: results.json} from FOLDER/ARM/results.json (a search's arms) or FOLDER/ARM.json (kept); an arm in a
    later folder replaces the same arm of an earlier one."""
    docs: dict[str, Path] = {}
    for folder in folders:
        docs.update({p.parent.name: p for p in sorted(folder.glob("*/results.json"))})
        docs.update({p.stem: p for p in sorted(folder.glob("*.json"))})
    return {name: json.loads(p.read_text(encoding="utf-8")) for name, p in docs.items()}


def fmt(ci: dict | None, f: str, scale: float = 1.0) -> str:
    if not ci:
        return "–"
    mean = format(scale * ci["mean"], f)
    return (
        mean if ci["ci95"] is None else f"{mean} ± {format(scale * (ci['ci95'][1] - ci['ci95'][0]) / 2, f.lstrip('+'))}"
    )


def by_seed(doc: dict) -> dict[int, dict]:
    return {r["seed_index"]: r for r in doc["runs"]}


def same_questions(doc: dict, other: dict) -> bool:
    """Whether two arms' held-out losses answer the same questions: every run's eval_sha256 (the evaluated
    sequences, their masks and inputs) is one and the same. Not the shard manifest's hash: a manifest rebuilt from
    the same text on a new machine differs in its creation time alone, and its held-out questions do not."""
    mine = {r["eval_sha256"] for r in doc["runs"]}
    return len(mine) == 1 and mine == {r["eval_sha256"] for r in other["runs"]}


def changes(doc: dict, base: dict) -> str:
    # Records of earlier mapnets carry the flat masking keys: read where they are now, as a run's settings.toml is.
    mine, theirs = (flat(migrate(d["runs"][0]["settings"])) for d in (doc, base))
    # A setting added after `base` ran is absent from its record; at its default it is what `base` did.
    default = flat(Settings().to_dict())
    out = [f"{k}={mine[k]}" for k in mine if k not in NOT_A_LEVER and mine[k] != theirs.get(k, default.get(k))]
    if not same_questions(doc, base):
        shards = Path(doc["shards"]["path"])  # its folder too: the 16,384 text's shards are `shards` as well
        out.append(
            f"shards {shards.parent.name}/{shards.name} ({doc['runs'][0]['settings']['shard']['max_seq_len']} tokens)"
        )
    return ", ".join(f"`{c}`" for c in out) or "–"


def described(doc: dict) -> str:
    """The baseline in a few words, from its recorded settings."""
    s = doc["runs"][0]["settings"]
    m, t = s.get("model", {}), s.get("train", {})
    return (
        f"`{m.get('preset', '?')}` L{m.get('layers', '?')}/H{m.get('hidden', '?')}, `{t.get('recipe', '?')}`, batch "
        f"{t.get('batch_size', '?')} × {s['shard']['max_seq_len']}"
    )


def final_loss(run: dict) -> float:
    return run["eval"][-1]["eval_loss"]


def clock(doc: dict) -> str:
    """Which clock counted the budget: `wall`, or `modelled` (each step its arm's measured cost; train/budget.py)."""
    clocks = {(r.get("budget") or {}).get("clock", "wall") for r in doc["runs"]}
    return clocks.pop() if len(clocks) == 1 else "mixed"


def step_costs(doc: dict) -> set[tuple]:
    """The (full, short) step seconds its runs' modelled clock counted (empty tuples on the wall clock)."""
    return {tuple((r.get("budget") or {}).get(k) for k in ("step_seconds", "short_step_seconds")) for r in doc["runs"]}


def fmt_costs(doc: dict) -> str:
    """ "0.6615 / 0.6395 s" (full / short), one such per distinct pair among the runs."""
    return "; ".join(" / ".join(f"{c:.4f}" for c in pair if c is not None) + " s" for pair in sorted(step_costs(doc)))


def steps_bought(run: dict) -> int:
    budget = run.get("budget")
    return budget["steps"] if budget else run["eval"][-1]["step"]


def row(name: str, doc: dict, base: dict, series: str | None = None, first: dict | None = None) -> str:
    """One arm's cells; with `series`, a leading series cell, and a later series' baseline (`first` given) is
    compared with the first series' baseline: the same settings and seeds in another sitting, so its Δ is drift."""
    runs = by_seed(doc)
    ref = by_seed(first if name == BASELINE and first is not None else base)
    seeds = sorted(set(runs) & set(ref))
    bar = doc["unigram"]["train_entropy"] - 1.0
    left = f"{sum(final_loss(r) <= bar for r in runs.values())} of {len(runs)}"
    steps = sorted(steps_bought(r) for r in runs.values())
    steps_text = f"{steps[0]:,}" if steps[0] == steps[-1] else f"{steps[0]:,}–{steps[-1]:,}"
    loss = mean_ci([final_loss(r) for r in runs.values()])
    blimp = (
        mean_ci([r["blimp"]["accuracy"] for r in runs.values()]) if all("blimp" in r for r in runs.values()) else None
    )
    # The arm's own random weights: another block or shape scores differently untrained (series 3's modern block's
    # scored above the BERT block's), so a trained BLiMP reads against its own control, not the baseline's.
    random = (doc.get("aggregate", {}).get("blimp_control") or {}).get("random_init")
    if name == BASELINE and first is None:
        d_loss = d_blimp = n = "–"
        what = described(doc)
    else:
        other = first if name == BASELINE else base
        d_loss = (
            fmt(mean_ci([final_loss(runs[k]) - final_loss(ref[k]) for k in seeds]), "+.3f")
            if same_questions(doc, other)
            else "n/c (other tokens)"
        )
        d_blimp = (
            fmt(mean_ci([runs[k]["blimp"]["accuracy"] - ref[k]["blimp"]["accuracy"] for k in seeds]), "+.1f", 100)
            if blimp is not None and all("blimp" in ref[k] for k in seeds)
            else "–"
        )
        n = str(len(seeds))
        what = changes(doc, other)
        if name != BASELINE and clock(doc) != clock(
            other
        ):  # the costs are not a lever, but another clock is a difference
            what = f"{what}, on the {clock(doc)} clock (its baseline: {clock(other)})"
        if name == BASELINE:  # its Δ is the drift between sittings; settings that differ would make it more
            if clock(doc) == clock(other) and step_costs(doc) == step_costs(other):
                again = "the first series' baseline again, in another sitting (Δ vs it: the drift)"
            else:  # a modelled clock priced on another CPU buys other steps: its costs say which
                on = f"the {clock(doc)} clock" + (f" at {fmt_costs(doc)} a step" if clock(doc) == "modelled" else "")
                again = f"the first series' baseline again, on {on} (Δ vs it: the clock's and the drift)"
            what = again if what == "–" else f"{again}, and {what}"
    lead = "" if series is None else f"| {series} "
    return (
        f"{lead}| {name} | {what} | {steps_text} | {left} | "
        f"{fmt(loss, '.3f')} | {d_loss} | {fmt(blimp, '.1f', 100)} | {fmt(random, '.1f', 100)} | {d_blimp} | {n} |"
    )


COLUMNS = (
    "arm | what it changes | steps bought | left the plateau | held-out loss | Δ loss (nats) | BLiMP | "
    "BLiMP, its random weights | Δ BLiMP (points) | n"
)


def header(base: dict, series: bool = False) -> list[str]:
    budget = base.get("time_budget") or "–"
    b = base.get("blimp") or {}
    ctl = base["aggregate"].get("blimp_control") or {}
    columns = ("series | " if series else "") + COLUMNS
    return [
        f"Every arm trained {budget} (training time; evaluation and checkpoints not counted), seeds "
        f"{base['seeds']}; BLiMP {b.get('method', '–')} on {b.get('paradigms', '–')} paradigms × "
        f"{b.get('pairs_per_paradigm', '–')} pairs, each arm beside its own random-weight encoders (same seeds); "
        f"the baseline's unigram control "
        f"{'–' if ctl.get('unigram') is None else format(100 * ctl['unigram'], '.1f')}. Δ = arm − baseline on "
        "the same seed"
        + (" of the same series (one sitting's baseline and the arms run beside it)" if series else "")
        + ", mean ± 95% t-interval over n independent comparisons; no correction for the number of levers.",
        "",
        f"| {columns} |",
        "|" + "---|" * (columns.count("|") + 1),
    ]


def table(docs: dict[str, dict]) -> str:
    if BASELINE not in docs:
        raise SystemExit(f"no `{BASELINE}` arm among {', '.join(docs) or 'nothing'}: every Δ is against it")
    base = docs[BASELINE]
    order = [BASELINE] + [name for name in docs if name != BASELINE]
    return "\n".join(header(base) + [row(name, docs[name], base) for name in order])


def series_table(series: list[tuple[str, dict[str, dict]]]) -> str:
    """Every kept series in one table: each arm against its own series' baseline, and each later baseline
    against the first (the same settings and seeds in another sitting: the drift between sittings)."""
    for label, docs in series:
        if BASELINE not in docs:
            raise SystemExit(f"{label} has no `{BASELINE}` arm: every Δ of a series is against its own")
    first = series[0][1][BASELINE]
    lines = header(first, series=True)
    for i, (label, docs) in enumerate(series):
        order = [BASELINE] + [name for name in docs if name != BASELINE]
        label = label if clock(docs[BASELINE]) == "wall" else f"{label} ({clock(docs[BASELINE])} clock)"
        lines += [row(name, docs[name], docs[BASELINE], label, first if i else None) for name in order]
    return "\n".join(lines)


def per_seed(docs: dict[str, dict]) -> str:
    """Each arm's seeds side by side (seed 0 / seed 1 ...): final held-out loss, BLiMP, the BLiMP of that seed's
    random-weight encoder (same shape and init; compare's `blimp_control`) and trained minus random."""

    def cells(values: list[float], f: str) -> str:
        return " / ".join(format(v, f) for v in values)

    lines = ["| arm | held-out loss | BLiMP | its random weights | trained − random |", "|---|---|---|---|---|"]
    for name in [BASELINE] + [n for n in docs if n != BASELINE]:
        runs = by_seed(docs[name])
        seeds = sorted(runs)
        random = (docs[name].get("blimp_control") or {}).get("random") or {}
        trained = [100 * runs[k]["blimp"]["accuracy"] for k in seeds] if all("blimp" in runs[k] for k in seeds) else []
        control = [100 * random[str(k)]["accuracy"] for k in seeds] if all(str(k) in random for k in seeds) else []
        lines.append(
            f"| {name} | {cells([final_loss(runs[k]) for k in seeds], '.3f')} | {cells(trained, '.1f') or '–'} | "
            f"{cells(control, '.1f') or '–'} | "
            f"{cells([t - c for t, c in zip(trained, control)], '+.1f') if trained and control else '–'} |"
        )
    return "\n".join(lines)


def kept_per_seed(name: str) -> str:
    """doc_tables' per-seed tables: one kept series (`series-N`), seed by seed."""
    if not (KEPT / name).is_dir():
        raise SystemExit(f"no kept series {name} in {KEPT}")
    docs = load(KEPT / name)
    if BASELINE not in docs:
        return "*Not measured yet.*"
    return f"Series {name.partition('-')[2]}, per seed (0 / 1 ...), from `results/{name}/`:\n\n" + per_seed(docs)


def kept() -> str:
    """doc_tables' `hour-levers`: the table of the kept raw JSON (every series), or what to run while there is none."""
    folders = levers_series.all_series(KEPT) if KEPT.is_dir() else []
    series = [(f.name, load(f)) for f in folders]
    if not any(docs for _, docs in series):
        return (
            "*Not measured yet*: the search runs alone on an idle machine "
            "(`bash experiments/hour-levers/levers_cpu.sh runs/hour-levers search`, then `... keep`)."
        )
    return series_table([(name, docs) for name, docs in series if docs])


if __name__ == "__main__":
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    print(table(load(*map(Path, sys.argv[1:]))))
