"""The steps and tokens 20 minutes bought each arm of experiments/hour-levers (section G), from the kept runs.

- `hour-levers-steps-bought`: series 3 (the modelled clock at the kept EPYC costs, `results/series-3/ARM.json`),
  one row per arm, the arms by steps bought: its shape (`model.layers` / `model.hidden` / `model.heads`, and the
  block where it is not BERT's), the steps its runs bought (`runs[].budget.steps`; one figure where the seeds agree,
  as they do on a modelled clock), that over the baseline's steps, the batch × its sequence length (`train.batch_size`,
  `shard.max_seq_len`; the 16-token pieces of the first 23% keep the tokens of a step; the product is not printed,
  so that it cannot meet the page's vocabulary sizes by chance) and the tokens trained in
  the budget, in millions. The tokens are the sequences of every step × the sequence length; the sequences are
  counted by replaying the modelled clock from the run's own record (each step counts its full or short cost, ×
  b / B on a batch ramp, `mapnet_cli/train/budget.py` and `train/batch_ramp.py`), and the replay must end at the
  recorded steps and counted seconds (`budget.steps`, `budget.spent_seconds`) or the cell reads "–". Only
  `batch-ramp`'s steps differ in size; every other arm's tokens are steps × batch × length.

The runs are read through levers_table's loader, as the page's other tables read them.
"""

from __future__ import annotations

from compare_tables import markdown
from levers_table import KEPT, load

from mapnet_cli.train.batch_ramp import BatchRamp
from mapnet_cli.train.budget import Budget

SERIES = "series-3"


def _replay(run: dict) -> int | None:
    """Sequences trained by a modelled-clock budget run, replayed from its record with the loop's own clock
    (Budget.counted, Budget.short_seq_over, BatchRamp.size); None unless the replay ends at the recorded steps and
    counted seconds. The kept runs predate the settings' [train.batch_ramp] table, so the ramp is read from its
    flat keys."""
    budget, t = run["budget"], run["settings"]["train"]
    if budget.get("clock") != "modelled":
        return None
    clock = Budget(
        budget["seconds"],
        budget["time_budget"],
        budget["warmup_fraction"],
        "linear",  # the schedule does not move the clock
        budget["short_seq_fraction"],
        budget["step_seconds"],
        budget["short_step_seconds"],
    )
    big, start = t["batch_size"], t.get("batch_ramp_start", 0)
    ramp = BatchRamp(start, big, seconds=t.get("batch_ramp_fraction", 0.0) * clock.seconds) if start else None
    spent, steps, sequences = 0.0, 0, 0
    while not clock.spent(spent):
        b = ramp.size(steps, spent) if ramp else big
        spent += clock.counted(0.0, short=not clock.short_seq_over(spent), share=b / big)
        steps, sequences = steps + 1, sequences + b
    if steps != budget["steps"] or abs(round(spent, 3) - budget["spent_seconds"]) > 1e-6:
        return None
    return sequences


def _shape(run: dict) -> str:
    m = run["settings"]["model"]
    block = "" if m.get("block", "bert") == "bert" else f", {m['block']} block"
    return f"L{m['layers']}/H{m['hidden']}/A{m['heads']}{block}"


def _one(values: list, f: str = ",") -> str:
    lo, hi = min(values), max(values)
    return format(lo, f) if lo == hi else f"{lo:{f}}–{hi:{f}}"


def steps_bought() -> str:
    docs = load(KEPT / SERIES)
    base = docs["baseline"]["runs"][0]["budget"]["steps"]
    rows = []
    for name, doc in sorted(docs.items(), key=lambda kv: (-kv[1]["runs"][0]["budget"]["steps"], kv[0])):
        runs = doc["runs"]
        steps = [r["budget"]["steps"] for r in runs]
        s = runs[0]["settings"]
        length = s["shard"]["max_seq_len"]
        seqs = [_replay(r) for r in runs]
        tokens = "–" if None in seqs else _one([q * length / 1e6 for q in seqs], ".1f")
        rows.append(
            [
                name,
                _shape(runs[0]),
                _one(steps),
                f"{min(steps) / base:.2f}×" if len(set(steps)) == 1 else "–",
                f"{s['train']['batch_size']} × {length}",
                tokens,
            ]
        )
    caption = (
        f"Series 3 (`results/{SERIES}/`: the modelled clock at the kept EPYC costs, 20 minutes of counted training "
        "time, seeds 0 and 1 buying the same steps): the steps each arm bought, over the baseline's, and the tokens "
        "they trained on (sequences × length, the sequences counted by replaying each run's modelled clock from its "
        "record, which ends at its recorded steps)."
    )
    headings = ["arm", "shape", "steps bought", "× baseline's steps", "batch × length", "tokens trained (M)"]
    return caption + "\n\n" + markdown(headings, rows)


TABLES = {"hour-levers-steps-bought": steps_bought}
