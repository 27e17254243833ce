"""Process groups: job detection (torchrun, SLURM), the torchrun command, and a real 2-process gloo run."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from mapnet_cli import distributed
from mapnet_cli.errors import MapnetError
from mapnet_cli.model import checkpoint
from mapnet_cli.settings import resolve
from mapnet_cli.train import pretrain


def test_no_job_means_a_single_process():
    assert distributed.job_env({}) is None
    assert distributed.job_env({"SLURM_NTASKS": "1", "SLURM_PROCID": "0"}) is None  # one srun task may launch torchrun
    info = distributed.init("cpu")
    assert (info.rank, info.world_size, info.distributed, info.is_main) == (0, 1, False, True)
    distributed.cleanup(info)


def test_torchrun_environment_is_detected():
    env = {"RANK": "3", "WORLD_SIZE": "8", "LOCAL_RANK": "1", "SLURM_NTASKS": "4", "SLURM_PROCID": "0"}
    assert distributed.job_env(env) == {"rank": 3, "world_size": 8, "local_rank": 1}  # torchrun's wins


def test_slurm_environment_is_detected_and_needs_a_master():
    env = {"SLURM_NTASKS": "16", "SLURM_PROCID": "9", "SLURM_LOCALID": "1"}
    with pytest.raises(MapnetError, match="MASTER_ADDR"):
        distributed.job_env(env)
    env |= {"MASTER_ADDR": "node0", "MASTER_PORT": "29500"}
    assert distributed.job_env(env) == {"rank": 9, "world_size": 16, "local_rank": 1}


def test_launch_is_skipped_inside_a_job(monkeypatch):
    monkeypatch.delenv("RANK", raising=False)
    monkeypatch.delenv("SLURM_NTASKS", raising=False)
    assert distributed.should_launch(gpus=8, nproc=0) and not distributed.should_launch(0, 0)
    monkeypatch.setenv("RANK", "0")
    monkeypatch.setenv("WORLD_SIZE", "8")
    assert not distributed.should_launch(gpus=8, nproc=0)


def test_torchrun_command_passes_multi_node_options_through():
    single = distributed.torchrun_command(["pretrain", "s"], 8)
    assert single[1:3] == ["-m", "mapnet_cli.torchrun"] and "--standalone" in single
    assert single[-4:] == ["-m", "mapnet_cli.cli", "pretrain", "s"]
    multi = distributed.torchrun_command(["pretrain"], 8, nnodes=2, node_rank=1, rdzv_endpoint="n0:29500")
    assert {"--nnodes=2", "--node-rank=1", "--rdzv-endpoint=n0:29500", "--rdzv-backend=c10d"} <= set(multi)
    assert "--standalone" not in multi


def test_gpus_beyond_the_visible_ones_are_refused():
    if torch.cuda.is_available():
        pytest.skip("checks the no-GPU message")
    with pytest.raises(MapnetError, match="CUDA devices"):
        distributed.launch(["pretrain"], resolve(None, None, ["distributed.gpus=2"]).distributed)


def test_a_process_group_the_caller_made_is_joined_and_left_up():
    """A script that runs several trainings in one job makes the group once; `pretrain` must not tear it down."""
    import torch.distributed as dist

    dist.init_process_group("gloo", store=dist.HashStore(), rank=0, world_size=1)
    try:
        with pytest.raises(MapnetError, match="reduces cpu tensors with 'gloo'; leave distributed.backend at 'auto'"):
            distributed.init("cpu", backend="nccl")
        with distributed.process_group("cpu", backend="gloo") as info:
            assert (info.rank, info.world_size, info.backend, info.owns_group) == (0, 1, "gloo", False)
            assert info.distributed and info.device == torch.device("cpu")
        assert dist.is_initialized()
    finally:
        dist.destroy_process_group()
    assert not distributed.init("cpu").distributed  # no group, no job: one process again


def test_a_callers_group_under_srun_uses_slurms_local_rank(monkeypatch):
    """A script under plain srun has no LOCAL_RANK: its GPU is SLURM_LOCALID's, not cuda:0 for every task."""
    import torch.distributed as dist

    for key, value in {"SLURM_NTASKS": "8", "SLURM_PROCID": "5", "SLURM_LOCALID": "1"}.items():
        monkeypatch.setenv(key, value)
    for key in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT"):  # the caller met its peers itself
        monkeypatch.delenv(key, raising=False)
    asked = []
    monkeypatch.setattr(
        distributed, "pick_device", lambda preference, local_rank: asked.append(local_rank) or torch.device("cpu")
    )
    dist.init_process_group("gloo", store=dist.HashStore(), rank=0, world_size=1)
    try:
        assert distributed.init("cpu").local_rank == 1 and asked == [1]
    finally:
        dist.destroy_process_group()


def test_a_callers_group_without_a_backend_for_the_device_is_refused(monkeypatch):
    """Made without naming a backend (get_backend() is "undefined", torch's newer default), a group on a CPU-only
    machine reduces CPU tensors only: joined with train.device=cpu, refused in one line for another device."""
    import torch.distributed as dist

    dist.init_process_group(store=dist.HashStore(), rank=0, world_size=1)
    try:
        assert dist.get_backend() == "undefined"
        with distributed.process_group("cpu") as info:
            assert (info.backend, info.owns_group) == ("gloo", False)
        if "cuda:" not in dist.get_backend_config():  # a CUDA build on a GPU machine adds nccl for cuda tensors
            monkeypatch.setattr(distributed, "pick_device", lambda preference, local_rank: torch.device("cuda", 0))
            with pytest.raises(MapnetError, match="cannot reduce cuda tensors; set train.device to match it"):
                distributed.init("cuda")
    finally:
        dist.destroy_process_group()


def test_print0_prints_on_rank_0_only(monkeypatch, capsys):
    monkeypatch.setenv("RANK", "1")
    distributed.print0("hidden")
    monkeypatch.setenv("RANK", "0")
    distributed.print0("shown")
    assert capsys.readouterr().out == "shown\n"


MASKINGS = {
    # Plain uniform masking is covered by "uniform-pieces": its last two steps are uniform at full length, with the
    # same uneven micro-batches.
    # All 8 slots hold copies of one sequence: its partition is shared across the two ranks and
    # across uneven micro-batches (3 + 1 per rank).
    "stratified": ["masking.strategy=stratified", "masking.stratified.copies=8", "train.micro_batch_size=3"],
    "frequency": ["masking.strategy=frequency", "masking.frequency.mix_uniform=0.5"],
    # The sequence-length warm-up: 4 pieces per sequence for 4 of the 6 steps, then 2 plain uniform steps at full
    # length; uneven micro-batches throughout.
    "uniform-pieces": ["train.short_seq.len=8", "train.short_seq.steps=4", "train.micro_batch_size=3"],
    # A batch-size ramp: 2, 2, 4, 6 sequences, then the whole 8 (one sequence per rank at first), uneven micro-batches.
    "uniform-ramp": ["train.batch_ramp.start=2", "train.batch_ramp.steps=4", "train.micro_batch_size=3"],
    "stratified-pieces": [
        "masking.strategy=stratified",
        "masking.stratified.copies=2",
        "train.short_seq.len=16",
        "train.short_seq.steps=3",
    ],
    # HT weights + the learnability reference, whose per-type averages are all-reduced every step.
    "mapnet-ht-learnability": [
        "masking.strategy=mapnet",
        "masking.mapnet.importance=ht",
        "masking.mapnet.mix_uniform=0.5",
        "masking.mapnet.explore_start=0",
        "masking.mapnet.explore_end=0",
        "masking.mapnet.target=learnability",
    ],
    # The adaptive table, updated from the scores of both ranks after steps 0, 2, 4 (every step for soft):
    # rank 1 masks its half of the batch from it, so a table built from its own half would change its masks.
    "adaptive-ht": [
        "masking.strategy=adaptive",
        "masking.adaptive.weights=ht",
        "masking.adaptive.mix_uniform=0.5",
        "masking.adaptive.every=2",
        "train.micro_batch_size=3",
    ],
    "adaptive-soft": ["masking.strategy=adaptive", "masking.adaptive.score=soft", "masking.adaptive.every=1"],
}


def _settings(masking: str) -> list[str]:
    return [
        "train.recipe=paper",
        *MASKINGS[masking],
        "model.max_position=32",
        "shard.max_seq_len=32",
        "model.dropout=0.0",
        "model.attention_dropout=0.0",
        "train.batch_size=8",
        "train.steps=6",
        "train.eval_every=3",
        "train.eval_sequences=8",
        "train.checkpoint_every=0",
        "optim.warmup.steps=2",
        "optim.lr=3e-3",
        "logging.log_every=1",
        "logging.progress=false",
        "train.device=cpu",
    ]  # the one process too, on a GPU machine


# A train.time_budget run rides in the session's job (tests/gloo_runs.py); the budget's other tests are in
# tests/train/test_budget.py. No learning-rate warm-up: a first step under torchrun on a loaded machine can spend
# a short budget's warm-up share, which is refused. 2 s: a tiny step takes milliseconds, so each rank still times
# hundreds of steps before rank 0's clock stops both.
BUDGET_SECONDS = 2.0
BUDGET_RUN = [
    "train.recipe=paper",
    "model.max_position=64",
    "shard.max_seq_len=32",
    "train.batch_size=8",
    "train.eval_every=5",
    "train.eval_sequences=8",
    "train.checkpoint_every=5",
    "optim.warmup.steps=0",
    "optim.lr=3e-3",
    "logging.log_every=1",
    "logging.progress=false",
    "train.time_budget=2s",
    "optim.warmup.fraction=0",
    "train.short_seq.len=8",
    "train.short_seq.fraction=0.3",
]


@pytest.mark.slow
@pytest.mark.distributed
@pytest.mark.parametrize("masking", list(MASKINGS))
def test_two_gloo_processes_match_one_process(tmp_path, masking, gloo_runs):
    """Global batch 8: 1 process x 8 sequences vs 2 processes x 4 (torchrun, gloo, the session's one job) give the
    same run."""
    sets = _settings(masking)
    shards, two = gloo_runs["shards"], gloo_runs[masking]
    assert json.loads((two / "run.json").read_text())["world_size"] == 2
    pretrain(resolve(None, {"model": {"preset": "tiny"}}, sets), shards, tmp_path / "one")

    def rows(run: Path, kind: str) -> list[dict]:
        return [r for r in map(json.loads, (run / "metrics.jsonl").read_text().splitlines()) if r["kind"] == kind]

    a, b = rows(tmp_path / "one", "train"), rows(two, "train")
    assert [r["step"] for r in a] == [r["step"] for r in b] == list(range(1, 7))
    for ra, rb in zip(a, b):
        assert rb["loss"] == pytest.approx(ra["loss"], rel=1e-5, abs=1e-6)
        assert rb["masked_tokens"] == ra["masked_tokens"] and rb["tokens"] == ra["tokens"]
        assert rb["grad_norm"] == pytest.approx(ra["grad_norm"], rel=1e-4)
    ea, eb = rows(tmp_path / "one", "eval"), rows(two, "eval")
    assert [r["eval_sha256"] for r in ea] == [r["eval_sha256"] for r in eb]
    assert [r["eval_masked_tokens"] for r in ea] == [r["eval_masked_tokens"] for r in eb]
    for ra, rb in zip(ea, eb):
        assert rb["eval_loss"] == pytest.approx(ra["eval_loss"], rel=1e-5)
    m1, _ = checkpoint.load_model(tmp_path / "one")
    m2, _ = checkpoint.load_model(two)
    for (k, p1), p2 in zip(m1.state_dict().items(), m2.state_dict().values()):
        torch.testing.assert_close(p1, p2, atol=2e-5, rtol=1e-4, msg=k)
    if masking.startswith("adaptive"):
        from safetensors.torch import load_file

        t1, t2 = (
            load_file(str(checkpoint.latest_checkpoint(run) / "model.safetensors")) for run in (tmp_path / "one", two)
        )
        assert int(t1["adaptive.updates"]) == int(t2["adaptive.updates"]) >= 3
        assert torch.equal(t1["adaptive.observed"], t2["adaptive.observed"])  # every rank's counts, summed
        torch.testing.assert_close(t1["adaptive.table"], t2["adaptive.table"], rtol=1e-6, atol=0.0)


@pytest.mark.slow
@pytest.mark.distributed
def test_two_processes_share_one_budget_clock_and_stop_at_the_same_step(gloo_runs):
    """Each rank times its own steps; rank 0's seconds are the ones both schedule and stop by, so they apply the
    same learning rates, take the same last step and meet at the final checkpoint (a rank stopping alone would
    leave the other waiting in a collective: the job would hang, not pass)."""
    from mapnet_cli.model import checkpoint

    run = gloo_runs["budget"]
    info = json.loads((run / "run.json").read_text())["budget"]
    assert info["finished"] and info["spent_seconds"] >= BUDGET_SECONDS and info["steps"] >= 2
    assert checkpoint.latest_checkpoint(run).name == f"step-{info['steps']:08d}"
    rows = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    assert [r for r in rows if r["kind"] == "eval"][-1]["step"] == info["steps"]
    assert [r for r in rows if r["kind"] == "train"][-1]["elapsed"] >= BUDGET_SECONDS


@pytest.mark.slow
@pytest.mark.distributed
def test_a_stop_signal_on_one_rank_stops_every_rank_at_one_step_and_resume_continues_exactly(gloo_runs):
    """Rank 1 alone got SIGTERM after step 1, which no rank reads back (tests/gloo.py): the ranks agree at the next
    read step, 2, rank 0 writes its checkpoint, both leave with the stop's exit status; resumed, the run ends as the
    uninterrupted one, bit for bit."""
    from safetensors.torch import load_file

    stopped = gloo_runs["stopped"]
    status, message = stopped.with_name("stopped.stopped").read_text().split(" ", 1)
    assert status == "143" and message.startswith("stopped by SIGTERM after step 2; its checkpoint is ")
    assert message.split("its checkpoint is ")[1].split(";")[0] == str(stopped / "checkpoints" / "step-00000002")
    resumes = json.loads((stopped / "run.json").read_text())["resumes"]
    assert len(resumes) == 1 and resumes[0]["step"] == 2
    a, b = (
        load_file(str(checkpoint.latest_checkpoint(run) / "model.safetensors"))
        for run in (gloo_runs["frequency"], stopped)
    )
    assert all(torch.equal(a[k], b[k]) for k in a)


# `kill` on `mapnet pretrain --nproc 2` (the launcher): tests/train/test_init_from.py, which reads the one
# --nproc 2 run of the suite that trains (test_the_launcher_passes_a_stop_signal_to_its_workers).
