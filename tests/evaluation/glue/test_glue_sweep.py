"""Encoding, one run, the sweep (selection, resume, keys) and the CLI on fake checkpoints."""

from __future__ import annotations

import importlib.util
import json
import math
import sys
import tomllib
from dataclasses import replace

import numpy as np
import pytest
from glue_fixtures import make_checkpoint, make_glue_dir
from typer.testing import CliRunner

from mapnet_cli import settings as settings_mod
from mapnet_cli.cli import app
from mapnet_cli.errors import MapnetError
from mapnet_cli.evaluation.glue import report
from mapnet_cli.evaluation.glue.encode import TextEncoder
from mapnet_cli.evaluation.glue.finetune import length_grouped_batches, lr_lambda, select_epoch
from mapnet_cli.evaluation.glue.pretrained import find_checkpoints
from mapnet_cli.evaluation.glue.sweep import Events, make_plan, run_sweep, summarize


def _ft(**kw):
    base = settings_mod.Settings().finetune
    small = dict(batch_sizes=(8,), learning_rates=(1e-3,), seeds=2, epochs=2, max_seq_len=64)
    return replace(base, **{**small, **kw})


class Counting(Events):
    def __init__(self, stop_after: int | None = None):
        self.finished, self.notes, self.total, self.advanced = [], [], None, 0
        self.stop_after = stop_after

    def start(self, total_steps, runs, done):
        self.total, self.runs, self.done = total_steps, runs, done

    def advance(self, steps):
        self.advanced += steps

    def note(self, text):
        self.notes.append(text)

    def run_finished(self, key, record):
        self.finished.append(key)
        if self.stop_after is not None and len(self.finished) >= self.stop_after:
            raise KeyboardInterrupt  # as if Ctrl-C arrived between runs


# ---------------------------------------------------------------- encoding
def test_encoder_cleans_like_pretraining_and_lays_out_pairs(fake_run):
    from mapnet_cli.data.cleaning import Cleaner

    (ref,) = find_checkpoints([fake_run])
    st = settings_mod.Settings().preprocess
    enc = TextEncoder(ref.path / "tokenizer.json", st, max_len=12)
    raw = "The CAT sat, didn't it?"
    (cleaned,) = Cleaner(st)([raw])
    assert cleaned == cleaned.lower() and " , " in cleaned  # lower-cased and Moses-tokenised
    a = enc.tokenise([raw])[0]
    assert a.tolist() == enc.tokenizer.encode(cleaned, add_special_tokens=False).ids
    seq, cut = enc.pair(a[:3], a[:2])
    assert seq.tolist() == [2, *a[:3], 3, *a[:2], 3] and not cut  # [CLS]=2, [SEP]=3 (bpe.SPECIAL_TOKENS)
    single, _ = enc.pair(a[:3], None)
    assert single.tolist() == [2, *a[:3], 3]


def test_encoding_needs_no_spacy(fake_run, monkeypatch):
    # Fine-tuning cleans one-sentence texts with Moses only: it must run where spaCy is missing (the GPU
    # image has no spaCy, and the first GPU fine-tuning failed on it); splitting sentences still needs it.
    from mapnet_cli.data.textproc import TextProcessor

    monkeypatch.setitem(sys.modules, "spacy", None)  # `import spacy` now raises ImportError
    (ref,) = find_checkpoints([fake_run])
    enc = TextEncoder(ref.path / "tokenizer.json", settings_mod.Settings().preprocess, max_len=12)
    assert len(enc.tokenise(["The CAT sat, didn't it?"])[0]) > 3
    with pytest.raises(ImportError):
        TextProcessor(settings_mod.Settings().preprocess).process(["One. Two."])


@pytest.mark.parametrize("la, lb, keep", [(10, 3, (6, 3)), (3, 10, (3, 6)), (9, 9, (4, 5)), (20, 1, (8, 1))])
def test_longest_first_truncation(fake_run, la, lb, keep):
    (ref,) = find_checkpoints([fake_run])
    enc = TextEncoder(ref.path / "tokenizer.json", settings_mod.Settings().preprocess, max_len=12)  # budget 9
    a, b = np.arange(100, 100 + la), np.arange(200, 200 + lb)
    seq, cut = enc.pair(a, b)
    assert cut and len(seq) == 12
    body_a = [t for t in seq.tolist() if 100 <= t < 200]
    body_b = [t for t in seq.tolist() if t >= 200]
    # The shorter side keeps min(len, budget // 2); ties cut b first-equal: (9, 9) -> a 5 / b 4 or a 4 / b 5.
    assert sorted((len(body_a), len(body_b))) == sorted(keep)
    assert body_a == list(range(100, 100 + len(body_a)))  # cut from the end, never the start


def test_token_cache_is_used(fake_run, tmp_path):
    (ref,) = find_checkpoints([fake_run])
    enc = TextEncoder(ref.path / "tokenizer.json", settings_mod.Settings().preprocess, 32, cache_dir=tmp_path)
    first = enc.tokenise(["one text", "another one"])
    (cache,) = tmp_path.glob("tokens-*.npz")
    enc._tokenise = lambda texts: pytest.fail("cache ignored")  # noqa: E731
    assert [x.tolist() for x in enc.tokenise(["one text", "another one"])] == [x.tolist() for x in first]
    cache.write_bytes(b"garbage")  # a damaged cache is rebuilt, not trusted
    enc._tokenise = TextEncoder._tokenise.__get__(enc)
    assert [x.tolist() for x in enc.tokenise(["one text", "another one"])] == [x.tolist() for x in first]


# ---------------------------------------------------------------- pieces of a run
def test_length_grouped_batches_cover_everything_and_pad_less():
    rng = np.random.default_rng(0)
    lengths = rng.integers(5, 200, size=1000)
    batches = length_grouped_batches(lengths, 16, 20, np.random.default_rng(1))
    assert sorted(np.concatenate(batches).tolist()) == list(range(1000))
    plain = length_grouped_batches(lengths, 16, 1, np.random.default_rng(1))
    padded = lambda bs: sum(len(b) * lengths[b].max() for b in bs)  # noqa: E731
    assert padded(batches) < 0.75 * padded(plain)
    # Not a global sort: the first batches are not all short.
    assert np.mean([lengths[b].max() for b in batches[:10]]) > 60


def test_warmup_then_linear_decay():
    f = lr_lambda(total=100, warmup=6)
    assert [round(f(s), 4) for s in (0, 5, 6)] == [round(1 / 6, 4), 1.0, 1.0]
    assert f(53) == pytest.approx(47 / 94) and f(99) == pytest.approx(1 / 94) and f(100) == 0.0


def test_select_epoch_rules():
    epochs = [{"score": 0.5}, {"score": 0.7}, {"score": 0.6}]
    assert select_epoch(epochs, "best_epoch") == 1 and select_epoch(epochs, "last_epoch") == 2
    assert select_epoch([{"score": float("nan")}, {"score": 0.1}], "best_epoch") == 1


# ---------------------------------------------------------------- selection (summary) on hand-made records
def _record(task, scores):
    """A run record whose epochs carry `scores` for a single-entry accuracy task."""
    return {
        "task": task,
        "epochs": [
            {"epoch": i + 1, "score": s, "entries": {task: {"metrics": {"acc": s}, "score": s}}}
            for i, s in enumerate(scores)
        ],
    }


def test_best_configuration_is_the_best_mean_not_the_best_run(fake_run):
    refs = find_checkpoints([fake_run])
    ft = _ft(batch_sizes=(16,), learning_rates=(1e-5, 2e-5), seeds=3)
    plan = make_plan(refs, ["RTE"], ft)
    runs = {}
    # lr 1e-5: one lucky seed (0.9) but mean 0.6; lr 2e-5: steady 0.7.
    for item, scores in zip(plan, [[0.9], [0.45], [0.45], [0.7], [0.7], [0.7]]):
        runs[item.key] = _record("RTE", scores)
    s = summarize(runs, plan, "best_epoch")["checkpoints"][0]
    best = s["tasks"]["RTE"]["best"]
    assert (
        best["lr"] == 2e-5
        and best["score"] == pytest.approx(0.7)
        and best["score_std"] == pytest.approx(0.0, abs=1e-12)
    )
    assert s["glue"]["score"] == pytest.approx(0.7) and s["glue"]["entries"] == ["RTE"]
    # best_epoch vs last_epoch: the per-run score follows the rule.
    runs = {item.key: _record("RTE", [0.8, 0.6]) for item in plan}
    assert summarize(runs, plan, "best_epoch")["checkpoints"][0]["entries"]["RTE"] == pytest.approx(0.8)
    assert summarize(runs, plan, "last_epoch")["checkpoints"][0]["entries"]["RTE"] == pytest.approx(0.6)
    # Sample std (ddof=1) over seeds.
    runs = {item.key: _record("RTE", [v]) for item, v in zip(plan, [0.5, 0.6, 0.7, 0, 0, 0])}
    best = summarize(runs, plan, "best_epoch")["checkpoints"][0]["tasks"]["RTE"]["best"]
    assert best["score_std"] == pytest.approx(np.std([0.5, 0.6, 0.7], ddof=1))


# ---------------------------------------------------------------- the sweep on fake checkpoints
def test_sweep_records_every_epoch_and_resumes(fake_run, glue_dir, tmp_path):
    refs = find_checkpoints([fake_run])
    out = tmp_path / "out"
    ft = _ft()
    ev = Counting(stop_after=1)
    with pytest.raises(KeyboardInterrupt):
        run_sweep(refs, ["RTE", "MNLI"], glue_dir, out, ft, ev)
    doc = json.loads((out / "results.json").read_text())
    assert len(doc["runs"]) == 1  # written after the first run, before the interrupt landed
    (first,) = doc["runs"]
    ev2 = Counting()
    doc = run_sweep(refs, ["RTE", "MNLI"], glue_dir, out, ft, ev2)
    assert ev2.done == 1 and ev2.runs == 3 and first not in ev2.finished and len(ev2.finished) == 3
    assert ev2.advanced == ev2.total == 3 * 2 * math.ceil(24 / 8)  # one bar: every step of the rest
    assert len(doc["runs"]) == 4
    for rec in doc["runs"].values():
        assert [e["epoch"] for e in rec["epochs"]] == [1, 2]
        entries = ["MNLI-m", "MNLI-mm"] if rec["task"] == "MNLI" else ["RTE"]
        assert all(list(e["entries"]) == entries for e in rec["epochs"])
    # A third run has nothing to do.
    ev3 = Counting()
    run_sweep(refs, ["RTE", "MNLI"], glue_dir, out, ft, ev3)
    assert ev3.finished == [] and ev3.total == 0
    # A setting that changes outcomes (epochs) is part of the key: nothing stale is reused.
    ev4 = Counting()
    run_sweep(refs, ["RTE"], glue_dir, out, _ft(epochs=1), ev4)
    assert len(ev4.finished) == 2


def test_sweep_is_deterministic_per_seed_and_seeds_differ(fake_run, glue_dir, tmp_path):
    refs = find_checkpoints([fake_run])
    a = run_sweep(refs, ["STS-B"], glue_dir, tmp_path / "a", _ft(), Counting())
    b = run_sweep(refs, ["STS-B"], glue_dir, tmp_path / "b", _ft(), Counting())
    ra = [r["epochs"][-1]["train_loss"] for r in a["runs"].values()]
    rb = [r["epochs"][-1]["train_loss"] for r in b["runs"].values()]
    assert ra == pytest.approx(rb) and ra[0] != ra[1]
    metrics = next(iter(a["runs"].values()))["epochs"][0]["entries"]["STS-B"]["metrics"]
    assert set(metrics) == {"pearson", "spearman"}


def test_missing_tasks_named_together_before_training(fake_run, tmp_path):
    root = make_glue_dir(tmp_path / "glue", tasks=("RTE",))
    with pytest.raises(MapnetError, match=r"CoLA: folder not found.*SST-2: folder not found"):
        run_sweep(find_checkpoints([fake_run]), ["RTE", "CoLA", "SST-2"], root, tmp_path / "o", _ft(), Counting())
    assert not (tmp_path / "o" / "results.json").exists()


def test_skipped_qqp_rows_are_reported(fake_run, glue_dir, tmp_path):
    path = glue_dir / "QQP" / "train.tsv"
    path.write_text(path.read_text() + "99\t1\t2\tbroken\n")
    ev = Counting()
    doc = run_sweep(find_checkpoints([fake_run]), ["QQP"], glue_dir, tmp_path / "o", _ft(seeds=1, epochs=1), ev)
    assert any("QQP train.tsv: skipped 1 malformed rows (lines 26)" in n for n in ev.notes)
    assert doc["data"]["QQP"]["train"]["skipped_malformed"] == 1


# ---------------------------------------------------------------- the command
def _cells(output: str) -> str:
    return " ".join(output.split())


def test_cli_checkpoint_sweep_json_and_tables_agree(fake_run, glue_dir, tmp_path):
    out = tmp_path / "out"
    # `--checkpoints RUN MORE...`: the extra path (a checkpoint of the same run) is de-duplicated by weights hash.
    args = [
        "finetune-glue",
        "--task",
        "rte,mrpc,wnli",
        "--checkpoints",
        str(fake_run),
        str(fake_run / "checkpoints" / "step-00000100"),
        "--data",
        str(glue_dir),
        "--out",
        str(out),
        "--grid",
        "8x1e-3",
        "--seeds",
        "2",
        "--epochs",
        "1",
        "--set",
        "finetune.max_seq_len=64",
    ]
    res = CliRunner().invoke(app, args, env={"COLUMNS": "250"})
    assert res.exit_code == 0, res.output
    doc = json.loads((out / "results.json").read_text())
    assert len(doc["runs"]) == 2 * 3 * 2  # 2 checkpoints x 3 tasks x 1 config x 2 seeds
    text = _cells(res.output)
    summary = doc["summary"]
    assert [(c["run"], c["step"]) for c in summary["checkpoints"]] == [("fake-bert", 100), ("fake-bert", 200)]
    for ck in summary["checkpoints"]:
        mrpc = ck["tasks"]["MRPC"]["best"]["entries"]["MRPC"]
        f1, acc = mrpc["metrics"]["f1"], mrpc["metrics"]["acc"]
        assert mrpc["score"] == pytest.approx((f1["mean"] + acc["mean"]) / 2)
        row = (
            f"fake-bert@{ck['step']} │ MRPC │ f1 {report.pm(f1['mean'], f1['std'])} / acc "
            f"{report.pm(acc['mean'], acc['std'])} │ {report.pm(mrpc['score'], mrpc['score_std'])}"
        )
        assert row in text
        # GLUE = mean of the paper's entries run here; WNLI is shown but not averaged.
        assert ck["glue"]["entries"] == ["MRPC", "RTE"]
        assert ck["glue"]["score"] == pytest.approx((ck["entries"]["MRPC"] + ck["entries"]["RTE"]) / 2)
        assert (
            f"fake-bert@{ck['step']} │ GLUE │ mean over 2/9: MRPC, RTE │ {report.points(ck['glue']['score'])}" in text
        )
    g = [report.points(ck["glue"]["score"]) for ck in summary["checkpoints"]]
    assert f"│ fake-bert │ {g[0]} │ {g[1]} │" in text  # Table 2: a row per run, a column per step
    for entry in ("MRPC", "RTE", "WNLI"):  # and per entry, the learning curves as numbers
        e = [report.points(ck["entries"][entry]) for ck in summary["checkpoints"]]
        assert f"│ {entry} │ fake-bert │ {e[0]} │ {e[1]} │" in text
    curves = (out / "learning_curves.csv").read_text().splitlines()
    assert curves[0] == "run,step,entry,score,std,seeds,batch_size,lr" and len(curves) == 1 + 2 * 4
    # The plot is optional (mapnet[plots]); either it is written or the output says why not.
    if importlib.util.find_spec("matplotlib"):
        assert (out / "learning_curves.png").is_file()
    else:
        assert "matplotlib is not installed (pip install 'mapnet[plots]')" in res.output
    # Re-running is a no-op that reports the same numbers.
    again = CliRunner().invoke(app, args, env={"COLUMNS": "250"})
    assert again.exit_code == 0 and "resuming: 12 runs already in results.json, 0 to go" in again.output
    assert json.loads((out / "results.json").read_text())["summary"] == summary


def test_cli_errors_are_one_line(fake_run, glue_dir, tmp_path):
    runner = CliRunner()
    base = ["finetune-glue", "--data", str(glue_dir), "--out", str(tmp_path / "o"), "--checkpoint", str(fake_run)]
    for extra, msg in [
        (["--task", "rte", "--grid", "16;32x1e-5"], "--grid batch sizes must be a comma-separated list of ints"),
        (["--task", "rte", "--grid", "16"], "--grid expects BATCH_SIZES x LEARNING_RATES"),
        (["--task", "nope"], "unknown GLUE task 'nope'"),
        (["--task", "rte", "--seeds", "0"], "finetune.seeds must be >= 1"),
    ]:
        res = runner.invoke(app, base + extra)
        assert isinstance(res.exception, MapnetError) and msg in str(res.exception), (extra, res.output)
    res = runner.invoke(app, ["finetune-glue", "--task", "rte", "--data", str(glue_dir), "--out", str(tmp_path / "o")])
    assert "name what to fine-tune" in str(res.exception)


def test_quick_preset_sits_below_flags(fake_run, glue_dir, tmp_path):
    base = [
        "finetune-glue",
        "--task",
        "rte",
        "--data",
        str(glue_dir),
        "--out",
        str(tmp_path),
        "--checkpoint",
        str(fake_run),
        "--print-settings",
        "--quick",
    ]
    res = CliRunner().invoke(app, base)
    ft = tomllib.loads(res.output)["finetune"]
    assert (ft["batch_sizes"], ft["learning_rates"], ft["seeds"], ft["epochs"], ft["max_train"]) == (
        [32],
        [8e-5],
        2,
        2,
        2000,
    )
    res = CliRunner().invoke(app, base + ["--seeds", "3"])
    assert tomllib.loads(res.output)["finetune"]["seeds"] == 3


def test_bf16_autocast_path_runs_on_cpu(fake_run, glue_dir, tmp_path):
    # The CUDA default is bf16 autocast; CPU autocast exercises the same code (losses in fp32, metrics finite).
    doc = run_sweep(
        find_checkpoints([fake_run]),
        ["STS-B", "RTE"],
        glue_dir,
        tmp_path / "o",
        _ft(seeds=1, epochs=1, precision="bf16"),
        Counting(),
    )
    for rec in doc["runs"].values():
        assert rec["precision"] == "bf16" and math.isfinite(rec["epochs"][0]["train_loss"])


@pytest.mark.gpu
def test_sweep_on_cuda(fake_run, glue_dir, tmp_path):
    import torch

    if not torch.cuda.is_available():
        pytest.skip("needs a CUDA device")
    doc = run_sweep(find_checkpoints([fake_run]), ["MNLI", "STS-B"], glue_dir, tmp_path / "o", _ft(seeds=1), Counting())
    for rec in doc["runs"].values():
        assert rec["device"].startswith("cuda") and rec["precision"] == "bf16"
        assert math.isfinite(rec["epochs"][-1]["train_loss"])


def test_checkpoint_selection(tmp_path, fake_run):
    import shutil

    run = tmp_path / "bert"
    make_checkpoint(run, steps=(10, 20, 30), seed=7)  # seed: weights unlike fake_run's (equal weights are deduplicated)
    # A checkpoint whose marker was never written (killed mid-save) is not part of any sweep.
    (run / "checkpoints" / "step-00000030" / "COMPLETE").unlink()
    refs = find_checkpoints(every=[run])
    assert [(r.run, r.step) for r in refs] == [("bert", 10), ("bert", 20)]
    assert [r.step for r in find_checkpoints(latest=[run])] == [20]
    # The same weights named twice (run folder + its checkpoint folder) are evaluated once.
    both = find_checkpoints(latest=[run / "checkpoints" / "step-00000020"], every=[run, fake_run])
    assert [(r.run, r.step) for r in both] == [("bert", 10), ("bert", 20), ("fake-bert", 100), ("fake-bert", 200)]
    shutil.rmtree(run / "checkpoints")
    (run / "checkpoints").mkdir()
    with pytest.raises(MapnetError, match="no complete checkpoint"):
        find_checkpoints(every=[run])


def test_unreadable_results_file_is_a_clear_error(fake_run, glue_dir, tmp_path):
    (tmp_path / "results.json").write_text("{not json")
    with pytest.raises(MapnetError, match="results.json is unreadable .* move it away"):
        run_sweep(find_checkpoints([fake_run]), ["RTE"], glue_dir, tmp_path, _ft(), Counting())
    (tmp_path / "results.json").write_text('{"schema": "something/else", "runs": {}}')
    with pytest.raises(MapnetError, match="not a mapnet GLUE results file"):
        run_sweep(find_checkpoints([fake_run]), ["RTE"], glue_dir, tmp_path, _ft(), Counting())


# ---------------------------------------------------------------- pooling and fine-tuning dropout
def test_mean_pooling_is_the_mean_over_real_tokens_and_ignores_padding():
    import torch

    from mapnet_cli.evaluation.glue.model import SequenceClassifier
    from mapnet_cli.model.bert import BertConfig, Encoder

    torch.manual_seed(0)
    enc = Encoder(
        BertConfig(
            vocab_size=50,
            hidden=16,
            layers=1,
            heads=2,
            intermediate=32,
            max_position=16,
            dropout=0.0,
            attention_dropout=0.0,
        )
    ).eval()
    model = SequenceClassifier(enc, 2, 0.0, pooling="mean").eval()
    ids = torch.randint(5, 50, (2, 6))
    mask = torch.tensor([[1, 1, 1, 1, 1, 1], [1, 1, 1, 0, 0, 0]], dtype=torch.bool)
    with torch.no_grad():
        got = model(ids, mask)
        # Exact: row 1 alone, unpadded, is the same sequence; its mean is over its 3 tokens.
        states0 = enc(ids[:1])
        states1 = enc(ids[1:, :3])
        want = torch.cat([states0.mean(1), states1.mean(1)])
        want = model.out(torch.tanh(model.pooler(want)))
        assert torch.allclose(got, want, atol=1e-5)
        # A padded position's token changes nothing.
        ids2 = ids.clone()
        ids2[1, 4] = 7
        assert torch.allclose(model(ids2, mask), got, atol=1e-6)
    with pytest.raises(ValueError, match="pooling"):
        SequenceClassifier(enc, 2, 0.0, pooling="max")


def test_finetune_dropout_and_pooling_reach_the_run_and_its_key(fake_run, glue_dir, tmp_path):
    from mapnet_cli.evaluation.glue import runs as runs_mod
    from mapnet_cli.evaluation.glue import sweep as sweep_mod

    refs = find_checkpoints([fake_run])
    seen = []
    real = runs_mod.finetune_run

    def spy(make_encoder, spec, train, devs, rc, *a, **kw):
        enc = make_encoder()
        seen.append((rc.dropout, rc.pooling, enc.cfg.dropout, enc.cfg.attention_dropout, enc.emb_dropout.p))
        return real(make_encoder, spec, train, devs, rc, *a, **kw)

    import unittest.mock as mock

    with mock.patch.object(runs_mod, "finetune_run", spy):
        plain = run_sweep(refs, ["RTE"], glue_dir, tmp_path / "a", _ft(seeds=1, pooling="cls"), Counting())
        tuned = run_sweep(
            refs, ["RTE"], glue_dir, tmp_path / "b", _ft(seeds=1, dropout=0.25, pooling="mean"), Counting()
        )
    from mapnet_cli.evaluation.glue.pretrained import load_architecture

    ck, _ = load_architecture(refs[0])  # what the checkpoint recorded
    assert ck.dropout != 0.25
    assert seen[0] == (ck.dropout, "cls", ck.dropout, ck.attention_dropout, ck.dropout)  # -1: the checkpoint's own
    assert seen[1] == (0.25, "mean", 0.25, 0.25, 0.25)
    (k_plain,), (k_tuned,) = plain["runs"], tuned["runs"]
    assert k_plain != k_tuned  # both change outcomes, so both are in the run key
    # ... and with [CLS] pooling (the default before mean) the protocol's hash is what it was before these
    # settings existed, so results made then are still found; the mean default is in the key, so they are not
    # taken for mean-pooled ones.
    assert sweep_mod.protocol(_ft(pooling="cls")).keys() == {
        "epochs",
        "warmup_ratio",
        "weight_decay",
        "betas",
        "eps",
        "max_seq_len",
        "max_train",
        "max_dev",
        "length_group",
        "precision",
        "malformed_rows",
    }
    assert sweep_mod.protocol(_ft())["pooling"] == "mean"
    assert settings_mod.Settings().finetune.__class__(dropout=1.0).problems()
