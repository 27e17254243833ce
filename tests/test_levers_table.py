"""experiments/common/levers_table.py (section G): each lever's Δ vs the baseline, paired by seed, from compare's results.json."""

from __future__ import annotations

import copy
import json
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "experiments" / "common"))  # the table scripts import each other by name, as scripts

import levers_table  # noqa: E402


def results(losses, blimps, steps, lr=2e-3, shards="aaa", entropy=6.9) -> dict:
    """A compare results.json with what the table reads: two seeds' final loss, BLiMP, budget and settings."""
    runs = [{"seed_index": k, "eval": [{"step": 0, "eval_loss": 9.0}, {"step": s, "eval_loss": loss}],
             "budget": {"steps": s, "finished": True}, "blimp": {"accuracy": b},
             "settings": {"optim": {"lr": lr}, "train": {"seed": k}, "shard": {"max_seq_len": 128}}}
            for k, (loss, b, s) in enumerate(zip(losses, blimps, steps))]
    return {"runs": runs, "unigram": {"train_entropy": entropy}, "seeds": 2, "time_budget": "20m",
            "shards": {"manifest_sha256": shards, "path": f"/x/{shards}"},
            "blimp": {"method": "pll", "paradigms": 45, "pairs_per_paradigm": 200},
            "aggregate": {"blimp_control": {"random_init": {"mean": 0.52, "ci95": [0.5, 0.54], "n": 2}, "unigram": 0.47}}}


def row(text: str, arm: str) -> list[str]:
    line = next(line for line in text.splitlines() if line.startswith(f"| {arm} |"))
    return [cell.strip() for cell in line.strip("|").split("|")]


def test_deltas_are_paired_by_seed_and_the_lever_is_read_from_the_settings(tmp_path):
    base = results([5.6, 5.8], [0.55, 0.57], [2140, 2150])
    # Seed 0: -0.2 nats, +3 points; seed 1: -0.4 nats, +1 point. Unpaired, the seeds' spread would swamp it.
    lr = results([5.4, 5.4], [0.58, 0.58], [2100, 2100], lr=4e-3)
    for name, doc in (("baseline", base), ("lr-4e-3", lr)):
        (tmp_path / name).mkdir()
        (tmp_path / name / "results.json").write_text(json.dumps(doc))
    text = levers_table.table(levers_table.load(tmp_path))
    cells = row(text, "lr-4e-3")
    assert cells[1] == "`optim.lr=0.004`" and cells[2] == "2,100" and cells[3] == "2 of 2"
    # t(1 dof) = 12.706: half-widths 12.706 x sd / sqrt(2), sd of (-0.2, -0.4) = 0.1414 and of (3, 1) = 1.414.
    assert cells[5] == "-0.300 ± 1.271" and cells[7] == "+2.0 ± 12.7" and cells[8] == "2"
    assert row(text, "baseline")[2] == "2,140–2,150" and "random weights 52.0" in text


def test_other_shards_give_no_loss_delta_and_a_run_on_the_plateau_is_counted(tmp_path):
    base = results([5.6, 5.8], [0.55, 0.57], [2140, 2150])
    vocab = results([6.5, 5.0], [0.57, 0.56], [1780, 1790], shards="bbb", entropy=7.2)
    text = levers_table.table({"baseline": base, "vocab-16k": vocab})
    cells = row(text, "vocab-16k")
    assert cells[5] == "n/c (other tokens)" and cells[7] == "+0.5 ± 19.1"  # BLiMP still compares
    assert cells[3] == "1 of 2" and "shards bbb (128 tokens)" in cells[1]  # 6.5 is not 1 nat under 7.2
    with pytest.raises(SystemExit, match="no `baseline` arm"):
        levers_table.table({"vocab-16k": copy.deepcopy(vocab)})


def test_the_kept_table_says_what_to_run_until_there_are_results(tmp_path, monkeypatch):
    monkeypatch.setattr(levers_table, "KEPT", tmp_path / "results")
    assert "levers_cpu.sh runs/hour-levers search" in levers_table.kept()
    (tmp_path / "results").mkdir()
    (tmp_path / "results" / "baseline.json").write_text(json.dumps(results([5.6, 5.8], [0.55, 0.57], [2140, 2150])))
    assert row(levers_table.kept(), "baseline")[0] == "baseline"


def test_a_later_folder_replaces_an_arm_of_a_kept_one(tmp_path):
    kept, new = tmp_path / "results", tmp_path / "arms"
    kept.mkdir()
    (kept / "baseline.json").write_text(json.dumps(results([5.6, 5.8], [0.55, 0.57], [2140, 2150])))
    (kept / "lr-4e-3.json").write_text(json.dumps(results([5.4, 5.4], [0.58, 0.58], [2100, 2100], lr=4e-3)))
    (new / "lr-4e-3").mkdir(parents=True)
    (new / "lr-4e-3" / "results.json").write_text(json.dumps(results([5.5, 5.7], [0.56, 0.56], [2000, 2000], lr=4e-3)))
    docs = levers_table.load(kept, new)
    assert sorted(docs) == ["baseline", "lr-4e-3"]
    assert row(levers_table.table(docs), "lr-4e-3")[2] == "2,000"  # this sitting's run, not the kept one


def test_a_kept_baseline_is_reused_only_on_a_machine_of_the_same_speed(tmp_path):
    import levers_calibration as cal

    kept, now = tmp_path / "kept.tsv", tmp_path / "now.tsv"
    kept.write_text("baseline\tstart\t2026-11-26T23:28:56Z\t0.01 0.02 0.00\t2\n")
    assert cal.check([("t", 530.0)], cal.calibrations(kept)) == (
        "nothing kept has a calibration: the kept baseline's machine speed is unknown")
    line = cal.record(kept, 531.25, "0.05 0.10 0.20", 2)
    assert line.startswith("calibration\t") and line.endswith("\t0.05 0.10 0.20\t2\t531.2 ms/step")
    assert [ms for _, ms in cal.calibrations(kept)] == [531.2]
    assert cal.check([], cal.calibrations(kept)).startswith("this sitting has no calibration")
    cal.record(now, 555.0, "0.00 0.00 0.00", 2)   # 4.5% slower: the same machine's spread
    assert cal.check(cal.calibrations(now), cal.calibrations(kept)) is None
    cal.record(now, 560.0, "0.00 0.00 0.00", 2)   # the latest counts: 5.4% slower
    why = cal.check(cal.calibrations(now), cal.calibrations(kept))
    assert "step is 560 ms; the kept arms ran at 531 ms" in why and "unset BASELINE" in why
    assert cal.main(["check", str(now), str(kept)]) == 1 and cal.main(["check", str(tmp_path / "none.tsv"), str(kept)]) == 1
    assert cal.main(["nonsense"]) == 2
