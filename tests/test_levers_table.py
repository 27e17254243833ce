"""experiments/common/levers_table.py (section G): each lever's Δ vs the baseline, paired by seed, from compare's
results.json."""

from __future__ import annotations

import copy
import json
import os
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "experiments" / "common"))  # the table scripts import each other by name, as scripts

import levers_table  # noqa: E402


def results(losses, blimps, steps, lr=2e-3, shards="aaa", entropy=6.9, random=0.52, questions=None) -> dict:
    """A compare results.json with what the table reads: two seeds' final loss, BLiMP, budget and settings.
    `questions`: the runs' held-out set hash (eval_sha256), by default the shards'."""
    runs = [
        {
            "seed_index": k,
            "eval_sha256": questions or f"eval-of-{shards}",
            "eval": [{"step": 0, "eval_loss": 9.0}, {"step": s, "eval_loss": loss}],
            "budget": {"steps": s, "finished": True},
            "blimp": {"accuracy": b},
            "settings": {"optim": {"lr": lr}, "train": {"seed": k}, "shard": {"max_seq_len": 128}},
        }
        for k, (loss, b, s) in enumerate(zip(losses, blimps, steps))
    ]
    return {
        "runs": runs,
        "unigram": {"train_entropy": entropy},
        "seeds": 2,
        "time_budget": "20m",
        "shards": {"manifest_sha256": shards, "path": f"/x/{shards}"},
        "blimp": {"method": "pll", "paradigms": 45, "pairs_per_paradigm": 200},
        "aggregate": {
            "blimp_control": {
                "random_init": {"mean": random, "ci95": [random - 0.02, random + 0.02], "n": 2},
                "unigram": 0.47,
            }
        },
    }


def row(text: str, arm: str) -> list[str]:
    line = next(line for line in text.splitlines() if line.startswith(f"| {arm} |"))
    return [cell.strip() for cell in line.strip("|").split("|")]


def test_deltas_are_paired_by_seed_and_the_lever_is_read_from_the_settings(tmp_path):
    base = results([5.6, 5.8], [0.55, 0.57], [2140, 2150])
    # Seed 0: -0.2 nats, +3 points; seed 1: -0.4 nats, +1 point. Unpaired, the seeds' spread would swamp it.
    lr = results([5.4, 5.4], [0.58, 0.58], [2100, 2100], lr=4e-3, random=0.547)
    for name, doc in (("baseline", base), ("lr-4e-3", lr)):
        (tmp_path / name).mkdir()
        (tmp_path / name / "results.json").write_text(json.dumps(doc))
    text = levers_table.table(levers_table.load(tmp_path))
    cells = row(text, "lr-4e-3")
    assert cells[1] == "`optim.lr=0.004`" and cells[2] == "2,100" and cells[3] == "2 of 2"
    # t(1 dof) = 12.706: half-widths 12.706 x sd / sqrt(2), sd of (-0.2, -0.4) = 0.1414 and of (3, 1) = 1.414.
    assert cells[5] == "-0.300 ± 1.271" and cells[8] == "+2.0 ± 12.7" and cells[9] == "2"
    # Each arm's BLiMP beside its own random weights, not the baseline's.
    assert cells[7] == "54.7 ± 2.0" and row(text, "baseline")[7] == "52.0 ± 2.0"
    assert row(text, "baseline")[2] == "2,140–2,150" and "unigram control 47.0" in text


def test_other_shards_give_no_loss_delta_and_a_run_on_the_plateau_is_counted(tmp_path):
    base = results([5.6, 5.8], [0.55, 0.57], [2140, 2150])
    vocab = results([6.5, 5.0], [0.57, 0.56], [1780, 1790], shards="bbb", entropy=7.2)
    text = levers_table.table({"baseline": base, "vocab-16k": vocab})
    cells = row(text, "vocab-16k")
    assert cells[5] == "n/c (other tokens)" and cells[8] == "+0.5 ± 19.1"  # BLiMP still compares
    assert cells[3] == "1 of 2" and "shards x/bbb (128 tokens)" in cells[1]  # 6.5 is not 1 nat under 7.2
    with pytest.raises(SystemExit, match="no `baseline` arm"):
        levers_table.table({"vocab-16k": copy.deepcopy(vocab)})


def test_shards_rebuilt_from_the_same_text_still_compare_their_loss():
    # A new machine rebuilds the shards: the manifest's bytes (its creation time) differ, its held-out questions not.
    base = results([5.6, 5.8], [0.55, 0.57], [2140, 2150])
    rebuilt = results([5.5, 5.6], [0.55, 0.57], [2140, 2150], lr=4e-3, shards="rebuilt", questions="eval-of-aaa")
    cells = row(levers_table.table({"baseline": base, "lr-4e-3": rebuilt}), "lr-4e-3")
    assert cells[1] == "`optim.lr=0.004`" and cells[5] == "-0.150 ± 0.635"


def test_the_kept_table_says_what_to_run_until_there_are_results(tmp_path, monkeypatch):
    monkeypatch.setattr(levers_table, "KEPT", tmp_path / "results")
    assert "levers_cpu.sh runs/hour-levers search" in levers_table.kept()
    (tmp_path / "results" / "series-1").mkdir(parents=True)
    assert "levers_cpu.sh runs/hour-levers search" in levers_table.kept()  # an empty series is nothing measured
    (tmp_path / "results" / "series-1" / "baseline.json").write_text(
        json.dumps(results([5.6, 5.8], [0.55, 0.57], [2140, 2150]))
    )
    assert row(levers_table.kept(), "series-1")[1] == "baseline"


def test_each_series_pairs_its_arms_with_its_own_baseline_and_a_rerun_baseline_shows_the_drift(tmp_path, monkeypatch):
    kept = tmp_path / "results"
    first = results([5.6, 5.8], [0.55, 0.57], [2140, 2150])
    again = results([5.5, 5.9], [0.56, 0.55], [2000, 2100])  # the same settings in another sitting
    for run in again["runs"]:  # recorded by a later mapnet, with a setting added since at its default: no lever
        run["settings"]["train"]["batch_ramp_start"] = 0
    docs = {
        "series-1": {"baseline": first, "mask-0.30": results([5.5, 5.7], [0.55, 0.57], [1800, 1800])},
        "series-2": {"baseline": again, "lr-4e-3": results([5.3, 5.8], [0.57, 0.56], [2000, 2100], lr=4e-3)},
    }
    for series, arms in docs.items():
        (kept / series).mkdir(parents=True)
        for name, doc in arms.items():
            (kept / series / f"{name}.json").write_text(json.dumps(doc))
    monkeypatch.setattr(levers_table, "KEPT", kept)
    text = levers_table.kept()
    lines = [line for line in text.splitlines() if line.startswith("| series-")]
    assert [line.split("|")[1:3] for line in lines] == [
        [" series-1 ", " baseline "],
        [" series-1 ", " mask-0.30 "],
        [" series-2 ", " baseline "],
        [" series-2 ", " lr-4e-3 "],
    ]
    cells = [[c.strip() for c in line.strip("|").split("|")] for line in lines]
    assert cells[0][6] == "–" and cells[0][10] == "–"  # the first baseline is the reference
    # The rerun baseline vs the first: seed 0 -0.1 nats and +1 point, seed 1 +0.1 nats and -2 points.
    assert cells[2][6] == "+0.000 ± 1.271" and cells[2][9] == "-0.5 ± 19.1" and cells[2][10] == "2"
    assert cells[2][2] == "the first series' baseline again, in another sitting (Δ vs it: the drift)"
    # lr-4e-3 against series-2's baseline (-0.2 and -0.1 nats), not series-1's (-0.3 and 0.0).
    assert cells[3][6] == "-0.150 ± 0.635" and cells[3][2] == "`optim.lr=0.004`"
    assert cells[1][6].startswith("-0.100")  # mask-0.30 against series-1's (both seeds -0.1 nats)


def modelled(doc: dict, step: float, short: float) -> dict:
    """`doc` as if its runs counted `step` / `short` seconds a step (train.step_seconds), as the settings record."""
    doc = copy.deepcopy(doc)
    for run in doc["runs"]:
        run["budget"].update(clock="modelled", step_seconds=step, short_step_seconds=short)
        run["settings"]["train"].update(step_seconds=step, short_step_seconds=short)
    return doc


def test_a_modelled_series_says_its_clock_and_an_arms_own_costs_are_not_its_lever():
    first = results([5.6, 5.8], [0.55, 0.57], [2140, 2150])
    base = modelled(results([5.5, 5.7], [0.56, 0.56], [2400, 2400]), 0.6, 0.3)
    lr = modelled(results([5.4, 5.6], [0.56, 0.57], [2400, 2400], lr=4e-3), 0.6, 0.3)
    bf16 = modelled(results([5.3, 5.5], [0.56, 0.56], [3600, 3600]), 0.4, 0.2)
    text = levers_table.series_table(
        [("series-1", {"baseline": first}), ("series-4", {"baseline": base, "lr-4e-3": lr, "bf16": bf16})]
    )
    cells = [
        [c.strip() for c in line.strip("|").split("|")] for line in text.splitlines() if line.startswith("| series-")
    ]
    assert [c[0] for c in cells] == [
        "series-1",
        "series-4 (modelled clock)",
        "series-4 (modelled clock)",
        "series-4 (modelled clock)",
    ]
    assert "on the modelled clock at 0.6000 / 0.3000 s a step (Δ vs it: the clock's and the drift)" in cells[1][2]
    # A later modelled baseline priced on another CPU: the same clock by name, other costs, so not just the drift.
    xeon = modelled(results([5.5, 5.7], [0.56, 0.56], [3000, 3000]), 0.4, 0.35)
    later = levers_table.series_table([("series-4", {"baseline": base}), ("series-5", {"baseline": xeon})])
    assert "on the modelled clock at 0.4000 / 0.3500 s a step (Δ vs it: the clock's and the drift)" in later
    again = levers_table.series_table(
        [("series-4", {"baseline": base}), ("series-5", {"baseline": copy.deepcopy(base)})]
    )
    assert "in another sitting (Δ vs it: the drift)" in again
    assert cells[2][2] == "`optim.lr=0.004`" and cells[3][2] == "–"  # bf16's cost is its clock, not a lever
    assert levers_table.clock(first) == "wall" and levers_table.clock(bf16) == "modelled"
    # An arm on another clock than its own baseline says so: its costs are not a lever, the clock is a difference.
    mixed = levers_table.table({"baseline": first, "bf16": bf16})
    assert "on the modelled clock (its baseline: wall)" in row(mixed, "bf16")[1]


def test_a_baseline_reused_from_its_runs_stays_in_its_series_and_a_rerun_starts_the_next(tmp_path):
    import levers_series

    kept = tmp_path / "results"
    base = results([5.6, 5.8], [0.55, 0.57], [2140, 2150])
    for n in (1, 2, 10):  # series-10 is newer than series-2
        (kept / f"series-{n}").mkdir(parents=True)
    (kept / "series-2" / "baseline.json").write_text(json.dumps(base))
    assert [p.name for p in levers_series.all_series(kept)] == ["series-1", "series-2", "series-10"]
    reused = copy.deepcopy(base)
    for run in reused["runs"]:
        run["reused"] = True  # compare rewrites results.json when it reuses finished runs: the same runs
    (tmp_path / "reused.json").write_text(json.dumps(reused))
    assert levers_series.where(tmp_path / "reused.json", kept) == kept / "series-2"
    rerun = copy.deepcopy(base)
    rerun["runs"][1]["eval"][-1]["eval_loss"] = 5.81  # the same settings run again measure something else
    (tmp_path / "rerun.json").write_text(json.dumps(rerun))
    assert levers_series.where(tmp_path / "rerun.json", kept) == kept / "series-11"
    assert levers_series.where(tmp_path / "rerun.json", tmp_path / "none") == tmp_path / "none" / "series-1"


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
        "nothing kept has a calibration: the kept baseline's machine speed is unknown"
    )
    line = cal.record(kept, 531.25, "0.05 0.10 0.20", 2)
    assert line.startswith("calibration\t") and line.endswith("\t0.05 0.10 0.20\t2\t531.2 ms/step")
    assert [ms for _, ms in cal.calibrations(kept)] == [531.2]
    assert cal.check([], cal.calibrations(kept)).startswith("this sitting has no calibration")
    cal.record(now, 555.0, "0.00 0.00 0.00", 2)  # 4.5% slower: the same machine's spread
    assert cal.check(cal.calibrations(now), cal.calibrations(kept)) is None
    cal.record(now, 560.0, "0.00 0.00 0.00", 2)  # the latest counts: 5.4% slower
    why = cal.check(cal.calibrations(now), cal.calibrations(kept))
    assert "step is 560 ms; the kept arms ran at 531 ms" in why and "unset BASELINE" in why
    assert (
        cal.main(["check", str(now), str(kept)]) == 1
        and cal.main(["check", str(tmp_path / "none.tsv"), str(kept)]) == 1
    )
    assert cal.main(["nonsense"]) == 2


def test_keep_files_each_sitting_under_the_series_of_its_baseline(tmp_path):
    """levers_cpu.sh keep, the bash path: a new baseline opens a series, a reused one and BASELINE=kept arms join
    theirs."""
    import subprocess

    kept = tmp_path / "kept"

    def sitting(name: str, arms: dict[str, dict], running: tuple[str, ...] = (), **env: str) -> str:
        out = tmp_path / name
        for arm in running:  # an arm still training: its log so far, no results.json
            out.mkdir(parents=True, exist_ok=True)
            (out / f"{arm}.log").write_text(f"{name} {arm}, half-way\n")
        for arm, doc in arms.items():
            (out / "arms" / arm).mkdir(parents=True)
            (out / "arms" / arm / "results.json").write_text(json.dumps(doc))
            (out / f"{arm}.log").write_text(f"{name} {arm}\n")
        (out / "load.tsv").write_text(f"{name}\tstart\t2026-11-27T04:00:00Z\t0.1 0.1 0.1\t2\n")
        done = subprocess.run(
            ["bash", "experiments/hour-levers/levers_cpu.sh", str(out), "keep"],
            cwd=REPO,
            env={**os.environ, "LEVERS_KEPT": str(kept), **env},
            capture_output=True,
            text=True,
        )
        assert done.returncode == 0, done.stderr
        return done.stdout

    base = results([5.6, 5.8], [0.55, 0.57], [2140, 2150])
    sitting("one", {"baseline": base, "mask-0.30": results([5.5, 5.7], [0.55, 0.57], [1800, 1800])})
    reused = copy.deepcopy(base)
    reused["runs"][0]["reused"] = True
    sitting("two", {"baseline": reused, "lr-4e-3": results([5.4, 5.4], [0.58, 0.58], [2100, 2100], lr=4e-3)})
    again = results([5.5, 5.9], [0.56, 0.55], [2000, 2100])
    assert "series-2" in sitting("three", {"baseline": again, "bf16": results([5.2, 5.3], [0.57, 0.57], [3000, 3100])})
    sitting(
        "four", {"modern": results([5.1, 5.2], [0.57, 0.57], [1900, 1900])}, running=("shape-tiny",), BASELINE="kept"
    )
    r = kept / "results"
    assert sorted(p.name for p in (r / "series-1").iterdir()) == ["baseline.json", "lr-4e-3.json", "mask-0.30.json"]
    assert sorted(p.name for p in (r / "series-2").iterdir()) == ["baseline.json", "bf16.json", "modern.json"]
    assert json.loads((r / "series-2" / "baseline.json").read_text()) == again
    load = (kept / "logs" / "series-1" / "load.tsv").read_text().splitlines()
    assert [line.split("\t")[0] for line in load] == ["one", "two"]  # each sitting's lines once, in order
    assert (kept / "logs" / "series-2" / "modern.log").read_text() == "four modern\n"
    assert not (kept / "logs" / "series-2" / "shape-tiny.log").exists()  # a running arm's partial log is not kept


@pytest.mark.parametrize(
    "combined, expect",
    [
        (
            "bf16 shape-tiny",
            "combined-bf16+shape-tiny base      --set train.precision=bf16 --set model.layers=2 "
            "--set model.hidden=128 --set model.heads=2",
        ),
        ("vocab-16k mask-0.30", "combined-vocab-16k+mask-0.30 vocab16k  --set masking.mask_prob=0.3"),
        (
            "shape-tiny shape-L6-H128",
            "COMBINED: two of shape-tiny shape-L6-H128 set model.layers (one lever of each kind)",
        ),
        # amendment 4: the two other kinds of shards compose, and so do seq-64's batch and a batch arm's factor
        (
            "seq-64 vocab-16k",
            "combined-seq-64+vocab-16k vocab16k-seq64 --set train.batch_size=64 --set shard.max_seq_len=64",
        ),
        ("batch-64 seq-64", "combined-batch-64+seq-64 seq64     --set train.batch_size=128 --set shard.max_seq_len=64"),
        (
            "seq-64 batch-16 batch-64",
            "COMBINED: two of seq-64 batch-16 batch-64 set train.batch_size (one lever of each kind)",
        ),
        ("baseline bf16", "COMBINED: baseline is not a lever arm"),
        ("bf16", "COMBINED needs two arms or more (got: bf16)"),
        ("vocab-16k vocab-16k", "COMBINED names vocab-16k twice"),
    ],
)
def test_the_winners_combine_into_one_arm_or_are_refused_in_one_line(tmp_path, combined, expect):
    """levers_cpu.sh COMBINED=...: the arms' flags joined on their shards; clashing levers or shards refused."""
    import subprocess

    done = subprocess.run(
        ["bash", "experiments/hour-levers/levers_cpu.sh", str(tmp_path), "plan"],
        cwd=REPO,
        env={**os.environ, "COMBINED": combined},
        capture_output=True,
        text=True,
    )
    if expect.startswith("combined-"):
        assert done.returncode == 0, done.stderr
        assert expect in done.stdout.splitlines()
    else:
        assert done.returncode == 2 and done.stderr.strip() == expect and not done.stdout


def test_the_per_seed_table_sets_each_seed_beside_its_own_random_weights():
    base = results([4.848, 4.843], [0.538, 0.546], [1829, 1829])
    modern = results([4.617, 4.647], [0.544, 0.542], [1659, 1659])
    base["blimp_control"] = {"random": {"0": {"accuracy": 0.516}, "1": {"accuracy": 0.516}}}
    modern["blimp_control"] = {"random": {"0": {"accuracy": 0.547}, "1": {"accuracy": 0.529}}}
    text = levers_table.per_seed({"modern": modern, "baseline": base})
    assert row(text, "baseline") == ["baseline", "4.848 / 4.843", "53.8 / 54.6", "51.6 / 51.6", "+2.2 / +3.0"]
    assert row(text, "modern") == ["modern", "4.617 / 4.647", "54.4 / 54.2", "54.7 / 52.9", "-0.3 / +1.3"]
    assert text.splitlines()[2].startswith("| baseline |")  # the baseline first, whatever the order given
    del modern["blimp_control"]  # scored without controls: no made-up difference
    assert row(levers_table.per_seed({"baseline": base, "modern": modern}), "modern")[3:] == ["–", "–"]
