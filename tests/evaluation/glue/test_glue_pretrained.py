"""End to end: real text -> preprocess -> shard -> pretrain `tiny` -> finetune-glue on real SST-2."""

from __future__ import annotations

import json

import numpy as np
import pytest
from typer.testing import CliRunner

from mapnet_cli.cli import app
from mapnet_cli.evaluation.glue.tasks import TASKS, read_split


@pytest.mark.slow
def test_tiny_pretrained_on_books_beats_majority_on_sst2(pretrained_tiny, shared_data, tmp_path):
    glue = shared_data / "glue"
    out = tmp_path / "sst2"
    # A short fine-tune: 2000 training sentences, 2 epochs, one seed. The learning rate is above the
    # paper's grid (tuned for BERT-base); a 2-layer, 128-wide model needs a larger step.
    res = CliRunner().invoke(
        app,
        [
            "finetune-glue",
            "--task",
            "sst2",
            "--checkpoint",
            str(pretrained_tiny),
            "--data",
            str(glue),
            "--out",
            str(out),
            "--grid",
            "32x1e-3",
            "--seeds",
            "1",
            "--epochs",
            "2",
            "--max-train",
            "2000",
        ],
    )
    assert res.exit_code == 0, res.output
    doc = json.loads((out / "results.json").read_text())
    (run,) = doc["runs"].values()
    assert run["checkpoint"]["step"] == 100 and run["train_examples"] == 2000
    dev = read_split(TASKS["SST-2"], glue / "SST-2" / "dev.tsv", "SST-2")
    majority = np.bincount(dev.labels).max() / len(dev)  # 444 / 872
    accs = [e["entries"]["SST-2"]["metrics"]["acc"] for e in run["epochs"]]
    best = doc["summary"]["checkpoints"][0]["entries"]["SST-2"]
    assert best == pytest.approx(max(accs))
    assert best > majority + 0.05, (accs, majority)
