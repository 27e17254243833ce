"""The random-init control, the named protocols, and the statistics over fine-tuning seeds."""

from __future__ import annotations

import json
import re
import tomllib
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
import torch
from typer.testing import CliRunner

from mapnet_cli import compare as cmp
from mapnet_cli import settings as settings_mod
from mapnet_cli.cli import app
from mapnet_cli.errors import MapnetError
from mapnet_cli.evaluation.glue import report
from mapnet_cli.evaluation.glue import runs as glue_runs
from mapnet_cli.evaluation.glue.pretrained import (
    CheckpointRef,
    find_checkpoints,
    load_encoder_state,
    random_encoder,
    random_init_ref,
    random_init_seed,
    with_controls,
)
from mapnet_cli.evaluation.glue.sweep import Events, make_plan, run_sweep, summarize
from mapnet_cli.settings import PROTOCOLS

EVALUATION_PAGE = Path(__file__).resolve().parents[3] / "docs" / "evaluation.md"  # where the protocol table lives


def _ft(**kw):
    base = settings_mod.Settings().finetune
    return replace(base, **{**dict(batch_sizes=(8,), learning_rates=(1e-3,), seeds=2, epochs=1, max_seq_len=64), **kw})


# ---------------------------------------------------------------- the random-init control
def test_random_init_has_the_architecture_not_the_weights(fake_run):
    (ref,) = find_checkpoints([fake_run])
    state, cfg, _ = load_encoder_state(ref)
    a = random_encoder(cfg, 0, 0).state_dict()
    assert list(a) == list(state)  # the same parameters, in the same order, with the same shapes
    assert all(a[k].shape == state[k].shape and a[k].dtype == state[k].dtype for k in a)
    matrices = [k for k in a if a[k].ndim >= 2]
    assert matrices and all(not torch.equal(a[k], state[k]) for k in matrices)
    # BERT's init, as pretraining draws it: N(0, init_std) matrices.
    emb = a["tok_embeddings.weight"]
    assert abs(float(emb.std()) - cfg.init_std) < 0.1 * cfg.init_std
    # Deterministic per (pretraining seed, fine-tuning seed), different across either.
    again = random_encoder(cfg, 0, 0).state_dict()
    assert all(torch.equal(a[k], again[k]) for k in a)
    for other in (random_encoder(cfg, 0, 1).state_dict(), random_encoder(cfg, 1, 0).state_dict()):
        assert all(not torch.equal(a[k], other[k]) for k in matrices)
    assert random_init_seed(0, 1) != random_init_seed(1, 0)
    # The caller's RNG is left as found: the head, dropout and data order of seed s stay those of seed s.
    torch.manual_seed(5)
    before = torch.rand(4)
    torch.manual_seed(5)
    random_encoder(cfg, 0, 0)
    assert torch.equal(torch.rand(4), before)


def test_controls_one_per_architecture_and_pretraining_seed(fake_run, tmp_path):
    from glue_fixtures import make_checkpoint

    refs = find_checkpoints(every=[fake_run])  # steps 100 and 200: one architecture, one pretraining seed
    ctl = random_init_ref(refs[0])
    assert ctl.init == "random" and ctl.step == 0 and ctl.sha not in {r.sha for r in refs}
    assert random_init_ref(refs[1]).sha == ctl.sha and ctl.init_seed == 0
    todo, of = with_controls(refs, "both")
    assert todo[:2] == refs and len(todo) == 3 and todo[2].run == "random-init"
    assert of == {refs[0].key: todo[2].key, refs[1].key: todo[2].key}
    only, none = with_controls(refs, "random")
    assert [r.init for r in only] == ["random"] and none == {}
    assert with_controls(refs, "pretrained") == (refs, {})
    # Another architecture gets its own control, named after its run.
    wide = tmp_path / "wide"
    make_checkpoint(wide, steps=(10,), hidden=64)
    todo, of = with_controls([*refs, *find_checkpoints([wide])], "both")
    names = sorted(r.run for r in todo if r.init == "random")
    assert names == ["random-init/fake-bert", "random-init/wide"] and len(set(of.values())) == 2
    with pytest.raises(MapnetError, match="--init must be"):
        with_controls(refs, "scratch")


class _Capture(Events):
    pass


def test_sweep_fine_tunes_random_weights_paired_with_the_checkpoint(fake_run, glue_dir, tmp_path, monkeypatch):
    (ref,) = find_checkpoints([fake_run])
    state, cfg, _ = load_encoder_state(ref)
    seen = []
    real = glue_runs.finetune_run

    def spy(make_encoder, spec, train, devs, rc, *args, **kw):
        torch.manual_seed(rc.seed)  # as finetune_run seeds before it builds the encoder
        weights = make_encoder().state_dict()
        seen.append((rc.seed, weights, torch.rand(4)))  # what the head init and dropout draw from next
        return real(make_encoder, spec, train, devs, rc, *args, **kw)

    monkeypatch.setattr(glue_runs, "finetune_run", spy)
    refs, controls = with_controls([ref], "both")
    doc = run_sweep(refs, ["RTE"], glue_dir, tmp_path / "a", _ft(), _Capture(), controls=controls)
    assert [s for s, _, _ in seen] == [0, 1, 0, 1]  # the checkpoint's two seeds, then the control's
    for _, enc, _ in seen[:2]:
        assert all(torch.equal(enc[k], state[k]) for k in state)
    # Paired by seed: after the encoder is built, the RNG stream (head init, dropout) is the same in both arms.
    assert torch.equal(seen[0][2], seen[2][2]) and torch.equal(seen[1][2], seen[3][2])
    assert not torch.equal(seen[0][2], seen[1][2])
    for seed, enc, _ in seen[2:]:
        expected = random_encoder(cfg, 0, seed).state_dict()
        assert all(torch.equal(enc[k], expected[k]) for k in expected)
        assert not torch.equal(enc["tok_embeddings.weight"], state["tok_embeddings.weight"])
    assert not torch.equal(seen[2][1]["tok_embeddings.weight"], seen[3][1]["tok_embeddings.weight"])

    # Recorded: the init of every run and checkpoint, the control mapping, the seeds behind the weights.
    saved = json.loads((tmp_path / "a" / "results.json").read_text())
    assert saved["init"] == ["pretrained", "random"] and saved["controls"] == controls
    inits = sorted((r["init"], r["seed"]) for r in saved["runs"].values())
    assert inits == [("pretrained", 0), ("pretrained", 1), ("random", 0), ("random", 1)]
    for r in saved["runs"].values():
        if r["init"] == "random":
            assert r["init_seed"] == {"pretraining_seed": 0, "torch_seed": random_init_seed(0, r["seed"])}
            assert r["checkpoint"]["init"] == "random" and r["checkpoint"]["path"] == str(ref.path)

    # The margin: per fine-tuning seed, checkpoint minus control, then a t-interval over the 2 seeds.
    ck, ctl = doc["summary"]["checkpoints"]
    assert (ck["init"], ctl["init"], ctl["run"]) == ("pretrained", "random", "random-init")
    by = {(r["init"], r["seed"]): r["epochs"][-1]["entries"]["RTE"]["score"] for r in doc["runs"].values()}
    diffs = [by["pretrained", s] - by["random", s] for s in (0, 1)]
    m = ck["margin"]["entries"]["RTE"]
    assert m["seeds"] == [0, 1] and m["differences"] == pytest.approx(diffs)
    assert m["mean"] == pytest.approx(np.mean(diffs)) and m["n"] == 2
    assert m["ci95"] == pytest.approx(cmp.mean_ci(diffs)["ci95"])
    assert ck["margin"]["entries"]["GLUE"]["differences"] == pytest.approx(diffs)  # one entry: GLUE = RTE
    assert "margin" not in ctl

    # Deterministic: the control fine-tuned again gives the same runs.
    monkeypatch.setattr(glue_runs, "finetune_run", real)
    again = run_sweep(refs[1:], ["RTE"], glue_dir, tmp_path / "b", _ft(), _Capture())
    first = sorted((r["seed"], r["epochs"][-1]["train_loss"]) for r in doc["runs"].values() if r["init"] == "random")
    second = sorted((r["seed"], r["epochs"][-1]["train_loss"]) for r in again["runs"].values())
    assert first == second


# ---------------------------------------------------------------- statistics on hand-made records
def _record(seed, score):
    return {
        "task": "RTE",
        "seed": seed,
        "epochs": [{"epoch": 1, "score": score, "entries": {"RTE": {"metrics": {"acc": score}, "score": score}}}],
    }


def test_summary_intervals_and_margin_by_hand():
    ck = CheckpointRef(Path("/x"), "bert", 100, "a" * 64)
    ctl = CheckpointRef(Path("/x"), "random-init", 0, "b" * 64, init="random", init_seed=0)
    ft = _ft(seeds=3, learning_rates=(1e-5, 2e-5))
    plan = make_plan([ck, ctl], ["RTE"], ft)
    # checkpoint: lr 1e-5 mean 0.6, lr 2e-5 mean 0.7 (best); control: lr 1e-5 best (0.55).
    scores = {
        ("a", 1e-5): [0.5, 0.6, 0.7],
        ("a", 2e-5): [0.72, 0.66, 0.72],
        ("b", 1e-5): [0.5, 0.6, 0.55],
        ("b", 2e-5): [0.5, 0.5, 0.5],
    }
    runs = {item.key: _record(item.seed, scores[item.ref.sha[0], item.lr][item.seed]) for item in plan}
    s = summarize(runs, plan, "best_epoch", {ck.key: ctl.key})
    a, b = s["checkpoints"]
    st = a["stats"]["RTE"]
    assert st["seeds"] == [0, 1, 2] and st["scores"] == [0.72, 0.66, 0.72]
    half = 4.302652730 * np.std([0.72, 0.66, 0.72], ddof=1) / np.sqrt(3)  # t(0.975, 2 dof)
    assert st["ci95"] == pytest.approx([0.7 - half, 0.7 + half])
    assert a["glue"]["ci95"] == pytest.approx(st["ci95"])
    assert a["tasks"]["RTE"]["best"]["entries"]["RTE"]["ci95"] == pytest.approx(st["ci95"])
    # The margin pairs each arm's best configuration seed by seed: (0.72-0.5, 0.66-0.6, 0.72-0.55).
    m = a["margin"]["entries"]["RTE"]
    assert m["differences"] == pytest.approx([0.22, 0.06, 0.17]) and m["n"] == 3
    assert m["ci95"] == pytest.approx(cmp.mean_ci([0.22, 0.06, 0.17])["ci95"])
    assert a["margin"]["control_run"] == "random-init" and a["margin"]["pairing"] == "fine-tuning seed"
    # A seed the control has not run yet is left out of the pairs, and n says so.
    del runs[next(i.key for i in plan if i.ref is ctl and i.lr == 1e-5 and i.seed == 2)]
    m = summarize(runs, plan, "best_epoch", {ck.key: ctl.key})["checkpoints"][0]["margin"]["entries"]["RTE"]
    assert m["seeds"] == [0, 1] and m["n"] == 2

    rows = report.stats_rows(s)
    assert rows[0][:3] == ["bert@100", "RTE", "3"]
    assert rows[0][3] == f"70.00 ± {100 * half:.2f}"
    d = cmp.mean_ci([0.22, 0.06, 0.17])
    assert rows[0][4] == f"+{100 * d['mean']:.2f} ± {100 * (d['ci95'][1] - d['ci95'][0]) / 2:.2f} (n=3)"
    assert [r[1] for r in rows] == ["RTE", "GLUE", "RTE", "GLUE"] and rows[2][4] == rows[3][4] == "control"


# ---------------------------------------------------------------- the command
def test_cli_init_both_prints_intervals_and_margins(fake_run, glue_dir, tmp_path):
    out = tmp_path / "out"
    args = [
        "finetune-glue",
        "--task",
        "rte",
        "--checkpoints",
        str(fake_run),
        "--init",
        "both",
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
    cks = doc["summary"]["checkpoints"]
    assert [(c["run"], c["step"], c["init"]) for c in cks] == [
        ("fake-bert", 100, "pretrained"),
        ("fake-bert", 200, "pretrained"),
        ("random-init", 0, "random"),
    ]
    assert len(doc["runs"]) == 3 * 2 and doc["protocol"]["preset"] == "paper"
    text = " ".join(res.output.split())
    for ck in cks[:2]:
        m = ck["margin"]["entries"]["RTE"]
        assert m["n"] == 2 and ck["margin"]["control"] == cks[2]["checkpoint"]
        row = (
            f"fake-bert@{ck['step']} │ RTE │ 2 │ {report.ci_points(ck['stats']['RTE'])} │ "
            f"{report.ci_points(m, signed=True)} (n=2)"
        )
        assert row in text
    assert "random-init@0 │ RTE │ 2 │" in text and "│ control" in text
    res = CliRunner().invoke(app, [*args[:5], "--init", "scratch", *args[7:]])
    assert "--init must be pretrained, random or both" in str(res.exception)


# ---------------------------------------------------------------- the protocols, as the manual states them
def _manual_protocols() -> dict[str, dict]:
    """The protocol table of docs/evaluation.md: {name: {column: cell}}."""
    text = EVALUATION_PAGE.read_text(encoding="utf-8")
    start = text.index("| protocol | tasks |")
    lines = [ln for ln in text[start:].splitlines()]
    table = []
    for ln in lines:
        if not ln.startswith("|"):
            break
        table.append([c.strip() for c in ln.strip().strip("|").split("|")])
    header, rows = table[0], table[2:]
    return {row[0].strip("`"): dict(zip(header, row)) for row in rows}


def _numbers(cell: str, kind):
    return [kind(x.replace(",", "")) for x in re.findall(r"[0-9][0-9,]*(?:\.[0-9]+)?(?:e-?[0-9]+)?", cell)]


@pytest.mark.parametrize("name", ["paper", "quick", "small"])
def test_protocol_resolves_as_the_manual_says(name, fake_run, glue_dir, tmp_path):
    row = _manual_protocols()[name]
    res = CliRunner().invoke(
        app,
        [
            "finetune-glue",
            "--data",
            str(glue_dir),
            "--out",
            str(tmp_path),
            "--checkpoint",
            str(fake_run),
            "--print-settings",
            "--protocol",
            name,
        ],
    )
    assert res.exit_code == 0, res.output
    ft = tomllib.loads(res.output)["finetune"]
    assert ft["batch_sizes"] == _numbers(row["batch sizes"], int)
    assert ft["learning_rates"] == _numbers(row["learning rates"], float)
    assert [ft["seeds"]] == _numbers(row["seeds"], int) and [ft["epochs"]] == _numbers(row["epochs"], int)
    assert ft["max_train"] == (
        0 if row["training examples per task"] == "all" else _numbers(row["training examples per task"], int)[0]
    )
    assert [ft["max_seq_len"]] == _numbers(row["max_seq_len"], int)
    assert ft["max_dev"] == 0 and ft["run_score"] == "best_epoch"
    tasks = [t.strip() for t in row["tasks"].split(",")] if not row["tasks"].startswith("(") else []
    assert list(PROTOCOLS[name].tasks) == tasks


def test_protocol_is_a_preset_below_the_config_and_flags(fake_run, glue_dir, tmp_path):
    base = [
        "finetune-glue",
        "--data",
        str(glue_dir),
        "--out",
        str(tmp_path),
        "--checkpoint",
        str(fake_run),
        "--print-settings",
        "--protocol",
        "small",
    ]
    res = CliRunner().invoke(app, base + ["--seeds", "5", "--set", "finetune.epochs=4"])
    ft = tomllib.loads(res.output)["finetune"]
    assert (ft["seeds"], ft["epochs"], ft["learning_rates"]) == (5, 4, [1e-4, 3e-4])
    cfg = tmp_path / "ft.toml"
    cfg.write_text("[finetune]\nmax_seq_len = 256\n")
    ft = tomllib.loads(CliRunner().invoke(app, base + ["--config", str(cfg)]).output)["finetune"]
    assert ft["max_seq_len"] == 256 and ft["max_train"] == 20000
    for extra, msg in (
        (["--protocol", "small", "--quick"], "--quick is --protocol quick"),
        (["--protocol", "huge"], "unknown fine-tuning protocol 'huge'"),
    ):
        res = CliRunner().invoke(app, base[:-2] + extra)
        assert isinstance(res.exception, MapnetError) and msg in str(res.exception), res.output
    # Without --task, a protocol with tasks supplies them; one without says what is missing.
    res = CliRunner().invoke(app, base[:-3] + ["--protocol", "quick"])
    assert "name the tasks: --task T" in str(res.exception)
