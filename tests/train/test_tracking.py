"""TensorBoard and W&B sinks: every metrics.jsonl number, under the same name, read back with each tool's own format."""

from __future__ import annotations

import json
import struct
from pathlib import Path

import pytest
from tiny_shards import write_tiny_shards
from typer.testing import CliRunner

from mapnet_cli.cli import app
from mapnet_cli.errors import MapnetError
from mapnet_cli.settings import resolve
from mapnet_cli.train import pretrain, tracking

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


@pytest.fixture(scope="module")
def shards(tmp_path_factory) -> Path:
    return write_tiny_shards(tmp_path_factory.mktemp("shards") / "shards")


def settings(*extra: str):
    return resolve(None, {"model": {"preset": "tiny"}}, [*TINY, *extra])


def mapnet_settings(steps: int, *extra: str):
    """A short MAP-Net run on the synthetic corpus (its token kinds give the per-kind metrics), logging every 2
    steps."""
    return resolve(
        None,
        {"model": {"preset": "tiny"}},
        [
            "train.recipe=paper",
            "train.batch_size=8",
            f"train.steps={steps}",
            f"train.eval_every={steps}",
            "train.eval_sequences=8",
            f"train.checkpoint_every={steps}",
            "optim.warmup.steps=1",
            "logging.log_every=2",
            "logging.progress=false",
            "masking.strategy=mapnet",
            *extra,
        ],
    )


def jsonl(run: Path) -> list[dict]:
    return [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]


def expected(run: Path) -> dict[str, dict[int, float]]:
    """{name: {step: value}} of every number metrics.jsonl holds."""
    out: dict[str, dict[int, float]] = {}
    for record in jsonl(run):
        for name, value in tracking.scalars(record):
            out.setdefault(name, {})[record["step"]] = value
    return out


def tensorboard_scalars(logdir: Path) -> dict[str, dict[int, float]]:
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    acc = EventAccumulator(str(logdir), size_guidance={"scalars": 0})  # 0: keep every point
    acc.Reload()
    out = {}
    for tag in acc.Tags()["scalars"]:
        events = acc.Scalars(tag)
        steps = [e.step for e in events]
        assert len(steps) == len(set(steps)), f"{tag}: a step logged twice {steps}"
        out[tag] = {e.step: e.value for e in events}
    return out


def assert_same(found: dict[str, dict[int, float]], want: dict[str, dict[int, float]]) -> None:
    assert set(found) == set(want), set(found) ^ set(want)
    for name, points in want.items():
        assert found[name].keys() == points.keys(), name
        for step, value in points.items():
            assert found[name][step] == pytest.approx(value, rel=1e-6, abs=1e-6), (name, step)  # TB stores float32


def test_scalars_names_every_number_by_its_path_and_skips_the_rest():
    record = {
        "kind": "eval",
        "step": 3,
        "eval_loss": 2.5,
        "eval_loss/noise": 4,
        "eval_sha256": "ab",
        "flag": True,
        "mapnet/log_ratio": None,
        "nan": float("nan"),
        "schemes": {"uniform": {"total": 1.5, "name": "u"}},
    }
    assert dict(tracking.scalars(record)) == {"eval_loss": 2.5, "eval_loss/noise": 4.0, "schemes/uniform/total": 1.5}


def test_tensorboard_holds_every_metric_and_a_resume_replaces_what_the_checkpoint_did_not_keep(shards, tmp_path):
    pytest.importorskip("tensorboard")
    from torch.utils.tensorboard import SummaryWriter

    run = tmp_path / "run"
    pretrain(settings("logging.tensorboard=true"), shards, run, stop_at=10)
    # The interrupted run got past its checkpoint: its later points must not survive the resume.
    stale = SummaryWriter(str(run / tracking.TB_DIR))
    stale.add_scalar("loss", -1.0, global_step=15)
    stale.add_scalar("eval_loss", -1.0, global_step=20)
    stale.close()
    pretrain(settings("logging.tensorboard=true"), shards, run, resume=True)

    want = expected(run)
    assert {"loss", "lr", "grad_norm", "tokens_per_s", "eval_loss", "eval_accuracy"} <= set(want)
    assert sorted(want["loss"]) == [5, 10, 15, 20] and sorted(want["eval_loss"]) == [0, 10, 20]
    found = tensorboard_scalars(run / tracking.TB_DIR)
    assert_same(found, want)
    assert found["loss"][15] != -1.0 and found["eval_loss"][20] != -1.0


def test_tensorboard_names_match_the_mapnet_metrics_and_eval_per_kind(synthetic_shards, tmp_path):
    pytest.importorskip("tensorboard")
    run = tmp_path / "run"
    s = mapnet_settings(4, "logging.tensorboard=true")
    pretrain(s, synthetic_shards, run)
    want = expected(run)
    assert {"mapnet/entropy", "mapnet/p_uniform", "eval_loss/noise", "mapnet/mass/determined"} <= set(want)
    assert_same(tensorboard_scalars(run / tracking.TB_DIR), want)


def test_mapnet_histograms_reach_tensorboard_and_stay_out_of_metrics_jsonl(synthetic_shards, tmp_path):
    pytest.importorskip("tensorboard")
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    run = tmp_path / "run"
    s = mapnet_settings(
        4, "masking.mapnet.importance=ht", "masking.mapnet.mix_uniform=0.25", "logging.tensorboard=true"
    )
    pretrain(s, synthetic_shards, run)
    assert not any("histogram" in key for record in jsonl(run) for key in record)
    acc = EventAccumulator(str(run / tracking.TB_DIR), size_guidance={"histograms": 0})
    acc.Reload()
    names = ["mapnet/histogram/entropy", "mapnet/histogram/log10_relative_p", "mapnet/histogram/token_weight"]
    assert set(names) <= set(acc.Tags()["histograms"])
    trains = {r["step"]: r for r in jsonl(run) if r["kind"] == "train"}
    for event in acc.Histograms("mapnet/histogram/entropy"):
        h = event.histogram_value
        # One value per sequence of the log step (batch 8, one process), mean = the logged scalar.
        assert h.num == 8 and h.sum / h.num == pytest.approx(trains[event.step]["mapnet/entropy"], rel=1e-5)
        assert 0 < h.min <= h.max <= 1 + 1e-6  # float32 proposal: entropy may round past 1
    for event in acc.Histograms("mapnet/histogram/token_weight"):
        h = event.histogram_value
        # HT weights with a uniform share alpha = 0.25 are bounded by 1/alpha; their mean is the logged scalar.
        assert h.max <= 4 + 1e-6
        assert h.sum / h.num == pytest.approx(trains[event.step]["mapnet/token_weight"], rel=1e-5)
    p = acc.Histograms("mapnet/histogram/log10_relative_p")[-1].histogram_value
    assert p.min < 0 < p.max  # a learned proposal: some positions below uniform's probability, some above


def wandb_records(path: Path):
    """The protobuf records of an offline run's .wandb file (a LevelDB-style log after a 7-byte W&B header)."""
    from wandb.proto import wandb_internal_pb2 as pb

    data = path.read_bytes()
    assert data[:4] == b":W&B"
    pos, block, buf = 7, 32768, b""
    while pos + 7 <= len(data):
        left = block - pos % block
        if left < 7:  # a block's tail too short for a header is padding
            pos += left
            continue
        _crc, length, kind = struct.unpack("<IHB", data[pos : pos + 7])
        if length == 0 and kind == 0:
            pos += left
            continue
        buf += data[pos + 7 : pos + 7 + length]
        pos += 7 + length
        if kind in (1, 4):  # FULL or LAST: one record complete
            record = pb.Record()
            record.ParseFromString(buf)
            yield record
            buf = b""


def test_wandb_offline_logs_every_metric_with_the_project_and_name_asked(shards, tmp_path, monkeypatch):
    pytest.importorskip("wandb")
    monkeypatch.setenv("WANDB_MODE", "offline")  # never the network
    monkeypatch.setenv("WANDB_SILENT", "true")
    run = tmp_path / "run"
    pretrain(settings("logging.wandb=true", "logging.wandb_project=enc", "logging.wandb_name=tiny-1"), shards, run)
    import wandb

    wandb.teardown()  # the run's file is written by W&B's service process: stop it so every record is on disk
    files = list(run.glob("wandb/offline-run-*/run-*.wandb"))
    assert len(files) == 1, files
    history: dict[str, dict[int, float]] = {}
    meta = None
    for record in wandb_records(files[0]):
        kind = record.WhichOneof("record_type")
        if kind == "run":
            meta = record.run
        elif kind == "history":
            items = {item.key or "/".join(item.nested_key): json.loads(item.value_json) for item in record.history.item}
            step = items["_step"]
            for name, value in items.items():
                if not name.startswith("_"):
                    history.setdefault(name, {})[step] = value
    assert meta.project == "enc" and meta.display_name == "tiny-1"
    assert meta.run_id == json.loads((run / tracking.WANDB_ID_FILE).read_text())["id"]
    assert_same(history, expected(run))


def test_wandb_gets_the_mapnet_histograms(synthetic_shards, tmp_path, monkeypatch):
    pytest.importorskip("wandb")
    monkeypatch.setenv("WANDB_MODE", "offline")
    monkeypatch.setenv("WANDB_SILENT", "true")
    run = tmp_path / "run"
    s = mapnet_settings(2, "logging.wandb=true")
    pretrain(s, synthetic_shards, run)
    import wandb

    wandb.teardown()
    [file] = run.glob("wandb/offline-run-*/run-*.wandb")
    logged = {}
    for record in wandb_records(file):
        if record.WhichOneof("record_type") == "history":
            for item in record.history.item:
                logged[item.key or "/".join(item.nested_key)] = json.loads(item.value_json)
    # The history record flattens a histogram into its fields (nested keys).
    assert logged["mapnet/histogram/entropy/_type"] == "histogram"
    assert sum(logged["mapnet/histogram/entropy/values"]) == 8  # one count per sequence of the log step
    assert logged["mapnet/histogram/log10_relative_p/_type"] == "histogram"


def test_a_sink_without_its_package_is_one_line_naming_the_extra(shards, tmp_path, monkeypatch):
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "tensorboard" else real(name, *a))
    out = tmp_path / "run"
    result = CliRunner().invoke(
        app,
        [
            "pretrain",
            str(shards),
            "--out",
            str(out),
            "--preset",
            "tiny",
            "--recipe",
            "paper",
            *[a for kv in TINY for a in ("--set", kv)],
            "--set",
            "logging.tensorboard=true",
        ],
    )
    assert isinstance(result.exception, MapnetError) and result.exit_code != 0
    assert "pip install 'mapnet[tensorboard]'" in str(result.exception) and "\n" not in str(result.exception)
    assert not out.exists()  # refused before anything was written
    with pytest.raises(MapnetError, match="mapnet\\[tensorboard\\]"):  # the library refuses too (torchrun workers)
        pretrain(settings("logging.tensorboard=true"), shards, tmp_path / "lib")


def test_a_sink_close_error_does_not_replace_the_error_that_stopped_the_run(tmp_path):
    from mapnet_cli.train import MetricsLog

    closed = []

    class Broken:
        def close(self, failed):
            closed.append(failed)
            raise OSError(28, "No space left on device")

    log = MetricsLog(tmp_path / "metrics.jsonl", True, None, [Broken(), Broken()])
    with pytest.raises(MapnetError, match="the disk is full"):
        try:
            raise MapnetError("the disk is full")
        finally:
            log.close(failed=True)
    assert closed == [True, True]  # every sink still closed
    log = MetricsLog(tmp_path / "metrics.jsonl", True, None, [Broken()])
    with pytest.raises(OSError):  # a run that succeeded reports its sink's close error
        log.close(failed=False)


class FakeWandb:
    """Stands in for the wandb module: records what `init` is asked."""

    def __init__(self):
        self.calls = []

    def init(self, **kwargs):
        self.calls.append(kwargs)
        return object()

    def Settings(self, **kwargs):
        return kwargs


@pytest.mark.parametrize("text", ['{"id": "ab', "[1]", "{}", '{"id": 3}'])
def test_a_corrupt_wandb_run_file_is_one_line(tmp_path, monkeypatch, text):
    import sys

    monkeypatch.setitem(sys.modules, "wandb", FakeWandb())
    run = tmp_path / "run"
    run.mkdir()
    (run / tracking.WANDB_ID_FILE).write_text(text)
    with pytest.raises(MapnetError) as info:
        tracking.WandbSink(settings("logging.wandb=true"), run, resume_step=10)
    assert tracking.WANDB_ID_FILE in str(info.value) and "\n" not in str(info.value)


def test_wandb_names_a_run_by_its_folder_and_parent_unless_asked(tmp_path, monkeypatch):
    import sys

    fake = FakeWandb()
    monkeypatch.setitem(sys.modules, "wandb", fake)
    for arm in ("uniform", "span"):
        (tmp_path / arm / "seed-0").mkdir(parents=True)
        tracking.WandbSink(settings("logging.wandb=true"), tmp_path / arm / "seed-0", resume_step=None)
    tracking.WandbSink(settings("logging.wandb=true", "logging.wandb_name=mine"), tmp_path / "span" / "seed-0", None)
    assert [c["name"] for c in fake.calls] == ["uniform/seed-0", "span/seed-0", "mine"]
