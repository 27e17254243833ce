"""No number typed by hand (issue 66, item 3): every figure of a page's prose is verified against the raw results it
comes from (tests/prose_check.py: a generated table as made now, a pinned raw number, or the page's registry in
tests/prose_figures/), and a changed raw figure fails here. Every checked page (the README, the CHANGELOG's latest
entry, docs/*.md, experiments/*/README.md) must verify every figure: a figure typed by hand fails until it has a
source.

    uv run python tests/prose_check.py PAGE       # what is unverified on a page, and why
    uv run python tests/prose_check.py --pin      # pin the raw number each figure is (after a rerun or an edit)
"""

from __future__ import annotations

import json

import prose_check
import pytest


def listing(figures) -> str:
    return "\n".join(f"  {f.page}:{f.line} {f.text!r} in {f.context!r}: {f.note}" for f in figures)


@pytest.mark.parametrize("page", prose_check.checked_pages())
def test_every_figure_of_the_page_is_verified(page):
    result = prose_check.checked(page)
    assert not result.problems, "\n".join(result.problems)
    assert not result.unverified(), f"{page}: figures not verified against the raw files:\n" + listing(
        result.unverified()
    )


def test_every_pin_is_a_figure_of_its_page():
    figures = {
        prose_check.figure_key(f) for page in prose_check.checked_pages() for f in prose_check.checked(page).figures
    }
    stale = [key for key in prose_check.read_pins() if key not in figures]
    assert not stale, "pins of figures no page holds now (`uv run python tests/prose_check.py --pin`):\n" + "\n".join(
        map(str, stale)
    )


# A page with no registry, whose one figure is pinned to the first CPU-ceiling printout's ratio against Hugging Face.
PINNED_PAGE, PINNED_LINE = "docs/no-such-page.md", "`mini` `fast` is 2.17× Hugging Face's tokens per second.\n"
CEILING = "experiments/profile-cpu/cpu-ceiling.txt"


def pinned_check(**kwargs) -> prose_check.Page:
    (figure,) = prose_check.figures_of(PINNED_LINE, PINNED_PAGE)
    pins = {prose_check.figure_key(figure): (CEILING, "line 9", 1)} if "pins" not in kwargs else kwargs.pop("pins")
    return prose_check.check(PINNED_PAGE, body=PINNED_LINE, pins=pins, **kwargs)


def test_a_changed_raw_figure_is_no_longer_verified(tmp_path):
    """Real data, the real matcher: a 2.17× pinned to the CPU-ceiling printout's line that prints it is verified; the
    same printout with that ratio changed no longer verifies it."""
    assert [(f.how, f.note) for f in pinned_check().figures] == [("raw", f"{CEILING} line 9")]
    text = (prose_check.REPO / CEILING).read_text(encoding="utf-8")
    assert "same batch: 2.17x its tokens" in text
    changed = tmp_path / "cpu-ceiling.txt"
    changed.write_text(text.replace("same batch: 2.17x", "same batch: 2.31x"), encoding="utf-8")
    assert [f.how for f in pinned_check(files={CEILING: changed}).figures] == [""]


def test_a_changed_raw_json_value_is_no_longer_verified(tmp_path):
    """The same with a JSON file: the first figure of the manual pinned to a number of a JSON file, that number changed
    by a tenth in a copy."""
    pins = prose_check.read_pins()
    key, (file, where, _) = next(
        (k, v)
        for k, v in pins.items()
        if k[0].startswith("docs/") and v[0].endswith(".json") and isinstance(prose_check.raw(v[0], v[1]), float)
    )
    assert next(f for f in prose_check.check(key[0]).figures if prose_check.figure_key(f) == key).how == "raw"
    doc = json.loads((prose_check.REPO / file).read_text(encoding="utf-8"))
    obj, parts = doc, prose_check.path_parts(where)
    for part in parts[:-1]:
        obj = obj[part]
    obj[parts[-1]] *= 1.1
    changed = tmp_path / "changed.json"
    changed.write_text(json.dumps(doc), encoding="utf-8")
    after = prose_check.check(key[0], files={file: changed})
    assert next(f for f in after.figures if prose_check.figure_key(f) == key).how == ""


def test_a_figure_the_registry_says_has_no_kept_raw_is_not_verified_by_its_pin(monkeypatch):
    """The pinned 2.17× above with a `no_raw` entry (as for a figure whose pin is a coincidence): it stays unverified
    with its reason, the pin unread, and `--pin`'s search proposes nothing for it."""
    entry = {"figure": "2.17×", "near": "is 2.17×", "no_raw": "its printout was not kept"}
    monkeypatch.setattr(prose_check, "registry_of", lambda _: {"figure": [entry]})
    for result in (pinned_check(), pinned_check(pins={}, search=True)):
        (held,) = result.figures
        assert (held.how, held.note, held.proposal) == ("", "no kept raw: its printout was not kept", None)
        assert result.unverified() == [held] and not result.problems


def test_a_registry_value_is_recomputed(tmp_path, monkeypatch):
    """A registry `value` reads the raw files when the check runs: docs/performance.md's 0.903× (the hour recipe's step
    with SDPA's math kernel, section K) fails against a copy of the repository's raw file with that ratio changed."""
    kernel = "experiments/hour-wall/raw/kernel.json"
    root = tmp_path / "repo"
    (root / kernel).parent.mkdir(parents=True)
    doc = json.loads((prose_check.REPO / kernel).read_text(encoding="utf-8"))
    doc["arms"]["math"]["ratio"]["full"] = 0.9149
    (root / kernel).write_text(json.dumps(doc), encoding="utf-8")
    monkeypatch.setattr(prose_check, "REPO", root)  # where raw() and text() read; the page is read before
    body = (prose_check.REGISTRY.parent.parent / "docs/performance.md").read_text(encoding="utf-8")
    result = prose_check.check("docs/performance.md", body=body, pins={})
    assert any("'0.903×'" in p and "0.9149" in p for p in result.problems), result.problems


def test_a_registry_value_reads_one_line_of_a_kept_metrics_file(tmp_path, monkeypatch):
    """`record()` reads the metrics.jsonl line of one kind and step: synthetic-tiny's rerun, uniform seed 0, whose
    held-out loss at step 300 the page quotes as 4.804; a copy with that line twice is refused, not read at random."""
    metrics = "experiments/synthetic-tiny/rerun-2026-12-03/runs/uniform/seed-0/metrics.jsonl"
    assert round(prose_check.record(metrics, "eval", 300, "eval_loss"), 3) == 4.804
    assert prose_check.record(metrics, "train", 300, "loss") != prose_check.record(metrics, "eval", 300, "eval_loss")
    lines = (prose_check.REPO / metrics).read_text(encoding="utf-8").splitlines()
    twice = [line for line in lines if '"kind": "eval", "step": 300,' in line]
    (tmp_path / metrics).parent.mkdir(parents=True)
    (tmp_path / metrics).write_text("\n".join(lines + twice) + "\n", encoding="utf-8")
    monkeypatch.setattr(prose_check, "REPO", tmp_path)
    with pytest.raises(LookupError, match="2 eval records at step 300"):
        prose_check.record(metrics, "eval", 300, "eval_loss")


def test_the_figures_of_a_line_are_read_whole():
    figures = prose_check.figures_of("It scores 62.1 ± 1.1 (+7.9, −0.22, 7,976 steps, 1.46×, 30% masking).\n", "p")
    assert [(f.text, f.value, f.decimals, f.signed) for f in figures] == [
        ("62.1", 62.1, 1, False),
        ("1.1", 1.1, 1, False),
        ("+7.9", 7.9, 1, True),
        ("−0.22", -0.22, 2, True),
        ("7,976", 7976.0, 0, False),
        ("1.46×", 1.46, 2, False),
        ("30%", 30.0, 0, False),
    ]
    assert figures[0].partner is figures[1]
    assert prose_check.figures_of("`uniform@0.3` and <!-- 1.5 --> and [x](a/1.2.md)\n", "p") == []


def test_a_figure_is_met_at_its_printed_precision():
    index = prose_check.Index.of([prose_check.Raw(0.6213, "", 4, False), prose_check.Raw(-0.2249, "", 4, False)])
    (one,) = prose_check.figures_of("62.1%\n", "p")
    (two,) = prose_check.figures_of("62.2%\n", "p")
    (three,) = prose_check.figures_of("a −0.22 and\n", "p")
    (four,) = prose_check.figures_of("a +0.22 and\n", "p")
    assert prose_check.meets(index, one) and not prose_check.meets(index, two)
    assert prose_check.meets(index, three) and not prose_check.meets(index, four)  # a sign must match


def test_a_setting_typed_again_is_looked_at():
    """A `not_measured` entry without `near` covers the occurrences it names: the README's "Python ≥ 3.11" once. The
    same figure typed a second time (it could be a measurement) fails until it gets its own entry."""
    body = (prose_check.REPO / "README.md").read_text(encoding="utf-8")
    assert not prose_check.check("README.md", body=body).problems
    again = prose_check.check("README.md", body=body + "\nThe step took 3.11 s.\n")
    assert any("'3.11' has no `near` and is on the page 2 times, not 1" in p for p in again.problems), again.problems


def test_a_ratio_or_a_large_count_is_never_met_by_a_fraction_read_as_a_percent():
    """62.1 (points) may be a raw 0.621; 3.08× and 30,000 may not be 0.0308 or 300 read as percents: such a match
    is a coincidence (it had pinned a ratio to an accuracy, a 30,000-step run to a step of 300)."""
    ratio, count, points = prose_check.figures_of("a 3.08× ratio, 30,000 steps, 62.1 points\n", "p")
    assert {scale for _, _, scale in prose_check.ranges(points)} == {1.0, 0.01}
    assert {scale for _, _, scale in prose_check.ranges(ratio)} == {1.0}
    assert {scale for _, _, scale in prose_check.ranges(count)} == {1.0}
    raws = [prose_check.Raw(value, f"line {i}", 4, False) for i, value in enumerate((0.0308, 300.0, 0.621))]
    index = prose_check.Index.of(raws)
    assert [prose_check.meets(index, f) for f in (ratio, count, points)] == [False, False, True]
