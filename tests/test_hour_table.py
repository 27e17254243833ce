"""experiments/common/hour_table.py (issue 45 part 3): the hour recipe's runs, its BLiMP against its controls, and
its curve by minutes beside `mini` `fast`'s, from the files hour_cpu.sh writes."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "experiments" / "common"))  # the table scripts import each other by name, as scripts

import hour_table  # noqa: E402


def write_run(
    folder: Path,
    steps: int,
    losses: list[float],
    entropy: float = 6.9,
    step_s: float = 0.5,
    short_s: float = 0.25,
    short_steps: int = 100,
) -> Path:
    """A budget run's run.json and metrics.jsonl as `pretrain` writes them: training lines every 50 steps with the
    counted seconds (`elapsed`) of a modelled clock, an evaluation at the end."""
    folder.mkdir(parents=True)
    counted = lambda s: min(s, short_steps) * short_s + max(0, s - short_steps) * step_s  # noqa: E731
    lines = [{"kind": "unigram", "step": 0, "train_entropy": entropy}]
    lines += [{"kind": "eval", "step": s, "eval_loss": loss} for s, loss in zip((0, steps), losses)]
    lines += [{"kind": "train", "step": s, "elapsed": counted(s)} for s in range(50, steps, 50)]
    (folder / "metrics.jsonl").write_text("".join(json.dumps(line) + "\n" for line in lines))
    budget = {
        "steps": steps,
        "spent_seconds": counted(steps),
        "clock": "modelled",
        "wall_seconds": 3 * counted(steps),
        "finished": True,
    }
    (folder / "run.json").write_text(json.dumps({"budget": budget}))
    return folder


def blimp_doc(trained: dict[tuple[str, int], float], random: dict[str, float], unigram: float = 0.47) -> dict:
    """A `mapnet blimp` file: each (run, step)'s accuracy, each run's random control, the unigram model."""
    models = [
        {
            "label": f"{run}@{step}",
            "run": run,
            "step": step,
            "init": "pretrained",
            "accuracy": acc,
            "fields": {"morphology": acc + 0.1, "syntax": acc - 0.1},
            "controls": {"random": f"random-init/{run}", "unigram": "unigram"},
        }
        for (run, step), acc in trained.items()
    ]
    models += [
        {"label": f"random-init/{run}", "run": "random-init", "step": None, "init": "random", "accuracy": acc}
        for run, acc in random.items()
    ]
    models.append({"label": "unigram", "run": "unigram", "step": None, "init": "unigram", "accuracy": unigram})
    return {
        "models": models,
        "references": {"5-gram": {"accuracy": 0.6332, "fields": {"morphology": 0.65, "syntax": 0.645}}},
        "data": {"paradigms": 45, "pairs": 45000, "pairs_per_paradigm": 0},
    }


def test_the_final_scores_are_paired_with_each_seeds_own_random_weights():
    doc = blimp_doc(
        {("seed-0", 900): 0.60, ("seed-1", 900): 0.64, ("seed-2", 900): 0.62},
        {"seed-0": 0.52, "seed-1": 0.52, "seed-2": 0.51},
    )
    trained, random, unigram = hour_table.final_scores(doc)
    assert trained == {"seed-0": 0.60, "seed-1": 0.64, "seed-2": 0.62} and random["seed-2"] == 0.51 and unigram == 0.47
    row = hour_table.blimp_table({"pll": doc}).splitlines()[2]
    cells = [c.strip() for c in row.strip("|").split("|")]
    # Differences 8, 12, 11 points: mean 10.33, sd 2.082, t(2 dof) 4.303 x 2.082 / sqrt(3) = 5.17.
    assert cells[:2] == ["pll", "60.0, 64.0, 62.0"] and cells[4] == "+10.3 ± 5.2" and cells[5] == "3"
    assert cells[6:] == ["47.0", "63.3", "no"]  # a mean of 62.0 is under the 5-gram's 63.3


def test_word_l2r_is_paired_with_pll_seed_by_seed_and_both_are_tabled_by_field():
    pll = blimp_doc(
        {("seed-0", 900): 0.60, ("seed-1", 900): 0.64, ("seed-2", 900): 0.62},
        {"seed-0": 0.52, "seed-1": 0.52, "seed-2": 0.51},
    )
    l2r = blimp_doc(
        {("seed-0", 900): 0.61, ("seed-1", 900): 0.64, ("seed-2", 900): 0.64},
        {"seed-0": 0.52, "seed-1": 0.52, "seed-2": 0.51},
    )
    text = hour_table.blimp_table({"pll": pll, "l2r": l2r})
    # Differences 1, 0, 2 points: mean 1.0, sd 1.0, t(2 dof) 4.303 x 1.0 / sqrt(3) = 2.48.
    assert "word-l2r − PLL, paired by seed: +1.0, +0.0, +2.0; +1.0 ± 2.5 (3 comparisons)." in text
    # By field, the mean over the seeds: morphology pll 0.72 (0.70, 0.74, 0.72), l2r 0.73; the 5-gram's own.
    assert "| field | pll, trained (mean) | l2r, trained (mean) | 5-gram |" in text
    assert "| morphology | 72.0 | 73.0 | 65.0 |" in text and "| syntax | 52.0 | 53.0 | 64.5 |" in text
    assert "word-l2r − PLL" not in hour_table.blimp_table({"pll": pll})  # one method: nothing to pair


def test_the_runs_say_what_the_budget_bought_and_whether_they_left_the_plateau(tmp_path):
    left = write_run(tmp_path / "seed-0", 1000, [9.2, 4.8])
    stayed = write_run(tmp_path / "seed-1", 1000, [9.2, 6.2])
    rows = hour_table.runs_table([left, stayed]).splitlines()[2:]
    assert rows[0].split("|")[2].strip() == "1,000" and rows[0].rstrip(" |").endswith("yes")
    assert rows[1].rstrip(" |").endswith("no")  # 6.2 is within 1 nat of the unigram entropy 6.9
    # 100 pieces at 0.25 s and 900 steps at 0.5 s: 475 counted seconds, the wall 3 x that.
    assert [c.strip() for c in rows[0].split("|")[3:6]] == ["modelled", "475", "1,425"]


def test_the_curve_reads_minutes_from_the_counted_seconds_and_averages_the_seeds(tmp_path):
    runs = {name: write_run(tmp_path / name, 1000, [9.2, 4.8]) for name in ("seed-0", "seed-1")}
    doc = blimp_doc(
        {("seed-0", 300): 0.52, ("seed-0", 1000): 0.56, ("seed-1", 300): 0.54, ("seed-1", 1000): 0.60},
        {"seed-0": 0.5, "seed-1": 0.5},
    )
    curve = hour_table.hour_curve(doc, runs)
    # Step 300: 100 x 0.25 + 200 x 0.5 = 125 s; step 1000: 475 s.
    assert curve == [(pytest.approx(125 / 60), pytest.approx(0.53)), (pytest.approx(475 / 60), pytest.approx(0.58))]
    text = hour_table.curve_table(curve, [(2.0, 0.50), (10.0, 0.54)])
    assert "| 2.1 | 53.0 | 50.0 |" in text  # the reference at 2.08 min, between its points: 50.0 + 4 x 0.083 / 8
    # Two points: the second half (from 3.96 minutes) holds one, too few for a line.
    assert "Second half" not in text
    # The second half's least-squares line, not its last segment: points at 30, 40, 50 minutes (58, 57, 60) have a
    # slope of 0.001 a minute (+6.0 points per 60; the last segment alone would say +18.0) and put 58.33 + 0.06 =
    # 64.3 at 100 minutes.
    text = hour_table.curve_table([(10.0, 0.50), (20.0, 0.56), (30.0, 0.58), (40.0, 0.57), (50.0, 0.60)], [])
    assert "Second half (3 points from 25 minutes): +6.0 points per 60 minutes" in text
    assert "puts 64.3 at 100 minutes" in text


def test_the_mini_fast_curve_is_put_on_minutes_at_the_kept_costs():
    curve = hour_table.mini_fast_curve()  # the kept files: experiments/blimp-arms-mini/uniform-6k and the costs
    kept = json.loads(hour_table.KEPT_COSTS.read_text())["reference_seconds"]
    # 6,000 steps, the first 500 on 16-token pieces: 500 short + 5,500 full steps.
    assert len(curve) == 6 and curve[-1][0] == pytest.approx((500 * kept["short"] + 5500 * kept["full"]) / 60)
    assert curve[-1][1] == pytest.approx(0.572, abs=0.001)  # its README: 57.2 after 6,000 steps


def test_the_reference_curve_is_priced_on_the_clock_the_runs_counted(tmp_path):
    # hour_cpu.sh with LEVERS_COSTS records where its costs came from; `mini` `fast` must be put on that machine's
    # minutes (its baseline), not the kept costs of another CPU. Without such a record: the kept costs.
    assert hour_table.clock_of(tmp_path) == hour_table.KEPT_COSTS
    (tmp_path / "costs.json").write_text(json.dumps({"arms": {"hour": {"step_seconds": 0.5}}}))
    assert hour_table.clock_of(tmp_path) == hour_table.KEPT_COSTS
    pinned = tmp_path / "pinned.json"
    (tmp_path / "costs.json").write_text(
        json.dumps({"arms": {"hour": {"step_seconds": 0.5, "from": {"file": str(pinned), "arm": "x"}}}})
    )
    assert hour_table.clock_of(tmp_path) == pinned


def test_costs_measured_beside_mini_fast_are_their_own_clock(tmp_path):
    # hour_cpu.sh's costs stage times mini fast as the reference on this machine: the curve is priced by that file.
    (tmp_path / "costs.json").write_text(
        json.dumps(
            {
                "reference": "mini-fast",
                "reference_seconds": {"full": 1, "short": 1},
                "arms": {"hour": {"step_seconds": 0.5}},
            }
        )
    )
    assert hour_table.clock_of(tmp_path) == tmp_path / "costs.json"


def test_a_kept_clock_recorded_in_another_checkout_is_read_from_this_one(tmp_path):
    # The kept costs record the path of the checkout that ran them; a clone elsewhere (CI), even on a machine where
    # that checkout still exists, prices the curve with its own copy, so its tables name the same relative file.
    other = tmp_path / "elsewhere" / "experiments" / "hour-levers" / "step-costs" / "costs.json"
    other.parent.mkdir(parents=True)
    other.write_text("{}")
    (tmp_path / "costs.json").write_text(json.dumps({"arms": {"hour": {"from": {"file": str(other), "arm": "x"}}}}))
    assert hour_table.clock_of(tmp_path) == hour_table.KEPT_COSTS


def test_an_out_folder_without_finished_runs_is_one_line(tmp_path):
    with pytest.raises(SystemExit, match="has no finished seed"):
        hour_table.main([str(tmp_path)])
    (tmp_path / "runs" / "seed-0").mkdir(parents=True)  # a run still training: run.json without its budget yet
    (tmp_path / "runs" / "seed-0" / "run.json").write_text(json.dumps({"command": "mapnet pretrain"}))
    with pytest.raises(SystemExit, match="has no finished seed"):
        hour_table.main([str(tmp_path)])


def test_a_blimp_file_not_complete_is_left_out_and_said_so(tmp_path, capsys):
    # A scoring stopped part-way (to be continued with `blimp --resume`) must not be tabled as the seeds' scores.
    write_run(tmp_path / "runs" / "seed-0", 1000, [9.2, 4.8])
    doc = blimp_doc({("seed-0", 1000): 0.62}, {"seed-0": 0.5})
    (tmp_path / "blimp-final-pll.json").write_text(json.dumps({**doc, "complete": False}))
    assert hour_table.main([str(tmp_path), "--costs", str(hour_table.KEPT_COSTS)]) == 0
    out, err = capsys.readouterr()
    assert "BLiMP at the budget's end" not in out and "blimp-final-pll.json: not complete (3 models so far" in err
    (tmp_path / "blimp-final-pll.json").write_text(json.dumps({**doc, "complete": True}))
    hour_table.main([str(tmp_path)])
    assert "BLiMP at the budget's end" in capsys.readouterr().out


def test_section_is_tables_read_the_benchmarks_output_and_the_runs_as_they_land(tmp_path):
    import masking_tables

    arm = lambda ratio, lo, hi, step: {
        "ratio": {"full": ratio, "short": ratio},
        "step_seconds": step,  # noqa: E731
        "short_step_seconds": step,
        "ratio_range": {"full": [lo, hi], "short": [lo, hi]},
    }
    costs = {
        "reference": "uniform",
        "reference_pinned": True,
        "reference_seconds": {"full": 0.4, "short": 0.5},
        "steps": 15,
        "skip": 2,
        "rounds_run": 3,
        "cores": 2,
        "omp_num_threads": "2",
        "cpu": "AMD EPYC; bf16: none",
        "when": "2026-11-29T03:52:01Z",
        "load_before": [0.6, 1.0, 1.0],
        "load_after": [1.7, 1.7, 1.4],
        "arms_given": [{"name": n} for n in ("uniform", "pmi", "mapnet-ht-lite")],
        "arms": {
            "uniform": arm(1.0, 1.0, 1.0, 0.4),
            "pmi": arm(1.055, 1.053, 1.113, 0.422),
            "mapnet-ht-lite": arm(1.029, 1.009, 1.058, 0.4116),
        },
    }
    (tmp_path / "costs.json").write_text(json.dumps(costs))
    table = masking_tables.costs(tmp_path / "costs.json")
    assert "`uniform`'s costs pinned (0.4 s, short 0.5 s)" in table and "0.60 / 1.00 / 1.00 before" in table
    rows = [line for line in table.splitlines() if line.startswith("| ") and "×" not in line]
    assert rows == [
        "| uniform | 1 | 1 | 0.4 | 0.4 |",
        "| pmi | 1.055 (1.053–1.113) | 1.055 (1.053–1.113) | 0.422 | 0.422 |",
        "| mapnet-ht-lite | 1.029 (1.009–1.058) | 1.029 (1.009–1.058) | 0.4116 | 0.4116 |",
    ]  # the costs' order
    assert masking_tables.runs(tmp_path) == "*No run finished yet.*"
    write_run(tmp_path / "runs" / "mapnet-ht-lite" / "seed-0", 2000, [9.9, 4.5])
    write_run(tmp_path / "runs" / "uniform" / "seed-0", 2400, [9.9, 4.3])
    (tmp_path / "runs" / "pmi").mkdir()  # started in a lane, nothing finished: left out
    runs = masking_tables.runs(tmp_path)
    assert runs.index("**uniform**") < runs.index("**mapnet-ht-lite**") and "**pmi**" not in runs
    assert "| seed-0 | 2,400 | modelled |" in runs and "| 4.300 |" in runs and "| 4.500 |" in runs


def test_the_scored_seeds_table_reads_the_most_seeds_kept_and_names_their_controls(tmp_path):
    import masking_tables

    assert masking_tables.scored(tmp_path) == "*No seed scored yet.*"
    kept = masking_tables.RAW / "score" / "seeds-1" / "results.json"  # the real file of the first scored seed
    for n in (1, 10):  # 10 sorts before 2 as text: the count decides, not the name
        (tmp_path / "score" / f"seeds-{n}").mkdir(parents=True)
        doc = json.loads(kept.read_text())
        doc["aggregate"]["strategies"]["uniform"]["blimp"]["mean"] = n / 100  # tells the two files apart
        (tmp_path / "score" / f"seeds-{n}" / "results.json").write_text(json.dumps(doc))
    (tmp_path / "score" / "seeds-2").mkdir()  # no results.json: left out
    table = masking_tables.scored(tmp_path)
    assert table.startswith(
        "`raw/score/seeds-10/results.json`: uniform, uniform@0.15, mapnet-ht-lite, adaptive-soft-ht"
    )
    assert "BLiMP (PLL, 45 paradigms × 200 pairs): uniform 10.0, uniform@0.15 60.4" in table
    assert "random weights 50.1, the unigram model 46.8." in table and "one seed gives no interval" in table
    assert "| mapnet-ht-lite | +0.004 | -0.018 | -0.021 | 0 of 1 | not reached | – | -1.3 |" in table


def test_kept_tables_any_kept_folder_and_says_when_there_is_none(tmp_path):
    # Section H twice: the Xeon's raw (bf16) and the AMD VM's (fp32) are tabled by the same function, each folder
    # from its own files; a folder not kept yet is said so, never tabled from the other.
    assert hour_table.kept(tmp_path / "amd") == "*Not measured yet.*"
    write_run(tmp_path / "amd" / "runs" / "seed-0", 1000, [9.2, 4.8])
    text = hour_table.kept(tmp_path / "amd")
    assert text.startswith("**Runs**") and "| seed-0 | 1,000 | modelled | 475 | 1,425 |" in text
    assert hour_table.RAW_AMD.parent == hour_table.RAW.parent and hour_table.RAW_AMD != hour_table.RAW


def glue_file(path: Path, task: str, examples: int, scores: dict[tuple[str, int], float]) -> Path:
    """A `finetune-glue` results.json: one run per (init, seed) with its epochs' dev scores."""
    runs = {
        f"{task}-{init}-{seed}": {
            "task": task,
            "train_examples": examples,
            "lr": 3e-4,
            "init": init,
            "seed": seed,
            "seconds": 10.0,
            "epochs": [{"score": score - 0.01}, {"score": score}],
        }
        for (init, seed), score in scores.items()
    }
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"runs": runs}))
    return path


def test_glue_files_at_two_training_sizes_are_two_rows_and_a_seed_in_two_files_is_refused(tmp_path, capsys):
    # Section H's GLUE: the small protocol (5,000 examples, seeds 0-2) beside few-shot (500, seeds 0-4) share task,
    # rate and seed numbers. Merged by (task, rate) alone, the few-shot runs overwrote the small protocol's seeds.
    import downstream_table

    small = glue_file(
        tmp_path / "glue-small" / "results.json",
        "SST-2",
        5000,
        {("pretrained", s): 0.77 for s in range(3)} | {("random", s): 0.75 for s in range(3)},
    )
    few = glue_file(
        tmp_path / "glue-fewshot-500" / "results.json",
        "SST-2",
        500,
        {("pretrained", s): 0.66 for s in range(5)} | {("random", s): 0.60 + s / 100 for s in range(5)},
    )
    downstream_table.main([str(small), str(few)])
    out = capsys.readouterr().out
    assert "Over pretraining seeds" not in out  # one encoder: no interval over encoders
    rows = [line for line in out.splitlines() if line.startswith("| SST-2")]
    assert rows[0].startswith(
        "| SST-2, 5,000 examples | 0.0003 | 0.7700, 0.7700, 0.7700 | 0.7500, 0.7500, 0.7500 | +0.0200"
    )
    assert rows[1].startswith("| SST-2, 500 examples | 0.0003 | 0.6600, 0.6600, 0.6600, 0.6600, 0.6600 |")
    assert len(rows) == 2
    # A control's seeds run apart (two files, one size) still merge into one row, named by its task alone.
    apart = glue_file(tmp_path / "b" / "results.json", "SST-2", 5000, {("random", 3): 0.74, ("pretrained", 3): 0.78})
    downstream_table.main([str(small), str(apart)])
    assert [line.split(" | ")[0] for line in capsys.readouterr().out.splitlines()[2:]] == ["| SST-2"]
    again = glue_file(tmp_path / "c" / "results.json", "SST-2", 5000, {("random", 1): 0.70})
    with pytest.raises(SystemExit, match=r"SST-2 \(5000 examples, lr 0.0003, random, seed 1\) is in both"):
        downstream_table.main([str(small), str(again)])


def test_glue_files_of_two_encoders_pair_each_control_with_its_own_encoder(tmp_path, capsys):
    # One file per pretraining seed (finetune-glue --checkpoint seed-K): the same task, size, rate and seed numbers,
    # so without the encoder in the key the second file's runs were refused as duplicates (or, before, mixed).
    import downstream_table

    def encoder_file(name: str, pre: float, ran: float) -> Path:
        path = glue_file(
            tmp_path / name / "results.json",
            "SST-2",
            5000,
            {("pretrained", s): pre for s in range(3)} | {("random", s): ran for s in range(3)},
        )
        doc = json.loads(path.read_text())
        for run in doc["runs"].values():
            key = f"{name}-weights@4917" if run["init"] == "pretrained" else f"{name}-random@0"
            run["checkpoint"] = {
                "key": key,
                "run": name if run["init"] == "pretrained" else "random-init",
                "step": 4917,
            }
        doc["controls"] = {f"{name}-weights@4917": f"{name}-random@0"}
        path.write_text(json.dumps(doc))
        return path

    one, two = encoder_file("seed-0", 0.77, 0.75), encoder_file("seed-1", 0.76, 0.70)
    downstream_table.main([str(one), str(two)])
    out = capsys.readouterr().out
    rows = [line for line in out.splitlines() if line.startswith("| SST-2,")]
    assert [r.split(" | ")[0] for r in rows] == ["| SST-2, seed-0@4917", "| SST-2, seed-1@4917"]
    assert "| +0.0200 ±" in rows[0] and "| +0.0600 ±" in rows[1]
    # Over the two encoders: their mean margins 0.02 and 0.06, mean 0.04, half-width t(0.975, 1 dof) 12.7062 times
    # the standard error 0.02 (the std of the two, 0.0283, over sqrt 2).
    assert "| SST-2 | 0.0003 | 2 | +0.0200, +0.0600 | +0.0400 ± 0.2541 | yes |" in out
    doc = json.loads(two.read_text())
    doc["controls"] = {}
    two.write_text(json.dumps(doc))
    with pytest.raises(SystemExit, match="is the control of no encoder these files hold"):
        downstream_table.main([str(one), str(two)])
