"""Every figure typed in a page's prose, checked against what the raw results give now (issue 66, item 3).

    uv run python tests/prose_check.py docs/results.md     # the page's unverified figures, with context and why
    uv run python tests/prose_check.py --all                # a count per page
    uv run python tests/prose_check.py --pin                # pin each figure a single raw number meets

A *figure* is a number the way tests/test_tables.py's FIGURE finds one (a decimal point or a thousands separator
between digits, or a digit before `%` or `×`), read whole: `+7.9`, `−0.22`, `7,976`, `62.1%`, `1.46×`. Each side of
`62.1 ± 1.1` and of `0.77–0.79×` is a figure. Generated blocks (`<!-- table: … -->`), fenced code, inline code spans
(names, commands, settings: `uniform@0.3`), HTML comments and link targets are not prose and are not checked. The
CHANGELOG's page is its latest entry only (the first `### ` section).

"At its printed precision": 62.1 is met by a value in [62.05, 62.15] (ends included: round-half-up and half-even
printers both count) or by a fraction in [0.6205, 0.6215] (a share printed as a percent, or a difference of shares in
points); `7,976` by [7975.5, 7976.5]. A signed figure must match the sign; an unsigned one matches either ("0.22
lower"). A figure is verified, in this order, by:

1. **registry** (`tests/prose_figures/<page>.toml`, `/` written `__`): `[[figure]]` entries with `figure` (as printed),
   optional `near` (a piece of its context, to pick one occurrence), and either `value`, an expression over the raw
   files that the check recomputes now (`raw(json_file, "a.b[2]")`, `record(metrics_jsonl, "eval", 300,
   "eval_loss")`, `text(text_file, regex)`, `min`, `max`, `mean`, arithmetic), or `not_measured = "why"` (a setting,
   a constant, a goal, an example input, a version; without `near` it covers `occurrences` occurrences of its figure,
   default 1, so a figure typed again is looked at), or `no_raw = "why"`: a measured figure whose source was not
   kept. It stays unverified, so its page fails until a source is kept or the figure leaves the prose, and no table
   number or pin may verify it by chance (a pin found by `--pin` for it would be a coincidence);
2. **table**: an `A ± B` that a generated table made now (any of doc_tables.TABLES) holds as a pair, both halves at
   their precision; or any figure that one of the page's own generated tables holds;
3. **derived**: an `A ± B` pair held by a committed derived table (`tables.md` and the like, scripts' outputs kept in
   the figure's source folders). Only as current as that table, which no test regenerates yet;
4. **raw, pinned**: tests/prose_figures/pins.tsv names the file and the place (a JSON key path, `L12:key` of a JSONL
   file, `line 12` of a text file) of the raw number the figure is; the check reads that place now, so a changed raw
   number fails. `--pin` pins a figure only where exactly one distinct raw value of its sources meets it (a figure's
   sources: the folders its section names, else the page's, with the page's own experiment folder and the
   registry's `sources`); a kept pin that still holds is left alone.

Why not more automatic matching. Single numbers of two or three significant digits are met by chance: the kept raw
files hold tens of thousands of numbers (loss curves, per-paradigm BLiMP scores), and measured on docs/results.md,
more than 90% of its figures were met by some raw number *and* by the numbers one unit above and below them in the
last digit: such a match proves nothing, and a change of the true source would not fail. Hence pairs (two numbers
jointly), a page's own tables (a few hundred numbers, not all the raw files), and pins only where the match is unique.
A figure of one significant digit (`0.5`, `3×`, `5%`) is never matched alone (every value in [0.45, 0.55] meets
`0.5`); it needs a registry entry, and most such figures are settings. What a unique pin still cannot tell: whether
the one raw number that meets a derived figure is its source or a coincidence (the figure is a difference no file
holds, and an unrelated number happens to round to it). pins.tsv records how many raw numbers met each figure when it
was pinned, for review.
"""

from __future__ import annotations

import bisect
import functools
import json
import math
import re
import sys
import tomllib
from dataclasses import dataclass, field
from pathlib import Path

from mapnet_cli.metrics_file import read_lines  # the one reader of the format, which verifies each line

REPO = Path(__file__).resolve().parents[1]
REGISTRY = REPO / "tests" / "prose_figures"
PINS = REGISTRY / "pins.tsv"
sys.path.insert(0, str(REPO / "experiments" / "common"))

FIGURE = re.compile(r"\d[.,]\d|\d%|\d×")  # tests/test_tables.py's: a measured-looking number
TOKEN = re.compile(r"(?<![\w.,])([+−-]?)(\d+(?:[.,]\d+)*)(\s?%|×|x\b)?")
THOUSANDS = re.compile(r"\d{1,3}(?:,\d{3})+(?:\.\d+)?|\d+(?:\.\d+)?")
NUMBER = re.compile(r"(?<![\w.])[+−-]?\d+(?:,\d{3})*(?:\.\d+)?(?:[eE][+-]?\d+)?(?![.\d])")  # not a version
DATA = {".json", ".jsonl", ".csv", ".tsv", ".txt", ".log", ".out", ".md", ".toml", ".command"}
SKIP_DIRS = {"__pycache__"}
TABLE_BLOCK = re.compile(r"<!-- table: (?P<name>[\w-]+) -->\n.*?<!-- /table -->", re.S)


@dataclass
class Figure:
    page: str
    line: int
    text: str  # as printed, sign and suffix included
    context: str  # 40 characters either side
    value: float | None  # None: not a number (a version, a list)
    decimals: int
    signed: bool
    how: str = ""  # table | raw | derived | registry | not_measured | "" (unverified)
    held: bool = False  # the registry says no kept file holds it: never matched by a table or pinned by chance
    note: str = ""
    span: tuple[int, int] = (0, 0)
    partner: Figure | None = field(default=None, repr=False)  # the other side of `A ± B`
    centre: bool = True  # A of `A ± B` (or a figure alone); False for B
    proposal: tuple[str, str] | None = None  # (file, where) of the raw number that meets it, when not pinned
    candidates: int = 0  # how many raw numbers of its sources meet it

    @property
    def significant(self) -> int:
        digits = re.sub(r"\D", "", self.text.split("%")[0].split("×")[0])
        return len(digits.lstrip("0"))


@dataclass
class Page:
    path: str
    figures: list[Figure] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)  # registry entries that are wrong or match nothing

    def unverified(self) -> list[Figure]:
        return [f for f in self.figures if not f.how]

    def counts(self) -> dict[str, int]:
        out: dict[str, int] = {}
        for f in self.figures:
            out[f.how or "unverified"] = out.get(f.how or "unverified", 0) + 1
        return out


# ------------------------------------------------------------------ the page's prose and its figures
def prose_lines(text: str) -> list[tuple[int, str]]:
    """(line number, text) of the page's prose: generated blocks, fenced code, HTML comments, inline code and link
    targets blanked out."""
    out, inside, fenced, comment = [], False, False, False
    for n, line in enumerate(text.split("\n"), 1):
        if line.startswith("```") or line.startswith("~~~"):
            fenced = not fenced
            continue
        if line.startswith("<!-- table: "):
            inside = True
            continue
        if line.startswith("<!-- /table -->"):
            inside = False
            continue
        if inside or fenced:
            continue
        if comment:
            if "-->" not in line:
                continue
            line, comment = line.split("-->", 1)[1], False
        line = re.sub(r"<!--.*?-->", " ", line)
        if "<!--" in line:
            line, comment = line.split("<!--", 1)[0], True
        line = re.sub(r"``.*?``|`[^`]*`", lambda m: " " * len(m.group()), line)
        line = re.sub(r"\]\([^)\s]*\)", "]", line)
        line = re.sub(r"https?://\S+", " ", line)
        out.append((n, line))
    return out


def figures_of(text: str, page: str) -> list[Figure]:
    out = []
    for n, line in prose_lines(text):
        for m in TOKEN.finditer(line):
            sign, body, suffix = m.group(1), m.group(2), (m.group(3) or "").strip()
            if suffix == "x" and not body[-1].isdigit():
                suffix = ""
            whole = body + ("%" if suffix == "%" else "×" if suffix in ("×", "x") else "")
            if not FIGURE.search(whole):
                continue
            # an ASCII hyphen is a sign only after a space or a bracket (not in "L4-H192" or "0.77-0.79")
            start = m.start()
            if sign == "-" and start > 0 and line[start - 1] not in " (":
                sign = ""
            context = line[max(0, m.start() - 40) : m.end() + 40].strip()
            shown = (sign if sign in "+−-" else "") + body + (suffix if suffix != "x" else "×")
            if THOUSANDS.fullmatch(body):
                value = float(body.replace(",", ""))
                if sign in ("−", "-"):
                    value = -value
                decimals = len(body.split(".")[1]) if "." in body else 0
            else:
                value, decimals = None, 0
            fig = Figure(page, n, shown, context, value, decimals, bool(sign), span=(m.start(), m.end()))
            if out and out[-1].line == n and re.fullmatch(r"\s*±\s*", line[out[-1].span[1] : m.start()]):
                out[-1].partner, fig.partner = fig, out[-1]
                fig.centre = False
            out.append(fig)
    return out


# ------------------------------------------------------------------ the numbers of the raw files
@dataclass(frozen=True)
class Raw:
    value: float
    where: str  # a JSON key path (`runs.uniform.final[2]`), `L12:key` in a JSONL file, `line 12` in a text file
    decimals: int  # as written (a JSON float's shortest repr), so a figure printed at that precision is exact
    curve: bool  # one point of a long list (a loss curve), or a log's line: a weaker source than a summary value


def decimals_of(s: str) -> int:
    s = s.lower().split("e")[0]
    return len(s.split(".")[1]) if "." in s else 0


def numbers_in_text(text: str, where: str, curve: bool) -> list[Raw]:
    out = []
    for m in NUMBER.finditer(text):
        s = m.group().replace(",", "").replace("−", "-")
        try:
            out.append(Raw(float(s), where, decimals_of(s), curve))
        except ValueError:
            pass
    return out


def numbers_in_json(obj, where: str, out: list[Raw], curve: bool = False) -> None:
    if isinstance(obj, bool) or obj is None:
        return
    if isinstance(obj, (int, float)):
        if math.isfinite(obj):
            out.append(Raw(float(obj), where, decimals_of(repr(obj)), curve))
    elif isinstance(obj, str):
        out.extend(numbers_in_text(obj, where, curve))
    elif isinstance(obj, dict):
        for k, v in obj.items():
            key = f"{where}.{k}" if re.fullmatch(r"[\w-]+", str(k)) else f'{where}["{k}"]'
            numbers_in_json(v, key.removeprefix("."), out, curve)
    elif isinstance(obj, list):
        long = curve or len(obj) > 20
        for i, v in enumerate(obj):
            numbers_in_json(v, f"{where}[{i}]", out, long)


def numbers_of_file(path: Path) -> list[Raw]:
    """Every number the file holds, with where it sits: a JSON file's numeric leaves (and the numbers written in its
    strings), a text file's numbers as written, by line."""
    text = path.read_text(encoding="utf-8", errors="replace")
    out: list[Raw] = []
    if path.suffix == ".json":
        try:
            numbers_in_json(json.loads(text), "", out)
            return out
        except ValueError:
            pass
    weak = path.suffix in (".log", ".out", ".jsonl", ".md")
    for n, line in enumerate(text.splitlines(), 1):
        if path.suffix == ".jsonl":
            try:
                numbers_in_json(json.loads(line), f"L{n}:", out, True)
                continue
            except ValueError:
                pass
        out.extend(numbers_in_text(line, f"line {n}", weak))
    return out


@functools.cache
def folder_files(folder: str) -> tuple[str, ...]:
    root = REPO / folder
    if root.is_file():
        return (folder,)
    files = []
    for p in sorted(root.rglob("*")):
        if p.is_file() and p.suffix in DATA and not SKIP_DIRS & set(p.parts) and p.name != "README.md":
            files.append(p.relative_to(REPO).as_posix())
    return tuple(files)


@dataclass(frozen=True)
class Index:
    """A file's numbers, sorted by value, for a range look-up."""

    values: tuple[float, ...]
    raws: tuple[Raw, ...]

    @classmethod
    def of(cls, raws: list[Raw]) -> Index:
        raws = sorted(raws, key=lambda r: r.value)
        return cls(tuple(r.value for r in raws), tuple(raws))

    def within(self, lo: float, hi: float) -> tuple[Raw, ...]:
        eps = 1e-9 * max(1.0, abs(lo), abs(hi))
        i, j = bisect.bisect_left(self.values, lo - eps), bisect.bisect_right(self.values, hi + eps)
        return self.raws[i:j]


@functools.cache
def index_of(path: str) -> Index:
    """The file's numbers (cached: a file is read once a session). `path` is the repository's, or absolute."""
    p = Path(path) if Path(path).is_absolute() else REPO / path
    return Index.of(numbers_of_file(p))


def ranges(figure: Figure) -> list[tuple[float, float, float]]:
    """(low, high, scale) of the raw values that print as the figure: itself at its precision, or a fraction printed
    as a percent (or a difference of fractions in points); a signed figure keeps its sign. A ratio (`1.46×`) or a
    number above 100 is never a fraction printed as a percent: a raw fraction that meets it is a coincidence."""
    assert figure.value is not None
    half = 0.5 * 10.0 ** (-figure.decimals)
    targets = [figure.value] if figure.signed or figure.value == 0 else [figure.value, -figure.value]
    percent = not figure.text.endswith(("×", "x")) and abs(figure.value) <= 100
    return [
        (min(t - half, t + half) * scale, max(t - half, t + half) * scale, scale)
        for scale in ((1.0, 0.01) if percent else (1.0,))
        for t in targets
    ]


def candidates(index: Index, figure: Figure) -> list[Raw]:
    return [r for lo, hi, _ in ranges(figure) for r in index.within(lo, hi)]


def meets(index: Index, figure: Figure) -> bool:
    return any(index.within(lo, hi) for lo, hi, _ in ranges(figure))


# ------------------------------------------------------------------ a page's sources
def slug(page: str) -> str:
    return page.replace("/", "__").removesuffix(".md")


def registry_of(page: str) -> dict:
    path = REGISTRY / f"{slug(page)}.toml"
    return tomllib.loads(path.read_text(encoding="utf-8")) if path.exists() else {}


def page_text(page: str) -> str:
    """The page's text; for CHANGELOG.md, its latest entry only (the first `### ` section)."""
    text = (REPO / page).read_text(encoding="utf-8")
    if page == "CHANGELOG.md":
        return latest_entry(text)
    return text


def latest_entry(text: str) -> str:
    """The CHANGELOG's latest entry: the first `### ` section of its first `## ` section, up to the next heading of
    either level (the text before it blanked, so line numbers stay the file's)."""
    lines = text.split("\n")
    start = next(i for i, line in enumerate(lines) if line.startswith("### "))
    end = next((i for i in range(start + 1, len(lines)) if lines[i].startswith(("### ", "## "))), len(lines))
    return "\n" * start + "\n".join(lines[start:end])


def source_folders(page: str, text: str, registry: dict) -> list[str]:
    folders = set(registry.get("sources", []))
    if page.startswith("experiments/") and page.count("/") == 2:
        folders.add(page.rsplit("/", 1)[0])
    for name in re.findall(r"experiments/([a-z0-9][a-z0-9-]*)", text):
        if name != "common" and (REPO / "experiments" / name).is_dir():
            folders.add(f"experiments/{name}")
    return sorted(folders)


@functools.cache
def made_table(name: str) -> Index:
    import doc_tables

    return Index.of(numbers_in_text(doc_tables.TABLES[name](), f"table {name}", False))


PAIR = re.compile(r"([+−-]?\d+(?:,\d{3})*(?:\.\d+)?)(%?)\s*±\s*(\d+(?:,\d{3})*(?:\.\d+)?)")


def pairs_in_text(text: str) -> tuple[tuple[Raw, Raw], ...]:
    """Every `A ± B` of a text (a table's cell), as two numbers."""
    out = []
    for m in PAIR.finditer(text):
        a, b = (m.group(i).replace(",", "").replace("−", "-") for i in (1, 3))
        out.append((Raw(float(a), "", decimals_of(a), False), Raw(float(b), "", decimals_of(b), False)))
    return tuple(out)


@functools.cache
def made_pairs(name: str) -> tuple[tuple[Raw, Raw], ...]:
    import doc_tables

    return pairs_in_text(doc_tables.TABLES[name]())


@functools.cache
def file_pairs(path: str) -> tuple[tuple[Raw, Raw], ...]:
    p = Path(path) if Path(path).is_absolute() else REPO / path
    return pairs_in_text(p.read_text(encoding="utf-8"))


def is_figure(value: float, figure: Figure) -> bool:
    return any(lo - 1e-9 * max(1.0, abs(lo)) <= value <= hi + 1e-9 * max(1.0, abs(hi)) for lo, hi, _ in ranges(figure))


def pair_meets(pairs, centre: Figure, half: Figure) -> bool:
    """Whether one `a ± b` of `pairs` is the prose's `A ± B`, both at their printed precision."""
    return any(
        is_figure(a.value, centre) and is_figure(b.value, half) and (a.value < 0) == (centre.value < 0)
        for a, b in pairs
    )


@functools.cache
def by_where(path: str) -> dict[str, list[Raw]]:
    out: dict[str, list[Raw]] = {}
    for r in index_of(path).raws:
        out.setdefault(r.where, []).append(r)
    return out


# ------------------------------------------------------------------ the registry's values
def path_parts(key: str) -> list[str | int]:
    return [int(i) if i else (q or n) for q, i, n in re.findall(r'\["([^"]+)"\]|\[(\d+)\]|([^.\[\]]+)', key)]


@functools.cache
def _parsed_json(file: Path, stamp: tuple[int, int]):
    """A JSON file parsed once per version (`stamp`: its mtime and size): hundreds of figures read a few large files,
    which parsing again for each cost seconds of the suite. Callers only read what this returns."""
    return json.loads(file.read_text(encoding="utf-8"))


def raw(path: str, key: str = ""):
    """The value at `key` of a JSON file: dotted names, `[i]` for a list's item, `["a.b"]` for a name with dots."""
    file = REPO / path
    st = file.stat()
    obj = _parsed_json(file, (st.st_mtime_ns, st.st_size))
    for part in path_parts(key):
        obj = obj[part]
    return obj


def record(path: str, kind: str, step: int, key: str):
    """`key` of the line of a metrics.jsonl with that `kind` ("eval", "train") and `step`; exactly one must match."""
    found = [r for _, r in read_lines(REPO / path) if r.get("kind") == kind and r["step"] == step]
    if len(found) != 1:
        raise LookupError(f"{path}: {len(found)} {kind} records at step {step}, not one")
    return found[0][key]


def text(path: str, pattern: str, group: int = 1) -> float:
    """The number the first match of `pattern` captures in a text file (multiline: `^` starts any line)."""
    m = re.search(pattern, (REPO / path).read_text(encoding="utf-8"), re.M)
    if not m:
        raise LookupError(f"{path}: no match for {pattern!r}")
    return float(m.group(group).replace(",", "").replace("−", "-"))


def evaluate(expression: str):
    from statistics import mean, median, stdev

    names = {"raw": raw, "record": record, "text": text, "mean": mean, "median": median, "stdev": stdev, "abs": abs,
             "min": min, "max": max, "sum": sum, "len": len, "round": round}  # fmt: skip
    import warnings

    with warnings.catch_warnings():  # an expression Python warns about (a regex without r'') is a registry error
        warnings.simplefilter("error")
        # The names as globals: a comprehension in an expression (a min over a file's models) sees globals only.
        return eval(expression, {"__builtins__": {}, **names})  # noqa: S307 - the registry is the repository's own file


# ------------------------------------------------------------------ pins: which raw number each figure is
def read_pins() -> dict[tuple[str, str, str], tuple[str, str, int]]:
    """{(page, figure, context): (file, where, how many raw numbers met the figure when it was pinned)}."""
    if not PINS.exists():
        return {}
    rows = [line.split("\t") for line in PINS.read_text(encoding="utf-8").splitlines()[1:] if line]
    return {(r[0], r[1], r[2]): (r[3], r[4], int(r[5])) for r in rows}


def best(found: list[tuple[str, Raw, float]], figure: Figure) -> tuple[str, Raw]:
    """The likeliest source of a figure among the raw numbers that meet it: a summary value before a curve's point or
    a log's line, one written at the figure's precision before one rounded to it, the figure itself before a fraction
    read as a percent, then the file order."""

    def rank(item):
        file, r, scale = item
        exact = r.decimals == figure.decimals + (2 if scale != 1.0 else 0)
        return (r.curve, file.endswith(".md"), not exact, scale != 1.0)

    file, r, _ = min(found, key=rank)
    return file, r


# ------------------------------------------------------------------ the check
def check(
    page: str, body: str | None = None, files: dict[str, Path] | None = None, pins=None, search: bool = False
) -> Page:
    """Each prose figure of `page` with how it was verified (`how`; empty where it was not, `note` saying why).
    `body` replaces the page's text; `files` reads a source file from another path (a test's changed copy); `pins`
    replaces the kept pins ({} to find every figure's source afresh, as `--pin` does); `search` looks for a raw
    number that meets each figure not pinned (`proposal`, `candidates`), as `--pin` and the command line do."""
    body = page_text(page) if body is None else body
    registry = registry_of(page)
    pins = read_pins() if pins is None else pins
    files = files or {}

    def index(path: str) -> Index:
        return index_of(str(files[path])) if path in files else index_of(path)

    result = Page(page, figures_of(body, page))
    entries = registry.get("figure", [])
    used = [0] * len(entries)
    for f in result.figures:
        for i, e in enumerate(entries):
            if e["figure"] != f.text or ("near" in e and e["near"] not in f.context):
                continue
            used[i] += 1
            if "not_measured" in e:
                f.how, f.note = "not_measured", e["not_measured"]
            elif "no_raw" in e:
                f.note, f.held = f"no kept raw: {e['no_raw']}", True
            else:
                try:
                    value = evaluate(e["value"])
                except Exception as err:  # noqa: BLE001 - reported, with the entry
                    result.problems.append(f"{page}: {f.text!r}: its value {e['value']!r} fails: {err!r}")
                    break
                if f.value is not None and is_figure(float(value), f):
                    f.how, f.note = "registry", e["value"]
                else:
                    result.problems.append(f"{page}: {f.text!r} ({f.context!r}) but its value gives {value!r}")
            break
    for e, n in zip(entries, used):
        if not n:
            result.problems.append(
                f"{page}: the registry's {e['figure']!r} near {e.get('near', '')!r} is not on the page"
            )
        elif "not_measured" in e and "near" not in e and n != e.get("occurrences", 1):
            # Without `near` an entry would pass every later occurrence of its figure, a measured one included: it
            # covers the count it names (default 1), and a figure typed again fails until it is looked at.
            result.problems.append(
                f"{page}: the registry's not_measured {e['figure']!r} has no `near` and is on the page {n} times, not "
                f"{e.get('occurrences', 1)}: give each occurrence its own entry with `near`, or set `occurrences`"
            )
    import doc_tables

    tables = [made_table(m["name"]) for m in TABLE_BLOCK.finditer(body)]
    every_pair = [made_pairs(name) for name in doc_tables.TABLES]
    sections = sections_of(body)
    for f in result.figures:
        if f.how or f.held:
            continue
        if f.value is None:
            f.note = "not a number (a version, a list): give it a registry entry"
            continue
        folders = section_folders(page, body, registry, sections, f.line)
        if f.partner is not None and f.partner.value is not None:
            centre, half = (f, f.partner) if f.centre else (f.partner, f)
            if any(pair_meets(pairs, centre, half) for pairs in every_pair):
                f.how = "table"
                continue
            derived = [p for folder in folders for p in folder_files(folder) if p.endswith(".md")]
            if any(pair_meets(file_pairs(p), centre, half) for p in derived):
                f.how = "derived"
                continue
        if f.significant < 2:
            f.note = "one significant digit: give it a registry entry"
            continue
        if any(meets(t, f) for t in tables):
            f.how = "table"
            continue
        pin = pins.get((page, f.text, f.context))
        if pin:
            file, where, _ = pin
            here = [
                r for r in (index(file).raws if file in files else by_where(file).get(where, [])) if r.where == where
            ]
            if meets(Index.of(here), f):
                f.how, f.note = ("derived" if file.endswith(".md") else "raw"), f"{file} {where}"
            else:
                f.note = f"pinned to {file} {where}, which now holds {[r.value for r in here]}"
            continue
        if not search:
            f.note = "not pinned, not in a table, not in the registry"
            continue
        found = [
            (p, r, scale)
            for folder in folders
            for p in folder_files(folder)
            for lo, hi, scale in ranges(f)
            for r in index(p).within(lo, hi)
        ]
        values = {round(r.value * scale, 9) for _, r, scale in found}
        if len(values) == 1:
            file, r = best(found, f)
            f.proposal, f.candidates = (file, r.where), len(found)
            f.note = f"not pinned: {file} {r.where} meets it (run `uv run python tests/prose_check.py --pin`)"
        elif values:
            f.note = f"{len(values)} different raw numbers of its sources meet it: which is it?"
        else:
            f.note = "no raw number of its sources meets it"
    return result


@functools.cache
def checked(page: str) -> Page:
    """check(page) as the files are now, once a session (the tests ask for each page more than once)."""
    return check(page)


def sections_of(body: str) -> list[tuple[int, int, str]]:
    """(first line, last line, text) of each part of the page between two headings."""
    lines = body.split("\n")
    starts = [i for i, line in enumerate(lines) if line.startswith("#")] + [len(lines)]
    starts = [0, *starts] if starts[0] != 0 else starts
    return [(a + 1, b, "\n".join(lines[a:b])) for a, b in zip(starts, starts[1:])]


def section_folders(page: str, body: str, registry: dict, sections, line: int) -> list[str]:
    """The folders a figure's numbers may come from: those its own section (between two headings) names, else those
    the page names; the page's own experiment folder and the registry's `sources` always."""
    part = next((s for a, b, s in sections if a <= line <= b), body)
    named = source_folders(page, part, registry)
    base = source_folders(page, "", registry)
    return named if len(named) > len(base) else source_folders(page, body, registry)


# ------------------------------------------------------------------ pages and pins
def checked_pages() -> list[str]:
    docs = sorted(p.relative_to(REPO).as_posix() for p in (REPO / "docs").glob("*.md"))
    readmes = sorted(p.relative_to(REPO).as_posix() for p in (REPO / "experiments").glob("*/README.md"))
    return ["README.md", "CHANGELOG.md", *docs, *readmes]


def write_pins(pages: list[str]) -> int:
    """Pin every figure that a raw number meets: a kept pin that still holds stays; the others are found afresh."""
    kept = read_pins()
    rows = []
    for page in pages:
        for f in check(page, pins=kept).figures:
            key = (page, f.text, f.context)
            if f.how in ("raw", "derived") and key in kept:
                rows.append((*key, *map(str, kept[key])))
        for f in check(page, pins={}, search=True).figures:
            if f.proposal and not any(r[:3] == (page, f.text, f.context) for r in rows):
                rows.append((page, f.text, f.context, *f.proposal, str(f.candidates)))
    lines = ["page\tfigure\tcontext\tfile\twhere\tcandidates"] + ["\t".join(r) for r in rows]
    PINS.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return len(rows)


def figure_key(f: Figure) -> tuple[str, str, str]:
    return (f.page, f.text, f.context)


if __name__ == "__main__":
    args = sys.argv[1:]
    if args == ["--all"]:
        for page in checked_pages():
            r = check(page)
            print(page, r.counts(), *r.problems, sep="  ")
    elif args == ["--pin"]:
        print(f"{write_pins(checked_pages())} figures pinned in {PINS.relative_to(REPO)}")
    elif args:
        for page in args:
            r = check(page, search=True)
            for f in r.unverified():
                print(f"{page}:{f.line}\t{f.text}\t{f.context}\t{f.note}")
            print(page, r.counts(), *r.problems, sep="\n")
    else:
        sys.exit(__doc__)
