"""Pretraining with `--masking mapnet`: CLI run and metrics, exact resume, 1 vs 2 processes, export, learning signal."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
import torch
from safetensors import safe_open
from safetensors.torch import load_file
from tiny_shards import write_tiny_shards
from typer.testing import CliRunner

from mapnet_cli.cli import app
from mapnet_cli.errors import MapnetError
from mapnet_cli.masking.mapnet import summary_keys
from mapnet_cli.model import checkpoint
from mapnet_cli.settings import resolve
from mapnet_cli.train import pretrain

# Tiny encoder (2 layers, H=128) and MAP-Net (2 layers, H=64), 64-token sequences.
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
ALWAYS = ["p_uniform", "uniform_fraction", "entropy", "ess", "weight", "map_objective"]  # defined at every step


def mapnet_settings(*extra: str):
    return resolve(None, {"model": {"preset": "tiny"}}, [*BASE, "masking.strategy=mapnet", *extra])


def rows(run: Path, kind: str = "train") -> list[dict]:
    return [r for r in map(json.loads, (run / "metrics.jsonl").read_text().splitlines()) if r["kind"] == kind]


@pytest.fixture(scope="module")
def tiny_shards(tmp_path_factory) -> Path:
    return write_tiny_shards(tmp_path_factory.mktemp("tiny") / "shards", train=64, valid=8, seq_len=64)


@pytest.fixture(scope="module")
def cli_run(synthetic_shards, tmp_path_factory) -> tuple[Path, str]:
    out = tmp_path_factory.mktemp("cli") / "run"
    args = [
        "pretrain",
        str(synthetic_shards),
        "--out",
        str(out),
        "--preset",
        "tiny",
        "--recipe",
        "paper",
        "--steps",
        "8",
        "--masking",
        "mapnet",
        "--set",
        "masking.mapnet.importance=unclipped",
        *[a for kv in BASE for a in ("--set", kv)],
        "--set",
        "masking.mapnet.explore_steps=4",
        "--set",
        "train.eval_every=4",
    ]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    return out, result.output


# ---------------------------------------------------------------- (a) the CLI run and its metrics
def test_cli_mapnet_run_logs_every_mapnet_key_at_every_log_step(cli_run, synthetic_shards):
    out, output = cli_run
    assert "done:" in output
    settings = (out / "settings.toml").read_text()
    assert 'strategy = "mapnet"' in settings and 'importance = "unclipped"' in settings
    kinds = sorted(json.loads((synthetic_shards / "token_kinds.json").read_text()))
    assert "determined" in kinds
    keys = summary_keys(kinds)
    assert {"mapnet/mass/determined", "mapnet/share/determined", "mapnet/log_ratio"} <= set(keys)
    always = [f"mapnet/{n}" for n in ALWAYS] + [k for k in keys if k.startswith(("mapnet/mass/", "mapnet/share/"))]
    train = rows(out)
    assert [r["step"] for r in train] == [2, 4, 6, 8]
    for r in train:
        assert set(keys) <= set(r), sorted(set(keys) - set(r))
        assert all(isinstance(r[k], float) for k in always), r
        assert all(r[k] is None or isinstance(r[k], float) for k in keys)  # None: nothing to average this step
        assert 0 < r["mapnet/entropy"] <= 1 + 1e-9 and 0 < r["mapnet/ess"] <= 1 + 1e-9
    # The schedule: 100% uniform at step 0 falling to 33% at step 4 (p of the logged step, 0-based = step - 1).
    assert [round(r["mapnet/p_uniform"], 4) for r in train] == [0.8325, 0.4975, 0.33, 0.33]
    assert train[-1]["mapnet/log_ratio"] is not None and train[-1]["mapnet/loss_map_tokens"] is not None
    assert [r["step"] for r in rows(out, "eval")] == [0, 4, 8]  # eval still runs on its fixed uniform masks


def test_mapnet_resume_refuses_a_changed_strategy_or_proposal(cli_run, synthetic_shards):
    out, _ = cli_run
    runner = CliRunner()
    base = ["pretrain", str(synthetic_shards), "--out", str(out), "--resume", "--steps", "10"]
    strategy = runner.invoke(app, base + ["--masking", "uniform"])
    assert isinstance(strategy.exception, MapnetError) and "cannot change masking.strategy" in str(strategy.exception)
    size = runner.invoke(app, base + ["--set", "masking.mapnet.layers=1"])
    assert isinstance(size.exception, MapnetError) and "cannot change masking.mapnet.layers" in str(size.exception)
    assert "(the run has 0, asked 1)" in str(size.exception) and "map_dropout" not in str(size.exception)
    drop = runner.invoke(app, base + ["--set", "masking.mapnet.dropout=0.1"])
    assert isinstance(drop.exception, MapnetError) and "cannot change masking.mapnet.dropout" in str(drop.exception)
    assert "(the run has 0.0, asked 0.1)" in str(drop.exception) and "\n" not in str(drop.exception)
    # Past the CLI (compare's resumes, a library caller), the run itself still refuses another MAP-Net by name.
    changed = resolve(out / "settings.toml", None, ["masking.mapnet.dropout=0.1"])
    with pytest.raises(MapnetError, match=r"has a different MAP-Net .*'dropout': \(0\.0, 0\.1\)"):
        pretrain(changed, synthetic_shards, out, resume=True)
    bad = runner.invoke(app, ["pretrain", str(synthetic_shards), "--out", str(out), "--masking", "random"])
    assert bad.exit_code != 0 and "random" in bad.output  # typed option: refused before any work
    assert checkpoint.latest_checkpoint(out).name == "step-00000008"  # nothing was trained or written


# ---------------------------------------------------------------- (b) exact resume, both networks
@pytest.mark.slow
def test_mapnet_resume_is_bitwise_identical_for_both_networks(tiny_shards, tmp_path):
    s = mapnet_settings("train.steps=12", "logging.log_every=3")
    straight = pretrain(s, tiny_shards, tmp_path / "a")
    assert pretrain(s, tiny_shards, tmp_path / "b", stop_at=6).name == "step-00000006"
    resumed = pretrain(s, tiny_shards, tmp_path / "b", resume=True)
    wa, wb = load_file(str(straight / "model.safetensors")), load_file(str(resumed / "model.safetensors"))
    assert wa.keys() == wb.keys()
    assert any(k.startswith("mapnet.blocks.") for k in wa) and "encoder.tok_embeddings.weight" in wa
    for k in wa:
        assert torch.equal(wa[k], wb[k]), k  # bitwise, encoder and MAP-Net
    ra, rb = rows(tmp_path / "a"), rows(tmp_path / "b")
    drop = ("tokens_per_s", "memory_bytes", "elapsed")
    assert [{k: v for k, v in r.items() if k not in drop} for r in ra] == [
        {k: v for k, v in r.items() if k not in drop} for r in rb
    ]
    assert checkpoint.read_config(resumed)["mapnet"]["hidden"] == 64  # half the encoder's width
    # Training really moved MAP-Net off its (uniform) initialisation.
    assert wa["mapnet.score.weight"].abs().sum() > 0


# ---------------------------------------------------------------- (c) 1 process x 8 vs 2 processes x 4
TWO_PROCESS_RUNS = {
    "mapnet": [
        *BASE,
        "model.dropout=0.0",
        "model.attention_dropout=0.0",
        "train.steps=6",
        "logging.log_every=1",
        "masking.strategy=mapnet",
        "masking.mapnet.explore_steps=3",
    ],
    # `masking.mapnet.train_every`: the frozen steps' zero gradients keep DDP's reducer whole, and every rank drops
    # them alike, so 2 x 4 still equals 1 x 8.
    "every-other-step": [
        *BASE,
        "model.dropout=0.0",
        "model.attention_dropout=0.0",
        "train.steps=5",
        "logging.log_every=1",
        "masking.strategy=mapnet",
        "masking.mapnet.explore_steps=2",
        "masking.mapnet.train_every=2",
    ],
}


# Trained by 2 gloo processes in the session's one torchrun job (tests/gloo_runs.py, conftest.gloo_runs).


@pytest.mark.slow
@pytest.mark.distributed
def test_two_gloo_processes_match_one_process_with_mapnet(gloo_runs, tmp_path):
    two, sets = gloo_runs["mapnet-mapnet"], TWO_PROCESS_RUNS["mapnet"]
    pretrain(resolve(None, {"model": {"preset": "tiny"}}, sets), gloo_runs["shards-64"], tmp_path / "one")

    a, b = rows(tmp_path / "one"), rows(two)
    assert [r["step"] for r in a] == [r["step"] for r in b] == list(range(1, 7))
    assert any(r["mapnet/uniform_fraction"] < 1 for r in a)  # some sequences were masked by MAP-Net
    for ra, rb in zip(a, b):
        assert rb["loss"] == pytest.approx(ra["loss"], rel=1e-5, abs=1e-6)
        assert rb["masked_tokens"] == ra["masked_tokens"] and rb["tokens"] == ra["tokens"]
        assert rb["grad_norm"] == pytest.approx(ra["grad_norm"], rel=1e-4)
        for key in (k for k in ra if k.startswith("mapnet/")):
            if ra[key] is None:
                assert rb[key] is None, key
            else:
                # abs: map_objective is a baseline-centred sum that cancels to ~1e-3 from O(1) terms,
                # each carrying the float32 rounding of a 4-row vs an 8-row forward pass.
                assert rb[key] == pytest.approx(ra[key], rel=1e-4, abs=1e-4), key
    wa = load_file(str(checkpoint.latest_checkpoint(tmp_path / "one") / "model.safetensors"))
    wb = load_file(str(checkpoint.latest_checkpoint(two) / "model.safetensors"))
    assert wa.keys() == wb.keys() and any(k.startswith("mapnet.") for k in wa)
    for k in wa:
        torch.testing.assert_close(wb[k], wa[k], atol=2e-5, rtol=1e-4, msg=k)


@pytest.mark.slow
@pytest.mark.distributed
def test_two_gloo_processes_match_one_process_when_mapnet_learns_every_other_step(gloo_runs, tmp_path):
    two, sets = gloo_runs["mapnet-every-other-step"], TWO_PROCESS_RUNS["every-other-step"]
    pretrain(resolve(None, {"model": {"preset": "tiny"}}, sets), gloo_runs["shards-64"], tmp_path / "one")
    a, b = rows(tmp_path / "one"), rows(two)
    assert [r["step"] for r in a] == [r["step"] for r in b] == list(range(1, 6))
    for ra, rb in zip(a, b):
        assert rb["loss"] == pytest.approx(ra["loss"], rel=1e-5, abs=1e-6)
        assert rb["grad_norm"] == pytest.approx(ra["grad_norm"], rel=1e-4)
    wa = load_file(str(checkpoint.latest_checkpoint(tmp_path / "one") / "model.safetensors"))
    wb = load_file(str(checkpoint.latest_checkpoint(two) / "model.safetensors"))
    for k in wa:
        torch.testing.assert_close(wb[k], wa[k], atol=2e-5, rtol=1e-4, msg=k)


def test_proposal_learns_only_on_every_kth_step_and_draws_the_same_masks(tiny_shards, tmp_path):
    from mapnet_cli.masking.mapnet import ProposalConfig, ProposalNetwork, draw_masks
    from mapnet_cli.model.bert import BertConfig, BertForMLM

    s = mapnet_settings(
        "train.steps=4",
        "train.checkpoint_every=1",
        "train.keep_last=10",
        "masking.mapnet.explore_steps=2",
        "masking.mapnet.train_every=3",
        "model.dropout=0.0",
        "model.attention_dropout=0.0",
    )
    pretrain(s, tiny_shards, tmp_path / "run")
    ckpts = sorted((tmp_path / "run" / "checkpoints").glob("step-*"))
    w = [load_file(str(c / "model.safetensors")) for c in ckpts]  # after steps 1..4 = 0-based steps 0..3
    assert len(w) == 4
    changed = lambda a, b, prefix: any(not torch.equal(a[k], b[k]) for k in a if k.startswith(prefix))
    # 0-based steps 1 and 2 are frozen (1 % 3, 2 % 3 != 0): MAP-Net's weights stay; step 3 learns again.
    assert not changed(w[0], w[1], "mapnet.") and not changed(w[1], w[2], "mapnet.")
    assert changed(w[2], w[3], "mapnet.")
    # The encoder learns on every step, frozen or not.
    assert all(changed(w[i], w[i + 1], "encoder.blocks.") for i in range(3))

    # A frozen step draws exactly the masks a learning step draws from the same weights, with no graph.
    torch.manual_seed(0)
    model = BertForMLM(BertConfig(vocab_size=60, hidden=32, layers=1, heads=2, intermediate=64, max_position=16))
    prop = ProposalNetwork(
        ProposalConfig.from_settings(s.model.__class__(hidden=32, heads=2, layers=1, max_position=16), s.masking),
        model.encoder.tok_embeddings,
    )
    torch.nn.init.normal_(prop.score.weight, std=1.0)  # a non-uniform proposal
    ids = torch.randint(5, 60, (4, 16))
    special = {"pad": 0, "cls": 1, "sep": 2, "mask": 3, "unk": 4}
    kw = dict(special_ids=special, vocab_size=60, step=5, total_steps=10, seed=0, slots=range(4), masking=s.masking)
    learning = draw_masks(prop, ids, None, **kw)
    frozen = draw_masks(prop, ids, None, **kw, learn=False)
    assert torch.equal(learning.chosen, frozen.chosen) and torch.equal(learning.corrupted, frozen.corrupted)
    assert torch.equal(learning.weights, frozen.weights)
    assert learning.log_probs.requires_grad and not frozen.log_probs.requires_grad


def test_the_loops_host_drawn_masks_are_those_drawn_from_the_rows_streams(tiny_shards, tmp_path):
    """The training path (`micro_batch` draws on the host, `to_device`, the loss) masks exactly as
    `draw_masks` does from the rows' keyed streams, for the paper's and the HT arm. Both paths draw through
    `draw_on_host`, so this checks what the loop hands it (keys, slots, padding, the device copy), not
    `draw_on_host` itself: tests/masking/mapnet/test_objective.py checks that uniform rows get the uniform
    strategy's masks exactly, and MAP rows K eligible positions."""
    from mapnet_cli import distributed
    from mapnet_cli.masking.mapnet import draw_masks
    from mapnet_cli.masking.uniform import SequenceRNG
    from mapnet_cli.train import Run

    for extra in (
        ["masking.mapnet.explore_steps=2"],
        [
            "masking.mapnet.importance=ht",
            "masking.mapnet.mix_uniform=0.5",
            "masking.mapnet.explore_start=0",
            "masking.mapnet.explore_end=0",
            "masking.mapnet.target=gradnorm",
        ],
    ):
        s = mapnet_settings("train.steps=4", *extra)
        run = Run(s, tiny_shards, tmp_path / extra[0], distributed.DistInfo(), False, [])
        torch.nn.init.normal_(run.strategy.proposal.score.weight, std=1.0)  # a proposal that is not uniform
        batch = run.batches(3)[0]
        kw = dict(
            special_ids=run.strategy.special_ids,
            vocab_size=run.strategy.vocab_size,
            step=3,
            total_steps=4,
            seed=0,
            slots=batch.slots,
            masking=s.masking,
        )
        loop = draw_masks(run.strategy.proposal, batch.targets, batch.attention_mask, draws=batch.draws, **kw)
        streams = draw_masks(
            run.strategy.proposal, batch.targets, batch.attention_mask, rng=SequenceRNG(batch.keys), **kw
        )
        assert not loop.uniform_rows.all()  # some rows were masked by the proposal
        for name in ("chosen", "corrupted", "weights", "positions"):
            assert torch.equal(getattr(loop, name), getattr(streams, name)), name
        assert loop.width == streams.width == int(loop.chosen.sum(1).max())
        # A diverged proposal still draws exactly K per row: the loop's non-finite check, not an assert, stops it.
        with torch.no_grad():
            run.strategy.proposal.score.bias.fill_(float("nan"))
        nan = draw_masks(run.strategy.proposal, batch.targets, batch.attention_mask, draws=batch.draws, **kw)
        assert torch.equal(nan.chosen.sum(1), batch.draws.counts)
        with pytest.raises(ValueError, match="not both"):
            draw_masks(
                run.strategy.proposal,
                batch.targets,
                batch.attention_mask,
                draws=batch.draws,
                rng=SequenceRNG(batch.keys),
                **kw,
            )


# ---------------------------------------------------------------- (d) export and inspect-masks
def test_export_keeps_only_the_encoder_and_inspect_masks_reads_the_checkpoint(cli_run, tmp_path):
    pytest.importorskip("transformers")
    out, _ = cli_run
    ckpt = checkpoint.latest_checkpoint(out)
    with safe_open(str(ckpt / "model.safetensors"), "pt") as fh:
        assert any(k.startswith("mapnet.") for k in fh.keys())  # the checkpoint has both networks
    runner = CliRunner()
    done = runner.invoke(app, ["export", str(out), "--out", str(tmp_path / "hf")])
    assert done.exit_code == 0, done.output
    with safe_open(str(tmp_path / "hf" / "model.safetensors"), "pt") as fh:
        keys = list(fh.keys())
    assert keys and not any("mapnet" in k for k in keys)
    assert any(k.startswith("bert.encoder.") for k in keys)

    shown = runner.invoke(app, ["inspect-masks", str(out), "--json", "--sentences", "2", "--samples", "5"], input="")
    assert shown.exit_code == 0, shown.output
    data = json.loads(shown.stdout)
    assert data["source"] == "valid" and data["step"] == 8 and len(data["sequences"]) == 2
    for seq in data["sequences"]:
        probs = [p for p in seq["probabilities"] if p is not None]
        assert len(probs) == seq["eligible"] and abs(sum(probs) - 1) < 1e-5
        assert len(seq["masked"]) == seq["k"] >= 1


# ---------------------------------------------------------------- (e) MAP-Net learns where not to mask
@pytest.mark.slow
def test_proposal_moves_mass_off_determined_tokens(synthetic_shards, tmp_path):
    """Determined tokens (agreement particles, brackets) are the first the encoder predicts well: their
    loss falls below their sequence's mean, so eq. 10 lowers their proposal probability."""
    s = mapnet_settings(
        "train.steps=50",
        "train.batch_size=16",
        "optim.lr=1e-3",
        "optim.warmup.steps=5",
        "logging.log_every=10",
        "masking.mapnet.explore_steps=20",
    )
    pretrain(s, synthetic_shards, tmp_path / "run")
    train = rows(tmp_path / "run")
    first, last = train[0], train[-1]
    mass, share = "mapnet/mass/determined", "mapnet/share/determined"
    # Measured (seed 0): first 0.146 (share 0.147: MAP-Net starts uniform), last ~0.02 (share ~0.14).
    assert first[mass] == pytest.approx(first[share], abs=0.02)
    assert last[mass] < 0.5 * first[mass]
    assert last[mass] < 0.5 * last[share]
    assert last["mapnet/entropy"] < first["mapnet/entropy"]
    # docs/masking.md quotes this run's three numbers ("tested: 0.15 -> ~0.02 against a uniform share of ~0.14"):
    # each within its printed precision, one unit of the last digit where the page says "about" (≈).
    page = (Path(__file__).resolve().parents[2] / "docs" / "masking.md").read_text(encoding="utf-8")
    quoted = re.search(r"tested: (\d\.\d\d) → ≈(\d\.\d\d) against a uniform share of ≈(\d\.\d\d)", page)
    assert quoted, "docs/masking.md no longer quotes this test's figures where it did"
    start_mass, end_mass, end_share = map(float, quoted.groups())
    assert first[mass] == pytest.approx(start_mass, abs=0.005)
    assert last[mass] == pytest.approx(end_mass, abs=0.01) and last[share] == pytest.approx(end_share, abs=0.01)

    # The held-out loss per token kind, under the fixed uniform eval masks.
    start, end = rows(tmp_path / "run", "eval")[0], rows(tmp_path / "run", "eval")[-1]
    kinds = sorted(k.split("/", 1)[1] for k in end if k.startswith("eval_tokens/"))
    assert {"determined", "noise", "other"} <= set(kinds)  # long_range words are split by this small vocabulary
    for ev in (start, end):
        covered = sum(ev[f"eval_tokens/{k}"] for k in kinds)
        assert 0 < covered <= ev["eval_masked_tokens"]
        if covered == ev["eval_masked_tokens"]:  # every masked token has a kind: the parts add up to the whole
            mean = sum(ev[f"eval_loss/{k}"] * ev[f"eval_tokens/{k}"] for k in kinds) / covered
            assert mean == pytest.approx(ev["eval_loss"], rel=1e-6)
    # Noise is unlearnable (>= ln 128 nats for any model); determined tokens are learned first.
    assert end["eval_loss/noise"] > 4.0
    assert end["eval_loss/determined"] < end["eval_loss/noise"] - 1.0
    assert end["eval_loss/determined"] < start["eval_loss/determined"] - 2.0


@pytest.mark.slow
def test_variance_every_records_the_decomposition_during_training(synthetic_shards, tmp_path):
    out = tmp_path / "run"
    args = [
        "pretrain",
        str(synthetic_shards),
        "--out",
        str(out),
        "--preset",
        "tiny",
        "--recipe",
        "paper",
        "--steps",
        "4",
        "--masking",
        "mapnet",
        "--set",
        "variance.every=2",
        *[a for kv in BASE for a in ("--set", kv)],
        "--set",
        "variance.snapshot_sentences=3",
        "--set",
        "variance.snapshot_masks=2",
        "--set",
        "variance.snapshot_project_dim=256",
    ]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    snaps = rows(out, "variance")
    assert [r["step"] for r in snaps] == [0, 2, 4]  # the starting point, then every 2 steps
    for r in snaps:
        assert set(r["schemes"]) == {"uniform", "mapnet_clipped", "mapnet_unclipped", "mapnet_unweighted"}
        for terms in r["schemes"].values():
            total = terms["total_variance"]
            assert total > 0 and terms["mask_variance"] + terms["sentence_variance"] == pytest.approx(total, rel=1e-6)
    # Training moved the weights: the decomposition at step 4 differs from step 0's.
    assert snaps[0]["schemes"]["uniform"]["total_variance"] != snaps[-1]["schemes"]["uniform"]["total_variance"]
