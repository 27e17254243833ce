"""Training recipes: named layers of optimisation and architecture settings, resolved like model presets.

    mapnet pretrain shards/ --out runs/tiny --preset tiny                  # tiny ... small: the `fast` recipe
    mapnet pretrain shards/ --out runs/tiny --preset tiny --recipe paper   # the paper's settings, exactly
    mapnet config show --preset mini --recipe fast                         # what a recipe sets

Resolution: defaults < model preset < recipe < fine-tuning protocol < config files < flags < --set, so a recipe is a
starting point that any key can still change. Without `--recipe` (`train.recipe`) a model preset brings its own:
`fast` for tiny, mini and small, `paper` for medium and base. A run that continues an earlier one (`--resume`,
`--init-from`) takes no recipe unless one is named, and never a recipe's architecture (`model.norm`): the weights
decide that; a recipe's shape (`SHAPES`) is trained when no preset is named. `paper` is the MAP-Net paper's
pretraining table (the settings defaults); `fast` leaves the MLM unigram plateau early on a small budget (measured
on real text on a 2-core CPU, RESULTS section 0); `hour` is the best encoder a CPU hour buys (issue 45: `fast` with
the equal-time search's levers, its shape, `MEASURED_ON`). What each sets and why: docs/internals.md#settingsrecipespy
and docs/pretraining.md#presets-recipes-and-the-unigram-plateau.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..errors import MapnetError

# Per model preset: (peak LR, warm-up steps, init std, steps on 16-token pieces). tiny and mini are
# measured (RESULTS 0); small, medium and base extrapolate them (LR and init toward BERT's as width grows).
FAST_BY_PRESET: dict[str, tuple[float, int, float, int]] = {
    "tiny": (2e-3, 300, 0.05, 500),
    "mini": (2e-3, 300, 0.05, 500),
    "small": (7e-4, 500, 0.03, 1000),
    "medium": (5e-4, 1000, 0.02, 2000),
    "base": (3e-4, 2000, 0.02, 4000),
    "custom": (5e-4, 1000, 0.02, 2000),
}
SHORT_SEQ_LEN = 16


# Under a train.time_budget the warm-ups are fractions of the budget (train/budget.py), not steps. `fast`: its
# `mini` warm-ups (300 and 500 steps) over the ~2,140 steps a 20-minute `mini` run buys on 2 CPU cores
# (experiments/hour-levers, whose baseline this is); not measured as the best fractions — the lever search
# measures the schedule. `paper`: BERT's 10k warm-up steps of 1M.
FAST_BUDGET_FRACTIONS = (0.14, 0.23)  # (optim.warmup.fraction, train.short_seq.fraction)
PAPER_BUDGET_WARMUP_FRACTION = 0.01


def _paper(preset: str, budgeted: bool) -> dict[str, dict[str, Any]]:
    # the settings defaults are the paper's; a budget replaces its warm-up steps by their share of the run
    return {"optim": {"warmup": {"steps": 0, "fraction": PAPER_BUDGET_WARMUP_FRACTION}}} if budgeted else {}


def _fast(preset: str, budgeted: bool) -> dict[str, dict[str, Any]]:
    lr, warmup, init_std, short_steps = FAST_BY_PRESET.get(preset, FAST_BY_PRESET["custom"])
    # The warm-ups in the unit the run counts: steps, or under a budget its shares of the time.
    warm, short = (
        ({"steps": 0, "fraction": FAST_BUDGET_FRACTIONS[0]}, {"steps": 0, "fraction": FAST_BUDGET_FRACTIONS[1]})
        if budgeted
        else ({"steps": warmup}, {"steps": short_steps})
    )
    optim = {"lr": lr, "warmup": warm, "eps": 1e-12, "grad_clip": 1.0}
    train = {"short_seq": {"len": SHORT_SEQ_LEN, **short}}
    return {
        "model": {"norm": "pre", "dropout": 0.0, "attention_dropout": 0.0, "init_std": init_std},
        "optim": optim,
        "train": train,
    }


# `hour`: `fast` with the levers that joined by section G's rule at equal (modelled) time, 2 seeds each, then won
# together against the best single lever (`tiny` alone) on BLiMP, 59.0 / 58.6 against 57.1 / 58.1
# (experiments/hour-levers, series 4): CPU bf16 (where native), the modern block (GeGLU, no biases, rotary positions),
# 30% masking,
# and 64 sequences of 64 tokens a step (the same tokens as 32 x 128: `seq-64`). It was measured on 64-token shards of
# a 16,384-token BPE (`vocab-16k`), which no setting of a run can make: `HOUR_DATA` says so, and a run refuses shards of
# another sequence length (the batch is sized for it). The 20-minute search's schedule fractions are `fast`'s.
# bf16 where the hardware computes it (section G's machines had it: an AMD EPYC with AVX512-BF16, then an Intel Xeon
# with AMX): on a CPU that emulates it a step cost 18x its fp32 step (an AMD EPYC without bf16 instructions,
# experiments/hour-masking), so there the recipe trains in fp32. On a CPU its training steps take SDPA's reference
# kernel (`math-cpu`): the same function, and on the Xeon 0.90x the time of PyTorch's pick a whole step and 0.73x a
# 16-token one, in lock-step, every round faster (experiments/hour-wall, its rule written before the measurement).
HOUR_LEVERS: dict[str, dict[str, Any]] = {
    "model": {"block": "modern"},
    "train": {"precision": "bf16-native", "batch_size": 64, "attention_kernel": "math-cpu"},
    "masking": {"mask_prob": 0.3},
}
HOUR_DATA = {"max_seq_len": 64, "vocab_size": 16384}


def _hour(preset: str, budgeted: bool) -> dict[str, dict[str, Any]]:
    layer = _fast(preset, budgeted)
    return {sec: {**layer.get(sec, {}), **HOUR_LEVERS.get(sec, {})} for sec in dict.fromkeys([*layer, *HOUR_LEVERS])}


RECIPES = {"paper": _paper, "fast": _fast, "hour": _hour}
# The data a recipe was measured on, which a run's settings cannot make (`mapnet preprocess --vocab-size`, `mapnet
# shard --max-seq-len`): a run on shards of another sequence length is refused (train/inputs.py).
MEASURED_ON: dict[str, dict[str, int]] = {"hour": HOUR_DATA}


@dataclass(frozen=True)
class Shape:
    """The encoder a recipe trains when no model preset is named: `preset`'s, with `sizes` (model settings) over
    it. The recipe's per-preset values (the `fast` LR, warm-ups, init) are `preset`'s either way: the recipe was
    measured with them. With sizes, the run records model.preset `custom` (its sizes are not the preset's)."""

    preset: str
    sizes: tuple[tuple[str, int], ...] = ()

    def model_values(self) -> dict[str, Any]:
        return {**dict(self.sizes), "preset": "custom" if self.sizes else self.preset}


# recipe -> its shape. `hour`: L4/H192 (`mini`'s depth at width 192, 3 heads of 64; the modern block's feed-forward
# 512). Section G's amendment chose it at 60 minutes over `tiny`, the 20-minute search's best shape, both with the
# levers above, 2 seeds each: BLiMP 62.5 / 62.1 against 60.3 / 62.0 (experiments/hour-levers/README.md, "The amendment's
# 60-minute runs").
# `tiny`'s and `mini`'s `fast` values are the same, so the runs that chose it trained exactly this.
SHAPES: dict[str, Shape] = {"hour": Shape("mini", (("layers", 4), ("hidden", 192), ("heads", 3)))}
SUB_BASE = ("tiny", "mini", "small")
ARCHITECTURE = {"model": ("norm",)}  # what a recipe never changes over existing weights


def default_recipe(preset: str | None) -> str:
    """The recipe a model preset brings when none is named."""
    return "fast" if preset in SUB_BASE else "paper"


def recipe_layer(
    name: str, preset: str | None, keep_architecture: bool = False, budgeted: bool = False
) -> dict[str, dict[str, Any]]:
    """The settings recipe `name` sets for model preset `preset`, as {section: {key: value}} (and
    train.recipe, so a run records which one it got). `keep_architecture`: leave model.norm out.
    `budgeted`: the run has a train.time_budget, so the recipe's warm-ups come as fractions of it."""
    if name not in RECIPES:
        raise MapnetError(f"unknown recipe {name!r} (choose from {', '.join(RECIPES)})")
    layer = RECIPES[name](preset or "custom", budgeted)
    if keep_architecture:
        layer = {
            sec: {k: v for k, v in values.items() if k not in ARCHITECTURE.get(sec, ())}
            for sec, values in layer.items()
        }
    train = dict(layer.get("train", {}))
    train["recipe"] = name
    return {**layer, "train": train}


__all__ = [
    "RECIPES",
    "FAST_BY_PRESET",
    "HOUR_DATA",
    "HOUR_LEVERS",
    "MEASURED_ON",
    "SHAPES",
    "SUB_BASE",
    "Shape",
    "default_recipe",
    "recipe_layer",
]
