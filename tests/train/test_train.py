"""The pretraining loop: data order, loss normalisation, metrics, evaluation, exact resume, failures."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch
from tiny_shards import SPECIAL_IDS, write_tiny_shards
from typer.testing import CliRunner

from mapnet_cli import distributed
from mapnet_cli.cli import app
from mapnet_cli.cpu_features import cpu_description
from mapnet_cli.data.shards import ShardReader
from mapnet_cli.data.unigram import entropy, unigram_log_probs
from mapnet_cli.errors import MapnetError
from mapnet_cli.masking.uniform import sequence_keys
from mapnet_cli.model import checkpoint
from mapnet_cli.settings import MaskingSettings, resolve
from mapnet_cli.train import DataOrder, Run, build_eval_set, make_batch, pretrain, rank_micro_slots, train_step
from mapnet_cli.train.batches import pieces

# The paper's recipe: these tests are about the loop's mechanics, calibrated on it (the recipes have their own).
TINY = [
    "train.recipe=paper",
    "model.max_position=64",
    "shard.max_seq_len=32",
    "train.batch_size=8",
    "train.steps=20",
    "train.eval_every=10",
    "train.eval_sequences=16",
    "train.checkpoint_every=10",
    "optim.warmup.steps=3",
    "optim.lr=3e-3",
    "logging.log_every=5",
    "logging.progress=false",
]


def tiny_settings(*extra: str):
    return resolve(None, {"model": {"preset": "tiny"}}, [*TINY, *extra])


def tiny_args(*extra: str) -> list[str]:
    # --set outranks flags, so the CLI tests leave train.steps to --steps.
    return ["--preset", "tiny", *[a for kv in TINY if not kv.startswith("train.steps") for a in ("--set", kv)], *extra]


@pytest.fixture(scope="module")
def shards(tmp_path_factory) -> Path:
    return write_tiny_shards(tmp_path_factory.mktemp("shards") / "shards")


def metrics(run: Path, kind: str = "train") -> list[dict]:
    lines = (run / "metrics.jsonl").read_text().splitlines()
    return [r for r in map(json.loads, lines) if r["kind"] == kind]


def weights(ckpt: Path) -> dict[str, torch.Tensor]:
    from safetensors.torch import load_file

    return load_file(str(ckpt / "model.safetensors"))


# ---------------------------------------------------------------- data order and batch splitting
def test_data_order_visits_every_sequence_once_per_epoch_and_reshuffles():
    order = DataOrder(10, seed=3)
    first, second = order.take(0, 10), order.take(10, 10)
    assert sorted(first) == sorted(second) == list(range(10))
    assert list(first) != list(second)  # epoch 1 has its own permutation
    assert list(order.take(7, 6)) == list(first[7:]) + list(second[:3])  # a batch straddling epochs
    assert list(DataOrder(10, seed=3).take(4, 3)) == list(first[4:7])  # a pure function of the position


@pytest.mark.parametrize("world,micro", [(1, 8), (1, 3), (2, 4), (2, 3), (4, 1)])
def test_rank_micro_slots_partition_the_global_batch(world, micro):
    slots = [list(s) for r in range(world) for s in rank_micro_slots(8, world, r, micro)]
    assert sum(slots, []) == list(range(8))
    assert all(1 <= len(s) <= micro for s in slots)


def test_batch_masks_do_not_depend_on_the_split():
    ids = np.random.default_rng(0).integers(5, 64, size=(8, 32)).astype(np.uint16)
    ids[:, 0] = SPECIAL_IDS["cls"]
    keys = sequence_keys(0, 5, range(8))
    args = (SPECIAL_IDS, 64, MaskingSettings(), torch.device("cpu"))
    whole = make_batch(ids, keys, *args)
    parts = [make_batch(ids[i : i + 4], keys[i : i + 4], *args) for i in (0, 4)]
    for field in ("inputs", "targets", "mask"):
        assert torch.equal(getattr(whole, field), torch.cat([getattr(p, field) for p in parts]))
    assert whole.attention_mask is None and whole.tokens == 8 * 32


def test_padded_batch_gets_an_attention_mask():
    ids = np.full((2, 8), 9, dtype=np.uint16)
    ids[1, 5:] = SPECIAL_IDS["pad"]
    b = make_batch(ids, [1, 2], SPECIAL_IDS, 64, MaskingSettings(), torch.device("cpu"))
    assert b.attention_mask.tolist()[1] == [True] * 5 + [False] * 3 and b.tokens == 13
    assert not b.mask[1, 5:].any()


def test_accumulation_gives_the_gradient_of_one_big_batch(shards, tmp_path):
    """One micro-batch of 8 vs micro-batches of 3+3+2: same update (loss = sum(l_s) / B)."""
    settings = tiny_settings("model.dropout=0.0", "model.attention_dropout=0.0")
    info = distributed.DistInfo()
    after = []
    for micro in (8, 3):
        s = tiny_settings("model.dropout=0.0", "model.attention_dropout=0.0", f"train.micro_batch_size={micro}")
        run = Run(s, shards, tmp_path / f"m{micro}", info, False, [])
        batches = run.batches(0)
        assert [len(b.targets) for b in batches] == ([8] if micro == 8 else [3, 3, 2])
        before = {k: v.clone() for k, v in run.model.state_dict().items()}
        st = train_step(
            run.ddp,
            run.optimizer,
            run.scheduler,
            batches,
            scale=1 / 8,
            grad_clip=0.0,
            autocast=run.autocast,
            info=info,
            batch_size=8,
        )
        after.append((st, {k: v - before[k] for k, v in run.model.state_dict().items()}))
    (st1, u1), (st2, u2) = after
    assert st1.loss == pytest.approx(st2.loss, rel=1e-6) and st1.grad_norm == pytest.approx(st2.grad_norm, rel=1e-5)
    for k in u1:
        # The updates, compared as wholes: Adam divides by sqrt(v) + eps, so where a gradient is ~0 the
        # rounding of the sums (8 rows at once vs 3 + 3 + 2) moves that one coordinate's step by ~1e-6
        # (seen on CI), while a dropped or wrongly weighted micro-batch changes whole updates.
        assert (u1[k] - u2[k]).norm() <= 1e-4 * u1[k].norm() + 1e-9, k
    # ...and that loss is the mean over sequences of each sequence's mean masked-token loss.
    run = Run(settings, shards, tmp_path / "ref", info, False, [])
    b = run.batches(0)[0]
    run.model.eval()
    out = run.model.mlm_losses(b.inputs, b.attention_mask, b.mask, b.targets)
    per_seq = [out.token_losses[out.rows == i].mean() for i in range(8)]
    assert st1.loss == pytest.approx(torch.stack(per_seq).mean().item(), rel=1e-5)


def test_pieces_cut_each_sequence_in_order_and_number_their_slots():
    ids = np.arange(2 * 8, dtype=np.uint16).reshape(2, 8)
    cut, slots = pieces(ids, [5, 6], 4, batch_size=8)
    assert cut.tolist() == [[0, 1], [2, 3], [4, 5], [6, 7], [8, 9], [10, 11], [12, 13], [14, 15]]
    assert slots == [5, 13, 21, 29, 6, 14, 22, 30]
    every = pieces(np.zeros((8, 8), np.uint16), range(8), 4, batch_size=8)[1]
    assert sorted(every) == list(range(32))  # unique over the global batch
    # Stratified copies of one sequence sit in consecutive slots: each piece keeps them in one group.
    assert all((j * 8 + 2 * q) // 2 == (j * 8 + 2 * q + 1) // 2 for j in range(4) for q in range(4))
    with pytest.raises(ValueError, match="equal pieces"):
        pieces(ids, [5, 6], 3, batch_size=8)


def test_short_seq_warm_up_trains_on_pieces_then_on_whole_sequences(shards, tmp_path):
    s = tiny_settings("train.short_seq.len=8", "train.short_seq.steps=3", "train.micro_batch_size=3")
    run = Run(s, shards, tmp_path / "run", distributed.DistInfo(), False, [])
    during, after = run.batches(2), run.batches(3)
    assert [tuple(b.targets.shape) for b in during] == [(12, 8), (12, 8), (8, 8)]  # 3 + 3 + 2 sequences, 4 pieces each
    assert [tuple(b.targets.shape) for b in after] == [(3, 32), (3, 32), (2, 32)]
    # The same tokens: the pieces of step 2 are its sequences cut up, in order.
    whole = Run(tiny_settings(), shards, tmp_path / "whole", distributed.DistInfo(), False, []).batches(2)
    assert torch.equal(torch.cat([b.targets for b in during]).reshape(8, 32), torch.cat([b.targets for b in whole]))
    assert all(b.mask.sum(1).min() >= 1 for b in during)  # every piece has a question
    for bad, message in (
        (["train.short_seq.len=12", "train.short_seq.steps=3"], "must divide"),
        (["train.short_seq.len=32", "train.short_seq.steps=3"], "at least two pieces"),
    ):
        with pytest.raises(MapnetError, match=message):
            Run(tiny_settings(*bad), shards, tmp_path / "bad", distributed.DistInfo(), False, [])
    with pytest.raises(
        MapnetError, match="turns the sequence-length warm-up on: give its length, train.short_seq.steps"
    ):
        tiny_settings("train.short_seq.len=8")


def test_a_recipe_trains_only_on_sequences_as_long_as_it_was_measured_on(shards, tmp_path):
    # `hour` is sized for 64-token sequences (batch 64 x 64: the tokens a step the lever search measured).
    hour = ["train.recipe=hour", "train.short_seq.len=8", "train.batch_size=4", "model.max_position=64"]
    with pytest.raises(MapnetError) as exc:
        Run(tiny_settings(*hour), shards, tmp_path / "bad", distributed.DistInfo(), False, [])
    assert str(exc.value).count("\n") == 0 and "recipe hour trains on 64-token sequences" in str(exc.value)
    assert "hold 32: shard them with `mapnet shard PREP --max-seq-len 64`" in str(exc.value)
    assert not (tmp_path / "bad").exists()
    sixty_four = write_tiny_shards(tmp_path / "shards-64", seq_len=64)
    run = Run(tiny_settings(*hour), sixty_four, tmp_path / "run", distributed.DistInfo(), False, [])
    assert run.settings.model.block == "modern" and run.settings.masking.mask_prob == 0.3


@pytest.mark.slow
def test_resume_in_the_middle_of_the_short_seq_warm_up_continues_exactly(shards, tmp_path):
    s = tiny_settings("train.short_seq.len=8", "train.short_seq.steps=14")
    straight = pretrain(s, shards, tmp_path / "a")
    pretrain(s, shards, tmp_path / "b", stop_at=10)
    resumed = pretrain(s, shards, tmp_path / "b", resume=True)
    wa, wb = weights(straight), weights(resumed)
    assert all(torch.equal(wa[k], wb[k]) for k in wa)
    la, lb = metrics(tmp_path / "a"), metrics(tmp_path / "b")
    assert [r["loss"] for r in la] == [r["loss"] for r in lb]
    # Each 8-token piece masks round(0.15 x its ~7 eligible tokens) = 1, a 32-token sequence 5: the count
    # per step shows which steps trained on pieces.
    masked = {r["step"]: r["masked_tokens"] for r in la}
    assert masked[5] == masked[10] == 8 * 4 and masked[15] == masked[20] == 8 * 5


# ---------------------------------------------------------------- a whole run
@pytest.mark.slow
def test_pretrain_learns_logs_evaluates_and_keeps_checkpoints(shards, tmp_path):
    run = tmp_path / "run"
    s = tiny_settings("train.steps=40", "train.checkpoint_every=5", "train.keep_last=2", "train.keep_steps=[10]")
    events = []
    last = pretrain(s, shards, run, command_line=["mapnet", "pretrain"], on_report=lambda k, d: events.append(k))
    assert last == run / "checkpoints" / "step-00000040"
    assert [p.name for _, p in checkpoint.list_checkpoints(run)] == ["step-00000010", "step-00000035", "step-00000040"]
    assert not list((run / "checkpoints").glob(".*"))  # no leftovers

    train = metrics(run)
    assert [r["step"] for r in train] == list(range(5, 41, 5))
    for key in ("loss", "lr", "grad_norm", "tokens_per_s", "masked_tokens", "memory_bytes", "elapsed"):
        assert all(isinstance(r[key], (int, float)) for r in train), key
    assert all(r["masked_tokens"] > 0 and r["memory_bytes"] > 0 for r in train)
    assert train[-1]["lr"] < train[1]["lr"]  # linear decay after warm-up
    evals = metrics(run, "eval")
    assert [r["step"] for r in evals] == [0, 10, 20, 30, 40]  # step 0: the untrained starting point
    assert len({r["eval_sha256"] for r in evals}) == 1 and evals[0]["eval_sequences"] == 16
    assert evals[-1]["eval_loss"] < evals[0]["eval_loss"] - 0.3  # it learns
    assert events.count("eval") == 5 and "step" in events

    info = json.loads((run / "run.json").read_text())
    assert info["world_size"] == 1 and info["seeds"] == {"train": 0, "eval": 1234}
    assert info["compiled"] is False and info["prefetch"] is False and info["attention_kernel"] == "auto"  # defaults
    assert info["cpu"] == cpu_description() and info["threads"] == torch.get_num_threads()  # the machine it ran on
    assert info["shards"]["manifest_sha256"] and info["eval_set"]["sha256"] == evals[0]["eval_sha256"]
    assert info["command"] == ["mapnet", "pretrain"] and "torch" in info["versions"]
    assert (run / "settings.toml").read_text() == s.to_toml()
    cfg = checkpoint.read_config(last)
    assert cfg["step"] == 40 and cfg["model"]["hidden"] == 128 and cfg["data_position"] == 320
    assert cfg["tokenizer_sha256"] == ShardReader(shards, verify="size").manifest["tokenizer_sha256"]
    for name in ("model.safetensors", "state.pt", "settings.toml", "tokenizer.json", "COMPLETE"):
        assert (last / name).is_file(), name


@pytest.mark.slow
def test_resume_continues_exactly(shards, tmp_path):
    s = tiny_settings()
    straight = pretrain(s, shards, tmp_path / "a")
    pretrain(s, shards, tmp_path / "b", stop_at=10)
    assert checkpoint.latest_checkpoint(tmp_path / "b").name == "step-00000010"
    # The interrupted run got further than its checkpoint; resume must drop those metrics lines.
    with open(tmp_path / "b" / "metrics.jsonl", "a") as fh:
        fh.write(json.dumps({"kind": "train", "step": 15, "loss": -1.0}) + "\n{torn")
    resumed = pretrain(s, shards, tmp_path / "b", resume=True)
    wa, wb = weights(straight), weights(resumed)
    assert wa.keys() == wb.keys()
    for k in wa:
        assert torch.equal(wa[k], wb[k]), k  # bitwise
    assert [r["loss"] for r in metrics(tmp_path / "a")] == [r["loss"] for r in metrics(tmp_path / "b")]
    sa = checkpoint.load_state(straight)
    sb = checkpoint.load_state(resumed)
    assert sa["data_position"] == sb["data_position"] == 160
    assert sa["scheduler"]["last_epoch"] == sb["scheduler"]["last_epoch"] == 20
    assert len(json.loads((tmp_path / "b" / "run.json").read_text())["resumes"]) == 1


@pytest.mark.slow
def test_a_machine_where_torch_compile_cannot_build_gets_one_line(shards, tmp_path):
    """`train.compile = auto` compiles on CUDA unasked; Inductor failing there (no C++ compiler, no Triton) is
    a MapnetError naming the off switch, not a traceback. Simulated on the CPU with a compiler that is not there."""
    import torch._dynamo
    import torch._inductor.config as inductor

    # inductor's own patch, not monkeypatch: monkeypatch's undo deletes the entry from inductor's config module,
    # and a later test in the same process that compiles then fails with "cpp.cxx does not exist".
    try:
        with (
            inductor.patch({"cpp.cxx": ("/nonexistent-cxx",)}),
            pytest.raises(
                MapnetError,
                match=r"^torch.compile failed on this machine \(.*C\+\+ compiler.*\); "
                r"--set train.compile=false trains without it$",
            ),
        ):
            pretrain(tiny_settings("train.compile=true", "train.steps=2"), shards, tmp_path / "run")
    finally:
        torch._dynamo.reset()  # no failed compilation cached for later tests
    assert not checkpoint.list_checkpoints(tmp_path / "run")


@pytest.mark.gpu
def test_resume_on_cuda_continues(shards, tmp_path):
    # Found on the first GPU run: resume mapped the saved RNG states to the GPU, which torch refuses.
    if not torch.cuda.is_available():
        pytest.skip("needs a CUDA device")
    s = tiny_settings("train.device=cuda")
    straight = pretrain(s, shards, tmp_path / "a")
    pretrain(s, shards, tmp_path / "b", stop_at=10)
    resumed = pretrain(s, shards, tmp_path / "b", resume=True)
    assert checkpoint.load_state(resumed)["data_position"] == checkpoint.load_state(straight)["data_position"] == 160
    # Not bitwise on a GPU (the embedding gradient is summed with atomics), but the same run.
    la, lb = [r["loss"] for r in metrics(tmp_path / "a")], [r["loss"] for r in metrics(tmp_path / "b")]
    assert len(la) == len(lb) and np.allclose(la, lb, rtol=1e-2), (la, lb)


def test_eval_set_is_fixed_by_eval_seed_only(shards):
    valid = ShardReader(shards, "valid", verify="size")
    a = build_eval_set(valid, 16, 1234, MaskingSettings())
    b = build_eval_set(valid, 16, 1234, MaskingSettings(strategy="mapnet", mask_count="bernoulli"))
    c = build_eval_set(valid, 16, 99, MaskingSettings())
    assert a.sha256 == b.sha256 != c.sha256
    assert build_eval_set(valid, 1000, 1234, MaskingSettings()).ids.shape[0] == 24  # capped by the split
    spread = build_eval_set(valid, 4, 1234, MaskingSettings(), pick="spread")
    assert np.array_equal(spread.ids, valid.take(np.array([0, 8, 15, 23])))  # both ends and evenly between


def test_eval_replace_mask_asks_the_same_positions_with_mask_everywhere(shards):
    valid = ShardReader(shards, "valid", verify="size")
    plain = build_eval_set(valid, 24, 1234, MaskingSettings(), replace="mask")
    bert = build_eval_set(valid, 24, 1234, MaskingSettings(), replace="bert")
    assert torch.equal(plain.mask, bert.mask) and plain.sha256 != bert.sha256
    assert (plain.inputs[plain.mask] == SPECIAL_IDS["mask"]).all()
    assert torch.equal(plain.inputs[~plain.mask], torch.from_numpy(plain.ids.astype(np.int64))[~plain.mask])
    kept = bert.inputs[bert.mask] != SPECIAL_IDS["mask"]
    assert 0 < kept.float().mean() < 0.35  # 80/10/10: about a fifth left unchanged or random
    assert tiny_settings().train.eval_replace == "mask"


def test_extra_eval_sets_are_evaluated_beside_the_main_one(shards, tmp_path):
    # The training shards' own validation split as an extra set must give the main numbers exactly;
    # a second folder with other sequences (same tokenizer) must give other numbers.
    other = write_tiny_shards(tmp_path / "other", seed=7)
    s = tiny_settings("train.steps=4", "train.eval_every=2", f'train.extra_eval=["same={shards}", "other={other}"]')
    pretrain(s, shards, tmp_path / "run")
    evals = metrics(tmp_path / "run", "eval")
    assert [e["step"] for e in evals] == [0, 2, 4]
    for e in evals:
        assert e["eval_loss@same"] == e["eval_loss"] and e["eval_accuracy@same"] == e["eval_accuracy"]
        assert e["eval_sha256@same"] == e["eval_sha256"] != e["eval_sha256@other"]
        assert e["eval_loss@other"] != e["eval_loss"]
    info = json.loads((tmp_path / "run" / "run.json").read_text())
    assert set(info["extra_eval"]) == {"same", "other"}
    assert info["extra_eval"]["other"]["path"] == str(other.resolve())
    assert info["extra_eval"]["other"]["sha256"] == evals[0]["eval_sha256@other"]


def test_the_unigram_plateau_is_recorded_once_and_printed_beside_every_held_out_loss(shards, tmp_path):
    other = write_tiny_shards(tmp_path / "other", seed=7)
    res = CliRunner().invoke(
        app,
        [
            "pretrain",
            str(shards),
            "--out",
            str(tmp_path / "run"),
            *tiny_args("--steps", "4", "--set", "train.eval_every=2", "--set", f'train.extra_eval=["other={other}"]'),
        ],
    )
    assert res.exit_code == 0, res.output
    records = [json.loads(line) for line in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()]
    unigram = [r for r in records if r["kind"] == "unigram"]
    assert len(unigram) == 1 and unigram[0]["step"] == 0
    # By hand: the training tokens' smoothed frequencies, scored on each set's own masked targets.
    log_p = unigram_log_probs(ShardReader(shards, "train"))
    s = tiny_settings()
    for key, folder in (("eval_unigram", shards), ("eval_unigram@other", other)):
        data = build_eval_set(
            ShardReader(folder, "valid"),
            s.train.eval_sequences,
            s.train.eval_seed,
            s.masking,
            replace=s.train.eval_replace,
        )
        assert unigram[0][key] == pytest.approx(-log_p[data.ids[data.mask.numpy()]].mean(), rel=1e-12)
    assert unigram[0]["train_entropy"] == pytest.approx(entropy(log_p))
    assert f"training tokens' entropy {unigram[0]['train_entropy']:.3f} nats" in res.output
    final = [r for r in records if r["kind"] == "eval"][-1]
    assert (
        f"loss {final['eval_loss']:.4f} (vs unigram {final['eval_loss'] - unigram[0]['eval_unigram']:+.3f})"
        in res.output
    )
    assert f"other: loss {final['eval_loss@other']:.4f} (vs unigram " in res.output
    # A resumed run keeps the record and does not write a second one.
    res = CliRunner().invoke(app, ["pretrain", str(shards), "--out", str(tmp_path / "run"), "--steps", "6", "--resume"])
    assert res.exit_code == 0, res.output
    assert [r for r in metrics(tmp_path / "run", "unigram")] == unigram


def test_extra_eval_refuses_another_tokenizer_and_bad_entries(shards, tmp_path):
    foreign = write_tiny_shards(tmp_path / "foreign", vocab_size=80)
    with pytest.raises(MapnetError, match="another tokenizer"):
        pretrain(tiny_settings(f'train.extra_eval=["x={foreign}"]'), shards, tmp_path / "run")
    novalid = write_tiny_shards(tmp_path / "novalid", valid=0)
    with pytest.raises(MapnetError, match="needs a validation split in the training shards"):
        pretrain(tiny_settings(f'train.extra_eval=["x={shards}"]'), novalid, tmp_path / "run2")
    with pytest.raises(MapnetError, match="NAME=SHARD_FOLDER"):
        tiny_settings('train.extra_eval=["no-folder"]')
    with pytest.raises(MapnetError, match="NAME=SHARD_FOLDER"):
        tiny_settings(f'train.extra_eval=["bücher={shards}"]')  # names become metric keys and file names
    with pytest.raises(MapnetError, match="unique"):
        tiny_settings(f'train.extra_eval=["a={shards}", "a={shards}"]')


# ---------------------------------------------------------------- failures
def test_non_finite_loss_stops_and_keeps_the_last_good_checkpoint(shards, tmp_path):
    s = tiny_settings("optim.lr=1e30", "optim.warmup.steps=0", "train.checkpoint_every=1", "train.keep_last=5")
    with pytest.raises(MapnetError, match=r"non-finite loss at step \d+ .*last good checkpoint: .*step-0000000\d"):
        pretrain(s, shards, tmp_path / "run")
    last = checkpoint.latest_checkpoint(tmp_path / "run")
    model, _ = checkpoint.load_model(last)
    assert all(torch.isfinite(p).all() for p in model.parameters())


def test_cli_run_resume_and_refusals(shards, tmp_path):
    runner = CliRunner()
    out = tmp_path / "run"
    base = ["pretrain", str(shards), "--out", str(out), *tiny_args()]
    shown = runner.invoke(app, base + ["--print-settings", "--steps", "7"])
    assert shown.exit_code == 0 and "steps = 7" in shown.output and not out.exists()
    done = runner.invoke(app, base + ["--steps", "6", "--set", "train.checkpoint_every=3"])
    assert done.exit_code == 0, done.output
    assert "step 5/6" in done.output and "done:" in done.output
    again = runner.invoke(app, base + ["--steps", "6"])
    assert isinstance(again.exception, MapnetError) and "--resume" in str(again.exception)
    # --resume takes the run's own settings; --steps extends it. (--data is the other spelling of SHARDS.)
    more = runner.invoke(app, ["pretrain", "--data", str(shards), "--out", str(out), "--resume", "--steps", "8"])
    assert more.exit_code == 0, more.output
    assert "resumed from" in more.output and checkpoint.latest_checkpoint(out).name == "step-00000008"
    changed = runner.invoke(
        app,
        ["pretrain", str(shards), "--out", str(out), "--resume", "--set", "model.hidden=64", "--set", "model.heads=2"],
    )
    assert isinstance(changed.exception, MapnetError) and "--resume cannot change model.hidden" in str(
        changed.exception
    )
    nothing = runner.invoke(app, ["pretrain", str(shards), "--out", str(tmp_path / "empty"), "--resume"])
    assert isinstance(nothing.exception, MapnetError) and "no complete checkpoint" in str(nothing.exception)
    neither = runner.invoke(app, ["pretrain", "--out", str(out), "--resume"])
    assert isinstance(neither.exception, MapnetError) and "no shard folder" in str(neither.exception)
    both = runner.invoke(app, ["pretrain", str(shards), "--data", str(tmp_path), "--out", str(out), "--resume"])
    assert isinstance(both.exception, MapnetError) and "two shard folders" in str(both.exception)


def test_tampered_shard_is_refused(shards, tmp_path):
    import shutil

    bad = tmp_path / "bad"
    shutil.copytree(shards, bad)
    path = bad / "train-00000.arrow"
    data = bytearray(path.read_bytes())
    data[-100] ^= 0xFF
    path.write_bytes(bytes(data))
    with pytest.raises(MapnetError, match="sha256"):
        pretrain(tiny_settings(), bad, tmp_path / "run")


def test_batch_must_split_evenly_across_ranks(shards, tmp_path):
    info = distributed.DistInfo(world_size=3)
    with pytest.raises(MapnetError, match="divisible"):
        Run(tiny_settings(), shards, tmp_path / "run", info, False, [])


# ---------------------------------------------------------------- reliability: checkpoints and stale run folders
def test_identical_runs_write_identical_checkpoint_bytes(shards, tmp_path):
    s = tiny_settings("train.steps=3", "train.eval_every=0")
    a, b = pretrain(s, shards, tmp_path / "a"), pretrain(s, shards, tmp_path / "b")
    assert (a / "model.safetensors").read_bytes() == (b / "model.safetensors").read_bytes()


def test_resume_refuses_a_flipped_byte_in_the_weights_by_name(shards, tmp_path):
    s = tiny_settings("train.steps=6", "train.eval_every=0")
    last = pretrain(s, shards, tmp_path / "run", stop_at=3)
    data = bytearray((last / "model.safetensors").read_bytes())
    data[-3] ^= 0x01
    (last / "model.safetensors").write_bytes(bytes(data))
    with pytest.raises(MapnetError, match=r"model\.safetensors does not match its sha256"):
        pretrain(s, shards, tmp_path / "run", resume=True)


def test_a_fresh_run_does_not_append_to_an_interrupted_runs_metrics(shards, tmp_path):
    run = tmp_path / "run"
    run.mkdir()
    # An earlier run killed before its first checkpoint left these lines; none of them is this run's.
    (run / "metrics.jsonl").write_text(
        json.dumps({"kind": "eval", "step": 0, "eval_loss": 99.0})
        + "\n"
        + json.dumps({"kind": "train", "step": 5, "loss": 99.0})
        + "\n{torn"
    )
    pretrain(tiny_settings("train.steps=4", "train.eval_every=2", "logging.log_every=2"), shards, run)
    assert [(r["kind"], r["step"]) for r in map(json.loads, (run / "metrics.jsonl").read_text().splitlines())] == [
        ("unigram", 0),
        ("eval", 0),
        ("train", 2),
        ("eval", 2),
        ("train", 4),
        ("eval", 4),
    ]
    assert all(r["eval_loss"] != 99.0 for r in metrics(run, "eval"))


def test_a_damaged_metrics_line_is_one_line_on_resume_and_a_torn_last_line_is_read_past(trained_runs, tmp_path):
    """Invalid UTF-8 appended (was a UnicodeDecodeError traceback) or a bad line before the last (was dropped
    unseen) is one line naming the file and line, before anything is written; a torn last line resumes."""
    import shutil

    runner = CliRunner()
    good = trained_runs["uniform"] / "metrics.jsonl"
    lines = good.read_bytes().splitlines(keepends=True)
    damages = {
        "utf8-appended": b"".join(lines) + b"\xff\xfe oops\n",
        "garbage-middle": b"".join([*lines[:1], b"{not json\n", *lines[1:]]),
        "list-middle": b"".join([*lines[:1], b"[1, 2]\n", *lines[1:]]),
        "step-not-int": b"".join([*lines[:1], b'{"kind": "train", "step": "2"}\n', *lines[1:]]),
    }
    for name, data in damages.items():
        run = shutil.copytree(trained_runs["uniform"], tmp_path / name)
        (run / "metrics.jsonl").write_bytes(data)
        before = {p: p.read_bytes() for p in run.rglob("*") if p.is_file()}
        res = runner.invoke(
            app,
            [
                "pretrain",
                str(trained_runs["shards"]),
                "--out",
                str(run),
                "--resume",
                "--steps",
                "4",
                "--set",
                "logging.progress=false",
            ],
        )
        assert isinstance(res.exception, MapnetError), (name, res.exception, res.output)
        text = str(res.exception)
        assert "\n" not in text and f"{run / 'metrics.jsonl'}, line " in text, (name, text)
        assert "line 2" in text if name != "utf8-appended" else f"line {len(lines) + 1}" in text, (name, text)
        assert {p: p.read_bytes() for p in run.rglob("*") if p.is_file()} == before, name

    run = shutil.copytree(trained_runs["uniform"], tmp_path / "torn")
    with open(run / "metrics.jsonl", "ab") as fh:
        fh.write(b'{"kind": "train", "step": 4, "lo')  # what a kill mid-write leaves
    res = runner.invoke(
        app,
        [
            "pretrain",
            str(trained_runs["shards"]),
            "--out",
            str(run),
            "--resume",
            "--steps",
            "4",
            "--set",
            "logging.progress=false",
        ],
    )
    assert res.exit_code == 0, res.output
    assert all(json.loads(ln)["step"] <= 4 for ln in (run / "metrics.jsonl").read_text().splitlines())
    assert (run / "metrics.jsonl").read_bytes().startswith(good.read_bytes())  # the kept lines as they were


def test_resume_refuses_flags_it_cannot_honour_and_settings_toml_tells_the_truth(shards, tmp_path):
    runner = CliRunner()
    out = tmp_path / "run"
    assert runner.invoke(app, ["pretrain", str(shards), "--out", str(out), *tiny_args("--steps", "2")]).exit_code == 0
    for flags, named in (
        (["--preset", "mini"], "model.preset (the run has 'tiny', asked 'mini')"),
        (["--masking", "mapnet"], "masking.strategy"),
        (["--seed", "3", "--set", "model.dropout=0.2"], "model.dropout (the run has 0.1, asked 0.2), train.seed"),
    ):
        res = runner.invoke(app, ["pretrain", str(shards), "--out", str(out), "--resume", "--steps", "4", *flags])
        assert isinstance(res.exception, MapnetError) and named in str(res.exception), (flags, res.exception)
    assert 'preset = "tiny"' in (out / "settings.toml").read_text()
    # Whatever made the run what it is, not only the model: the batch, the optimiser, the held-out set, the masks.
    before = (out / "settings.toml").read_bytes()
    for flags, named in (
        (["--batch-size", "16"], ["train.batch_size (the run has 8, asked 16)"]),
        (
            ["--set", "optim.lr=1e-3", "--set", "train.eval_sequences=4"],
            ["optim.lr (the run has", "asked 0.001)", "train.eval_sequences (the run has 16, asked 4)"],
        ),
        (["--mask-prob", "0.3"], ["masking.mask_prob (the run has 0.15, asked 0.3)"]),
        # logging may change on resume, but not the file the run's metrics go to (two halves)
        (["--set", "logging.metrics_file=other.jsonl"], ["logging.metrics_file (the run has"]),
    ):
        res = runner.invoke(app, ["pretrain", str(shards), "--out", str(out), "--resume", "--steps", "4", *flags])
        assert isinstance(res.exception, MapnetError), (flags, res.output)
        assert all(n in str(res.exception) for n in named) and "\n" not in str(res.exception), str(res.exception)
    assert (out / "settings.toml").read_bytes() == before and checkpoint.latest_checkpoint(out).name == "step-00000002"
    # Naming the run's own preset is no change; --steps is honoured and recorded.
    # So is what only changes how it runs and what it records (MAY_CHANGE_ON_RESUME).
    res = runner.invoke(
        app,
        [
            "pretrain",
            str(shards),
            "--out",
            str(out),
            "--resume",
            "--steps",
            "4",
            "--preset",
            "tiny",
            "--set",
            "logging.log_every=1",
            "--set",
            "train.eval_every=2",
            "--set",
            "train.keep_last=3",
        ],
    )
    assert res.exit_code == 0, res.output
    recorded = (out / "settings.toml").read_text()
    assert 'preset = "tiny"' in recorded and "steps = 4" in recorded and "hidden = 128" in recorded


def test_a_warmup_as_long_as_the_run_is_warned_about_naming_the_fix(shards, tmp_path):
    runner = CliRunner()
    base = ["pretrain", str(shards), "--out", str(tmp_path / "a"), *tiny_args("--steps", "2")]
    res = runner.invoke(app, base + ["--set", "optim.warmup.steps=10000"])  # the paper's default on a 2-step run
    assert res.exit_code == 0, res.output
    warning = [line for line in res.stderr.splitlines() if line.startswith("warning:")]
    assert len(warning) == 1 and "optim.warmup.steps (10000) >= train.steps (2)" in warning[0]
    assert "at most 6e-07" in warning[0] and "--set optim.warmup.steps=N" in warning[0]
    quiet = runner.invoke(app, ["pretrain", str(shards), "--out", str(tmp_path / "b"), *tiny_args("--steps", "4")])
    assert quiet.exit_code == 0 and "warning" not in quiet.stderr  # warm-up 3 < 4 steps


def test_resume_on_shards_of_another_tokenizer_is_refused_before_reading_them(shards, tmp_path, monkeypatch):
    """The tokenizer check ran in `_restore`, after the held-out sets were built and the training shards read in
    full for the unigram levels; it now comes right after the shards are opened."""
    out = tmp_path / "run"
    assert (
        CliRunner().invoke(app, ["pretrain", str(shards), "--out", str(out), *tiny_args("--steps", "2")]).exit_code == 0
    )
    other = write_tiny_shards(tmp_path / "other", vocab_size=72, seed=3)

    def unreached(self):
        raise AssertionError("the unigram pass ran before the refusal")

    monkeypatch.setattr(Run, "_unigram_levels", unreached)
    res = CliRunner().invoke(app, ["pretrain", str(other), "--out", str(out), "--resume", "--steps", "4"])
    assert isinstance(res.exception, MapnetError), res.output
    assert f"used another tokenizer than the shards in {other}" in str(res.exception)
    assert checkpoint.latest_checkpoint(out).name == "step-00000002"


# ---------------------------------------------------------------- values checked before any work (issue 63)
def cli_lines(argv: list, monkeypatch, capsys) -> tuple[int, list[str]]:
    """`mapnet ARGV` as the console script runs it (cli.main): exit code and stderr lines."""
    from mapnet_cli.cli import main

    monkeypatch.setattr("sys.argv", ["mapnet", *map(str, argv)])
    monkeypatch.setenv("COLUMNS", "400")
    with pytest.raises(SystemExit) as done:
        main()
    return done.value.code, capsys.readouterr().err.strip().splitlines()


@pytest.mark.parametrize("batch", ["128", "1000000000000"])
def test_a_batch_the_training_split_cannot_fill_is_refused_before_any_work(
    batch, shards, tmp_path, monkeypatch, capsys
):
    """`train.batch_size = 1e12` on a 573-sequence corpus was accepted: evaluation ran, then the first step grew past
    12 GB building a batch that wraps through the data order's epochs again and again."""
    code, lines = cli_lines(
        [
            "pretrain",
            shards,
            "--out",
            tmp_path / "run",
            *tiny_args("--steps", "4"),
            "--set",
            f"train.batch_size={batch}",
        ],
        monkeypatch,
        capsys,
    )
    assert code == 2 and len(lines) == 1, lines
    assert (
        f"train.batch_size ({batch}) asks for {batch} distinct sequences per step, but shards {shards} hold 96 "
        "training sequences: use --batch-size 96 or less"
    ) in lines[0], lines
    assert not (tmp_path / "run").exists()
    # A stratified batch holds each sequence twice: 128 slots are 64 sequences, which 96 can fill.
    from mapnet_cli.train.inputs import batch_problems

    s = tiny_settings("train.batch_size=128", "masking.strategy=stratified")
    assert batch_problems(s, ShardReader(shards), shards) == []


def test_a_micro_batch_beyond_the_machines_memory_is_refused_with_the_estimate(shards, tmp_path, monkeypatch):
    from mapnet_cli.train import inputs

    s = tiny_settings("train.batch_size=64")
    need = inputs.activation_bytes(s, ShardReader(shards), 64)
    assert need > 64 * 32 * 2 * (10 * 128 + 2 * 512) * 2  # two layers of H 128 and I 512, 2 bytes a value
    monkeypatch.setattr(inputs, "machine_memory_bytes", lambda: need // 2)
    with pytest.raises(
        MapnetError,
        match=rf"a micro-batch of 64 sequences of 32 tokens keeps at least "
        rf"{inputs.human_bytes(need)} of activations .* more than this machine's "
        r".* set --micro-batch-size 4 \(the batch is then accumulated\)",
    ):
        pretrain(s, shards, tmp_path / "run")
    assert not (tmp_path / "run").exists()
    assert (
        inputs.batch_problems(
            tiny_settings("train.batch_size=64", "train.micro_batch_size=8"), ShardReader(shards), shards
        )
        == []
    )


def test_nproc_that_does_not_divide_the_batch_is_one_line_from_the_launcher(shards, tmp_path, monkeypatch, capsys):
    """`--nproc 2 --batch-size 7` said its error twice (once per worker) and torchrun added a 30-line report: the
    launcher now checks what the loop will split before it starts torchrun."""

    def unreached(*args, **kwargs):
        raise AssertionError("torchrun was started")

    monkeypatch.setattr(distributed, "launch", unreached)
    code, lines = cli_lines(
        [
            "pretrain",
            shards,
            "--out",
            tmp_path / "run",
            *tiny_args("--steps", "4"),
            "--nproc",
            "2",
            "--set",
            "train.batch_size=7",
        ],
        monkeypatch,
        capsys,
    )
    assert code == 2 and lines == [
        "error: train.batch_size (7) must be divisible by the world size (2): each process "
        "trains an equal part of the batch (e.g. --batch-size 6)"
    ], lines
    code, lines = cli_lines(
        [
            "pretrain",
            shards,
            "--out",
            tmp_path / "run",
            *tiny_args("--steps", "4"),
            "--nproc",
            "2",
            "--set",
            "train.batch_size=200",
        ],
        monkeypatch,
        capsys,
    )  # the shards' checks too, once
    assert code == 2 and len(lines) == 1 and "hold 96 training sequences" in lines[0], lines
    assert not (tmp_path / "run").exists()


def test_resume_with_fewer_steps_than_the_run_took_is_refused_and_settings_toml_kept(
    shards, tmp_path, monkeypatch, capsys
):
    """`--resume --steps 2` on a run at step 4 said "done" and rewrote settings.toml to steps = 2 beside the step-4
    checkpoint."""
    out = tmp_path / "run"
    assert (
        CliRunner().invoke(app, ["pretrain", str(shards), "--out", str(out), *tiny_args("--steps", "4")]).exit_code == 0
    )
    before = {p.name: p.read_bytes() for p in out.iterdir() if p.is_file()}
    code, lines = cli_lines(["pretrain", shards, "--out", out, "--resume", "--steps", "2"], monkeypatch, capsys)
    assert code == 2 and lines == [
        f"error: --resume: the run in {out} is at step 4 already (step-00000004), past "
        "train.steps = 2 (--steps): a run cannot train back; resume with --steps 4 or "
        "more, or read that checkpoint as it is (export, blimp, finetune-glue)"
    ], lines
    assert {p.name: p.read_bytes() for p in out.iterdir() if p.is_file()} == before
    with pytest.raises(MapnetError, match="is at step 4 already"):  # the library's callers too
        pretrain(tiny_settings("train.steps=3"), shards, out, resume=True)
    assert {p.name: p.read_bytes() for p in out.iterdir() if p.is_file()} == before


def test_evaluation_asked_of_shards_without_a_validation_split_is_refused_and_the_default_warned(
    tmp_path, monkeypatch, capsys
):
    """Shards without a validation split and train.eval_every=2: no evaluation ever ran, and nothing said so. A
    train.eval_every the user set asks for the curve: refused before any work. The default asks nothing: the run
    goes on, with one warning at its start."""
    novalid = write_tiny_shards(tmp_path / "novalid", valid=0)
    args = [
        "--preset",
        "tiny",
        "--steps",
        "4",
        *[a for kv in TINY if not kv.startswith(("train.steps", "train.eval_every")) for a in ("--set", kv)],
    ]
    code, lines = cli_lines(
        ["pretrain", novalid, "--out", tmp_path / "a", *args, "--set", "train.eval_every=2"], monkeypatch, capsys
    )
    assert code == 2 and len(lines) == 1, lines
    assert (
        f"train.eval_every = 2 asks for held-out evaluation, but shards {novalid} have no validation split" in lines[0]
    ) and "--valid-fraction 0.01" in lines[0], lines
    assert not (tmp_path / "a").exists()
    res = CliRunner().invoke(app, ["pretrain", str(novalid), "--out", str(tmp_path / "b"), *args])
    assert res.exit_code == 0, res.output
    warning = [line for line in res.stderr.splitlines() if line.startswith("warning:")]
    assert len(warning) == 1 and f"shards {novalid} have no validation split: this run is never evaluated" in warning[0]
    assert metrics(tmp_path / "b", "eval") == []
