"""The experiment scripts of issue 45 (sections G, H and I): bad arguments refused in one line, before any work.

Their stages are smoke-run by hand (`... OUT smoke`, minutes each); here only what must be refused at once: an
unknown stage, an unknown clock or shards, a masking comparison without uniform as its reference, and a training stage
before its step costs are measured; which arms of the lever search reuse the baseline's BLiMP controls; and which
shards and held-out sets the hour and masking scripts' DATA picks."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
HOUR = "experiments/hour-recipe/hour_cpu.sh"
MASKING = "experiments/hour-masking/masking_cpu.sh"
LEVERS = "experiments/hour-levers/levers_cpu.sh"


def script(path: str, out: Path, *args: str, **env: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        ["bash", path, str(out), *args], cwd=REPO, capture_output=True, text=True, timeout=60, env={**os.environ, **env}
    )


@pytest.mark.parametrize(
    "path, args, env, says",
    [
        (HOUR, ("train",), {}, "usage: hour_cpu.sh OUT costs|pretrain|shape|blimp|glue|table|smoke"),
        (HOUR, ("pretrain",), {"CLOCK": "cpu"}, "CLOCK must be modelled or wall (got cpu)"),
        (HOUR, ("pretrain",), {"DATA": "seq32"}, "DATA must be base, seq64, vocab16k or vocab16k-seq64 (got seq32)"),
        (HOUR, ("glue",), {"GLUE_SEEDS": "0 3"}, "GLUE_SEEDS must be seeds of 0..2 (got 3)"),
        (HOUR, ("glue",), {"GLUE_SEEDS": "one"}, "GLUE_SEEDS must be seeds of 0..2 (got one)"),
        (LEVERS, ("prepare", "base", "seq32"), {}, "unknown shards seq32 (base, seq64, vocab16k, vocab16k-seq64)"),
        (MASKING, ("sweep",), {}, "usage: masking_cpu.sh OUT costs|run|table|score|smoke"),
        (MASKING, ("run",), {"STRATEGIES": "pmi,uniform"}, "STRATEGIES must be uniform (the reference"),
        (MASKING, ("run",), {"STRATEGIES": "uniform"}, "STRATEGIES must be uniform (the reference"),
        (MASKING, ("run",), {"LANES": "0"}, "LANES must be 1 to 9 (got 0)"),
    ],
)
def test_bad_arguments_are_one_line_and_exit_2_before_any_work(tmp_path, path, args, env, says):
    out = tmp_path / "out"
    done = script(path, out, *args, **env)
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr.count("\n") == 1 and done.stderr.startswith(says)
    assert not out.exists()  # nothing made


@pytest.mark.parametrize("path, stage", [(HOUR, "pretrain"), (MASKING, "run")])
def test_a_stage_that_needs_the_costs_says_so_before_building_data(tmp_path, path, stage):
    # The costs are measured alone first; without them the stage stops before it builds or reads any shards.
    done = script(path, tmp_path / "out", stage, MAPNET="false")
    assert done.returncode == 2 and done.stderr.count("\n") == 1 and "run the costs stage first" in done.stderr


def test_score_links_only_the_seeds_every_arm_has_finished(tmp_path):
    # A run not finished must never reach the scoring compare: it would train it, beside its own lane.
    out, recorder = tmp_path / "out", tmp_path / "mapnet.sh"
    recorder.write_text('echo "$@" > "$(dirname "$0")/argv"\n')
    (out / "costs.json").parent.mkdir(parents=True)
    (out / "costs.json").write_text("{}")

    def run(lane: str, arm: str, seed: int, finished: bool) -> None:
        folder = out / f"lane-{lane}" / "runs" / arm / f"seed-{seed}"
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "run.json").write_text(f'{{"budget": {{"finished": {str(finished).lower()}}}}}')

    env = {"STRATEGIES": "uniform,pmi", "MAPNET": f"bash {recorder}"}
    run("a", "uniform", 0, True), run("b", "pmi", 0, False)
    done = script(MASKING, out, "score", **env)
    assert done.returncode == 2 and done.stderr.startswith("no seed is finished for every arm yet (uniform pmi)")
    assert not (out / "score").exists() and not (tmp_path / "argv").exists()
    run("b", "pmi", 0, True), run("a", "uniform", 1, True), run("b", "pmi", 1, False)  # seed 1: one arm only
    done = script(MASKING, out, "score", **env)
    assert done.returncode == 0, done.stderr
    links = sorted(p.relative_to(out / "score" / "runs") for p in (out / "score" / "runs").glob("*/*"))
    assert [str(p) for p in links] == ["pmi/seed-0", "uniform/seed-0"]
    assert (out / "score" / "runs" / "pmi" / "seed-0").resolve() == out / "lane-b" / "runs" / "pmi" / "seed-0"
    argv = (tmp_path / "argv").read_text().split()
    assert argv[:5] == ["compare", argv[1], "--out", str(out / "score"), "--strategies"] and argv[5] == "uniform,pmi"
    assert argv[argv.index("--seeds") + 1] == "1"


def test_an_arm_of_the_baselines_architecture_reuses_its_random_weight_controls(tmp_path):
    # levers_cpu.sh with BASELINE=kept has no baseline folder: the controls come from any arm of the baseline's
    # architecture (same seeds, same weights), never from an arm with its own (another shape or block).
    out = tmp_path / "out"
    for arm, score in (("shape-tiny", "own"), ("mask-0.40", "baseline's")):
        (out / "arms" / arm).mkdir(parents=True)
        (out / "arms" / arm / "blimp-controls.json").write_text(score)
    run = (
        'source experiments/hour-levers/levers_cpu.sh "$OUT" plan > /dev/null; '
        'for line in "$(chosen batch-16)" "$(chosen shape-L8-H128)"; do run_arm "$line"; done'
    )
    done = subprocess.run(
        ["bash", "-c", run],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "OUT": str(out), "BASELINE": "kept", "MAPNET": "true"},
    )
    assert done.returncode == 0, done.stderr
    assert (out / "arms" / "batch-16" / "blimp-controls.json").read_text() == "baseline's"
    assert not (out / "arms" / "shape-L8-H128" / "blimp-controls.json").exists()  # its own: scored by its run


def test_glue_seeds_fine_tune_each_named_seeds_own_last_checkpoint(tmp_path):
    # One pretrained encoder is one comparison: GLUE_SEEDS="0 2" runs the small protocol on seed 2's last checkpoint
    # too, into its own folder; seed 0 keeps its few-shot runs and the folder names the kept raw files use.
    out, recorder = tmp_path / "out", tmp_path / "mapnet.sh"
    recorder.write_text('echo "$@" >> "$(dirname "$0")/argv"\n')
    for k in range(3):
        for step in (100, 200):
            (out / "runs" / f"seed-{k}" / "checkpoints" / f"step-{step:08d}").mkdir(parents=True)
        (out / "runs" / f"seed-{k}" / "run.json").write_text('{"budget": {"finished": true}}')
    done = script(HOUR, out, "glue", GLUE_SEEDS="0 2", MAPNET=f"bash {recorder}")
    assert done.returncode == 0, done.stderr
    calls = [line.split() for line in (tmp_path / "argv").read_text().splitlines()]
    where = [
        (c[c.index("--checkpoint") + 1].split("/runs/")[1], c[c.index("--out") + 1].rsplit("/", 1)[1]) for c in calls
    ]
    assert where == [
        ("seed-0/checkpoints/step-00000200", "glue-small"),
        ("seed-0/checkpoints/step-00000200", "glue-fewshot-500"),
        ("seed-0/checkpoints/step-00000200", "glue-fewshot-1000"),
        ("seed-2/checkpoints/step-00000200", "glue-small-seed-2"),
    ]
    assert calls[-1][calls[-1].index("--max-train") + 1] == "5000"


# A recording `mapnet` that also finishes what a `compare --strategies ARMS --seeds N` asks for: each run's
# run.json says its budget is spent, as a real run's does (what the queue lanes read).
FINISH_COMPARED_RUNS = r"""
[[ $1 == compare ]] || exit 0
while (($#)); do case $1 in --out) out=$2 ;; --strategies) arms=$2 ;; --seeds) seeds=$2 ;; esac; shift; done
IFS=, read -r -a arms <<<"$arms"
for arm in "${arms[@]}"; do for ((k = 0; k < ${seeds:-3}; k++)); do
    mkdir -p "$out/runs/$arm/seed-$k"; echo '{"budget": {"finished": true}}' > "$out/runs/$arm/seed-$k/run.json"
done; done
"""


def recorded_run(
    tmp_path: Path,
    path: str,
    stage: str,
    arm: str,
    shards: str,
    held_out: str,
    spent: tuple[int, ...] = (),
    kept: dict[str, str] | None = None,
    **env: str,
) -> tuple[list[str], Path, Path]:
    """`path OUT stage` in a working copy whose runs/ holds only manifests (of `shards` and of `held_out`'s shards
    and held-out sets: nothing is built), with OUT's costs for `arm` and a `mapnet` that records what it was asked:
    (its calls, the working copy, OUT). The seeds in `spent` have already spent their budget in OUT (a run.json
    that says so, and their log); `kept` holds files already in OUT ({relative path: text})."""
    work = tmp_path / "work"
    (work / "experiments").mkdir(parents=True)
    for part in ("hour-recipe", "hour-masking", "common", "hour-levers", "real-text-cpu"):
        (work / "experiments" / part).symlink_to(REPO / "experiments" / part)
    vocab = 16384 if "16k" in held_out else 8192
    for folder in (shards, f"{held_out}/shards", f"{held_out}/heldout-books", f"{held_out}/heldout-wiki"):
        (work / folder).mkdir(parents=True, exist_ok=True)
        (work / folder / "manifest.json").write_text(f'{{"vocab_size": {vocab}}}')
    out, calls = tmp_path / "out", tmp_path / "calls.txt"
    out.mkdir()
    for rel, text in (kept or {}).items():
        (out / rel).parent.mkdir(parents=True, exist_ok=True)
        (out / rel).write_text(text)
    for seed in spent:
        (out / f"runs/seed-{seed}/checkpoints").mkdir(parents=True)
        (out / f"runs/seed-{seed}/run.json").write_text(
            '{"budget": {"time_budget": "60m", "seconds": 3600, "finished": true}}'
        )
        (out / f"seed-{seed}.log").write_text("the budget run's own log\n")
    (out / "costs.json").write_text(f'{{"arms": {{"{arm}": {{"step_seconds": 0.5, "short_step_seconds": 0.4}}}}}}')
    fake = tmp_path / "mapnet"
    fake.write_text(f'#!/usr/bin/env bash\necho "$*" >> {calls}\n' + FINISH_COMPARED_RUNS)
    fake.chmod(0o755)
    done = subprocess.run(
        ["bash", str(REPO / path), str(out), stage],
        cwd=work,
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, **env, "MAPNET": str(fake)},
    )
    assert done.returncode == 0, done.stderr
    return (calls.read_text().splitlines() if calls.exists() else []), work, out


def held_out_flag(work: Path, held_out: str) -> str:
    return f'train.extra_eval=["books={work / held_out}/heldout-books", "wiki={work / held_out}/heldout-wiki"]'


@pytest.mark.parametrize(
    "data, shards, held_out",
    [
        ("base", "runs/real-text-x5/shards", "runs/real-text"),
        ("seq64", "runs/real-text-x5/shards-64", "runs/real-text"),
        ("vocab16k", "runs/real-text-x5-16k/shards", "runs/real-text-16k"),
        ("vocab16k-seq64", "runs/real-text-x5-16k/shards-64", "runs/real-text-16k"),
    ],
)
def test_the_hour_script_trains_on_the_shards_data_names_with_their_own_held_out_sets(tmp_path, data, shards, held_out):
    # The run must read DATA's shards and score the held-out sets of the same tokenizer.
    calls, work, out = recorded_run(tmp_path, HOUR, "pretrain", "hour", shards, held_out, DATA=data, SEEDS="1")
    trained = calls[-1]  # the training call (the first asks for the settings)
    assert trained.startswith(f"pretrain {work / shards} --out {out}/runs/seed-0 ")
    assert held_out_flag(work, held_out) in trained


def test_the_hour_script_adds_a_seed_without_touching_those_that_spent_their_budget(tmp_path):
    # SEEDS=3 after two finished seeds trains the third alone; rerunning the finished ones would overwrite their logs.
    calls, work, out = recorded_run(
        tmp_path,
        HOUR,
        "pretrain",
        "hour",
        "runs/real-text-x5-16k/shards-64",
        "runs/real-text-16k",
        spent=(0, 1),
        SEEDS="3",
        JOBS="1",
    )
    assert calls and all(f"--out {out}/runs/seed-2 " in line for line in calls)
    assert (out / "seed-0.log").read_text() == (out / "seed-1.log").read_text() == "the budget run's own log\n"
    # Another budget is not "spent": every seed goes on to `pretrain --resume`, which extends it or refuses.
    calls, work, out = recorded_run(
        tmp_path / "90m",
        HOUR,
        "pretrain",
        "hour",
        "runs/real-text-x5-16k/shards-64",
        "runs/real-text-16k",
        spent=(0, 1),
        SEEDS="3",
        JOBS="1",
        BUDGET="90m",
    )
    trained = [line for line in calls if "--print-settings" not in line]
    assert [f"--out {out}/runs/seed-{k} " in line and "--resume" in line for k, line in enumerate(trained)] == [
        True,
        True,
        False,
    ]


@pytest.mark.parametrize(
    "env, shards, held_out, seq",
    [
        ({}, "runs/real-text-x5-16k/shards-64", "runs/real-text-16k", 64),  # the hour recipe's own shards
        ({"DATA": "vocab16k"}, "runs/real-text-x5-16k/shards", "runs/real-text-16k", 128),
        ({"RECIPE": "fast"}, "runs/real-text-x5/shards", "runs/real-text", 128),
        ({"SETS": "--set train.precision=fp32"}, "runs/real-text-x5-16k/shards-64", "runs/real-text-16k", 64),
    ],
)
def test_the_masking_script_compares_on_its_recipes_shards_with_their_pmi_vocabulary(
    tmp_path, env, shards, held_out, seq
):
    # As above, for section I: every compare (each run a lane trains, and the last one over all arms) reads the same
    # shards, cut to their sequence length, scores the held-out sets of their tokenizer, and PMI's vocabulary is
    # built from the preparation those shards were cut from.
    calls, work, out = recorded_run(
        tmp_path,
        MASKING,
        "run",
        "uniform",
        shards,
        held_out,
        **env,
        STRATEGIES="uniform,pmi",
        SEEDS="2",
        kept={"score/blimp-controls.json": "scored"},
    )
    prep = (work / shards).parent / "prep"
    assert calls[0] == f"pmi-vocab {prep} --out {work / shards}/pmi.tsv --min-count 11 --size 200000 --no-progress"
    compares = [line for line in calls if line.startswith("compare ")]
    assert len(compares) == 5  # one per run (2 arms x 2 seeds), then the one over every arm
    assert "--blimp " in compares[-1] and not any("--blimp " in line for line in compares[:-1])  # lanes only train
    assert sorted(p.relative_to(out / "arms" / "runs").as_posix() for p in (out / "arms" / "runs").glob("*/*")) == [
        "pmi/seed-0",
        "pmi/seed-1",
        "uniform/seed-0",
        "uniform/seed-1",
    ]  # gathered
    assert (out / "arms" / "blimp-controls.json").read_text() == "scored"  # the score stage's controls reused
    for line in compares:
        assert line.startswith(f"compare {work / shards} --out {out}/")
        assert f"shard.max_seq_len={seq} " in line and held_out_flag(work, held_out) in line
        assert ("--set train.precision=fp32 " in f"{line} ") == ("SETS" in env)  # every arm and lane: comparable runs


def test_the_hour_costs_measure_the_recipe_beside_mini_fast_on_its_own_shards(tmp_path):
    # The comparison curve (mini fast by minutes) must be priced on the machine whose costs the recipe's runs count:
    # the costs stage times mini fast first (the reference, alone) on its 8,192-token 128-token shards.
    bin_dir, seen = tmp_path / "bin", tmp_path / "uv.txt"
    bin_dir.mkdir()
    (bin_dir / "uv").write_text(f'#!/usr/bin/env bash\necho "$*" >> {seen}\n')
    (bin_dir / "uv").chmod(0o755)
    calls, work, out = recorded_run(
        tmp_path,
        HOUR,
        "costs",
        "hour",
        "runs/real-text-x5/shards",
        "runs/real-text",
        DATA="base",
        PATH=f"{bin_dir}:{os.environ['PATH']}",
    )
    bench = seen.read_text().splitlines()
    assert len(bench) == 1 and bench[0].startswith("run python benchmarks/step_costs.py --out ")
    base, recipe = bench[0].index("--arm mini-fast "), bench[0].index("--arm hour ")
    assert base < recipe  # the first arm is the reference
    assert bench[0][base:recipe].split()[2:] == [
        str(work / "runs/real-text-x5/shards"),
        "preset=mini",
        "recipe=fast",
        "train.batch_size=32",
        "shard.max_seq_len=128",
        "train.extra_eval=[]",
    ]


def test_the_hour_costs_refuse_a_shape_the_mini_fast_reference_would_take_too(tmp_path):
    # In a checkout with no shards (CI's fresh clone): refused before the data stage would spend minutes building
    # them (it did, and the test timed out there).
    work, out = tmp_path / "work", tmp_path / "out"
    (work / "experiments").mkdir(parents=True)
    for part in ("hour-recipe", "hour-levers", "common"):
        (work / "experiments" / part).symlink_to(REPO / "experiments" / part)
    done = subprocess.run(
        ["bash", str(REPO / HOUR), str(out), "costs"],
        cwd=work,
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "SETS": "--set model.layers=4", "MAPNET": "true", "DATA": "base"},
    )
    assert done.returncode == 2 and done.stderr.startswith("SETS changes the model") and done.stderr.count("\n") == 1
    assert not (work / "runs").exists() and not out.exists()


def test_the_masking_costs_pin_uniform_to_another_clock_and_take_the_run_flags(tmp_path):
    # REFERENCE pins uniform's costs (section H's Xeon clock) while the ratios are measured here; SETS reaches the
    # benchmark as settings, so the costs are those of the runs that will count them.
    bin_dir, seen = tmp_path / "bin", tmp_path / "uv.txt"
    bin_dir.mkdir()
    (bin_dir / "uv").write_text(f'#!/usr/bin/env bash\necho "$*" >> {seen}\n')
    (bin_dir / "uv").chmod(0o755)
    recorded_run(
        tmp_path,
        MASKING,
        "costs",
        "uniform",
        "runs/real-text-x5-16k/shards-64",
        "runs/real-text-16k",
        STRATEGIES="uniform,pmi",
        SETS="--set train.precision=fp32",
        REFERENCE="0.4385 0.5007",
        PATH=f"{bin_dir}:{os.environ['PATH']}",
    )
    bench = seen.read_text().splitlines()
    assert len(bench) == 1 and bench[0].startswith("run python benchmarks/step_costs.py --out ")
    assert bench[0].endswith(" --reference 0.4385 0.5007") and " train.precision=fp32 " in bench[0]
    assert "--arm uniform " in bench[0] and "--arm pmi " in bench[0]


def test_the_hour_script_takes_an_arms_costs_from_section_gs_pinned_clock(tmp_path):
    # LEVERS_COSTS/LEVERS_ARM: the recipe's costs are that arm's, recorded with where they came from; an arm the
    # file lacks is refused without writing any costs.
    kept = tmp_path / "costs.json"
    kept.write_text('{"arms": {"combined-x": {"step_seconds": 0.2443, "short_step_seconds": 0.2732}}}')
    work = tmp_path / "work"
    (work / "experiments").mkdir(parents=True)
    for part in ("hour-recipe", "common"):
        (work / "experiments" / part).symlink_to(REPO / "experiments" / part)
    (work / "runs/real-text-x5-16k/shards-64").mkdir(parents=True)
    (work / "runs/real-text-x5-16k/shards-64/manifest.json").write_text("{}")
    out = tmp_path / "out"

    def run(arm: str) -> subprocess.CompletedProcess:
        return subprocess.run(
            ["bash", str(REPO / HOUR), str(out), "costs"],
            cwd=work,
            capture_output=True,
            text=True,
            timeout=60,
            env={**os.environ, "LEVERS_COSTS": str(kept), "LEVERS_ARM": arm},
        )

    missing = run("combined-y")
    assert missing.returncode != 0 and "has no arm combined-y" in missing.stderr and not (out / "costs.json").exists()
    done = run("combined-x")
    assert done.returncode == 0, done.stderr
    costs = json.loads((out / "costs.json").read_text())["arms"]["hour"]
    assert (costs["step_seconds"], costs["short_step_seconds"]) == (0.2443, 0.2732)
    assert costs["from"] == {"file": str(kept), "arm": "combined-x"}


def test_the_queue_lanes_train_every_run_once_and_resume_their_own(tmp_path):
    # Two lanes over one queue (lanes.sh): each run trained exactly once, in the lane that already holds it when it
    # was stopped there; earlier seeds reached through links that compare reuses (never trained through a link);
    # the finished runs then gathered, one real folder each.
    out, log, fake = tmp_path / "out", tmp_path / "trained.txt", tmp_path / "mapnet.sh"
    fake.write_text(rf"""
while (($#)); do case $1 in --out) out=$2 ;; --strategies) arm=$2 ;; --seeds) seeds=$2 ;; esac; shift; done
for ((k = 0; k < seeds; k++)); do
    run=$out/runs/$arm/seed-$k
    grep -q '"finished": true' "$run/run.json" 2>/dev/null && continue
    [[ -L $run ]] && {{ echo "trained through a link: $run" >&2; exit 3; }}
    echo "$(basename "$out") $arm $k" >> {log}
    mkdir -p "$run"; sleep 0.3; echo '{{"budget": {{"finished": true}}}}' > "$run/run.json"
done
""")
    stopped = out / "lane-b" / "runs" / "pmi" / "seed-1"  # lane b stopped it inside its budget
    stopped.mkdir(parents=True)
    (stopped / "run.json").write_text('{"budget": {"finished": false}}')
    (out / "lane-a" / "runs" / "pmi" / "seed-0").mkdir(parents=True)
    (out / "lane-a" / "runs" / "pmi" / "seed-0" / "run.json").write_text('{"budget": {"finished": true}}')
    lanes = (
        f"set -euo pipefail; source experiments/common/lanes.sh; mapnet=(bash {fake}); "
        f"queue_lanes {out} SHARDS 3 uniform,span,pmi --set x=1; gather {out} {out}/arms"
    )
    done = subprocess.run(["bash", "-c", lanes], cwd=REPO, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr + (out / "lane-a.log").read_text() + (out / "lane-b.log").read_text()
    trained = log.read_text().splitlines()
    assert sorted(line.split(" ", 1)[1] for line in trained) == sorted(
        f"{arm} {k}" for arm in ("uniform", "span", "pmi") for k in range(3) if (arm, k) != ("pmi", 0)
    )
    assert "lane-b pmi 1" in trained and {line.split()[0] for line in trained} == {"lane-a", "lane-b"}
    runs = sorted(p.relative_to(out / "arms" / "runs").as_posix() for p in (out / "arms" / "runs").glob("*/*"))
    assert runs == [f"{arm}/seed-{k}" for arm in ("pmi", "span", "uniform") for k in range(3)]
    assert not any(p.is_dir() and not p.is_symlink() for p in out.glob("lane-*/runs/*/*"))  # only links left


def test_the_queue_lanes_stop_at_a_failed_run_and_say_which_are_unfinished(tmp_path):
    # A failed (or SIGTERM-stopped) compare ends its lane at once: no next run is started behind it.
    out, fake = tmp_path / "out", tmp_path / "mapnet.sh"
    fake.write_text("while (($#)); do case $1 in --strategies) arm=$2 ;; esac; shift; done; exit 1\n")
    lanes = (
        f"set -euo pipefail; source experiments/common/lanes.sh; mapnet=(bash {fake}); "
        f"queue_lanes {out} SHARDS 2 uniform,pmi"
    )
    done = subprocess.run(["bash", "-c", lanes], cwd=REPO, capture_output=True, text=True, timeout=60)
    assert done.returncode == 1 and done.stderr.startswith("a lane failed (exit 1)")
    assert sorted(p.name for p in (out / "claims").iterdir()) == ["pmi.seed-0", "uniform.seed-0"]  # one run a lane


def test_a_lane_claims_its_own_stopped_run_while_compare_starts_it_again(tmp_path):
    # compare deletes a stopped run that never reached a checkpoint before it trains it again: in that gap the other
    # lane must not find the run unheld and train it a second time.
    out, log, fake = tmp_path / "out", tmp_path / "trained.txt", tmp_path / "mapnet.sh"
    fake.write_text(rf"""
while (($#)); do case $1 in --out) out=$2 ;; --strategies) arm=$2 ;; esac; shift; done
run=$out/runs/$arm/seed-0
if [[ $arm == x ]]; then rm -rf "$run"; sleep 2; else sleep 0.2; fi
echo "$(basename "$out") $arm" >> {log}
mkdir -p "$run"; echo '{{"budget": {{"finished": true}}}}' > "$run/run.json"
""")
    (out / "lane-a" / "runs" / "x" / "seed-0").mkdir(parents=True)  # stopped before its first checkpoint
    lanes = f"set -euo pipefail; source experiments/common/lanes.sh; mapnet=(bash {fake}); queue_lanes {out} S 1 x,y"
    done = subprocess.run(["bash", "-c", lanes], cwd=REPO, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert sorted(log.read_text().splitlines()) == ["lane-a x", "lane-b y"]


def test_three_queue_lanes_share_the_runs_and_none_trains_twice(tmp_path):
    # LANES=3 (lanes a, b, c on one queue): three runs at once, each in its own lane, then the fourth to whichever
    # lane is free first; every run once. A run ends only once three are in flight (or after 10 s, which two lanes
    # would need), so the order does not hang on how fast each lane starts.
    out, log, fake = tmp_path / "out", tmp_path / "trained.txt", tmp_path / "mapnet.sh"
    fake.write_text(rf"""
while (($#)); do case $1 in --out) out=$2 ;; --strategies) arm=$2 ;; esac; shift; done
run=$out/runs/$arm/seed-0
echo "$(basename "$out") $arm" >> {log}
mkdir -p "$run"
for ((i = 0; i < 100; i++)); do (($(ls -d {tmp_path}/out/lane-*/runs/*/seed-0 | wc -l) >= 3)) && break; sleep 0.1; done
echo '{{"budget": {{"finished": true}}}}' > "$run/run.json"
""")
    lanes = (
        f"set -euo pipefail; source experiments/common/lanes.sh; mapnet=(bash {fake}); "
        f"LANES=3 queue_lanes {out} S 1 w,x,y,z"
    )
    done = subprocess.run(["bash", "-c", lanes], cwd=REPO, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    trained = log.read_text().splitlines()
    assert sorted(line.split()[1] for line in trained) == ["w", "x", "y", "z"]
    assert {line.split()[0] for line in trained[:3]} == {"lane-a", "lane-b", "lane-c"}
