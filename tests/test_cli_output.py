"""Output people read outside a wide terminal: piped progress lines, help and setting docs at 80 columns."""

from __future__ import annotations

import re

import pytest
from tiny_shards import write_tiny_shards
from typer.testing import CliRunner

from mapnet_cli.cli import app
from mapnet_cli.commands.progress import PlainProgress, clock
from mapnet_cli.settings import field_docs

# Variables that make rich colour output that is not a terminal; a pipe in CI or SLURM has none of them.
NO_FORCE = {"FORCE_COLOR": None, "TTY_COMPATIBLE": None, "TTY_INTERACTIVE": None, "COLUMNS": "80"}


def test_piped_pretrain_prints_plain_progress_lines_without_escape_codes(tmp_path):
    shards = write_tiny_shards(tmp_path / "shards")
    sets = [
        "model.max_position=64",
        "shard.max_seq_len=32",
        "train.batch_size=8",
        "train.eval_every=5",
        "train.eval_sequences=8",
        "optim.warmup.steps=2",
        "logging.log_every=5",
    ]
    args = [
        "pretrain",
        str(shards),
        "--out",
        str(tmp_path / "run"),
        "--preset",
        "tiny",
        "--steps",
        "12",
        *[a for kv in sets for a in ("--set", kv)],
    ]
    result = CliRunner().invoke(app, args, env=NO_FORCE)
    assert result.exit_code == 0, result.output
    assert "\x1b[" not in result.output and "\r" not in result.output
    lines = [ln for ln in result.output.splitlines() if ln.startswith("step ")]
    assert [ln.split()[1] for ln in lines] == ["5/12", "10/12", "12/12"], result.output
    pattern = (
        r"step \d+/12 \(\d+%\)  loss \d+\.\d{4}  lr \S+  [\d,]+ tok/s  elapsed \d+:\d\d:\d\d  eta (\d+:\d\d:\d\d)$"
    )
    assert all(re.fullmatch(pattern, ln) for ln in lines), lines
    assert lines[-1].endswith("eta 0:00:00") and "(100%)" in lines[-1]


def test_plain_progress_throttles_by_time_and_estimates_what_is_left():
    now, out = [100.0], []
    progress = PlainProgress(out.append, log_every=5, every_s=60, now=lambda: now[0])
    data = {"loss": 2.0, "lr": 1e-4, "tokens_per_s": 12345.0, "total": 100}
    for step in range(1, 101):
        now[0] += 2.0  # 2 s a step
        progress.step({**data, "step": step})
    # The first logged step, then at most one line a minute (every 30 steps of 2 s), and always the last.
    assert [ln.split()[1] for ln in out] == ["5/100", "35/100", "65/100", "95/100", "100/100"]
    assert (
        out[0] == "step 5/100 (5%)  loss 2.0000  lr 1.00e-04  12,345 tok/s  elapsed 0:00:08  eta 0:03:10"
    )  # 2 s a step since step 1
    # A resumed run estimates from its own steps: 10 s for 5 steps, 40 left.
    out2: list[str] = []
    resumed = PlainProgress(out2.append, log_every=5, now=lambda: now[0])
    resumed.resumed(50)
    now[0] += 10
    resumed.step({**data, "total": 90, "step": 55})
    assert out2 == ["step 55/90 (61%)  loss 2.0000  lr 1.00e-04  12,345 tok/s  elapsed 0:00:10  eta 0:01:10"]
    assert clock(3600 * 101 + 61) == "101:01:01"


@pytest.mark.parametrize("command", [[], ["pretrain"], ["config", "show"], ["compare"], ["inspect-masks"]])
def test_help_fits_80_columns_and_flags_take_no_value(command):
    result = CliRunner().invoke(app, [*command, "--help"], env=NO_FORCE)
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    assert max(map(len, lines)) <= 80, max(lines, key=len)
    assert "<bool>" not in result.output and "\x1b[" not in result.output
    if command == ["pretrain"]:
        # Every option is spelled whole on its own line start, and a flag stands alone.
        for option in ("--micro-batch-size", "--rdzv-endpoint", "--print-settings"):
            assert re.search(rf"^\s+{option}\b", result.output, re.M), option
        assert re.search(r"^\s+--resume\s{2,}Continue", result.output, re.M)


def test_config_docs_never_cut_a_setting_name_at_80_columns():
    result = CliRunner().invoke(app, ["config", "show", "--docs"], env=NO_FORCE)
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    assert max(map(len, lines)) <= 80 and "…" not in result.output
    names = [ln.split()[0] for ln in lines if ln.strip() and not ln.startswith(" " * 10) and "." in ln.split()[0]]
    assert names == [key for key, _, _ in field_docs()]  # every name whole, in order, one row each


@pytest.mark.slow  # the whole chain, twice (once through quickstart): ~8 s
def test_paths_with_brackets_are_printed_as_given_by_every_command(tmp_path):
    """rich read `[exp1]` and `[x]` in printed paths as markup and dropped them (`.../u//pre`): preprocess, shard,
    pretrain, export, pmi-vocab and quickstart's summary print each output path verbatim."""
    runner = CliRunner()
    wide = {**NO_FORCE, "COLUMNS": "1000"}

    def run(*argv: str) -> str:
        """The output without whitespace: a table title still wraps at the table's width, which is not the point."""
        res = runner.invoke(app, list(argv), env=wide)
        assert res.exit_code == 0, res.output
        return squeeze(res.output)

    def squeeze(text: object) -> str:
        return "".join(str(text).split())

    base = tmp_path / "[exp1]"
    pre, shards, run_dir, hf = base / "pre", base / "sh [x]", base / "run [bold]", base / "hf [y]"
    out = run(
        "preprocess",
        "synthetic:",
        "--out",
        str(pre),
        "--vocab-size",
        "512",
        "--set",
        "synthetic.documents=60",
        "--set",
        "preprocess.workers=1",
    )
    assert squeeze(f"preprocessed -> {pre}") in out, out
    out = run(
        "shard",
        str(pre),
        "--out",
        str(shards),
        "--max-seq-len",
        "32",
        "--valid-fraction",
        "0.1",
        "--set",
        "shard.workers=1",
    )
    assert squeeze(f"{shards}: 32 tokens/sequence") in out, out
    out = run(
        "pretrain",
        str(shards),
        "--out",
        str(run_dir),
        "--preset",
        "tiny",
        "--steps",
        "2",
        "--set",
        "model.max_position=32",
        "--set",
        "shard.max_seq_len=32",
        "--set",
        "train.batch_size=4",
        "--set",
        "train.eval_sequences=4",
    )
    assert squeeze(f"checkpoint {run_dir / 'checkpoints' / 'step-00000002'}") in out, out
    assert squeeze(f"exported {hf}") in run("export", str(run_dir), "--out", str(hf))
    pmi = base / "[p]" / "pmi.tsv"
    pmi.parent.mkdir()
    assert squeeze(f"{pmi}: ") in run("pmi-vocab", str(pre), "--out", str(pmi), "--no-progress")

    quick = tmp_path / "sh [x]" / "q"
    out = run(
        "quickstart",
        "--out",
        str(quick),
        "--steps",
        "2",
        "--set",
        "synthetic.documents=60",
        "--set",
        "preprocess.workers=1",
        "--set",
        "shard.workers=1",
        "--set",
        "train.eval_sequences=4",
        "--set",
        "train.batch_size=4",
    )
    assert squeeze(f"mapnet inspect-masks {quick / 'run'} | mapnet export {quick / 'run'} --out {quick / 'hf'}") in out
