"""The tables of experiments/long-tiny/README.md (results section E3), from the files kept beside it.

- `long-tiny-blimp-curve`: BLiMP (pseudo-log-likelihood, accuracy in points, one decimal) of the pretrained
  checkpoints in blimp-curve-200.json, by step, on the first `pairs_per_paradigm` pairs of each paradigm.
- `long-tiny-glue`: per protocol (glue-small-5000.json, glue-fewshot-500.json, glue-fewshot-1000.json) and task,
  the best-epoch dev score of each fine-tuning seed, pretrained and random init, and the paired margin (mean ± the
  95% t-interval's half-width), three decimals: the cells and the verdict are tables_downstream.margins' (bold where
  the interval excludes zero against the encoder), less its `lr` and `seed std` columns (one rate here).
"""

from __future__ import annotations

import json

from compare_tables import REPO, markdown
from tables_downstream import margins

HERE = "experiments/long-tiny"
TASKS = ["CoLA", "MRPC", "SST-2"]
PROTOCOLS = ["glue-small-5000.json", "glue-fewshot-500.json", "glue-fewshot-1000.json"]


def doc(name: str) -> dict:
    return json.loads((REPO / HERE / name).read_text(encoding="utf-8"))


def steps(s: int) -> str:
    return f"{s // 1000}k" if s % 1000 == 0 else f"{s:,}"


def blimp_curve() -> str:
    curve = doc("blimp-curve-200.json")
    models = sorted((m for m in curve["models"] if m["init"] == "pretrained"), key=lambda m: m["step"])
    label = f"BLiMP, {curve['data']['pairs_per_paradigm']} pairs per paradigm"
    return markdown(
        ["step", *(steps(m["step"]) for m in models)], [[label, *(f"{100 * m['accuracy']:.1f}" for m in models)]]
    )


def glue() -> str:
    body = []
    for name in PROTOCOLS:
        p = doc(name)["protocol"]
        protocol = f"{p['max_train']:,} examples, {p['epochs']} epochs, {p['seeds']} seeds"
        for i, row in enumerate(margins([f"{HERE}/{name}"], TASKS, 3).splitlines()[2:]):
            task, _lr, pre, ran, margin, _sd, verdict = (c.strip() for c in row.strip().strip("|").split("|"))
            body.append([protocol if i == 0 else "", task, pre, ran, margin, verdict])
    headings = ["protocol", "task", "pretrained", "random init", "margin, mean ± 95%", "margin > 2 std?"]
    return markdown(headings, body).replace("|  |", "| |")


TABLES = {"long-tiny-blimp-curve": blimp_curve, "long-tiny-glue": glue}
