"""Properties of the GLUE TSV readers (hypothesis): any bytes give well-formed rows or one MapnetError line.

Bytes are drawn raw (invalid UTF-8, NULs) and as TSV-like text built from the pieces real files are
made of and break on: the task's header (or a damaged one), tabs, bare quotes, CRLF, a BOM, empty
lines, labels right and wrong, huge fields.
"""

from __future__ import annotations

import math
import tempfile
from pathlib import Path

import numpy as np
from hypothesis import given
from hypothesis import settings as hsettings
from hypothesis import strategies as st

from mapnet_cli.errors import MapnetError
from mapnet_cli.evaluation.glue.tasks import TASKS, TaskSpec, read_split

SPECS = list(TASKS.values())
# Field text without the separators the format cannot carry (tab, line ends); surrogates are not text.
FIELD = st.text(st.characters(blacklist_characters="\t\n\r", blacklist_categories=("Cs",)), max_size=20)
JUNK = st.sampled_from(
    [
        "",
        " ",
        '"',
        "'",
        '""',
        "\t",
        "\r",
        "\x00",
        "\ufeff",
        "nan",
        "inf",
        "-1",
        "5.0001",
        "1e400",
        "x" * 5000,
        "label",
        "0",
        "1",
        "2.5",
        "entailment",
        "neutral",
    ]
)


def header_of(spec: TaskSpec) -> list[str]:
    return list(spec.header) if spec.header else []


@st.composite
def tsv_like(draw, spec: TaskSpec) -> bytes:
    lines = []
    header = header_of(spec)
    if header and draw(st.booleans()):
        header = draw(st.permutations(header))
    if header and draw(st.integers(0, 4)) == 0:
        header = header[:-1]  # a missing column
    if header:
        lines.append(("\ufeff" if draw(st.booleans()) else "") + "\t".join(header))
    width = len(spec.header) if spec.header else spec.n_columns
    for _ in range(draw(st.integers(0, 8))):
        n = width + draw(st.sampled_from([0, 0, 0, -1, 1]))
        fields = [draw(FIELD | JUNK) for _ in range(max(n, 0))]
        if fields and draw(st.booleans()):
            label = spec.labels and draw(st.sampled_from(spec.labels)) or f"{draw(st.floats(0, 5)):.3f}"
            fields[
                spec.label
                if isinstance(spec.label, int)
                else min(header.index(spec.label) if spec.label in header else 0, len(fields) - 1)
            ] = label
        lines.append("\t".join(fields))
        if draw(st.integers(0, 5)) == 0:
            lines.append("")
    end = draw(st.sampled_from(["\n", "\r\n"]))
    data = (end.join(lines) + draw(st.sampled_from(["", end]))).encode("utf-8")
    if draw(st.integers(0, 5)) == 0:  # a stray invalid byte somewhere
        at = draw(st.integers(0, len(data)))
        data = data[:at] + draw(st.sampled_from([b"\xff", b"\xc3", b"\x80", b"\x00"])) + data[at:]
    return data


def check(spec: TaskSpec, data: bytes, skip: bool | None) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "dev.tsv"
        path.write_bytes(data)
        try:
            split = read_split(spec, path, spec.name, skip_malformed=skip)
        except MapnetError as exc:
            assert "\n" not in str(exc) and str(exc)
            return
    n = len(split.text_a)
    assert n >= 1 and len(split.labels) == n
    assert (split.text_b is None) == (spec.text_b is None) and (split.text_b is None or len(split.text_b) == n)
    for text in split.text_a + (split.text_b or []):
        assert isinstance(text, str) and "\t" not in text and "\n" not in text and text == text.strip()
    if spec.labels is None:
        assert split.labels.dtype == np.float32
        assert all(math.isfinite(x) and 0.0 <= x <= 5.0 for x in split.labels.tolist())
    else:
        assert split.labels.dtype == np.int64 and set(split.labels.tolist()) <= set(range(len(spec.labels)))
    if skip is False or (skip is None and not spec.skip_malformed):
        assert split.skipped == 0


@hsettings(max_examples=80, deadline=None)
@given(st.sampled_from(SPECS), st.binary(max_size=300), st.sampled_from([None, True, False]))
def test_property_any_bytes_are_rows_or_one_line(spec, data, skip):
    check(spec, data, skip)


@hsettings(max_examples=80, deadline=None)
@given(
    st.sampled_from(SPECS).flatmap(lambda spec: st.tuples(st.just(spec), tsv_like(spec))),
    st.sampled_from([None, True, False]),
)
def test_property_tsv_like_text_is_rows_or_one_line(case, skip):
    check(*case, skip)


@st.composite
def valid_file(draw):
    spec = draw(st.sampled_from(SPECS))
    width = len(spec.header) if spec.header else spec.n_columns
    rows = []
    for _ in range(draw(st.integers(1, 6))):
        fields = [draw(FIELD) for _ in range(width)]
        il = spec.label if isinstance(spec.label, int) else spec.header.index(spec.label)
        fields[il] = draw(st.sampled_from(spec.labels)) if spec.labels else f"{draw(st.floats(0, 5)):.4f}"
        if not "".join(fields).strip():
            fields[il] = fields[il] or "0"
        rows.append(fields)
    lines = (["\t".join(spec.header)] if spec.header else []) + ["\t".join(r) for r in rows]
    bom = "\ufeff" if draw(st.booleans()) else ""
    return spec, rows, (bom + draw(st.sampled_from(["\n", "\r\n"])).join(lines) + "\n").encode("utf-8")


@hsettings(max_examples=60, deadline=None)
@given(valid_file())
def test_property_well_formed_rows_read_back_exactly(case):
    spec, rows, data = case
    col = (lambda c: c) if spec.header is None else spec.header.index
    with tempfile.TemporaryDirectory() as tmp:
        (Path(tmp) / "train.tsv").write_bytes(data)
        split = read_split(spec, Path(tmp) / "train.tsv", "train", skip_malformed=False)
    assert split.text_a == [r[col(spec.text_a)].strip() for r in rows]
    if spec.text_b is not None:
        assert split.text_b == [r[col(spec.text_b)].strip() for r in rows]
    if spec.labels:
        assert split.labels.tolist() == [spec.labels.index(r[col(spec.label)]) for r in rows]
    else:
        assert np.allclose(split.labels, [float(r[col(spec.label)]) for r in rows])
