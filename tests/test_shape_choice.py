"""experiments/common/shape_choice.py: section G's amendment applied to two shapes' 60-minute runs (the higher mean
BLiMP wins; within 0.5 points the lower mean held-out loss does), from the files hour_cpu.sh writes."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import shape_choice  # noqa: E402
from test_hour_table import blimp_doc, write_run  # puts experiments/common on sys.path


def shape_folder(
    root: Path, layers: int, hidden: int, blimp: list[float], losses: list[float], finished: bool = True
) -> Path:
    """hour_cpu.sh's OUT for one shape: two seeds' budget runs (their model in run.json) and blimp-shape.json."""
    out = root / f"L{layers}H{hidden}"
    for seed, loss in enumerate(losses):
        run = write_run(out / "runs" / f"seed-{seed}", 1000, [9.7, loss])
        info = json.loads((run / "run.json").read_text())
        info["model"] = {"layers": layers, "hidden": hidden}
        info["budget"]["finished"] = finished
        (run / "run.json").write_text(json.dumps(info))
    doc = blimp_doc(
        {(f"seed-{s}", 1000): a for s, a in enumerate(blimp)}, {f"seed-{s}": 0.48 for s in range(len(blimp))}
    )
    (out / "blimp-shape.json").write_text(json.dumps(doc))
    return out


def test_the_higher_mean_blimp_takes_the_recipe_whatever_the_losses(tmp_path):
    tiny = shape_folder(tmp_path, 2, 128, [0.580, 0.590], [4.20, 4.30])
    wide = shape_folder(tmp_path, 4, 192, [0.600, 0.620], [4.40, 4.50])
    text = shape_choice.table([tiny, wide])
    rows = text.splitlines()
    assert rows[2] == "| L2/H128 (`tiny`) | 1,000 | 4.200 / 4.300 | 58.0 / 59.0 | 58.5 | 48.0 / 48.0 |"
    assert rows[3].startswith("| L4/H192 | 1,000 | 4.400 / 4.500 | 60.0 / 62.0 | 61.0 |")
    # Differences +2.0 and +3.0: mean 2.5, sd 0.707, t(1 dof) 12.706 x 0.707 / sqrt(2) = 6.35.
    assert "L4/H192 − L2/H128 (`tiny`), BLiMP paired by seed: +2.0, +3.0; +2.5 ± 6.4" in text
    assert "**The `hour` recipe takes L4/H192:** its mean BLiMP is higher by 2.5 points" in text


def test_a_tie_within_half_a_point_goes_to_the_lower_loss(tmp_path):
    tiny = shape_folder(tmp_path, 2, 128, [0.590, 0.594], [4.20, 4.30])
    wide = shape_folder(tmp_path, 4, 192, [0.592, 0.600], [4.40, 4.50])  # 0.4 points higher: a tie
    text = shape_choice.table([tiny, wide])
    assert "**The `hour` recipe takes L2/H128 (`tiny`):** the mean BLiMP differs by 0.4 points (a tie" in text
    assert "lower (4.250 against 4.450)" in text


def test_a_run_short_of_its_budget_decides_nothing(tmp_path):
    tiny = shape_folder(tmp_path, 2, 128, [0.58, 0.59], [4.2, 4.3], finished=False)
    wide = shape_folder(tmp_path, 4, 192, [0.60, 0.62], [4.4, 4.5])
    with pytest.raises(SystemExit, match="has not spent its budget"):
        shape_choice.table([tiny, wide])
