"""benchmarks/bench_quickstart.py's steal share and the README line it feeds (experiments/common/quickstart_table.py).

The timings themselves are not asserted (they are a benchmark's, not a test's); what is: the share of CPU time the
hypervisor stole is computed from two cpu_times readings exactly, and a kept file that records it puts it beside the
README's figure, where the kept file without it reads as before.
"""

from __future__ import annotations

import json
import sys
from collections import namedtuple
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "benchmarks"))
sys.path.insert(0, str(REPO / "experiments" / "common"))

import bench_quickstart  # noqa: E402
import quickstart_table  # noqa: E402

Linux = namedtuple("Linux", "user system idle steal")
Mac = namedtuple("Mac", "user system idle")


def test_the_steal_share_is_the_stolen_part_of_all_cpu_time_between_two_readings():
    before, after = Linux(100.0, 10.0, 50.0, 5.0), Linux(160.0, 14.0, 66.0, 25.0)  # 100 s of CPU time, 20 stolen
    assert bench_quickstart.steal_share(before, after) == 0.2
    assert bench_quickstart.steal_share(before, before) == 0.0
    assert bench_quickstart.steal_share(Mac(1.0, 1.0, 1.0), Mac(2.0, 2.0, 2.0)) is None


def test_a_recorded_steal_share_stands_beside_the_readme_figure(tmp_path, monkeypatch):
    kept = json.loads(quickstart_table.BENCH.read_text(encoding="utf-8"))
    assert "stolen" not in quickstart_table.figures(others=())  # the kept file predates the steal share
    for i, load in enumerate(kept["loads"]):
        load["steal"] = [0.02, 0.23, 0.11][i % 3]
    (tmp_path / "bench.json").write_text(json.dumps(kept), encoding="utf-8")
    monkeypatch.setattr(quickstart_table, "REPO", tmp_path)  # where the line names its file from
    line = quickstart_table.figures(tmp_path / "bench.json", others=())
    assert "up to 23% of CPU time stolen by the hypervisor during a run" in line
    for load in kept["loads"]:
        load["steal"] = 0.001
    (tmp_path / "bench.json").write_text(json.dumps(kept), encoding="utf-8")
    assert "no CPU time stolen by the hypervisor" in quickstart_table.figures(tmp_path / "bench.json", others=())


def test_a_second_machine_is_a_sentence_of_its_own_with_its_losses_where_they_differ(tmp_path, monkeypatch):
    kept = json.loads(quickstart_table.BENCH.read_text(encoding="utf-8"))
    (tmp_path / "bench.json").write_text(json.dumps(kept), encoding="utf-8")
    kept["seconds"], kept["cpu"] = [40.0, 41.5, 39.25], "a slower CPU"
    (tmp_path / "same.json").write_text(json.dumps(kept), encoding="utf-8")
    kept["evals"][-1]["eval_loss/determined"] = 0.52
    (tmp_path / "other.json").write_text(json.dumps(kept), encoding="utf-8")
    monkeypatch.setattr(quickstart_table, "REPO", tmp_path)
    same = quickstart_table.figures(tmp_path / "bench.json", others=(tmp_path / "same.json",))
    assert "On another machine (a slower CPU, 2 cores" in same and "**39.2 s** (median 40.0 s)" in same
    assert same.endswith(
        f"the same losses to these digits. *`same.json`, made by `{kept['command']}` on {kept['when']}.*"
    )
    other = quickstart_table.figures(tmp_path / "bench.json", others=(tmp_path / "other.json",))
    assert "and its losses: " in other and "to **0.52** nats" in other
