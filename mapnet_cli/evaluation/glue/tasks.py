"""The nine GLUE tasks: their files, columns and label sets, and strict TSV readers.

    spec = task_spec("sts-b")                 # names: any case, dash optional
    data = load_task(spec, Path("glue_data"))  # -> TaskData(train, dev=[Split, ...])

Layouts are those of the official GLUE release (`download_glue_data.py`), read the way GLUE's own processors read
them: split on TAB with no quote handling (the files are not CSV-quoted; MRPC and SST-2 contain bare `"`), UTF-8
with an optional BOM (MRPC's header carries one). Tasks with a header are checked against it by column name, so a
file with a missing column fails with that column's name; CoLA has no header and is read by position.

Malformed rows (wrong number of fields, an unknown label, a score that is not a number in [0, 5]) stop the read
with the file and line, except for QQP, whose train.tsv is known to hold a few broken rows (questions with
embedded newlines): there they are skipped and counted, as GLUE's reference processors do, and the count is
reported. `finetune.malformed_rows` can force either behaviour for every task. Empty lines carry no row and are
ignored (the official files end with one newline; CoLA's dev has none).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from ...comma_list import comma_list
from ...errors import MapnetError


@dataclass(frozen=True)
class TaskSpec:
    name: str  # canonical GLUE spelling, also the folder name
    header: tuple[str, ...] | None  # the official header (None: the file has none)
    n_columns: int  # fields per row
    text_a: str | int  # column name (header files) or index (no header)
    text_b: str | int | None  # None: a single-sentence task
    label: str | int
    labels: tuple[str, ...] | None  # class names in id order; None: regression (STS-B)
    dev: tuple[tuple[str, str], ...]  # (score entry, file) per dev set
    metrics: tuple[str, ...]
    skip_malformed: bool = False  # the known convention for this task's files

    @property
    def is_regression(self) -> bool:
        return self.labels is None

    @property
    def num_outputs(self) -> int:
        return 1 if self.labels is None else len(self.labels)

    @property
    def entries(self) -> tuple[str, ...]:
        return tuple(entry for entry, _ in self.dev)


_NLI_HEADER_TRAIN = (
    "index",
    "promptID",
    "pairID",
    "genre",
    "sentence1_binary_parse",
    "sentence2_binary_parse",
    "sentence1_parse",
    "sentence2_parse",
    "sentence1",
    "sentence2",
    "label1",
    "gold_label",
)

TASKS: dict[str, TaskSpec] = {
    t.name: t
    for t in (
        TaskSpec(
            name="CoLA",
            header=None,
            n_columns=4,
            text_a=3,
            text_b=None,
            label=1,
            labels=("0", "1"),
            dev=(("CoLA", "dev.tsv"),),
            metrics=("mcc",),
        ),
        TaskSpec(
            name="SST-2",
            header=("sentence", "label"),
            n_columns=2,
            text_a="sentence",
            text_b=None,
            label="label",
            labels=("0", "1"),
            dev=(("SST-2", "dev.tsv"),),
            metrics=("acc",),
        ),
        TaskSpec(
            name="MRPC",
            header=("Quality", "#1 ID", "#2 ID", "#1 String", "#2 String"),
            n_columns=5,
            text_a="#1 String",
            text_b="#2 String",
            label="Quality",
            labels=("0", "1"),
            dev=(("MRPC", "dev.tsv"),),
            metrics=("f1", "acc"),
        ),
        TaskSpec(
            name="STS-B",
            header=(
                "index",
                "genre",
                "filename",
                "year",
                "old_index",
                "source1",
                "source2",
                "sentence1",
                "sentence2",
                "score",
            ),
            n_columns=10,
            text_a="sentence1",
            text_b="sentence2",
            label="score",
            labels=None,
            dev=(("STS-B", "dev.tsv"),),
            metrics=("pearson", "spearman"),
        ),
        TaskSpec(
            name="QQP",
            header=("id", "qid1", "qid2", "question1", "question2", "is_duplicate"),
            n_columns=6,
            text_a="question1",
            text_b="question2",
            label="is_duplicate",
            labels=("0", "1"),
            dev=(("QQP", "dev.tsv"),),
            metrics=("f1", "acc"),
            skip_malformed=True,
        ),
        # MNLI's dev files carry five annotator labels (label1..label5) before gold_label; train only label1.
        # Both are read by column name, so the differing widths need no special case.
        TaskSpec(
            name="MNLI",
            header=_NLI_HEADER_TRAIN,
            n_columns=12,
            text_a="sentence1",
            text_b="sentence2",
            label="gold_label",
            labels=("contradiction", "entailment", "neutral"),
            dev=(("MNLI-m", "dev_matched.tsv"), ("MNLI-mm", "dev_mismatched.tsv")),
            metrics=("acc",),
        ),
        TaskSpec(
            name="QNLI",
            header=("index", "question", "sentence", "label"),
            n_columns=4,
            text_a="question",
            text_b="sentence",
            label="label",
            labels=("entailment", "not_entailment"),
            dev=(("QNLI", "dev.tsv"),),
            metrics=("acc",),
        ),
        TaskSpec(
            name="RTE",
            header=("index", "sentence1", "sentence2", "label"),
            n_columns=4,
            text_a="sentence1",
            text_b="sentence2",
            label="label",
            labels=("entailment", "not_entailment"),
            dev=(("RTE", "dev.tsv"),),
            metrics=("acc",),
        ),
        TaskSpec(
            name="WNLI",
            header=("index", "sentence1", "sentence2", "label"),
            n_columns=4,
            text_a="sentence1",
            text_b="sentence2",
            label="label",
            labels=("0", "1"),
            dev=(("WNLI", "dev.tsv"),),
            metrics=("acc",),
        ),
    )
}


def _task_key(name: str) -> str:
    return name.lower().replace("-", "").replace("_", "")


_ALIASES = {_task_key(name): name for name in TASKS}


def task_names(text: str) -> list[str]:
    """Canonical task names from `RTE`, `sst2`, `sts-b`, `all`, or a comma list of those."""
    out: list[str] = []
    for part in comma_list(text, "GLUE task", allowed=[*TASKS, "all"], key=_task_key):
        out.extend(TASKS if _task_key(part) == "all" else [_ALIASES[_task_key(part)]])
    return list(dict.fromkeys(out))  # de-duplicated, order kept


def task_spec(name: str) -> TaskSpec:
    names = task_names(name)
    if len(names) != 1:
        raise MapnetError(f"expected one GLUE task, got {name!r}")
    return TASKS[names[0]]


# ---------------------------------------------------------------- reading
@dataclass
class Split:
    """One labelled file, read and checked."""

    entry: str  # the score entry: "RTE", "MNLI-m", ... ("train" for training data)
    path: Path
    text_a: list[str]
    text_b: list[str] | None
    labels: np.ndarray  # int64 class ids, or float32 scores for STS-B
    skipped: int = 0  # malformed rows skipped (QQP's convention)
    skipped_lines: list[int] = field(default_factory=list)  # the first few, for the report

    def __len__(self) -> int:
        return len(self.text_a)

    def rows(self, keep: np.ndarray) -> Split:
        """The rows at the indices `keep`, in that order (the file, its entry and its skipped rows as they were)."""
        return Split(
            self.entry,
            self.path,
            [self.text_a[i] for i in keep],
            None if self.text_b is None else [self.text_b[i] for i in keep],
            self.labels[keep],
            self.skipped,
            self.skipped_lines,
        )


@dataclass
class TaskData:
    spec: TaskSpec
    train: Split
    dev: list[Split]


def _col(spec: TaskSpec, header: list[str] | None, col: str | int, path: Path) -> int:
    if isinstance(col, int):
        return col
    assert header is not None
    if col not in header:
        raise MapnetError(f"{path}: {spec.name} needs column {col!r}, header has {', '.join(map(repr, header))}")
    return header.index(col)


def read_split(spec: TaskSpec, path: Path, entry: str, skip_malformed: bool | None = None) -> Split:
    """Read one labelled GLUE file; `skip_malformed` None means the task's own convention."""
    skip = spec.skip_malformed if skip_malformed is None else skip_malformed
    if not path.is_file():
        what = "folder" if not path.parent.is_dir() else "file"
        missing = path.parent if what == "folder" else path
        raise MapnetError(f"GLUE {spec.name}: {what} not found: {missing}")
    try:
        text = path.read_text(encoding="utf-8-sig")  # -sig: drops MRPC's BOM, harmless elsewhere
    except UnicodeDecodeError as exc:
        raise MapnetError(f"{path} is not UTF-8 text ({exc.reason} at byte {exc.start})") from None
    lines = text.split("\n")
    header = None
    first = 0
    if spec.header is not None:
        if not lines or not lines[0].strip():
            raise MapnetError(f"{path} is empty (expected the header {chr(9).join(spec.header)!r})")
        header = [h.strip() for h in lines[0].rstrip("\r").split("\t")]
        first = 1
    ia = _col(spec, header, spec.text_a, path)
    ib = None if spec.text_b is None else _col(spec, header, spec.text_b, path)
    il = _col(spec, header, spec.label, path)
    width = len(header) if header is not None else spec.n_columns
    label_ids = {name: i for i, name in enumerate(spec.labels)} if spec.labels is not None else None

    text_a, text_b, labels = [], [] if ib is not None else None, []
    skipped, skipped_lines = 0, []
    for lineno, line in enumerate(lines[first:], start=first + 1):
        line = line.rstrip("\r")
        if not line:
            continue
        fields = line.split("\t")
        problem = None
        if len(fields) != width:
            problem = f"{len(fields)} fields, expected {width}"
        else:
            raw = fields[il].strip()
            if label_ids is not None:
                value = label_ids.get(raw)
                if value is None:
                    problem = f"label {raw!r} is not one of {', '.join(spec.labels)}"
                    if spec.header is None and lineno == 1:
                        problem += f" ({spec.name}'s GLUE files have no header line)"
            else:
                try:
                    value = float(raw)
                except ValueError:
                    value = float("nan")
                if not (math.isfinite(value) and 0.0 <= value <= 5.0):
                    problem = f"score {raw!r} is not a number in [0, 5]"
        if problem is not None:
            if not skip:
                raise MapnetError(f"{path}:{lineno}: malformed {spec.name} row: {problem}")
            skipped += 1
            if len(skipped_lines) < 5:
                skipped_lines.append(lineno)
            continue
        text_a.append(fields[ia].strip())
        if text_b is not None:
            text_b.append(fields[ib].strip())
        labels.append(value)
    if not text_a:
        raise MapnetError(f"{path} has no usable {spec.name} rows" + (f" ({skipped} malformed)" if skipped else ""))
    dtype = np.float32 if spec.is_regression else np.int64
    return Split(entry, path, text_a, text_b, np.asarray(labels, dtype=dtype), skipped, skipped_lines)


def load_task(spec: TaskSpec, glue_dir: Path, skip_malformed: bool | None = None) -> TaskData:
    """Train and every dev set of one task from the standard layout GLUE_DIR/<Task>/<file>.tsv."""
    glue_dir = Path(glue_dir)
    if not glue_dir.is_dir():
        raise MapnetError(f"GLUE data folder not found: {glue_dir}")
    folder = glue_dir / spec.name
    if not folder.is_dir():
        # Accept the lower-case, dash-less folder names some copies use (sst2, stsb).
        alt = [
            p
            for p in glue_dir.iterdir()
            if p.is_dir() and p.name.lower().replace("-", "") == spec.name.lower().replace("-", "")
        ]
        if not alt:
            raise MapnetError(f"GLUE {spec.name}: folder not found: {folder}")
        folder = alt[0]
    train = read_split(spec, folder / "train.tsv", "train", skip_malformed)
    dev = [read_split(spec, folder / name, entry, skip_malformed) for entry, name in spec.dev]
    return TaskData(spec, train, dev)


# ---------------------------------------------------------------- the subsets a sweep reads
DATA_SEED = 0  # the max_train / max_dev subsets: the same for every run, checkpoint and seed


def subset(split: Split, n: int) -> Split:
    """A fixed random subset of at most n rows (seeded by DATA_SEED, order kept)."""
    if n <= 0 or len(split) <= n:
        return split
    return split.rows(np.sort(np.random.default_rng(DATA_SEED).choice(len(split), size=n, replace=False)))


def load_tasks(tasks: list[str], glue_dir: Path, ft) -> dict[str, TaskData]:
    """Read every task first, so that all missing files are named in one error before any training."""
    skip = {"task": None, "error": False, "skip": True}[ft.malformed_rows]
    out, problems = {}, []
    for name in tasks:
        try:
            data = load_task(TASKS[name], glue_dir, skip)
        except MapnetError as exc:
            problems.append(str(exc))
            continue
        data.train = subset(data.train, ft.max_train)
        data.dev = [subset(d, ft.max_dev) for d in data.dev]
        out[name] = data
    if problems:
        raise MapnetError("; ".join(problems))
    return out
