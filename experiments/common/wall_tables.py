"""Section K's tables (experiments/hour-wall, issue 67 item 4), made from its kept raw files by doc_tables.py:

- `kernel`: the `benchmarks/step_costs.py` output (the math kernel's step in lock-step with PyTorch's pick, the
  latter's cost measured alone) and the README's rule applied to it;
- `runs`: every seed that spent its budget (raw/runs/seed-K): the machine its run.json names, the steps 60 wall
  minutes bought, the counted seconds and the seconds from start to end (load.tsv: evaluation and checkpoints
  included), training tokens a second (the steps' tokens over the counted seconds), the held-out loss against the
  training tokens' unigram entropy (the plateau);
- `blimp`: BLiMP at each seed's last checkpoint by method (PLL, word-l2r) on the reporting half (the headline), the
  choosing half and all 45 paradigms: the trained encoders, their random weights, trained − random paired by seed
  (one comparison per seed), the unigram model and the published 5-gram on the same paradigms.

A half's accuracy is the mean of its paradigms' accuracies, as `mapnet blimp` averages all 45 (every pair: 1,000 a
paradigm, so the same as pooling the pairs).
"""

from __future__ import annotations

import statistics
from pathlib import Path

import blimp_halves
import masking_tables
from hour_table import PLATEAU_NATS, fmt, metrics, read

from mapnet_cli.intervals import mean_ci

RAW = Path(__file__).resolve().parents[2] / "experiments" / "hour-wall" / "raw"
# The README's rule for the kernel, written before the measurement: every round's whole step faster, median ≤ 0.97.
KERNEL_MEDIAN = 0.97
METHODS = {"pll": "blimp-final-pll.json", "word-l2r": "blimp-final-l2r.json"}


def kernel_rule(doc: dict, arm: str = "math") -> tuple[bool, str]:
    """The README's rule on a step_costs.py file: (taken?, why)."""
    a = doc["arms"][arm]
    rounds = [r["arm"]["full"] / r["reference"]["full"] for r in a["rounds"]]  # each round's own pair
    low, high = a["ratio_range"]["full"]
    taken = all(r < 1 for r in rounds) and a["ratio"]["full"] <= KERNEL_MEDIAN
    why = (
        f"whole step {a['ratio']['full']:.3f}× (range {low:.3f}–{high:.3f}) over {doc['rounds_run']} rounds "
        f"(the rule: below 1 in every round and a median ≤ {KERNEL_MEDIAN})"
    )
    return taken, why


def kernel(raw: Path = RAW) -> str:
    if not (raw / "kernel.json").is_file():
        return "*Not measured yet.*"
    taken, why = kernel_rule(read(raw / "kernel.json"))
    return masking_tables.costs(raw / "kernel.json") + f"\n\n**The rule: {'taken' if taken else 'not taken'}** — {why}."


def waited(raw: Path) -> dict[str, float]:
    """{seed-K: seconds from the stage's start of that seed to its end} from load.tsv: what a user waits, evaluation
    and checkpoints included (run.json's wall seconds are the steps' own, on the wall clock the counted ones)."""
    from datetime import datetime

    stamps: dict[str, dict[str, datetime]] = {}
    path = raw / "load.tsv"
    for line in path.read_text(encoding="utf-8").splitlines() if path.is_file() else []:
        stage, what, when, *_ = line.split("\t")
        if stage.startswith("seed-") and what in ("start", "end"):
            stamps.setdefault(stage, {})[what] = datetime.fromisoformat(when.replace("Z", "+00:00"))
    return {k: (v["end"] - v["start"]).total_seconds() for k, v in stamps.items() if v.keys() == {"start", "end"}}


def finished(raw: Path) -> list[Path]:
    """The kept seeds that spent their budget (raw/runs/seed-K)."""
    if not (raw / "runs").is_dir():
        return []
    return sorted(p for p in (raw / "runs").glob("seed-*") if read(p / "run.json").get("budget", {}).get("finished"))


def plateau(ms: list[dict]) -> tuple[float, float, bool]:
    """A run's last held-out loss, its training tokens' unigram entropy, and whether the loss is at least
    PLATEAU_NATS below it (the run left the plateau)."""
    loss = [m["eval_loss"] for m in ms if m.get("kind") == "eval"][-1]
    entropy = next(m["train_entropy"] for m in ms if m.get("kind") == "unigram")
    return loss, entropy, loss <= entropy - PLATEAU_NATS


def runs(raw: Path = RAW) -> str:
    done = finished(raw)
    if not done:
        return "*No seed finished yet.*"
    lines = [
        "| seed | machine (run.json) | threads | steps bought | counted s | start to end, s | tokens/s | "
        "held-out loss | unigram entropy | left the plateau? |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    took = waited(raw)
    for run in done:
        info, ms = read(run / "run.json"), metrics(run)
        budget = info["budget"]
        tokens = sum(m["tokens"] for m in ms if m.get("kind") == "train")
        logged = sum(1 for m in ms if m.get("kind") == "train")
        loss, entropy, left = plateau(ms)
        # Train lines are logged every logging.log_every steps, each with its own step's tokens: a step's tokens
        # are the same throughout (the warm-up's pieces cut the same sequences), so the mean logged step stands
        # for every step.
        per_second = tokens / logged * budget["steps"] / budget["spent_seconds"]
        lines.append(
            f"| {run.name} | {info.get('cpu') or 'not recorded'} | {info.get('threads', '–')} | "
            f"{budget['steps']:,} | {budget['spent_seconds']:,.0f} | "
            f"{format(took[run.name], ',.0f') if run.name in took else '–'} | "
            f"{per_second:,.0f} | {loss:.3f} | {entropy:.3f} | {'yes' if left else 'no'} |"
        )
    return "\n".join(lines)


def half_accuracy(model: dict, uids: list[str]) -> float:
    return statistics.mean(model["paradigms"][uid]["accuracy"] for uid in uids)


def five_gram(doc: dict, uids: list[str]) -> float:
    return statistics.mean(doc["references"]["5-gram"]["paradigms"][uid] for uid in uids)


def half_scores(doc: dict, uids: list[str]) -> dict:
    """One half's figures: each seed's trained and random-weight accuracy (its own init), their paired differences,
    the trained mean with its interval and the paired difference's, and the 5-gram on the same paradigms."""
    trained = {m["run"]: m for m in doc["models"] if m["init"] == "pretrained"}
    by_label = {m["label"]: m for m in doc["models"]}
    seeds = sorted(trained)
    acc = {s: half_accuracy(trained[s], uids) for s in seeds}
    random = {
        s: half_accuracy(by_label[trained[s]["controls"]["random"]], uids)
        for s in seeds
        if trained[s].get("controls", {}).get("random") in by_label
    }
    paired = [acc[s] - random[s] for s in seeds if s in random]
    return {
        "seeds": seeds, "acc": acc, "random": random, "paired": paired, "mean": mean_ci(list(acc.values())),
        "difference": mean_ci(paired) if paired else None, "five": five_gram(doc, uids),
    }  # fmt: skip


def half_rows(doc: dict, halves: dict[str, list[str]]) -> list[str]:
    """One row a half: the trained encoders, their random weights (each seed's own), the paired difference."""
    unigram = next((m for m in doc["models"] if m["init"] == "unigram"), None)
    rows = []
    for half, uids in halves.items():
        h = half_scores(doc, uids)
        seeds, acc, random, paired, five, mean = h["seeds"], h["acc"], h["random"], h["paired"], h["five"], h["mean"]
        rows.append(
            f"| {doc['method']} | {half} ({len(uids)}) | {', '.join(f'{100 * acc[s]:.1f}' for s in seeds)} | "
            f"{fmt(mean)} | {', '.join(f'{100 * random[s]:.1f}' for s in seeds if s in random) or '–'} | "
            f"{', '.join(f'{100 * d:+.1f}' for d in paired) or '–'} | "
            f"{fmt(h['difference'], f='+.1f') if paired else '–'} | {len(paired)} | "
            f"{'–' if unigram is None else f'{100 * half_accuracy(unigram, uids):.1f}'} | {100 * five:.1f} | "
            f"{'yes' if mean['mean'] >= five else 'no'} |"
        )
    return rows


def blimp(raw: Path = RAW, data: Path = blimp_halves.BLIMP) -> str:
    docs = {method: read(raw / name) for method, name in METHODS.items() if (raw / name).is_file()}
    if not docs:
        return "*Not scored yet.*"
    cut = blimp_halves.halves(blimp_halves.paradigm_rows(data))
    lines = [
        "BLiMP in %, every pair, at each seed's last checkpoint; the reporting half is the headline (no choice was "
        "made on it), the choosing half and all 45 (the development set) beside it. Trained − random: each seed "
        "against its own random weights (the same init), a 95% t-interval over the seeds, one comparison per seed.",
        "",
        "| method | paradigms | trained, per seed | trained, mean ± 95% | random weights, per seed | trained − random, "
        "per seed | trained − random | n | unigram | 5-gram | ≥ 5-gram? |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for doc in docs.values():
        every = sorted(next(m for m in doc["models"] if m["init"] == "pretrained")["paradigms"])
        if doc["data"]["pairs_per_paradigm"]:
            raise SystemExit(f"{doc['method']}: {doc['data']['pairs_per_paradigm']} pairs a paradigm, not every pair")
        lines += half_rows(doc, {"reporting": cut["report"], "choosing": cut["choose"], "all": every})
    return "\n".join(lines)


def excludes_zero(ci: dict) -> bool:
    return ci["ci95"] is not None and (ci["ci95"][0] > 0 or ci["ci95"][1] < 0)


def answer(raw: Path = RAW, data: Path = blimp_halves.BLIMP) -> str:
    """The hour's headline as a user gets it, in one paragraph (the README, docs/pretraining.md and section K quote
    it): the steps 60 wall minutes bought, the plateau, and BLiMP by PLL on the reporting half against the 5-gram
    and against each seed's random weights, all 45 beside it; word-l2r's reporting half when it is scored."""
    done = finished(raw)
    if not done or not (raw / METHODS["pll"]).is_file():
        return "*Section K is not scored yet.*"
    info = read(done[0] / "run.json")
    steps = [read(run / "run.json")["budget"]["steps"] for run in done]
    past = sum(plateau(metrics(run))[2] for run in done)
    cut = blimp_halves.halves(blimp_halves.paradigm_rows(data))
    pll = read(raw / METHODS["pll"])
    all45 = sorted(next(m for m in pll["models"] if m["init"] == "pretrained")["paradigms"])
    report, every = half_scores(pll, cut["report"]), half_scores(pll, all45)

    def versus(h: dict) -> str:
        text = (
            f"{fmt(h['mean'])} ({'at or above' if h['mean']['mean'] >= h['five'] else 'below'} the 5-gram's "
            f"{100 * h['five']:.1f} on the same paradigms)"
        )
        if h["difference"] is None:  # no random-weight control scored: no difference to state
            return text + ", no random-weight control scored"
        return (
            f"{text}, trained − random-init {fmt(h['difference'], f='+.1f')} "
            f"(the interval {'excludes' if excludes_zero(h['difference']) else 'includes'} 0)"
        )

    seeds = len(report["paired"])
    # run.json's cpu: "NAME; bf16: FLAGS" where the CPU has native bf16
    cpu, _, bf16 = (info.get("cpu") or "CPU").partition("; ")
    features = f"{bf16}; " if bf16 else ""
    text = (
        f"`--recipe hour --time-budget 60m` on the wall clock of the machine its run.json names, {cpu} "
        f"({features}{info.get('threads', '?')} threads), each seed alone: {', '.join(f'{n:,}' for n in steps)} "
        f"steps in its 60 minutes ({len(done)} seeds; {past} of {len(done)} past the unigram plateau on the "
        f"{info['model']['vocab_size']:,}-token BPE). BLiMP by PLL, every pair, {seeds} "
        f"seed{'' if seeds == 1 else 's'} each paired with its own random weights (one comparison a seed): on the "
        f"reporting half "
        f"({len(cut['report'])} paradigms, which chose nothing) {versus(report)}; on all {len(all45)} (the development "
        f"set, which chose the recipe) {versus(every)}."
    )
    if (raw / METHODS["word-l2r"]).is_file():
        l2r = half_scores(read(raw / METHODS["word-l2r"]), cut["report"])
        text += f" By word-l2r on the reporting half: {versus(l2r)}."
    return text


MODELLED = RAW.parents[1] / "hour-recipe" / "raw" / "hour"  # section H's Xeon seeds, counted on the modelled clock


def modelled(raw: Path = MODELLED) -> str:
    """Section H's hour beside the answer, labelled: the steps the Xeon's modelled clock bought and BLiMP by PLL on
    all 45 (the figure the hour was quoted by before section K)."""
    pll = read(raw / "blimp-final-pll.json")
    trained = [m["accuracy"] for m in pll["models"] if m["init"] == "pretrained"]
    steps = sorted({read(run / "run.json")["budget"]["steps"] for run in (raw / "runs").glob("seed-*")})
    return (
        f"Beside it, counted on the same Xeon's modelled clock before the faster step (section H): "
        f"{', '.join(f'{n:,}' for n in steps)} steps and {fmt(mean_ci(trained))} by PLL on all 45 "
        f"({len(trained)} seeds)."
    )
