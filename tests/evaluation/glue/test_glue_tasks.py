"""Readers: every task present in shared/data/glue, official-layout files for the others, bad input."""

from __future__ import annotations

import numpy as np
import pytest
from glue_fixtures import make_glue_dir, official_rows, write_tsv

from mapnet_cli.errors import MapnetError
from mapnet_cli.evaluation.glue.tasks import TASKS, load_task, read_split, task_names, task_spec


def test_task_names_accept_common_spellings():
    assert task_names("sst2") == ["SST-2"]
    assert task_names("sts-b") == task_names("stsb") == task_names("STS-B") == ["STS-B"]
    assert task_names("mnli,rte,MNLI") == ["MNLI", "RTE"]
    assert task_names("all") == list(TASKS) and len(TASKS) == 9
    with pytest.raises(MapnetError, match="unknown GLUE task 'mnli-m'"):
        task_names("mnli-m")


# ---------------------------------------------------------------- real files (counts from SOURCES.md)
@pytest.mark.parametrize(
    "task, split, rows, counts",
    [
        ("CoLA", "dev.tsv", 1043, {0: 322, 1: 721}),
        ("CoLA", "train.tsv", 8551, {0: 2528, 1: 6023}),
        ("SST-2", "dev.tsv", 872, {0: 428, 1: 444}),
        ("SST-2", "train.tsv", 67349, {0: 29780, 1: 37569}),
        ("MRPC", "train.tsv", 3668, {0: 1194, 1: 2474}),
        ("MRPC", "dev.tsv", 408, None),
        ("WNLI", "train.tsv", 635, None),
        ("WNLI", "dev.tsv", 71, None),
        ("QNLI", "dev.tsv", 5463, {0: 2702, 1: 2761}),  # entailment, not_entailment
    ],
)
def test_real_files(shared_data, task, split, rows, counts):
    s = read_split(TASKS[task], shared_data / "glue" / task / split, task)
    assert len(s) == rows and s.skipped == 0
    assert (s.text_b is None) == (TASKS[task].text_b is None)
    if counts:
        assert dict(enumerate(np.bincount(s.labels).tolist())) == counts
    assert all(t and t == t.strip() for t in s.text_a)


def test_real_quirks(shared_data):
    glue = shared_data / "glue"
    # MRPC: the BOM must not leak into the first column name (else "Quality" would be "missing").
    mrpc = load_task(TASKS["MRPC"], glue)
    assert mrpc.train.text_a[0].startswith("Amrozi accused his brother")
    assert mrpc.train.text_b[0].startswith("Referring to him")
    # CoLA: no header, so the first line is data; the sentence is column 4.
    cola = read_split(TASKS["CoLA"], glue / "CoLA" / "dev.tsv", "CoLA")
    assert cola.text_a[0] == "The sailors rode the breeze clear of the rocks." and cola.labels[0] == 1
    assert cola.text_a[-1]  # dev.tsv has no final newline: its last row still counts (1043 above)


# ---------------------------------------------------------------- official layouts written here
@pytest.mark.parametrize("task", list(TASKS))
def test_every_task_in_official_layout(tmp_path, task):
    root = make_glue_dir(tmp_path, tasks=(task,), n_train=10, n_dev=6)
    data = load_task(TASKS[task], root)
    spec = TASKS[task]
    assert len(data.train) == 10 and [d.entry for d in data.dev] == list(spec.entries)
    assert all(len(d) == 6 for d in data.dev)
    _, rows = official_rows(task, 10)
    if task == "STS-B":
        assert data.train.labels.dtype == np.float32
        np.testing.assert_allclose(data.train.labels, [float(r[-1]) for r in rows], rtol=1e-6)
        assert data.train.text_a[3] == rows[3][7] and data.train.text_b[3] == rows[3][8]
    else:
        gold = [spec.labels.index(r[spec.header.index(spec.label)] if spec.header else r[spec.label]) for r in rows]
        assert data.train.labels.tolist() == gold
    assert data.train.text_a[1].startswith("a dog ran far number 1")


def test_mnli_dev_sets_are_matched_and_mismatched(tmp_path):
    root = make_glue_dir(tmp_path, tasks=("MNLI",), n_train=9, n_dev=5)
    data = load_task(task_spec("mnli"), root)
    assert [d.entry for d in data.dev] == ["MNLI-m", "MNLI-mm"]
    assert [d.path.name for d in data.dev] == ["dev_matched.tsv", "dev_mismatched.tsv"]
    # gold_label (last of 16 dev columns), not label1..5, which differ on purpose in the fixture rows.
    assert data.dev[0].labels.tolist() == [i % 3 for i in range(5)]


def test_missing_folder_file_and_column(tmp_path):
    root = make_glue_dir(tmp_path, tasks=("RTE",))
    with pytest.raises(MapnetError, match=r"GLUE MRPC: folder not found: .*MRPC"):
        load_task(TASKS["MRPC"], root)
    (root / "RTE" / "dev.tsv").unlink()
    with pytest.raises(MapnetError, match=r"GLUE RTE: file not found: .*RTE/dev.tsv"):
        load_task(TASKS["RTE"], root)
    write_tsv(root / "RTE" / "dev.tsv", ("index", "sentence1", "label"), [(0, "a", "entailment")])
    with pytest.raises(MapnetError, match="RTE needs column 'sentence2'"):
        load_task(TASKS["RTE"], root)


def test_malformed_rows_error_with_line(tmp_path):
    header, rows = official_rows("RTE", 4)
    path = write_tsv(tmp_path / "dev.tsv", header, rows)
    path.write_text(path.read_text() + "9\tonly two\n")
    with pytest.raises(MapnetError, match=r"dev.tsv:6: malformed RTE row: 2 fields, expected 4"):
        read_split(TASKS["RTE"], path, "RTE")
    rows[2] = (2, "a", "b", "contradiction")
    path = write_tsv(tmp_path / "dev2.tsv", header, rows)
    with pytest.raises(
        MapnetError, match=r"dev2.tsv:4: .*label 'contradiction' is not one of entailment, not_entailment"
    ):
        read_split(TASKS["RTE"], path, "RTE")


def test_sts_score_range_and_cola_header(tmp_path):
    header, rows = official_rows("STS-B", 3)
    rows[1] = rows[1][:-1] + ("5.5",)
    with pytest.raises(MapnetError, match=r"score '5.5' is not a number in \[0, 5\]"):
        read_split(TASKS["STS-B"], write_tsv(tmp_path / "s.tsv", header, rows), "STS-B")
    # A CoLA file with a header (not the GLUE layout) says why line 1 fails.
    _, rows = official_rows("CoLA", 3)
    with pytest.raises(MapnetError, match="no header line"):
        read_split(TASKS["CoLA"], write_tsv(tmp_path / "c.tsv", ("source", "label", "orig", "sentence"), rows), "CoLA")


def test_qqp_skips_and_counts_broken_rows(tmp_path):
    header, rows = official_rows("QQP", 6)
    path = write_tsv(tmp_path / "train.tsv", header, rows)
    # The known QQP breakage: a question with a newline splits one row in two.
    path.write_text(path.read_text() + "77\t1\t2\tWhy is the\n" + "sky blue?\tIs it?\t0\n" + "78\t3\t4\ta\tb\tmaybe\n")
    s = read_split(TASKS["QQP"], path, "train")
    assert len(s) == 6 and s.skipped == 3 and s.skipped_lines == [8, 9, 10]
    # The same file under the strict policy fails loudly.
    with pytest.raises(MapnetError, match="train.tsv:8"):
        read_split(TASKS["QQP"], path, "train", skip_malformed=False)
    # And another task can opt in to skipping.
    header, rows = official_rows("RTE", 3)
    path = write_tsv(tmp_path / "rte.tsv", header, rows)
    path.write_text(path.read_text() + "x\ty\n")
    assert read_split(TASKS["RTE"], path, "RTE", skip_malformed=True).skipped == 1


def test_not_utf8_and_empty(tmp_path):
    bad = tmp_path / "bad.tsv"
    bad.write_bytes(b"sentence\tlabel\n\xff\xfe oops\t1\n")
    with pytest.raises(MapnetError, match="not UTF-8"):
        read_split(TASKS["SST-2"], bad, "SST-2")
    empty = tmp_path / "empty.tsv"
    empty.write_text("sentence\tlabel\n")
    with pytest.raises(MapnetError, match="no usable SST-2 rows"):
        read_split(TASKS["SST-2"], empty, "SST-2")
