"""The BLiMP development set's two halves (experiments/common/blimp_halves.py): the rule, and the docs naming them."""

from __future__ import annotations

import json
import re
import sys
from collections import Counter
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "experiments" / "common"))

import blimp_halves  # noqa: E402


def test_each_field_is_cut_alternately_along_its_terms():
    rows = [
        ("syntax", "island", "b_island"),
        ("morphology", "agreement", "a_2"),
        ("syntax", "island", "a_island"),
        ("morphology", "agreement", "a_1"),
        ("syntax", "argument", "z_arg"),
        ("morphology", "forms", "f"),
    ]
    # morphology: a_1, a_2, f -> choose, report, choose; syntax by term: z_arg (argument), a_island, b_island.
    assert blimp_halves.halves(rows) == {"choose": ["a_1", "b_island", "f", "z_arg"], "report": ["a_2", "a_island"]}


def test_the_halves_split_the_data_in_two_by_field():
    rows = blimp_halves.paradigm_rows(blimp_halves.BLIMP)
    halves = blimp_halves.halves(rows)
    assert len(rows) == 45 and sorted(halves["choose"] + halves["report"]) == sorted(uid for *_, uid in rows)
    field = {uid: f for f, _, uid in rows}
    counts = {half: Counter(field[u] for u in uids) for half, uids in halves.items()}
    for f, total in Counter(field.values()).items():
        assert counts["choose"][f] - counts["report"][f] == total % 2  # each field as even as it can be
    for uid in halves["choose"]:  # names `mapnet blimp --paradigms` takes: the files' stems
        assert (blimp_halves.BLIMP / f"{uid}.jsonl").is_file()


def test_the_docs_name_the_halves_the_rule_gives():
    text = (REPO / "docs" / "evaluation.md").read_text(encoding="utf-8")
    section = text.split("### The development set's two halves", 1)[1].split("\n## ", 1)[0]
    named = {
        half: re.findall(r"`(\w+)`", section.split(f"{label}, ", 1)[1].split(". ", 1)[0])
        for half, label in (("choose", "Choosing"), ("report", "Reporting"))
    }
    assert named == blimp_halves.halves(blimp_halves.paradigm_rows(blimp_halves.BLIMP))


def test_the_script_prints_a_half_and_refuses_an_empty_folder(tmp_path, capsys):
    assert blimp_halves.main(["report"]) == 0
    assert (
        capsys.readouterr().out.strip().split(",")
        == blimp_halves.halves(blimp_halves.paradigm_rows(blimp_halves.BLIMP))["report"]
    )
    (tmp_path / "models_summary.jsonl").write_text(json.dumps({"model": "x"}) + "\n")
    assert blimp_halves.main(["choose", "--data", str(tmp_path)]) == 2
    assert "no paradigm files" in capsys.readouterr().err
