"""The levers of the equal-time search (issue 45, experiments/hour-levers) are settings that reach the run,
none hand-wired: a shape set over a preset, the masking rate and the 80/10/10 split, the schedule's shape."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from tiny_shards import SPECIAL_IDS, write_tiny_shards

from mapnet_cli.errors import MapnetError
from mapnet_cli.masking.uniform import sequence_keys
from mapnet_cli.model import checkpoint
from mapnet_cli.settings import MaskingSettings, resolve
from mapnet_cli.settings.recipes import FAST_BY_PRESET
from mapnet_cli.train import make_batch, pretrain
from mapnet_cli.train.budget import lr_factor_at
from mapnet_cli.train.optim import lr_factor

V = 64


@pytest.fixture(scope="module")
def shards(tmp_path_factory):
    return write_tiny_shards(tmp_path_factory.mktemp("shards") / "shards")


# ---------------------------------------------------------------- shape
def test_a_shape_set_over_a_preset_keeps_the_presets_recipe_and_trains_that_shape(shards, tmp_path):
    # The search's shape arms are `--preset mini --set model.layers=6 --set model.hidden=128 ...`: the sizes are
    # the ones set, the fast recipe's values stay mini's (a `custom` preset would bring other ones).
    s = resolve(
        None,
        {"model": {"preset": "mini"}},
        [
            "model.layers=3",
            "model.hidden=32",
            "model.heads=2",
            "model.max_position=64",
            "shard.max_seq_len=32",
            "train.batch_size=4",
            "train.steps=2",
            "train.eval_every=0",
            "train.eval_sequences=8",
            "train.short_seq.len=0",
            "train.short_seq.steps=0",
            "optim.warmup.steps=1",
            "logging.progress=false",
        ],
    )
    lr, _, init_std, _ = FAST_BY_PRESET["mini"]
    assert (s.model.preset, s.train.recipe, s.optim.lr, s.model.init_std) == ("mini", "fast", lr, init_std)
    last = pretrain(s, shards, tmp_path / "run", command_line=["mapnet", "pretrain"])
    model = checkpoint.read_config(last)["model"]
    assert (model["layers"], model["hidden"], model["heads"], model["intermediate"]) == (3, 32, 2, 128)


# ---------------------------------------------------------------- masking: rate and the 80/10/10 split
def _shares(masking: MaskingSettings) -> tuple[float, float, float, float]:
    """(masked share of eligible, [MASK] share, random-token share, unchanged share) of a 64 x 128 batch."""
    ids = np.random.default_rng(0).integers(5, V, size=(64, 128)).astype(np.uint16)
    b = make_batch(ids, sequence_keys(0, 3, range(64)), SPECIAL_IDS, V, masking, torch.device("cpu"))
    n = b.mask.sum().item()
    to_mask = ((b.inputs == SPECIAL_IDS["mask"]) & b.mask).sum().item()
    same = ((b.inputs == b.targets) & b.mask).sum().item()
    return n / b.mask.numel(), to_mask / n, (n - to_mask - same) / n, same / n


def test_the_paper_split_is_the_default_and_another_split_reaches_the_masks():
    m = MaskingSettings()
    assert (m.mask_prob, m.replace_mask, m.replace_random) == (0.15, 0.8, 0.1)  # the paper's arm, unchanged
    rate, masked, random, same = _shares(m)
    assert rate == pytest.approx(0.15, abs=0.01) and masked == pytest.approx(0.8, abs=0.02)
    # A random draw from 59 ordinary tokens is the original 1/59 of the time.
    assert random == pytest.approx(0.1 * 58 / 59, abs=0.02) and same == pytest.approx(0.1 + 0.1 / 59, abs=0.02)
    rate, masked, random, same = _shares(MaskingSettings(mask_prob=0.4, replace_mask=1.0, replace_random=0.0))
    assert rate == pytest.approx(0.4, abs=0.01) and (masked, random, same) == (1.0, 0.0, 0.0)
    rate, masked, random, same = _shares(MaskingSettings(replace_mask=0.5, replace_random=0.3))
    assert masked == pytest.approx(0.5, abs=0.03) and random == pytest.approx(0.3 * 58 / 59, abs=0.03)


@pytest.mark.parametrize(
    "sets, words",
    [
        (["model.hidden=192", "model.heads=5"], "model.hidden (192) must be divisible by model.heads (5)"),
        (["masking.replace_mask=0.9", "masking.replace_random=0.2"], "sum to <= 1"),
        (["masking.replace_mask=-0.1"], "must be >= 0"),
        (["masking.mask_prob=1.0"], "masking.mask_prob must be in (0, 1)"),
    ],
)
def test_a_shape_split_or_rate_out_of_range_is_refused(sets, words):
    with pytest.raises(MapnetError) as err:
        resolve(None, {"model": {"preset": "mini"}}, sets)
    assert words in str(err.value)


# ---------------------------------------------------------------- the schedule's shape
def test_one_cycle_is_linear_to_zero_with_half_the_run_warming_up():
    # Cramming's one-cycle: up to the peak at half the budget, down to zero at its end. With a budget it is
    # optim.warmup.fraction = 0.5 (the default shape, linear decay to zero); by steps, warm-up = half the steps.
    for p, want in [(0.0, 0.0), (0.25, 0.5), (0.5, 1.0), (0.75, 0.5), (1.0, 0.0)]:
        assert lr_factor_at(p, 0.5) == pytest.approx(want)
    assert [lr_factor(k, 50, 100) for k in (24, 49, 50, 75, 100)] == pytest.approx([0.5, 1.0, 1.0, 0.5, 0.0])
    # Linear-to-zero after a short warm-up (the baseline) spends more of the run near the peak.
    assert lr_factor_at(0.25, 0.05) == pytest.approx(0.75 / 0.95)
    assert (
        resolve(
            None, None, ["train.time_budget=20m", "optim.warmup.steps=0", "optim.warmup.fraction=0.5"]
        ).optim.warmup.fraction
        == 0.5
    )
