"""Proposal targets beyond eq. 10: the gradient-norm proxy, the centred log regression, the learnability
reference; HT training end to end (exact resume, where the mass goes on the synthetic corpus)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file
from tiny_shards import write_tiny_shards

from mapnet_cli import distributed
from mapnet_cli.masking.mapnet.targets import TokenLossReference, gradnorm_proxy, regression_objective
from mapnet_cli.settings import resolve
from mapnet_cli.train import pretrain

BASE = [
    "train.recipe=paper",
    "model.max_position=64",
    "shard.max_seq_len=64",
    "train.batch_size=8",
    "train.eval_sequences=8",
    "train.eval_every=0",
    "train.checkpoint_every=0",
    "optim.warmup.steps=3",
    "optim.lr=3e-3",
    "logging.log_every=2",
    "logging.progress=false",
    "train.device=cpu",
]
HT = [
    "masking.strategy=mapnet",
    "masking.mapnet.importance=ht",
    "masking.mapnet.mix_uniform=0.5",
    "masking.mapnet.explore_start=0",
    "masking.mapnet.explore_end=0",
]


def rows(run: Path, kind: str = "train") -> list[dict]:
    return [r for r in map(json.loads, (run / "metrics.jsonl").read_text().splitlines()) if r["kind"] == kind]


def test_gradnorm_proxy_is_the_norm_of_the_cross_entropy_gradient_at_the_logits():
    g = torch.Generator().manual_seed(0)
    logits = (torch.randn(6, 30, generator=g) * 3).requires_grad_()
    labels = torch.randint(0, 30, (6,), generator=g)
    torch.nn.functional.cross_entropy(logits, labels, reduction="sum").backward()
    assert torch.allclose(gradnorm_proxy(logits, labels), logits.grad.norm(dim=1), atol=1e-6)
    assert float(gradnorm_proxy(logits, labels).max()) <= 2**0.5


def test_regression_is_zero_exactly_when_log_p_matches_the_target_up_to_a_constant():
    chosen = torch.tensor([[True, True, False, True], [True, False, False, False]])
    log_t = torch.tensor([[0.1, -1.0, 5.0, 2.0], [0.0, 0.0, 0.0, 0.0]])
    matched = (log_t + 3.7).requires_grad_()  # a per-sequence constant does not matter (softmax)
    terms = regression_objective(matched, chosen, log_t)
    assert terms.tolist() == pytest.approx([0.0, 0.0])  # row 1: one position fixes nothing
    off = torch.zeros(2, 4, requires_grad=True)
    regression_objective(off, chosen, log_t).sum().backward()
    # Descending the gradient raises log p where the target is above the chosen positions' mean.
    assert off.grad[0, 3] < 0 < off.grad[0, 1] and off.grad[0, 2] == 0 and off.grad[1].abs().sum() == 0


def test_reference_tracks_a_slow_and_a_fast_average_and_progress_is_their_gap():
    ref = TokenLossReference(8, decay=0.9)
    fast = 0.9**20
    info = distributed.DistInfo()
    labels = torch.tensor([5, 5, 6])
    assert ref.progress(labels).tolist() == [0.0, 0.0, 0.0]  # nothing seen yet
    ref.observe(labels, torch.tensor([1.0, 3.0, 4.0]))
    ref.update(info)  # the first time a type is seen, both averages start at its batch mean
    assert ref.mean[5].item() == pytest.approx(2.0) and ref.fast[5].item() == pytest.approx(2.0)
    assert ref.mean[6].item() == pytest.approx(4.0)
    ref.observe(torch.tensor([5, 5]), torch.tensor([0.5, 0.5]))  # type 5's loss falls; type 6 is not seen
    ref.update(info)
    assert ref.mean[5].item() == pytest.approx(0.9 * 2.0 + 0.1 * 0.5)
    assert ref.fast[5].item() == pytest.approx(fast * 2.0 + (1 - fast) * 0.5)
    assert ref.mean[6].item() == pytest.approx(4.0) and ref.fast[6].item() == pytest.approx(4.0)
    gap = (0.9 * 2.0 + 0.1 * 0.5) - (fast * 2.0 + (1 - fast) * 0.5)
    assert ref.progress(torch.tensor([5, 6, 7])).tolist() == pytest.approx([gap, 0.0, 0.0])
    ref.observe(torch.tensor([6]), torch.tensor([9.0]))  # a rising loss is not progress
    ref.update(info)
    assert ref.progress(torch.tensor([6])).tolist() == [0.0]


@pytest.mark.slow
def test_ht_learnability_resume_is_bitwise_identical_including_the_reference(tmp_path):
    shards = write_tiny_shards(tmp_path / "shards", train=64, valid=8, seq_len=64)
    s = resolve(
        None,
        {"model": {"preset": "tiny"}},
        [
            *BASE,
            *HT,
            "masking.mapnet.target=learnability",
            "masking.mapnet.lr=1e-2",
            "train.steps=10",
            "logging.log_every=5",
        ],
    )
    straight = pretrain(s, shards, tmp_path / "a")
    pretrain(s, shards, tmp_path / "b", stop_at=5)
    resumed = pretrain(s, shards, tmp_path / "b", resume=True)
    wa, wb = load_file(str(straight / "model.safetensors")), load_file(str(resumed / "model.safetensors"))
    assert wa.keys() == wb.keys() and "mapnet_reference.mean" in wa
    for k in wa:
        assert torch.equal(wa[k], wb[k]), k
    assert wa["mapnet_reference.seen"].sum() > 0
    last = rows(tmp_path / "a")[-1]
    assert 0 < last["mapnet/token_ess"] <= 1 and last["mapnet/max_token_weight"] <= 2.0 + 1e-4  # 1 / alpha


def _mass_run(shards: Path, out: Path, target: str) -> list[dict]:
    s = resolve(
        None,
        {"model": {"preset": "tiny"}},
        [
            *BASE,
            *HT,
            f"masking.mapnet.target={target}",
            "masking.mapnet.lr=1e-2",
            "train.steps=60",
            "train.batch_size=16",
            "optim.lr=1e-3",
            "optim.warmup.steps=5",
            "logging.log_every=10",
        ],
    )
    pretrain(s, shards, out)
    return rows(out)


@pytest.mark.slow
def test_learnability_moves_mass_off_noise_tokens_and_loss_moves_it_onto_them(synthetic_shards, tmp_path):
    """Noise words carry no signal (loss >= ln 128 for any model): eq. 10 rewards their high loss, the
    learnability target sees that their loss stops falling."""
    mass, share = "mapnet/mass/noise", "mapnet/share/noise"
    learn = _mass_run(synthetic_shards, tmp_path / "learn", "learnability")[-1]
    loss = _mass_run(synthetic_shards, tmp_path / "loss", "loss")[-1]
    assert learn[mass] < learn[share]
    assert loss[mass] > loss[share]
    assert learn[mass] < 0.5 * loss[mass]


@pytest.mark.slow
def test_gradnorm_moves_mass_off_predictable_tokens_onto_large_gradients(tmp_path):
    """tiny shards: each sequence repeats one theme token, 1 in 5 positions is random noise. Once the
    encoder predicts the theme (softmax ~ onehot there), the gradient-norm proxy is small at theme
    positions and ~1 at noise positions, so the regressed proposal moves mass off the theme."""
    from mapnet_cli.evaluation.variance.target import load_target
    from mapnet_cli.masking.uniform import eligible_positions

    shards = write_tiny_shards(tmp_path / "shards", train=256, valid=32, seq_len=64)
    s = resolve(
        None,
        {"model": {"preset": "tiny"}},
        [
            *BASE,
            *HT,
            "masking.mapnet.target=gradnorm",
            "masking.mapnet.lr=1e-2",
            "train.steps=200",
            "train.batch_size=16",
            "logging.log_every=50",
        ],
    )
    target = load_target(pretrain(s, shards, tmp_path / "run"), shards)
    ids = torch.from_numpy(target.reader.take(list(range(len(target.reader)))).astype("int64"))
    eligible = eligible_positions(ids, target.reader.special_ids)
    with torch.no_grad():
        p = target.proposal.eval()(ids, None, eligible).exp()
    theme = (ids == torch.mode(ids[:, 1:-1], dim=1).values[:, None]) & eligible
    mass, share = float(p[theme].sum() / len(ids)), float(theme.sum() / eligible.sum())
    # Measured (seed 0): mass 0.50 against a share of 0.80.
    assert mass < 0.8 * share


def test_resume_refuses_a_changed_map_lr_or_proposal_target(tmp_path):
    from typer.testing import CliRunner

    from mapnet_cli.cli import app
    from mapnet_cli.errors import MapnetError

    shards = write_tiny_shards(tmp_path / "shards", train=32, valid=8, seq_len=64)
    base = [
        "pretrain",
        str(shards),
        "--out",
        str(tmp_path / "run"),
        "--preset",
        "tiny",
        "--recipe",
        "paper",
        "--steps",
        "2",
        *[a for kv in [*BASE, *HT, "masking.mapnet.target=gradnorm"] for a in ("--set", kv)],
    ]
    runner = CliRunner()
    assert runner.invoke(app, base).exit_code == 0
    for change, name in (
        ("masking.mapnet.lr=1e-2", "masking.mapnet.lr"),
        ("masking.mapnet.target=loss", "masking.mapnet.target"),
    ):
        result = runner.invoke(app, [*base, "--resume", "--steps", "4", "--set", change])
        assert isinstance(result.exception, MapnetError) and name in str(result.exception), result.output
    # A config.json without what every MAP-Net checkpoint records is refused in one line, not given defaults.
    import json

    from mapnet_cli.model import checkpoint

    ckpt = checkpoint.latest_checkpoint(tmp_path / "run")
    for key, message in (
        ("map_lr", "lacks map_lr, which every MAP-Net checkpoint records"),
        ("masking", "does not say which masking it was trained with"),
    ):
        meta = json.loads((ckpt / "config.json").read_text())
        del meta[key]
        (ckpt / "config.json").write_text(json.dumps(meta))
        checkpoint.write_manifest(ckpt)  # as if written so: past the hash check
        result = runner.invoke(app, [*base, "--resume", "--steps", "4"])
        assert isinstance(result.exception, MapnetError) and message in str(result.exception), result.output
        assert "\n" not in str(result.exception)
