"""`mapnet compare`: fair starts, the table agrees with results.json, reuse, determinism, and the statistics."""

from __future__ import annotations

import hashlib
import json
import math
import re
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
from tiny_shards import write_tiny_shards
from typer.testing import CliRunner

from mapnet_cli import compare as cmp
from mapnet_cli.cli import app
from mapnet_cli.compare import records
from mapnet_cli.errors import MapnetError
from mapnet_cli.model import checkpoint
from mapnet_cli.settings import MaskingSettings, resolve

SETS = [
    "model.max_position=32",
    "shard.max_seq_len=32",
    "train.batch_size=8",
    "train.eval_sequences=8",
    "train.eval_every=3",
    "optim.warmup.steps=2",
    "optim.lr=3e-3",
    "logging.log_every=2",
    "logging.progress=false",
    "train.device=cpu",
    "variance.snapshot_sentences=4",
    "variance.snapshot_masks=2",
    "variance.snapshot_project_dim=256",
]


def compare_args(shards: Path, out: Path, *extra: str) -> list[str]:
    """`shards` sits beside `other`, a second held-out set with the same tokenizer (train.extra_eval)."""
    args = [
        "compare",
        str(shards),
        "--out",
        str(out),
        "--strategies",
        "uniform,mapnet",
        "--seeds",
        "2",
        "--steps",
        "6",
        "--preset",
        "tiny",
        "--variance",
        "--set",
        f'train.extra_eval=["other={shards.parent / "other"}"]',
    ]
    for s in SETS:
        args += ["--set", s]
    return args + list(extra)


def invoke(args: list[str]):
    res = CliRunner().invoke(app, args, env={"COLUMNS": "250"})
    if res.exception and not isinstance(res.exception, SystemExit):
        raise res.exception
    return res


@pytest.fixture(scope="module")
def compared(tmp_path_factory):
    root = tmp_path_factory.mktemp("compare")
    shards = write_tiny_shards(root / "shards", train=96, valid=24, seq_len=32)
    # A second held-out set with the same tokenizer, as held-out books beside held-out Wikipedia.
    write_tiny_shards(root / "other", train=8, valid=16, seq_len=32, seed=5)
    out = root / "cmp"
    res = invoke(compare_args(shards, out))
    assert res.exit_code == 0, res.output
    return shards, out, res, json.loads((out / cmp.RESULTS).read_text())


def _runs(doc: dict, strategy: str) -> list[dict]:
    return sorted((r for r in doc["runs"] if r["strategy"] == strategy), key=lambda r: r["seed_index"])


# ---------------------------------------------------------------- end to end
@pytest.mark.slow
def test_same_start_same_data_same_eval_set(compared):
    shards, out, _, doc = compared
    assert doc["checks"] == {
        "same_initial_weights_per_seed": True,
        "same_data_order_per_seed": True,
        "same_step0_eval_loss_per_seed": True,
        "same_eval_set": True,
        "same_extra_eval_sets": True,
        "same_precision": True,
    }
    uni, mapn = _runs(doc, "uniform"), _runs(doc, "mapnet")
    assert [r["seed"] for r in uni] == [r["seed"] for r in mapn] == [0, 1]
    for u, m in zip(uni, mapn):
        assert u["initial_weights_sha256"] == m["initial_weights_sha256"]
        assert u["data_order_sha256"] == m["data_order_sha256"]
        assert u["eval"][0]["step"] == 0 and u["eval"][0]["eval_loss"] == m["eval"][0]["eval_loss"]
        assert u["eval"][-1]["eval_loss"] != m["eval"][-1]["eval_loss"]  # the masks did differ
    assert uni[0]["initial_weights_sha256"] != uni[1]["initial_weights_sha256"]
    assert uni[0]["eval"][0]["eval_loss"] != uni[1]["eval"][0]["eval_loss"]

    from mapnet_cli.model.bert import BertConfig, BertForMLM
    from mapnet_cli.train import DataOrder

    shas = set()
    for rec in doc["runs"]:
        run = Path(rec["path"])
        info = json.loads((run / "run.json").read_text())
        # Rebuilt from what the run itself recorded (its model config and seed), not from compare's settings.
        torch.manual_seed(info["seeds"]["train"])
        state = BertForMLM(BertConfig.from_dict(info["model"])).state_dict()
        digest = hashlib.sha256()
        for key in sorted(state):
            digest.update(key.encode())
            digest.update(state[key].contiguous().numpy().tobytes())
        assert digest.hexdigest() == rec["initial_weights_sha256"]
        first = DataOrder(info["shards"]["train_sequences"], info["seeds"]["train"]).take(0, 8)
        assert hashlib.sha256(first.astype(np.int64).tobytes()).hexdigest() == rec["data_order_sha256"]
        evals = [json.loads(ln) for ln in (run / "metrics.jsonl").read_text().splitlines()]
        shas |= {e["eval_sha256"] for e in evals if e["kind"] == "eval"}
        assert [s for s, _ in checkpoint.list_checkpoints(run)] == [3, 6]  # every eval step after 0
        assert set(rec["variance"]) == {"3", "6"}
    assert len(shas) == 1 and doc["runs"][0]["eval_sha256"] in shas
    assert len({r["extra_eval_sha256"]["other"] for r in doc["runs"]}) == 1
    assert set(doc["runs"][-1]["variance"]["6"]["schemes"]) >= {"uniform", "mapnet_clipped"}


@pytest.mark.slow
def test_table_matches_results_json(compared):
    _, out, res, doc = compared
    rows = {}
    for line in res.stdout.splitlines():
        cells = [c.strip() for c in line.strip().strip("│").split("│")]
        if cells and cells[0] in doc["strategies"]:
            rows[cells[0]] = cells
    assert set(rows) == {"uniform", "mapnet"}
    number = lambda text: [float(x) for x in re.findall(r"[-+]?\d+\.?\d*(?:e[-+]?\d+)?", text)]  # noqa: E731
    for name, cells in rows.items():
        agg = doc["aggregate"]["strategies"][name]
        for cell, ci, tol in (
            (cells[2], agg["final"]["eval_loss"], 1e-4),
            (cells[5], agg["final"]["eval_accuracy"], 1e-4),
            (cells[6], agg["seconds_per_step"], 1e-4),
        ):
            mean, half = number(cell)
            assert mean == pytest.approx(ci["mean"], abs=tol)
            assert half == pytest.approx((ci["ci95"][1] - ci["ci95"][0]) / 2, abs=tol)
        # The unigram plateau: every run recorded the same levels, and the column is the final loss minus it.
        assert {json.dumps(r["unigram"], sort_keys=True) for r in doc["runs"]} == {
            json.dumps(doc["unigram"], sort_keys=True)
        }
        assert 0 < doc["unigram"]["eval_unigram"] < 20 and "eval_unigram@other" in doc["unigram"]
        assert number(cells[3])[0] == pytest.approx(
            agg["final"]["eval_loss"]["mean"] - doc["unigram"]["eval_unigram"], abs=1e-3
        )
        if name == "uniform":
            assert cells[4] == "-"
        else:  # the paired difference: per seed index, strategy minus uniform, then a t-interval
            diffs = [
                r["eval"][-1]["eval_loss"] - u["eval"][-1]["eval_loss"]
                for r in doc["runs"]
                if r["strategy"] == name
                for u in doc["runs"]
                if u["strategy"] == "uniform" and u["seed_index"] == r["seed_index"]
            ]
            mean, half = number(cells[4])
            assert mean == pytest.approx(float(np.mean(diffs)), abs=1e-4)
            assert agg["paired_vs_uniform"]["eval_loss"]["n"] == len(diffs) >= 2
        reached = agg["steps_to_target"]["mean_curve"]
        assert cells[7] == ("not reached" if reached is None else f"{reached:.1f}")
        mean, half = number(cells[8])  # the extra held-out set's column
        other = agg["final"]["eval_loss@other"]
        assert mean == pytest.approx(other["mean"], abs=1e-4) and other["mean"] != agg["final"]["eval_loss"]["mean"]
        assert half == pytest.approx((other["ci95"][1] - other["ci95"][0]) / 2, abs=1e-4)
        assert set(agg["steps_to_target_by_set"]) == {"other"}
        total = number(cells[10])[0]
        assert total == pytest.approx(agg["variance"]["total_variance"][-1]["mean"], rel=1e-3)
    # The uniform baseline reaches its own final mean loss by its last step at the latest.
    assert doc["aggregate"]["strategies"]["uniform"]["steps_to_target"]["mean_curve"] <= 6
    assert (out / "command.txt").is_file()
    assert all((out / name).is_file() for name in ("loss_vs_step.png", "loss_vs_time.png", "variance_vs_step.png"))


@pytest.mark.slow
def test_rerun_reuses_runs_and_reproduces(compared):
    shards, out, _, doc = compared
    stamps = {r["path"]: (Path(r["path"]) / "metrics.jsonl").stat().st_mtime_ns for r in doc["runs"]}
    again = invoke(compare_args(shards, out))
    assert again.exit_code == 0, again.output
    doc2 = json.loads((out / cmp.RESULTS).read_text())
    assert doc2["aggregate"] == doc["aggregate"]
    assert all(r["reused"] for r in doc2["runs"])
    assert stamps == {r["path"]: (Path(r["path"]) / "metrics.jsonl").stat().st_mtime_ns for r in doc2["runs"]}

    # Training from scratch on CPU reproduces every held-out number exactly.
    import shutil

    redo = Path(_runs(doc, "mapnet")[1]["path"])
    shutil.rmtree(redo)
    third = invoke(compare_args(shards, out))
    assert third.exit_code == 0, third.output
    doc3 = json.loads((out / cmp.RESULTS).read_text())
    old, new = _runs(doc, "mapnet")[1], _runs(doc3, "mapnet")[1]
    assert not new["reused"]
    assert [(p["step"], p["eval_loss"], p["eval_accuracy"]) for p in new["eval"]] == [
        (p["step"], p["eval_loss"], p["eval_accuracy"]) for p in old["eval"]
    ]
    assert [t["loss"] for t in new["train"]] == [t["loss"] for t in old["train"]]
    assert new["variance"]["6"]["schemes"] == old["variance"]["6"]["schemes"]

    # Changed settings never silently reuse runs trained with other ones.
    with pytest.raises(MapnetError, match="other settings"):
        invoke(compare_args(shards, out, "--set", "optim.lr=1e-3"))


# ---------------------------------------------------------------- pure functions
def test_steps_to_target_on_a_hand_made_curve():
    steps = [0, 10, 20, 30]
    assert cmp.steps_to_target(steps, [5.0, 4.0, 3.0, 2.0], 2.5) == 25.0
    assert cmp.steps_to_target(steps, [5.0, 4.0, 3.0, 2.0], 3.0) == 20.0
    assert cmp.steps_to_target(steps, [5.0, 4.0, 3.0, 2.0], 5.0) == 0.0
    assert cmp.steps_to_target(steps, [5.0, 4.0, 3.0, 2.0], 1.0) is None
    # The first crossing counts, even if the curve rises again later.
    assert cmp.steps_to_target(steps, [5.0, 3.0, 4.0, 2.0], 3.5) == 7.5


def test_t_quantiles_and_ci_against_hand_computation():
    table = {1: 12.706204736, 2: 4.302652730, 3: 3.182446305, 4: 2.776445105, 9: 2.262157163, 30: 2.042272456}
    for dof, t in table.items():
        assert cmp.t_quantile_975(dof) == pytest.approx(t, abs=1e-6)
    ci = cmp.mean_ci([1.0, 2.0, 3.0])  # mean 2, sample std 1, n 3
    half = 4.302652730 / math.sqrt(3)
    assert ci["mean"] == 2.0 and ci["n"] == 3
    assert ci["ci95"] == pytest.approx([2.0 - half, 2.0 + half], abs=1e-9)
    assert cmp.mean_ci([4.0]) == {"mean": 4.0, "ci95": None, "n": 1}


def _run(strategy, k, losses, sps=0.5):
    return {
        "strategy": strategy,
        "seed_index": k,
        "seed": k,
        "seconds_per_step": sps,
        "eval": [
            {"step": s, "eval_loss": loss, "eval_accuracy": 0.1, "elapsed": s * sps}
            for s, loss in zip((0, 10, 20), losses)
        ],
    }


def test_aggregate_targets_uniforms_final_mean():
    runs = [
        _run("uniform", 0, [6.0, 5.0, 4.0]),
        _run("uniform", 1, [6.0, 5.0, 3.0]),
        _run("mapnet", 0, [6.0, 3.0, 2.0], 1.0),
        _run("mapnet", 1, [6.0, 4.0, 3.0], 1.0),
    ]
    agg = cmp.aggregate(runs, ["uniform", "mapnet"])
    assert agg["target"]["final_mean_eval_loss"] == 3.5
    m = agg["strategies"]["mapnet"]
    assert m["final"]["eval_loss"]["mean"] == 2.5
    # mean curve 6, 3.5, 2.5: reaches 3.5 exactly at step 10; seed 0 crosses at 0 + 2.5/3*10, seed 1 at 10 + 0.5/1*10.
    assert m["steps_to_target"]["mean_curve"] == 10.0
    assert m["steps_to_target"]["per_seed"] == pytest.approx([25 / 3, 15.0])
    assert m["seconds_to_target"] == 10.0
    assert agg["strategies"]["uniform"]["steps_to_target"]["per_seed"] == [None, 17.5]  # 10 + (5 - 3.5) / (5 - 3) * 10
    assert "steps_to_target" not in cmp.aggregate(runs[2:], ["mapnet"])["strategies"]["mapnet"]


def test_fairness_flags_runs_with_differing_extra_sets():
    base = {
        "seed_index": 0,
        "initial_weights_sha256": "w",
        "data_order_sha256": "d",
        "eval_sha256": "e",
        "eval": [{"step": 0, "eval_loss": 9.0}],
    }
    books_x, books_y = {**base, "extra_eval_sha256": {"books": "x"}}, {**base, "extra_eval_sha256": {"books": "y"}}
    checks = cmp.fairness_checks([books_x, books_y])
    assert checks["same_eval_set"] and not checks["same_extra_eval_sets"]
    assert cmp.fairness_checks([books_x, dict(books_x)])["same_extra_eval_sets"]
    assert not cmp.fairness_checks([books_x, {**base, "extra_eval_sha256": {}}])["same_extra_eval_sets"]


def test_fairness_flags_runs_trained_in_different_precisions():
    # bf16-native resolves per machine: an arm (or a resume) on a CPU with bf16 beside one without is not equal work.
    base = {
        "seed_index": 0,
        "initial_weights_sha256": "w",
        "data_order_sha256": "d",
        "eval_sha256": "e",
        "extra_eval_sha256": {},
        "eval": [{"step": 0, "eval_loss": 9.0}],
    }
    fp32, bf16, unrecorded = {**base, "precision": ["fp32"]}, {**base, "precision": ["bf16"]}, dict(base)
    assert cmp.fairness_checks([fp32, dict(fp32), unrecorded])["same_precision"]
    assert not cmp.fairness_checks([fp32, bf16])["same_precision"]
    assert not cmp.fairness_checks([{**base, "precision": ["bf16", "fp32"]}])["same_precision"]  # a resume elsewhere


def test_aggregate_extra_sets_get_their_own_curves_and_targets():
    runs = [_run("uniform", 0, [6.0, 5.0, 4.0]), _run("mapnet", 0, [6.0, 3.0, 2.0], 1.0)]
    for r, books in zip(runs, ([7.0, 6.0, 5.0], [7.0, 6.5, 5.5])):  # worse on books, better overall
        for point, loss in zip(r["eval"], books):
            point.update({"eval_loss@books": loss, "eval_accuracy@books": 0.2})
    m = cmp.aggregate(runs, ["uniform", "mapnet"])["strategies"]["mapnet"]
    assert m["final"]["eval_loss@books"]["mean"] == 5.5 and m["final"]["eval_loss"]["mean"] == 2.0
    assert [p["mean"] for p in m["curve"]["eval_loss@books"]] == [7.0, 6.5, 5.5]
    assert m["steps_to_target"]["mean_curve"] == pytest.approx(20 / 3)  # 6 -> 3 crosses 4 two thirds of the way
    assert m["steps_to_target_by_set"] == {"books": {"target": 5.0, "mean_curve": None, "per_seed": [None]}}


def _glue(score, entries):
    return {"score": score, "entries": entries, "score_entries": sorted(entries), "curve": []}


def test_glue_margin_over_random_init_is_paired_by_pretraining_seed():
    # GLUE scores are already means over fine-tuning seeds (finetune-glue's summary); seeds 0..2.
    runs = [_run("uniform", k, [6.0, 5.0, 4.0]) for k in range(3)] + [
        _run("mapnet", k, [6.0, 5.0, 4.5]) for k in range(3)
    ]
    uni = [(0.70, 0.60), (0.74, 0.58), (0.69, 0.61)]  # (SST-2, CoLA) per pretraining seed
    mapn = [(0.72, 0.55), (0.70, 0.57), (0.71, 0.60)]
    ctl = [(0.65, 0.50), (0.70, 0.52), (0.60, 0.55)]  # each seed's own control, an independent draw
    for r in runs:
        sst, cola = (uni if r["strategy"] == "uniform" else mapn)[r["seed_index"]]
        r["glue"] = _glue((sst + cola) / 2, {"SST-2": sst, "CoLA": cola})
    control = {
        k: {"seed_index": k, "init": "random", **_glue((s + c) / 2, {"SST-2": s, "CoLA": c})}
        for k, (s, c) in enumerate(ctl)
    }
    agg = cmp.aggregate(runs, ["uniform", "mapnet"], control)
    for name, arm in (("uniform", uni), ("mapnet", mapn)):
        m = agg["strategies"][name]["glue_vs_random_init"]
        # Average over fine-tuning seeds first (done upstream), then the paired difference per pretraining seed.
        diffs = [(a[0] + a[1]) / 2 - (c[0] + c[1]) / 2 for a, c in zip(arm, ctl)]
        assert m["score"]["mean"] == pytest.approx(np.mean(diffs))
        assert m["score"]["ci95"] == pytest.approx(cmp.mean_ci(diffs)["ci95"])
        assert m["independent_comparisons"] == 3 and m["seed_indices"] == [0, 1, 2]
        assert m["entries"]["SST-2"]["mean"] == pytest.approx(np.mean([a[0] - c[0] for a, c in zip(arm, ctl)]))
        assert set(m["entries"]) == {"SST-2", "CoLA"}
        # Pairing matters: the unpaired interval (control averaged away) is not what is reported.
        unpaired = cmp.mean_ci([(a[0] + a[1]) / 2 - np.mean([(c[0] + c[1]) / 2 for c in ctl]) for a in arm])
        assert m["score"]["ci95"] != pytest.approx(unpaired["ci95"])
    assert agg["glue_control"]["glue"]["mean"] == pytest.approx(np.mean([(s + c) / 2 for s, c in ctl]))
    assert agg["glue_control"]["seed_indices"] == [0, 1, 2]
    # A pretraining seed without a control is left out, and the count of comparisons says so.
    partial = cmp.aggregate(runs, ["uniform", "mapnet"], {k: control[k] for k in (0, 2)})
    assert partial["strategies"]["mapnet"]["glue_vs_random_init"]["independent_comparisons"] == 2

    header, rows = cmp.table_rows({"aggregate": agg})
    assert header[-2:] == ["GLUE", "GLUE Δ vs random init (paired)"]
    by_name = {r[0]: r for r in rows}
    assert set(by_name) == {"uniform", "mapnet", cmp.CONTROL_ROW} and all(len(r) == len(header) for r in rows)
    d = agg["strategies"]["mapnet"]["glue_vs_random_init"]["score"]
    assert by_name["mapnet"][-1] == f"{100 * d['mean']:+.2f} ± {100 * (d['ci95'][1] - d['ci95'][0]) / 2:.2f} (n=3)"
    g = agg["glue_control"]["glue"]
    assert by_name[cmp.CONTROL_ROW][1] == "3" and by_name[cmp.CONTROL_ROW][-1] == "control"
    assert by_name[cmp.CONTROL_ROW][-2] == f"{100 * g['mean']:.2f} ± {100 * (g['ci95'][1] - g['ci95'][0]) / 2:.2f}"
    # Without a control, the table is as before.
    header, rows = cmp.table_rows({"aggregate": cmp.aggregate(runs, ["uniform", "mapnet"])})
    assert header[-1] == "GLUE" and len(rows) == 2


def test_glue_protocol_option(tmp_path):
    import tomllib

    base = ["compare", str(tmp_path / "shards"), "--out", str(tmp_path / "out")]
    for extra, msg in (
        (["--glue-protocol", "small"], "need --glue-data"),
        (["--glue-data", str(tmp_path)], "the quick protocol names no tasks"),
        (["--glue-data", str(tmp_path), "--glue-protocol", "huge"], "unknown fine-tuning protocol"),
    ):
        with pytest.raises(MapnetError, match=msg):
            invoke(base + extra)
    res = invoke(base + ["--glue-protocol", "small", "--glue-data", str(tmp_path), "--print-settings"])
    ft = tomllib.loads(res.stdout)["finetune"]
    assert (ft["learning_rates"], ft["seeds"], ft["epochs"], ft["max_train"], ft["max_seq_len"]) == (
        [1e-4, 3e-4],
        3,
        3,
        20000,
        128,
    )
    res = invoke(base + ["--print-settings"])  # without GLUE the finetune section is quick's, as before
    assert tomllib.loads(res.stdout)["finetune"]["learning_rates"] == [8e-5]


def test_plots_draw_each_strategys_mean_curve_and_interval(tmp_path, monkeypatch):
    from mapnet_cli import plotting

    drawn = {}
    monkeypatch.setattr(plotting, "save_figure", lambda fig, path: drawn.setdefault(path.name, fig))
    runs = [_run("uniform", k, [6.0, 5.0, 4.0 + k]) for k in range(2)] + [
        _run("mapnet", k, [6.0, 4.0, 3.0]) for k in range(2)
    ]
    doc = {"aggregate": cmp.aggregate(runs, ["uniform", "mapnet"])}
    notes = cmp.write_plots(doc, tmp_path)
    assert sorted(drawn) == ["loss_vs_step.png", "loss_vs_time.png"]  # no variance or GLUE curve in these runs
    assert notes == [f"plot: {tmp_path / name}" for name in ("loss_vs_step.png", "loss_vs_time.png")]
    ax = drawn["loss_vs_step.png"].axes[0]
    lines = {line.get_label(): (list(line.get_xdata()), list(line.get_ydata())) for line in ax.get_lines()}
    assert lines == {"uniform": ([0, 10, 20], [6.0, 5.0, 4.5]), "mapnet": ([0, 10, 20], [6.0, 4.0, 3.0])}
    assert (ax.get_xlabel(), ax.get_ylabel()) == ("step", "held-out MLM loss")
    assert len(ax.collections) == 2  # one 95% band per strategy (two seeds each)
    assert list(drawn["loss_vs_time.png"].axes[0].get_lines()[0].get_xdata()) == [0.0, 5.0, 10.0]


def test_fifteen_arms_are_drawn_fifteen_different_ways(tmp_path, monkeypatch):
    """compare's 15 masking arms outnumber matplotlib's 10 colours: no two arms may share colour and line style,
    and each arm's band is in its line's colour."""
    from matplotlib.colors import to_rgba

    from mapnet_cli import plotting

    drawn = {}
    monkeypatch.setattr(plotting, "save_figure", lambda fig, path: drawn.setdefault(path.name, fig))
    arms = [
        "uniform",
        "uniform@0.3",
        "mapnet-ht-lite",
        "uniform@0.4",
        "mapnet-ht",
        "whole-word",
        "span",
        "pmi",
        "mapnet",
        "stratified",
        "frequency-ht",
        "adaptive",
        "adaptive-soft",
        "adaptive-ht",
        "adaptive-soft-ht",
    ]
    runs = [_run(arm, k, [6.0, 5.0, 4.0 + k + i / 10]) for i, arm in enumerate(arms) for k in range(2)]
    cmp.write_plots({"aggregate": cmp.aggregate(runs, arms)}, tmp_path)
    ax = drawn["loss_vs_step.png"].axes[0]
    looks = [(to_rgba(line.get_color()), line.get_linestyle()) for line in ax.get_lines()]
    assert [line.get_label() for line in ax.get_lines()] == arms and len(set(looks)) == 15
    bands = [tuple(band.get_facecolor()[0][:3]) for band in ax.collections]
    assert bands == [rgba[:3] for rgba, _ in looks]
    legend = ax.get_legend()
    assert [t.get_text() for t in legend.get_texts()] == arms
    assert legend.get_bbox_to_anchor().x0 >= ax.get_window_extent().x1  # right of the axes, not on the curves
    plotting.pyplot().close("all")


def test_plots_are_skipped_cleanly_without_matplotlib(tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # import fails as if not installed
    runs = [_run("uniform", 0, [6.0, 5.0, 4.0])]
    doc = {"aggregate": cmp.aggregate(runs, ["uniform"])}
    notes = cmp.write_plots(doc, tmp_path)
    assert notes == ["no plots: matplotlib is not installed (pip install 'mapnet[plots]')"]
    assert list(tmp_path.iterdir()) == []


def test_plan_gives_every_strategy_the_same_seeds(tmp_path):
    base = resolve(None, {"model": {"preset": "tiny"}}, ["train.steps=10", "train.eval_every=4", "train.seed=7"])
    plan = cmp.plan_runs(base, cmp.parse_strategies("uniform,mapnet-noweight,mapnet-noexplore"), 2, tmp_path)
    assert [(p.strategy, p.settings.train.seed) for p in plan] == [
        ("uniform", 7),
        ("mapnet-noweight", 7),
        ("mapnet-noexplore", 7),
        ("uniform", 8),
        ("mapnet-noweight", 8),
        ("mapnet-noexplore", 8),
    ]
    assert cmp.eval_steps(base.train) == [0, 4, 8, 10]
    noexp = plan[2].settings.masking
    assert (noexp.strategy, noexp.mapnet.explore_start, noexp.mapnet.explore_end, noexp.mapnet.importance) == (
        "mapnet",
        0.0,
        0.0,
        "clipped",
    )
    assert plan[1].settings.masking.mapnet.importance == "none"
    assert all(p.settings.train.checkpoint_every == 4 and p.settings.train.keep_steps == (4, 8, 10) for p in plan)
    assert plan[4].path == tmp_path / "runs" / "mapnet-noweight" / "seed-1"
    with pytest.raises(MapnetError, match="unknown strategy .bogus. .choose from uniform, .*NAME@RATE"):
        cmp.parse_strategies("uniform,bogus")


def test_new_arms_and_rates_resolve_to_their_settings(tmp_path):
    base = resolve(None, {"model": {"preset": "tiny"}}, ["train.steps=50", "train.eval_every=25"])
    names = cmp.parse_strategies(
        "mapnet-uncompressed,mapnet-ht,mapnet-ht-learnability,stratified,frequency-ht,uniform@0.3"
    )
    plan = {p.strategy: p.settings.masking for p in cmp.plan_runs(base, names, 1, tmp_path)}
    assert (
        plan["mapnet-uncompressed"].mapnet.explore_steps == 500
        and plan["mapnet-uncompressed"].mapnet.importance == "clipped"
    )
    ht = plan["mapnet-ht"].mapnet
    assert (ht.importance, ht.mix_uniform, ht.explore_start, ht.explore_end, ht.target) == (
        "ht",
        0.5,
        0.0,
        0.0,
        "gradnorm",
    )
    assert plan["mapnet-ht-learnability"].mapnet.target == "learnability"
    assert plan["stratified"].strategy == "stratified" and plan["frequency-ht"].frequency.mix_uniform == 0.5
    assert (plan["uniform@0.3"].strategy, plan["uniform@0.3"].mask_prob) == ("uniform", 0.3)
    for bad in ("uniform@x", "uniform@1.5"):
        with pytest.raises(MapnetError, match="masking rate"):
            cmp.parse_strategies(bad)


def test_the_adaptive_arms_resolve_and_take_a_scaled_period_the_other_arms_ignore(tmp_path):
    base = resolve(
        None,
        {"model": {"preset": "tiny"}},
        ["train.steps=50", "train.eval_every=25", "masking.adaptive.every=5"],
        check_ignored=False,
    )
    names = cmp.parse_strategies(
        "uniform,uniform@0.3,mapnet-ht-lite,adaptive,adaptive-soft,adaptive-ht,adaptive-soft-ht"
    )
    plan = {p.strategy: p.settings.masking for p in cmp.plan_runs(base, names, 1, tmp_path)}
    got = {
        name: (m.strategy, m.adaptive.score, m.adaptive.weights, m.adaptive.mix_uniform, m.adaptive.every)
        for name, m in plan.items()
        if name.startswith("adaptive")
    }
    assert got == {
        "adaptive": ("adaptive", "hard", "none", 0.0, 5),
        "adaptive-soft": ("adaptive", "soft", "none", 0.0, 5),
        "adaptive-ht": ("adaptive", "hard", "ht", 0.5, 5),
        "adaptive-soft-ht": ("adaptive", "soft", "ht", 0.5, 5),
    }
    assert plan["uniform"].adaptive.every == plan["mapnet-ht-lite"].adaptive.every == MaskingSettings().adaptive.every
    assert all(cmp.SCHEME[name] is None for name in got)  # no variance scheme of their own yet


def test_a_runs_recorded_settings_compare_with_the_plan_that_wrote_them(tmp_path):
    """run_all reuses a run only when its settings.toml matches the plan's pretraining settings."""
    s = resolve(None, {"model": {"preset": "tiny"}}, ["train.steps=10"])
    (tmp_path / "settings.toml").write_text(s.to_toml(), encoding="utf-8")
    assert cmp.pretraining_part(cmp.recorded_settings(tmp_path)) == cmp.pretraining_part(s.to_dict())
    other = resolve(None, {"model": {"preset": "tiny"}}, ["train.steps=10", "train.eval_mask_prob=0.3"])
    assert cmp.pretraining_part(cmp.recorded_settings(tmp_path)) != cmp.pretraining_part(other.to_dict())


@pytest.mark.slow
def test_glue_quick_on_final_checkpoints(compared, tmp_path):
    sys.path.insert(0, str(Path(__file__).parents[1] / "evaluation"))
    from glue_fixtures import make_glue_dir

    shards, out, _, _ = compared
    glue = make_glue_dir(tmp_path / "glue", tasks=("SST-2",))
    res = invoke(
        compare_args(shards, out, "--glue-tasks", "sst2", "--glue-data", str(glue), "--set", "finetune.max_seq_len=32")
    )
    assert res.exit_code == 0, res.output
    doc = json.loads((out / cmp.RESULTS).read_text())
    assert all(r["reused"] for r in doc["runs"])  # GLUE alone: nothing is pretrained again
    sweep = json.loads((out / "glue" / "results.json").read_text())
    # The --quick protocol: one configuration x 2 seeds per final checkpoint, checkpoints labelled by strategy.
    assert sweep["protocol"]["seeds"] == 2 and sweep["protocol"]["batch_sizes"] == [32]
    assert sweep["protocol"]["preset"] == "quick" and doc["glue_protocol"] == {"name": "quick", "tasks": ["SST-2"]}
    pretrained = [ck for ck in sweep["summary"]["checkpoints"] if ck["init"] == "pretrained"]
    assert sorted(ck["run"] for ck in pretrained) == sorted(
        f"{s}/seed-{k}" for s in ("uniform", "mapnet") for k in (0, 1)
    )
    assert all(ck["step"] == 6 for ck in pretrained)
    # One random-init control per pretraining seed, from that seed's uniform run, independent across seeds.
    controls = {ck["run"]: ck for ck in sweep["summary"]["checkpoints"] if ck["init"] == "random"}
    assert sorted(controls) == ["random-init/seed-0", "random-init/seed-1"]
    assert len({ck["sha256"] for ck in controls.values()}) == 2
    uniform_paths = {r["seed_index"]: r["path"] for r in _runs(doc, "uniform")}
    for k in (0, 1):
        assert controls[f"random-init/seed-{k}"]["path"].startswith(str(Path(uniform_paths[k]).resolve()))
        assert doc["glue_control"][str(k)]["score"] == controls[f"random-init/seed-{k}"]["glue"]["score"]
        assert doc["glue_control"][str(k)]["pretraining_seed"] == k
    # Each strategy's checkpoint is paired with its own seed's control, in the sweep too.
    for ck in pretrained:
        assert ck["margin"]["control_run"] == f"random-init/seed-{ck['run'][-1]}"
    for name in ("uniform", "mapnet"):
        scores = [r["glue"]["score"] for r in _runs(doc, name)]
        assert doc["aggregate"]["strategies"][name]["glue"]["mean"] == pytest.approx(np.mean(scores))
        margin = doc["aggregate"]["strategies"][name]["glue_vs_random_init"]
        diffs = [r["glue"]["score"] - doc["glue_control"][str(r["seed_index"])]["score"] for r in _runs(doc, name)]
        assert margin["score"]["mean"] == pytest.approx(np.mean(diffs)) and margin["independent_comparisons"] == 2
    cells = lambda ln: [c.strip() for c in ln.strip().strip("│").split("│")]  # noqa: E731
    row = cells(next(ln for ln in res.stdout.splitlines() if "│ mapnet" in ln))
    glue_mean = float(row[-2].split("±")[0])
    assert glue_mean == pytest.approx(100 * doc["aggregate"]["strategies"]["mapnet"]["glue"]["mean"], abs=0.01)
    d = doc["aggregate"]["strategies"]["mapnet"]["glue_vs_random_init"]["score"]
    assert float(row[-1].split("±")[0]) == pytest.approx(100 * d["mean"], abs=0.01) and row[-1].endswith("(n=2)")
    control_row = cells(next(ln for ln in res.stdout.splitlines() if cmp.CONTROL_ROW in ln))
    assert float(control_row[-2].split("±")[0]) == pytest.approx(
        100 * doc["aggregate"]["glue_control"]["glue"]["mean"], abs=0.01
    )
    assert "2 pretraining seeds = 2 independent comparisons" in " ".join(res.stdout.split())


@pytest.mark.slow
def test_glue_at_every_checkpoint_gives_a_curve(compared, tmp_path):
    sys.path.insert(0, str(Path(__file__).parents[1] / "evaluation"))
    import shutil

    from glue_fixtures import make_glue_dir

    shards, shared_out, _, _ = compared
    out = tmp_path / "cmp"  # a copy: the other GLUE test's sweep folder stays as it left it
    shutil.copytree(shared_out, out, ignore=shutil.ignore_patterns("glue"))
    glue = make_glue_dir(tmp_path / "glue", tasks=("SST-2",))
    with pytest.raises(MapnetError, match="needs --glue-tasks"):
        invoke(compare_args(shards, out, "--glue-every-checkpoint"))
    res = invoke(
        compare_args(
            shards,
            out,
            "--glue-tasks",
            "sst2",
            "--glue-data",
            str(glue),
            "--glue-every-checkpoint",
            "--set",
            "finetune.max_seq_len=32",
        )
    )
    assert res.exit_code == 0, res.output
    doc = json.loads((out / cmp.RESULTS).read_text())
    sweep = json.loads((out / "glue" / "results.json").read_text())
    by_run_step = {(ck["run"], ck["step"]): ck["glue"]["score"] for ck in sweep["summary"]["checkpoints"]}
    for name in ("uniform", "mapnet"):
        runs = _runs(doc, name)
        for r in runs:  # one point per kept checkpoint, straight from the sweep; the last is the final score
            assert [(p["step"], p["score"]) for p in r["glue"]["curve"]] == [
                (s, by_run_step[(f"{name}/seed-{r['seed_index']}", s)]) for s in (3, 6)
            ]
            assert r["glue"]["curve"][-1]["score"] == r["glue"]["score"]
        curve = doc["aggregate"]["strategies"][name]["glue_curve"]
        assert curve["steps"] == [3, 6]
        assert [p["mean"] for p in curve["score"]] == pytest.approx(
            [np.mean([r["glue"]["curve"][i]["score"] for r in runs]) for i in range(2)]
        )
    assert "no plots" in res.stderr or (out / "glue_vs_step.png").is_file()


def test_variance_is_measured_only_for_arms_with_a_variance_scheme(tmp_path, monkeypatch):
    shards = write_tiny_shards(tmp_path / "shards", train=16, valid=8, seq_len=32)
    base = resolve(None, {"model": {"preset": "tiny"}}, ["train.steps=4", "train.eval_every=2"])
    plan = cmp.plan_runs(base, cmp.parse_strategies("uniform,whole-word,span,pmi,span@0.3"), 1, tmp_path)
    measured = []
    monkeypatch.setattr(records, "run_record", lambda pr, *a: {"strategy": pr.strategy})
    monkeypatch.setattr(records, "variance_curve", lambda pr, shards: measured.append(pr.strategy) or {})
    runs = cmp.collect(plan, shards, {}, variance=True)
    assert measured == ["uniform"]
    assert ["variance" in r for r in runs] == [True, False, False, False, False]


def test_a_strategy_specific_setting_goes_to_the_arms_that_use_it(tmp_path):
    shards = write_tiny_shards(tmp_path / "shards", train=16, valid=8, seq_len=32)
    sets = ["train.steps=4", "train.eval_every=2", "masking.span.p=0.3"]
    base = resolve(None, {"model": {"preset": "tiny"}}, sets, check_ignored=False)
    plan = {
        p.strategy: p.settings.masking for p in cmp.plan_runs(base, cmp.parse_strategies("uniform,span"), 1, tmp_path)
    }
    assert plan["span"].span.p == 0.3 and plan["uniform"].span.p == MaskingSettings().span.p
    with pytest.raises(
        MapnetError, match="masking.span.p = 0.3 only applies with masking.strategy 'span'.*no compared"
    ):
        cmp.plan_runs(base, cmp.parse_strategies("uniform,mapnet"), 1, tmp_path)
    args = [
        "compare",
        str(shards),
        "--out",
        str(tmp_path / "cmp"),
        "--strategies",
        "uniform,span",
        "--preset",
        "tiny",
        *[a for kv in sets for a in ("--set", kv)],
        "--print-settings",
    ]
    res = CliRunner().invoke(app, args)
    assert res.exit_code == 0, res.output
    # a single run still refuses a setting its strategy would ignore
    res = CliRunner().invoke(
        app,
        [
            "pretrain",
            str(shards),
            "--out",
            str(tmp_path / "run"),
            "--preset",
            "tiny",
            "--set",
            "masking.span.p=0.3",
            "--print-settings",
        ],
    )
    assert isinstance(res.exception, MapnetError) and "here it would be ignored" in str(res.exception)


def test_a_finished_run_is_reused_unless_what_changes_its_outcome_differs():
    import copy

    from mapnet_cli.compare.run import changed_keys, pretraining_part

    plan = resolve(None, {"model": {"preset": "tiny"}}, []).to_dict()
    recorded = copy.deepcopy(plan)
    recorded["train"]["compile"] = False  # a run from before `auto`: same outcome, reused
    recorded["logging"]["progress"] = not plan["logging"]["progress"]
    recorded["finetune"]["seeds"] = 99
    assert changed_keys(pretraining_part(recorded), pretraining_part(plan)) == []
    recorded["optim"]["lr"] = plan["optim"]["lr"] * 2
    recorded["masking"]["mask_prob"] = 0.3
    assert changed_keys(pretraining_part(recorded), pretraining_part(plan)) == ["masking.mask_prob", "optim.lr"]


def _blimp(curve: list[tuple[int, float]], syntax: float) -> dict:
    return {
        "accuracy": curve[-1][1],
        "fields": {"syntax": syntax},
        "curve": [{"step": s, "accuracy": a} for s, a in curve],
    }


def test_blimp_is_paired_by_seed_against_uniform_its_random_encoder_and_at_uniforms_time():
    runs = [_run("uniform", k, [6.0, 5.0, 4.0]) for k in range(3)] + [
        _run("uniform@0.3", k, [6.0, 5.0, 3.8], 1.0) for k in range(3)
    ]
    for r in runs:  # recorded training time: uniform 0.5 s/step, uniform@0.3 1.0 s/step
        r["train"] = [{"step": s, "elapsed": s * r["seconds_per_step"]} for s in (10, 20)]
    uni = [0.55, 0.57, 0.54]
    mid = [0.56, 0.59, 0.55]  # the 30% arm at step 10 = uniform's final training time (10 s)
    hi = [0.60, 0.58, 0.59]  # its final (step 20)
    for r in runs:
        k = r["seed_index"]
        r["blimp"] = (
            _blimp([(10, 0.52), (20, uni[k])], uni[k])
            if r["strategy"] == "uniform"
            else _blimp([(10, mid[k]), (20, hi[k])], hi[k])
        )
    ctl = [0.50, 0.52, 0.49]
    control = {
        "random": {k: {"seed_index": k, "accuracy": a} for k, a in enumerate(ctl)},
        "unigram": {"accuracy": 0.51},
    }
    agg = cmp.aggregate(runs, ["uniform", "uniform@0.3"], None, control)
    a = agg["strategies"]["uniform@0.3"]
    assert a["blimp"]["mean"] == pytest.approx(np.mean(hi))
    assert a["paired_vs_uniform"]["blimp"]["ci95"] == pytest.approx(
        cmp.mean_ci([h - u for h, u in zip(hi, uni)])["ci95"]
    )
    assert a["blimp_vs_random_init"]["mean"] == pytest.approx(np.mean([h - c for h, c in zip(hi, ctl)]))
    assert a["blimp_vs_random_init"]["independent_comparisons"] == 3
    assert a["blimp_vs_unigram"]["mean"] == pytest.approx(np.mean(hi) - 0.51)
    # Uniform trained 10 s; the arm's curve at 10 s is its step-10 point (1 s/step): mid - uni, per seed.
    at = a["blimp_at_uniform_time"]
    assert at["per_seed"] == pytest.approx([m - u for m, u in zip(mid, uni)])
    assert at["paired_vs_uniform"]["mean"] == pytest.approx(np.mean([m - u for m, u in zip(mid, uni)]))
    assert a["blimp_curve"]["steps"] == [10, 20] and a["blimp_curve"]["accuracy"][0]["mean"] == pytest.approx(
        np.mean(mid)
    )
    # Read between checkpoints: 15 s is halfway from step 10 (10 s) to step 20 (20 s).
    assert records_blimp_at(runs[3], 15.0) == pytest.approx((mid[0] + hi[0]) / 2)
    assert records_blimp_at(runs[0], 25.0) is None  # past the run's end: not reached
    assert agg["blimp_control"] == {"seed_indices": [0, 1, 2], "random_init": cmp.mean_ci(ctl), "unigram": 0.51}

    header, rows = cmp.table_rows({"aggregate": agg})
    assert header[-4:] == cmp.report.BLIMP_HEADER
    by_name = {r[0]: r for r in rows}
    assert all(len(r) == len(header) for r in rows)
    d = a["paired_vs_uniform"]["blimp"]
    assert by_name["uniform@0.3"][-3] == f"{100 * d['mean']:+.1f} ± {100 * (d['ci95'][1] - d['ci95'][0]) / 2:.1f}"
    assert by_name[cmp.report.BLIMP_UNIGRAM_ROW][-4:] == ["51.0", "control", "-", "-"]
    assert by_name["uniform"][-1] == "-"

    # Final checkpoints only (no --blimp-every-checkpoint): the time column is not measured, not "not reached".
    for r in runs:
        r["blimp"]["curve"] = r["blimp"]["curve"][-1:]
    finals = cmp.aggregate(runs, ["uniform", "uniform@0.3"], None, control)
    assert "blimp_at_uniform_time" not in finals["strategies"]["uniform@0.3"]
    assert {r[0]: r for r in cmp.table_rows({"aggregate": finals})[1]}["uniform@0.3"][-1] == "-"


def records_blimp_at(run: dict, seconds: float):
    from mapnet_cli.compare.statistics import blimp_at_time

    return blimp_at_time(run, seconds)


@pytest.mark.slow
def test_blimp_column_scores_every_checkpoint_once_as_mapnet_blimp_does(compared, tmp_path, shared_data, monkeypatch):
    import shutil

    from mapnet_cli.evaluation.blimp import evaluate
    from mapnet_cli.evaluation.blimp.data import load_suite
    from mapnet_cli.evaluation.blimp.evaluate import blimp_run

    devices = []  # where compare asks the scorer to run: the runs' own device, not the scorer's CPU default
    real_init = evaluate.Scorer.__init__
    monkeypatch.setattr(
        evaluate.Scorer,
        "__init__",
        lambda self, suite, cfg, device=None: (devices.append(device), real_init(self, suite, cfg, device))[1],
    )

    shards, shared_out, _, _ = compared
    out = tmp_path / "cmp"
    shutil.copytree(shared_out, out, ignore=shutil.ignore_patterns("glue"))
    blimp = shared_data / "blimp"
    with pytest.raises(MapnetError, match="need --blimp"):
        invoke(compare_args(shards, out, "--blimp-pairs", "3"))
    flags = ["--blimp", str(blimp), "--blimp-pairs", "3", "--blimp-every-checkpoint"]
    res = invoke(compare_args(shards, out, *flags))
    assert res.exit_code == 0, res.output
    assert devices == [torch.device("cpu")]  # train.device "auto" on a machine without CUDA
    doc = json.loads((out / cmp.RESULTS).read_text())
    assert doc["blimp"]["pairs"] == 3 * len(load_suite(blimp).paradigms)
    run = _runs(doc, "mapnet")[1]
    alone = blimp_run([Path(run["path"])], load_suite(blimp, 3))  # `mapnet blimp` on the same run
    steps = [m["step"] for m in alone["models"] if m["init"] == "pretrained"]
    assert [p["step"] for p in run["blimp"]["curve"]] == steps == [3, 6]
    assert [p["accuracy"] for p in run["blimp"]["curve"]] == [m["accuracy"] for m in alone["models"][:2]]
    # The seed's random encoder and the unigram model are mapnet blimp's controls of that run too.
    by_init = {m["init"]: m for m in alone["models"]}
    assert doc["blimp_control"]["random"]["1"]["paradigms"] == {
        u: p["accuracy"] for u, p in by_init["random"]["paradigms"].items()
    }
    assert doc["blimp_control"]["unigram"]["accuracy"] == by_init["unigram"]["accuracy"]
    assert "BLiMP" in res.output and "independent" in res.output
    # A rerun scores nothing again: every checkpoint is read from the run folders' caches.
    res = invoke(compare_args(shards, out, *flags))
    assert (
        "BLiMP uniform" not in res.stderr
        and json.loads((out / cmp.RESULTS).read_text())["aggregate"] == doc["aggregate"]
    )


def test_a_blimp_cache_is_served_only_to_the_scorer_that_made_it(tmp_path):
    """Caches written before the key held the scorer's version were version 1; any other version is scored again."""
    from mapnet_cli.compare.blimp_scores import SCORER_VERSION, _cached

    key = {"suite": "s", "pairs_per_paradigm": 3, "method": "pll", "scorer": SCORER_VERSION}
    path = tmp_path / "compare-blimp.json"
    scores = {"abc": {"step": 1, "accuracy": 0.6}}
    path.write_text(json.dumps({"key": {k: v for k, v in key.items() if k != "scorer"}, "scores": scores}))
    assert _cached(path, key) == (scores if SCORER_VERSION == 1 else {})
    path.write_text(json.dumps({"key": key | {"scorer": SCORER_VERSION + 1}, "scores": scores}))
    assert _cached(path, key) == {}
    path.write_text(json.dumps({"key": key | {"method": "word-l2r"}, "scores": scores}))
    assert _cached(path, key) == {}
    path.write_text("{damaged")
    assert _cached(path, key) == {}


# ---------------------------------------------------------------- checked before the first run trains
def test_what_would_fail_after_training_is_refused_before_any_run_starts(tmp_path):
    """A missing GLUE folder or task, a `pmi` arm without its vocabulary: refused before the first run trains (they
    used to come after every arm had trained, or after the first ones, leaving their files), all in one line;
    --out untouched. A --out that is a file is one line too (it was a 37-line traceback)."""
    import subprocess

    sys.path.insert(0, str(Path(__file__).parents[1] / "evaluation"))
    from glue_fixtures import make_glue_dir

    shards = write_tiny_shards(tmp_path / "shards", train=32, valid=8, seq_len=32)
    glue = make_glue_dir(tmp_path / "glue")
    for task in ("RTE", "SST-2"):
        (glue / task / "dev.tsv").unlink()
    out = tmp_path / "cmp"
    base = [
        "compare",
        str(shards),
        "--out",
        str(out),
        "--seeds",
        "1",
        "--steps",
        "2",
        "--preset",
        "tiny",
        *[a for s in SETS for a in ("--set", s)],
    ]
    cases = (
        (
            ["--strategies", "uniform,pmi", "--glue-data", str(tmp_path / "nope"), "--glue-tasks", "rte"],
            ["strategy pmi: PMI masking needs a PMI vocabulary", f"--glue-data {tmp_path / 'nope'}: no such folder"],
        ),
        (
            ["--strategies", "uniform", "--glue-data", str(glue), "--glue-tasks", "rte,sst2"],
            [str(glue / "RTE" / "dev.tsv"), str(glue / "SST-2" / "dev.tsv")],
        ),
        (
            ["--strategies", "uniform,pmi,span", "--set", "model.max_position=16", "--set", "shard.max_seq_len=16"],
            ["strategies uniform, pmi, span: shards", "hold 32-token sequences but model.max_position is 16"],
        ),
    )
    long_blimp = tmp_path / "blimp"  # one paradigm whose sentences the 32-position model cannot read
    long_blimp.mkdir()
    row = {
        "sentence_good": " ".join(["the cat sat"] * 15) + ".",
        "sentence_bad": " ".join(["the sat cat"] * 15) + ".",
        "field": "syntax",
        "UID": "long",
    }
    (long_blimp / "long.jsonl").write_text(json.dumps(row) + "\n")
    cases += (
        (
            ["--strategies", "uniform", "--blimp", str(long_blimp)],
            ["--blimp: its longest sentence is", "more than model.max_position (32)"],
        ),
    )
    for extra, named in cases:
        with pytest.raises(MapnetError) as info:
            invoke(base + extra)
        assert all(n in str(info.value) for n in named) and "\n" not in str(info.value), str(info.value)
        assert not out.exists()
    out.write_text("a file the user keeps\n")
    proc = subprocess.run(
        [sys.executable, "-m", "mapnet_cli.cli", *base, "--strategies", "uniform"],
        capture_output=True,
        text=True,
        env={**__import__("os").environ, "OMP_NUM_THREADS": "1"},
    )
    assert proc.returncode == 2 and "Traceback" not in proc.stderr and len(proc.stderr.strip().splitlines()) == 1
    assert "is a file" in proc.stderr and out.read_text() == "a file the user keeps\n"


def test_a_run_in_out_trained_otherwise_is_refused_before_any_run_trains(tmp_path):
    """A rerun whose later arm finds its run trained with other settings was refused only when that arm's turn came,
    after the arms before it had trained; every run in --out is now checked first, all named in one line."""
    shards = write_tiny_shards(tmp_path / "shards", train=32, valid=8, seq_len=32)
    out = tmp_path / "cmp"
    base = [
        "compare",
        str(shards),
        "--out",
        str(out),
        "--seeds",
        "1",
        "--steps",
        "2",
        "--preset",
        "tiny",
        *[a for s in SETS for a in ("--set", s)],
    ]
    assert invoke([*base, "--strategies", "mapnet", "--set", "masking.mapnet.lr=1e-2"]).exit_code == 0
    (out / "runs" / "stratified" / "seed-0").mkdir(parents=True)
    # A run that never reached a checkpoint is not refused, whatever it holds: it is started again.
    (out / "runs" / "stratified" / "seed-0" / "settings.toml").write_text("[model\n")
    with pytest.raises(MapnetError) as info:
        invoke([*base, "--strategies", "uniform,mapnet,stratified"])
    text = str(info.value)
    assert (
        f"{out / 'runs' / 'mapnet' / 'seed-0'} was trained with other settings" in text and "masking.mapnet.lr" in text
    )
    assert "\n" not in text and "stratified" not in text
    assert not (out / "runs" / "uniform").exists()  # nothing trained before the refusal
