"""Section J's tables (experiments/hour-syntax, issue 67 item 3), made from its kept raw files by doc_tables.py:

- `costs`: the `benchmarks/step_costs.py` output (the hybrid's step in lock-step with the recipe's, pinned clock);
- `runs`: every finished run of the comparison (raw/runs/ARM/seed-K): the steps its time bought, its held-out loss;
- `decision`: the choosing half's BLiMP (compare's results.json) per seed and arm, with the syntax field, the held-out
  loss, each seed's random weights, the paired differences (hybrid − uniform, 95% t-intervals over the seeds: one
  comparison per seed) and the rule of the README applied to them;
- `report`: the reporting half's BLiMP on the same final checkpoints (raw/blimp-report.json), scored after the
  decision, with its controls.
"""

from __future__ import annotations

from pathlib import Path

import masking_tables
from hour_table import PLATEAU_NATS, metrics, read, runs_table

from mapnet_cli.evaluation.blimp.data import load_suite
from mapnet_cli.intervals import mean_ci

RAW = Path(__file__).resolve().parents[2] / "experiments" / "hour-syntax" / "raw"
BLIMP = Path(__file__).resolve().parents[2] / ".." / "shared" / "data" / "blimp"
ARMS = ("uniform", "hybrid")
# The README's rule, written before the runs: the lever is taken if it is ahead on every seed and by at least this
# many points on the mean paired difference (choosing half, every pair, PLL).
TAKE_POINTS = 0.5


def pm(ci: dict, scale: float = 1.0, f: str = "+.3f") -> str:
    if ci["ci95"] is None:
        return format(scale * ci["mean"], f)
    return f"{format(scale * ci['mean'], f)} ± {format(scale * (ci['ci95'][1] - ci['ci95'][0]) / 2, f.lstrip('+'))}"


def costs(raw: Path = RAW) -> str:
    return masking_tables.costs(raw / "costs.json") if (raw / "costs.json").is_file() else "*Not measured yet.*"


def runs(raw: Path = RAW) -> str:
    parts = [
        f"**{arm}**\n\n{runs_table(sorted((raw / 'runs' / arm).glob('seed-*')))}"
        for arm in ARMS
        if (raw / "runs" / arm).is_dir()
    ]
    if not parts:
        return "*No run finished yet.*"
    done = {arm: {int(r.name.split("-")[1]): r for r in (raw / "runs" / arm).glob("seed-*")} for arm in ARMS}
    paired = sorted(set(done["uniform"]) & set(done.get("hybrid", {})))
    if paired:
        last = lambda run: [m["eval_loss"] for m in metrics(run) if m.get("kind") == "eval"][-1]  # noqa: E731
        deltas = [last(done["hybrid"][k]) - last(done["uniform"][k]) for k in paired]
        parts.append(
            "Held-out loss (the mixed validation set), hybrid − uniform on the same seed: "
            + ", ".join(f"{d:+.3f}" for d in deltas)
            + f"; mean {pm(mean_ci(deltas))} nats ({len(deltas)} paired comparison{'s' if len(deltas) > 1 else ''})."
        )
    return "\n\n".join(parts)


def five_gram(uids: list[str]) -> tuple[float, float]:
    """The published 5-gram model's accuracy on these paradigms: (mean over them, its syntax field's mean)."""
    suite = load_suite(BLIMP, 1, only=uids)
    scores = suite.references["ngram"]  # models_summary.jsonl calls the 5-gram model "ngram"
    syntax = [scores[p.uid] for p in suite.paradigms if p.field == "syntax"]
    return sum(scores.values()) / len(scores), sum(syntax) / len(syntax)


def by_seed(doc: dict) -> dict[str, dict[int, dict]]:
    return {arm: {r["seed_index"]: r for r in doc["runs"] if r["strategy"] == arm} for arm in ARMS}


def rule(deltas: list[float]) -> tuple[bool, str]:
    """The README's rule on the per-seed BLiMP differences (fractions): (taken?, why)."""
    mean = 100 * sum(deltas) / len(deltas)
    ahead = sum(d > 0 for d in deltas)
    taken = ahead == len(deltas) and mean >= TAKE_POINTS
    why = (
        f"ahead on {ahead} of {len(deltas)} seeds, mean {mean:+.1f} points "
        f"(the rule: ahead on every seed and by ≥ +{TAKE_POINTS} points)"
    )
    return taken, why


def decision(raw: Path = RAW) -> str:
    if not (raw / "results.json").is_file():
        return "*Not scored yet.*"
    doc = read(raw / "results.json")
    arms, control = by_seed(doc), doc["blimp_control"]
    seeds = sorted(arms["uniform"])
    blimp = doc["blimp"]
    lines = [
        f"`raw/results.json`: {blimp['paradigms']} paradigms (the choosing half), "
        f"{'every pair' if not blimp['pairs_per_paradigm'] else str(blimp['pairs_per_paradigm']) + ' pairs each'}, "
        f"{blimp['method']}; {len(seeds)} paired seeds, one comparison each. BLiMP in %, held-out loss in nats on "
        "the recipe's 16,384-token vocabulary (the mixed validation set), Δ = hybrid − uniform on the same seed.",
        "",
        "| seed | BLiMP uniform | BLiMP hybrid | Δ | syntax uniform | syntax hybrid | Δ syntax | random weights | "
        "loss uniform | loss hybrid | Δ loss | left the plateau (both)? |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    d_blimp, d_syntax, d_loss, d_random = [], [], [], []
    for k in seeds:
        u, h = arms["uniform"][k], arms["hybrid"][k]
        random = control["random"][str(k)]["accuracy"]
        loss_u, loss_h = u["eval"][-1]["eval_loss"], h["eval"][-1]["eval_loss"]
        entropy = u["unigram"]["train_entropy"]
        left = all(loss <= entropy - PLATEAU_NATS for loss in (loss_u, loss_h))
        d_blimp.append(h["blimp"]["accuracy"] - u["blimp"]["accuracy"])
        d_syntax.append(h["blimp"]["fields"]["syntax"] - u["blimp"]["fields"]["syntax"])
        d_loss.append(loss_h - loss_u)
        d_random.append(u["blimp"]["accuracy"] - random)
        lines.append(
            f"| {k} | {100 * u['blimp']['accuracy']:.1f} | {100 * h['blimp']['accuracy']:.1f} | "
            f"{100 * d_blimp[-1]:+.1f} | {100 * u['blimp']['fields']['syntax']:.1f} | "
            f"{100 * h['blimp']['fields']['syntax']:.1f} | {100 * d_syntax[-1]:+.1f} | {100 * random:.1f} | "
            f"{loss_u:.3f} | {loss_h:.3f} | {d_loss[-1]:+.3f} | {'yes' if left else 'no'} |"
        )
    taken, why = rule(d_blimp)
    gram, gram_syntax = five_gram(sorted(arms["uniform"][seeds[0]]["blimp"]["paradigms"]))
    lines += [
        "",
        f"Paired over the seeds: BLiMP Δ {pm(mean_ci(d_blimp), 100, '+.1f')} points, syntax Δ "
        f"{pm(mean_ci(d_syntax), 100, '+.1f')}, held-out loss Δ {pm(mean_ci(d_loss))} nats; the recipe against its "
        f"random weights {pm(mean_ci(d_random), 100, '+.1f')} points; the unigram model "
        f"{100 * control['unigram']['accuracy']:.1f}, the 5-gram {100 * gram:.1f} (syntax {100 * gram_syntax:.1f}). "
        f"**The rule: {'taken' if taken else 'not taken'}** — {why}.",
    ]
    return "\n".join(lines)


def report(raw: Path = RAW) -> str:
    if not (raw / "blimp-report.json").is_file():
        return "*Not scored yet (after the decision).*"
    doc = read(raw / "blimp-report.json")
    trained = {}
    for m in doc["models"]:
        if m["init"] == "pretrained":
            arm, seed = Path(m["path"]).parts[-4], int(Path(m["path"]).parts[-3].split("-")[1])
            trained[arm, seed] = m
    random = {int(m["label"].split("seed-")[1]): m for m in doc["models"] if m["init"] == "random"}
    unigram = next(m for m in doc["models"] if m["init"] == "unigram")
    seeds = sorted({seed for _, seed in trained})
    d = doc["data"]
    lines = [
        f"`raw/blimp-report.json`: {d['paradigms']} paradigms (the reporting half), {d['pairs']:,} pairs, "
        f"{doc['method']}; scored after the decision. BLiMP in %.",
        "",
        "| seed | uniform | hybrid | Δ | random weights | uniform − random | hybrid − random |",
        "|---|---|---|---|---|---|---|",
    ]
    deltas, minus_random = [], {arm: [] for arm in ARMS}
    for k in seeds:
        u, h, r = trained["uniform", k]["accuracy"], trained["hybrid", k]["accuracy"], random[k]["accuracy"]
        deltas.append(h - u)
        minus_random["uniform"].append(u - r)
        minus_random["hybrid"].append(h - r)
        lines.append(
            f"| {k} | {100 * u:.1f} | {100 * h:.1f} | {100 * (h - u):+.1f} | {100 * r:.1f} | {100 * (u - r):+.1f} | "
            f"{100 * (h - r):+.1f} |"
        )
    lines += [
        "",
        f"Paired over the seeds: Δ {pm(mean_ci(deltas), 100, '+.1f')} points; uniform − random "
        f"{pm(mean_ci(minus_random['uniform']), 100, '+.1f')}, hybrid − random "
        f"{pm(mean_ci(minus_random['hybrid']), 100, '+.1f')}; the unigram model {100 * unigram['accuracy']:.1f}, "
        f"the 5-gram {100 * doc['references']['5-gram']['accuracy']:.1f}.",
    ]
    return "\n".join(lines)
