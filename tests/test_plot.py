"""`mapnet plot`: the figure's lines hold exactly the metrics files' values, one line per run."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from mapnet_cli import plotting
from mapnet_cli.cli import app
from mapnet_cli.errors import MapnetError

pytest.importorskip("matplotlib")


def write_run(path: Path, records: list[dict]) -> Path:
    path.mkdir(parents=True)
    (path / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    return path


def uniform_run(path: Path) -> Path:
    return write_run(
        path,
        [
            {"kind": "eval", "step": 0, "eval_loss": 7.0, "eval_loss@books": 7.5, "eval_sha256": "x"},
            {"kind": "train", "step": 10, "loss": 6.0, "lr": 1e-4},
            {"kind": "eval", "step": 10, "eval_loss": 6.5, "eval_loss@books": 6.9, "eval_sha256": "x"},
            {"kind": "train", "step": 20, "loss": 5.5, "lr": 5e-5},
            {"kind": "train", "step": 20, "loss": 5.25, "lr": 5e-5},  # a resume rewrote step 20: the later line counts
            {"kind": "variance", "step": 20, "schemes": {}},
        ],
    )


def mapnet_run(path: Path) -> Path:
    return write_run(
        path,
        [
            {"kind": "eval", "step": 0, "eval_loss": 7.1},
            {
                "kind": "train",
                "step": 10,
                "loss": 6.2,
                "lr": 1e-4,
                "mapnet/entropy": 0.99,
                "mapnet/log_ratio": None,
                "mapnet/mass/noise": 0.2,
                "mapnet/mass/determined": 0.1,
            },
            {
                "kind": "train",
                "step": 20,
                "loss": 5.9,
                "lr": 5e-5,
                "mapnet/entropy": 0.95,
                "mapnet/log_ratio": -0.5,
                "mapnet/mass/noise": None,
                "mapnet/mass/determined": 0.05,
            },
            {"kind": "eval", "step": 20, "eval_loss": 6.0},
        ],
    )


def lines_by_panel(fig) -> dict[str, dict[str, tuple[list, list]]]:
    return {
        ax.get_gid(): {ln.get_label(): (list(ln.get_xdata()), list(ln.get_ydata())) for ln in ax.get_lines()}
        for ax in fig.axes
        if ax.get_visible()
    }


def test_one_figure_overlays_every_run_with_the_metrics_values(tmp_path):
    a, b = uniform_run(tmp_path / "a"), mapnet_run(tmp_path / "b")
    panels = lines_by_panel(plotting.run_curves([a, b]))
    assert list(panels) == [
        "loss",
        "eval_loss",
        "eval_loss@books",
        "lr",
        "mapnet/entropy",
        "mapnet/mass/determined",
        "mapnet/mass/noise",
    ]
    assert panels["loss"] == {"a": ([10, 20], [6.0, 5.25]), "b": ([10, 20], [6.2, 5.9])}
    assert panels["eval_loss"] == {"a": ([0, 10], [7.0, 6.5]), "b": ([0, 20], [7.1, 6.0])}
    assert panels["eval_loss@books"] == {"a": ([0, 10], [7.5, 6.9])}
    assert panels["lr"]["a"] == ([10, 20], [1e-4, 5e-5])
    # MAP-Net curves only for the run that logs them; a null point (nothing to average) is left out.
    assert panels["mapnet/entropy"] == {"b": ([10, 20], [0.99, 0.95])}
    assert panels["mapnet/mass/noise"] == {"b": ([10], [0.2])}


def test_runs_with_the_same_folder_name_are_labelled_by_path(tmp_path):
    a, b = uniform_run(tmp_path / "x" / "seed0"), uniform_run(tmp_path / "y" / "seed0")
    assert set(lines_by_panel(plotting.run_curves([a, b]))["loss"]) == {str(a), str(b)}


def test_more_runs_than_colours_are_still_told_apart(tmp_path):
    """12 runs against matplotlib's 10 colours: no two lines of a panel share colour and line style."""
    from matplotlib.colors import to_rgba

    runs = [uniform_run(tmp_path / f"r{i}") for i in range(12)]
    fig = plotting.run_curves(runs)
    loss = next(ax for ax in fig.axes if ax.get_gid() == "loss")
    assert len({(to_rgba(ln.get_color()), ln.get_linestyle()) for ln in loss.get_lines()}) == 12
    plotting.pyplot().close(fig)


def test_cli_writes_the_image_and_refuses_bad_input_in_one_line(tmp_path, monkeypatch):
    a, b = uniform_run(tmp_path / "a"), mapnet_run(tmp_path / "b")
    runner = CliRunner()
    done = runner.invoke(app, ["plot", str(a), str(b), "--out", str(tmp_path / "curves.png")])
    assert done.exit_code == 0, done.output
    assert (tmp_path / "curves.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []  # no staging file left
    (tmp_path / "empty").mkdir()
    for args, message in (
        ([str(tmp_path / "nope")], "is not a run folder"),
        ([str(tmp_path / "empty")], "has no metrics.jsonl"),
        ([str(tmp_path)], "lies inside the input"),  # --out c.png in the folder it reads
        ([str(a), "--out", str(tmp_path / "c.txt")], "use one of .png"),
        ([str(a), "--out", str(tmp_path / "no" / "c.png")], "does not exist"),
    ):
        args = args if "--out" in args else [*args, "--out", str(tmp_path / "c.png")]
        bad = runner.invoke(app, ["plot", *args])
        assert isinstance(bad.exception, MapnetError) and message in str(bad.exception), (args, bad.output)
    monkeypatch.setattr(plotting, "pyplot", lambda: None)
    missing = runner.invoke(app, ["plot", str(a), "--out", str(tmp_path / "c.png")])
    assert isinstance(missing.exception, MapnetError) and "pip install 'mapnet[plots]'" in str(missing.exception)


def test_a_torn_last_line_is_skipped_and_a_bad_middle_line_is_one_line(tmp_path):
    from mapnet_cli.metrics_file import read_metrics

    run = uniform_run(tmp_path / "torn")
    with open(run / "metrics.jsonl", "a", encoding="utf-8") as fh:
        fh.write('{"kind": "train", "step": 30, "lo')  # a full disk stopped the write here
    evals, trains = read_metrics(run / "metrics.jsonl")
    assert [r["step"] for r in trains] == [10, 20] and [r["step"] for r in evals] == [0, 10]
    done = CliRunner().invoke(app, ["plot", str(run), "--out", str(tmp_path / "torn.png")])
    assert done.exit_code == 0, done.output

    bad = uniform_run(tmp_path / "bad")
    lines = (bad / "metrics.jsonl").read_text().splitlines()
    lines[2] = lines[2][:15]
    (bad / "metrics.jsonl").write_text("\n".join(lines) + "\n")
    with pytest.raises(MapnetError) as info:
        read_metrics(bad / "metrics.jsonl")
    assert "line 3" in str(info.value) and "metrics.jsonl" in str(info.value) and "\n" not in str(info.value)
    res = CliRunner().invoke(app, ["plot", str(bad), "--out", str(tmp_path / "bad.png")])
    assert isinstance(res.exception, MapnetError) and "line 3" in str(res.exception)


def test_nan_losses_are_not_drawn_silently(tmp_path):
    """A diverged run logs NaN (json.dumps writes it, json.loads reads it back): matplotlib drew nothing for it and
    said nothing. Its finite points are drawn and one warning line names what was left out; a run with nothing
    finite to draw is refused in one line."""
    diverged = write_run(
        tmp_path / "diverged",
        [
            {"kind": "eval", "step": 0, "eval_loss": 7.0},
            {"kind": "train", "step": 10, "loss": 6.0, "lr": 1e-4},
            {"kind": "train", "step": 20, "loss": float("nan"), "lr": 1e-4},
            {"kind": "eval", "step": 20, "eval_loss": float("inf")},
        ],
    )
    assert "NaN" in (diverged / "metrics.jsonl").read_text()
    out = tmp_path / "d.png"
    res = CliRunner().invoke(app, ["plot", str(diverged), "--out", str(out)])
    assert res.exit_code == 0, res.output
    warning = [line for line in res.stderr.splitlines() if line.startswith("warning:")]
    assert len(warning) == 1 and f"{diverged}: loss at 1 steps, eval_loss at 1 steps" in warning[0], res.stderr
    assert out.is_file()
    panels = lines_by_panel(plotting.run_curves([diverged]))
    assert panels["loss"] == {"diverged": ([10], [6.0])} and panels["eval_loss"] == {"diverged": ([0], [7.0])}

    all_nan = write_run(tmp_path / "all-nan", [{"kind": "train", "step": s, "loss": float("nan")} for s in (10, 20)])
    res = CliRunner().invoke(app, ["plot", str(all_nan), "--out", str(tmp_path / "n.png")])
    assert isinstance(res.exception, MapnetError) and "every value is NaN or infinite" in str(res.exception)
    assert "\n" not in str(res.exception) and not (tmp_path / "n.png").exists()


def test_values_that_are_no_number_are_named_with_every_panel_dropped(tmp_path):
    """A panel whose values are lists (or lists holding NaN), strings or true/false was left out without a word (the
    NaN warning only counted numbers): one line names each such point by run and key, and every panel left out."""
    odd = write_run(
        tmp_path / "odd",
        [
            {"kind": "eval", "step": 0, "eval_loss": [7.0]},
            {"kind": "train", "step": 10, "loss": 6.0, "lr": [float("nan")], "mapnet/entropy": "0.9"},
            {"kind": "train", "step": 20, "loss": True, "lr": [1e-4, 2e-4], "mapnet/entropy": None},
            {"kind": "eval", "step": 20, "eval_loss": {"x": 1}},
        ],
    )
    out = tmp_path / "o.png"
    res = CliRunner().invoke(app, ["plot", str(odd), "--out", str(out)])
    assert res.exit_code == 0, res.output
    warning = [line for line in res.stderr.splitlines() if line.startswith("warning:")]
    assert len(warning) == 1, res.stderr
    assert (
        f"not drawn, not a number: {odd}: loss at 1 steps (true/false), lr at 2 steps (a list), "
        "mapnet/entropy at 1 steps (a string), eval_loss at 2 steps (a list, an object)"
    ) in warning[0], warning[0]
    assert warning[0].endswith("no panel for eval_loss, lr, mapnet/entropy"), warning[0]
    assert lines_by_panel(plotting.run_curves([odd])) == {"loss": {"odd": ([10], [6.0])}}

    # NaN as well: a line each; nothing drawable at all is one error naming both
    both = write_run(tmp_path / "both", [{"kind": "train", "step": 10, "loss": float("nan"), "lr": [1e-4]}])
    res = CliRunner().invoke(app, ["plot", str(both), "--out", str(tmp_path / "b.png")])
    assert isinstance(res.exception, MapnetError) and "\n" not in str(res.exception)
    assert (
        f"every value is NaN, infinite or not a number ({both}: loss at 1 steps; {both}: lr at 1 steps (a list))"
        in str(res.exception)
    ), str(res.exception)
    mixed = write_run(
        tmp_path / "mixed",
        [
            {"kind": "train", "step": 10, "loss": 6.0, "lr": [1e-4]},
            {"kind": "train", "step": 20, "loss": float("nan"), "lr": 1e-4},
        ],
    )
    res = CliRunner().invoke(app, ["plot", str(mixed), "--out", str(tmp_path / "m.png")])
    warning = [line for line in res.stderr.splitlines() if line.startswith("warning:")]
    assert res.exit_code == 0 and len(warning) == 2 and "NaN or infinite" in warning[0] and "(a list)" in warning[1]
