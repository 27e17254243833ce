"""Draw the arm-comparison figures of an experiment from its kept `compare` results.json, with compare's own plotting.

    uv run python experiments/common/plot_arms.py experiments/word-masking-tiny/results.json
    uv run python experiments/common/plot_arms.py experiments/learned-masking-mini/mapnet-arms-results.json

Writes the PNGs `mapnet compare` writes (loss vs step per held-out set, loss vs training time, variance, GLUE,
BLiMP where the document has them) beside the JSON; a file other than results.json prefixes its stem
(`mapnet-arms-results.json` -> `mapnet-arms-loss_vs_step.png`), so two comparisons in one folder do not collide.
The experiment's README shows them; rerunning this redraws them from the raw numbers, nothing else.
"""

from __future__ import annotations

import json
import shutil
import sys
import tempfile
from pathlib import Path

from mapnet_cli.compare.plots import write_plots


def plot(results: Path) -> list[Path]:
    doc = json.loads(results.read_text(encoding="utf-8"))
    prefix = "" if results.name == "results.json" else results.name.removesuffix("results.json").rstrip("-") + "-"
    written = []
    with tempfile.TemporaryDirectory() as tmp:
        for note in write_plots(doc, Path(tmp)):
            if not note.startswith("plot: "):
                raise SystemExit(f"{results}: {note}")
        for png in sorted(Path(tmp).glob("*.png")):
            dest = results.parent / f"{prefix}{png.name}"
            shutil.move(png, dest)
            written.append(dest)
    return written


if __name__ == "__main__":
    if len(sys.argv) < 2:
        raise SystemExit(__doc__)
    for arg in sys.argv[1:]:
        for path in plot(Path(arg)):
            print(path)
