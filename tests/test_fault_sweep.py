"""The fault sweep: bad inputs and faults across every subcommand, each held to the same four promises.

    uv run pytest tests/test_fault_sweep.py -n 2          # the sweep alone (docs/reliability.md reports its count)

Every case runs a real `mapnet` command line (in-process, through typer's runner, as `main` would run it)
against a small world of real files — tiny shards, a trained run, its Hugging Face export, a preprocessed
corpus, GLUE and BLiMP folders — or a damaged copy of one, and checks:

1. the exit code is not 0;
2. the error is one line: a `MapnetError` (which `main` prints as one red `error:` line) or click's usage
   error (one `Error:` line under the usage line), and never any other exception (a traceback);
3. nothing the command read changed: every byte of the world and of the case's own folder is the same
   after as before (sha256 of every file, and the set of files), so no input was damaged and no output
   was left behind — no partial folder, no staging leftover, no file that looks complete.

A case is a command line and, where it needs one, a small preparation (a damaged copy, an existing output).
New faults are one line each in CASES.
"""

from __future__ import annotations

import gzip
import hashlib
import json
import math
import shutil
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest
from tiny_shards import write_tiny_shards
from trained_runs import train_tiny_run
from typer.testing import CliRunner

from mapnet_cli.cli import app
from mapnet_cli.errors import MapnetError

SMALL = ["--set", "logging.progress=false"]
TINY_STEPS = ["--preset", "tiny", "--set", "train.recipe=paper", "--steps", "2"]
SHARDABLE = ["--valid-fraction", "0.2"]  # the world's 60 documents: a 1% split would hold none


@dataclass(frozen=True)
class World:
    """Real, small, finished inputs; read-only for every case (a case that damages one copies it first)."""

    root: Path
    shards: Path  # tiny shards (the documented format), with a PMI-less manifest
    run: Path  # a finished 3-step tiny run on them (batch 8)
    export: Path  # its Hugging Face export
    prep: Path  # a preprocessed synthetic corpus
    text: Path  # a plain-text file
    glue: Path  # GLUE folder with SST-2
    blimp: Path  # BLiMP folder: two paradigms, 8 pairs each


def _build_world(root: Path, shared_data: Path) -> World:
    from mapnet_cli.data.preprocess import run_preprocess
    from mapnet_cli.export import export
    from mapnet_cli.settings import resolve

    shards = write_tiny_shards(root / "shards")
    run = train_tiny_run(root / "run", shards)
    export(run, root / "export")
    s = resolve(None, None, ["synthetic.documents=60", "preprocess.vocab_size=512", "preprocess.workers=1"])
    run_preprocess(["synthetic:"], root / "prep", s)
    text = root / "text.txt"
    with gzip.open(shared_data / "books" / "carroll-alice.txt.gz", "rt", encoding="utf-8") as fh:
        text.write_text("".join(fh.readlines()[200:400]), encoding="utf-8")
    rows = "".join(f"w{5 + i % 9} w{6 + i % 7} w{7 + i % 5}\t{i % 2}\n" for i in range(16))
    for split in ("train", "dev"):
        (root / "glue" / "SST-2").mkdir(parents=True, exist_ok=True)
        (root / "glue" / "SST-2" / f"{split}.tsv").write_text("sentence\tlabel\n" + rows)
    (root / "blimp").mkdir()
    for name in ("adjunct_island", "anaphor_gender_agreement"):
        lines = (shared_data / "blimp" / f"{name}.jsonl").read_text(encoding="utf-8").splitlines()[:8]
        (root / "blimp" / f"{name}.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
    return World(root, shards, run, root / "export", root / "prep", text, root / "glue", root / "blimp")


@pytest.fixture(scope="module")
def world(tmp_path_factory, shared_data) -> World:
    return _build_world(tmp_path_factory.mktemp("fault-world"), shared_data)


# ------------------------------------------------------------------------------------------- preparations
def copy(src: Path, dest: Path) -> Path:
    (shutil.copytree if src.is_dir() else shutil.copy2)(src, dest)
    return dest


def newest_checkpoint(run: Path) -> Path:
    return sorted((run / "checkpoints").glob("step-*"))[-1]


def flip_last_byte(path: Path) -> None:
    data = path.read_bytes()
    path.write_bytes(data[:-1] + bytes([data[-1] ^ 1]))


def truncate(path: Path) -> None:
    path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])


def damaged_run(w: World, t: Path, how: Callable[[Path], None], name: str = "model.safetensors") -> Path:
    run = copy(w.run, t / "run")
    how(newest_checkpoint(run) / name)
    return run


def damaged_export(w: World, t: Path, how: Callable[[Path], None], name: str) -> Path:
    out = copy(w.export, t / "export")
    how(out / name)
    return out


def run_with_nan_metrics(w: World, t: Path) -> Path:
    """A diverged run: every number it logged is NaN (plot warns about some; with nothing finite it refuses)."""
    run = copy(w.run, t / "run")
    lines = []
    for line in (run / "metrics.jsonl").read_text().splitlines():
        rec = json.loads(line)
        lines.append(json.dumps({k: math.nan if isinstance(v, float) else v for k, v in rec.items()}))
    (run / "metrics.jsonl").write_text("\n".join(lines) + "\n")
    return run


def run_with_garbage_metrics(w: World, t: Path) -> Path:
    """A metrics file damaged in the middle (a torn *last* line is what a killed run leaves, and is read past)."""
    run = copy(w.run, t / "run")
    lines = (run / "metrics.jsonl").read_text().splitlines()
    lines.insert(1, "{not json")
    (run / "metrics.jsonl").write_text("\n".join(lines) + "\n")
    return run


def appended(run: Path, name: str, data: bytes) -> Path:
    with open(run / name, "ab") as fh:
        fh.write(data)
    return run


def blimp_with_summary(w: World, t: Path, value: str) -> Path:
    """The BLiMP folder with a models_summary.jsonl whose first ngram figure is `value` (JSON text)."""
    folder = copy(w.blimp, t / "blimp")
    rows = [
        {"UID": p.stem, "ngram": 0.5, "lstm": 0.6, "txl": 0.7, "gpt2": 0.8} for p in sorted(w.blimp.glob("*.jsonl"))
    ]
    text = "".join(json.dumps(r) + "\n" for r in rows).replace('"ngram": 0.5', f'"ngram": {value}', 1)
    (folder / "models_summary.jsonl").write_text(text)
    return folder


def run_with_list_metrics(w: World, t: Path) -> Path:
    """A run whose logged numbers are all lists: nothing a plot can draw."""
    run = copy(w.run, t / "run")
    lines = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    (run / "metrics.jsonl").write_text(
        "".join(json.dumps({k: [v] if isinstance(v, float) else v for k, v in r.items()}) + "\n" for r in lines)
    )
    return run


def step_costs(t: Path, *arms: str) -> Path:
    """A `benchmarks/step_costs.py` file with costs for `arms` only."""
    path = t / "costs.json"
    path.write_text(json.dumps({"arms": {a: {"step_seconds": 0.5, "short_step_seconds": 0.4} for a in arms}}))
    return path


def existing(path: Path, folder: bool = False) -> Path:
    if folder:
        path.mkdir(parents=True)
        (path / "keep.txt").write_text("the user's file\n")
    else:
        path.write_text("the user's file\n")
    return path


def empty(path: Path) -> Path:
    path.write_bytes(b"")
    return path


def symlink_to(target: Path, link: Path) -> Path:
    link.symlink_to(target, target_is_directory=target.is_dir())
    return link


def users_folder(path: Path) -> Path:
    """An ordinary folder of the user's: nothing mapnet wrote."""
    path.mkdir(parents=True)
    (path / "thesis.tex").write_text("\\documentclass{article}\n")
    (path / "notes.txt").write_text("the user's notes\n")
    return path


def with_users_file(folder: Path, name: str = "README.md") -> Path:
    """A mapnet output to which the user added a file of their own."""
    (folder / name).write_text("the user's words\n")
    return folder


def quickstart_folder(w: World, t: Path, users_file: str = "notes.txt") -> Path:
    """A quickstart folder as quickstart leaves it (corpus/, shards/, run/), plus a file of the user's at
    `users_file` (beside the stages, or inside one)."""
    q = t / "q"
    q.mkdir()
    copy(w.prep, q / "corpus")
    copy(w.shards, q / "shards")
    copy(w.run, q / "run")
    (q / users_file).write_text("the user's notes\n")
    return q


def blimp_identical_pairs(w: World, t: Path) -> Path:
    folder = t / "blimp"
    folder.mkdir()
    rec = json.loads((w.blimp / "adjunct_island.jsonl").read_text().splitlines()[0])
    rec["sentence_bad"] = rec["sentence_good"]
    (folder / "adjunct_island.jsonl").write_text(json.dumps(rec) + "\n")
    return folder


def bom_toml(t: Path) -> Path:
    path = t / "bom.toml"
    path.write_bytes(b"\xef\xbb\xbf[optim]\nlr = 1e-3\n")
    return path


def broken_toml(t: Path) -> Path:
    path = t / "bad.toml"
    path.write_text("[optim\nlr = 1e-3\n")
    return path


# ------------------------------------------------------------------------------------------------- cases
# (id, make) where make(world, case_dir) -> argv. The case folder is empty at the start; whatever make puts
# there counts as input (checked unchanged) unless the command was meant to create it (then it must not exist).
Case = tuple[str, Callable[[World, Path], list[str]]]

CASES: list[Case] = [
    # ---- preprocess
    (
        "preprocess-out-is-input",
        lambda w, t: ["preprocess", str(copy(w.prep, t / "c")), "--out", str(t / "c"), "--overwrite"],
    ),
    (
        "preprocess-out-inside-input",
        lambda w, t: ["preprocess", str(copy(w.prep, t / "c")), "--out", str(t / "c" / "p"), "--overwrite"],
    ),
    (
        "preprocess-input-inside-out",
        lambda w, t: [
            "preprocess",
            str(copy(w.text, existing(t / "o", True) / "t.txt")),
            "--out",
            str(t / "o"),
            "--overwrite",
        ],
    ),
    (
        "preprocess-out-via-symlink-to-input",
        lambda w, t: [
            "preprocess",
            str(copy(w.prep, t / "c")),
            "--out",
            str(symlink_to(t / "c", t / "link")),
            "--overwrite",
        ],
    ),
    ("preprocess-out-exists", lambda w, t: ["preprocess", str(w.text), "--out", str(existing(t / "o", True))]),
    ("preprocess-missing-input", lambda w, t: ["preprocess", str(t / "nope.txt"), "--out", str(t / "o")]),
    ("preprocess-empty-input", lambda w, t: ["preprocess", str(empty(t / "e.txt")), "--out", str(t / "o")]),
    (
        "preprocess-vocab-size-zero",
        lambda w, t: ["preprocess", str(w.text), "--out", str(t / "o"), "--vocab-size", "0"],
    ),
    (
        "preprocess-missing-tokenizer",
        lambda w, t: ["preprocess", str(w.text), "--out", str(t / "o"), "--tokenizer", str(t / "tok.json")],
    ),
    (
        "preprocess-garbage-tokenizer",
        lambda w, t: ["preprocess", str(w.text), "--out", str(t / "o"), "--tokenizer", str(existing(t / "tok.json"))],
    ),
    (
        "preprocess-missing-recipe",
        lambda w, t: ["preprocess", str(w.text), "--out", str(t / "o"), "--recipe", str(t / "r.toml")],
    ),
    (
        "preprocess-broken-config",
        lambda w, t: ["preprocess", str(w.text), "--out", str(t / "o"), "--config", str(broken_toml(t))],
    ),
    (
        "preprocess-unknown-setting",
        lambda w, t: ["preprocess", str(w.text), "--out", str(t / "o"), "--set", "nope.key=1"],
    ),
    ("preprocess-not-gzip", lambda w, t: ["preprocess", str(existing(t / "x.txt.gz")), "--out", str(t / "o")]),
    (
        "preprocess-out-is-a-file",
        lambda w, t: ["preprocess", str(w.text), "--out", str(existing(t / "o")), "--overwrite"],
    ),
    (
        "preprocess-binary-config",
        lambda w, t: [
            "preprocess",
            str(w.text),
            "--out",
            str(t / "o"),
            "--config",
            str(w.export / "model.safetensors"),
        ],
    ),
    (
        "preprocess-config-with-bom",
        lambda w, t: ["preprocess", str(w.text), "--out", str(t / "o"), "--config", str(bom_toml(t))],
    ),
    (
        "preprocess-engine-address-not-a-url",
        lambda w, t: [
            "preprocess",
            str(w.text),
            "--out",
            str(t / "o"),
            "--engine",
            "dask",
            "--engine-address",
            "notaurl",
        ],
    ),
    # ---- shard
    ("shard-out-is-input", lambda w, t: ["shard", str(copy(w.prep, t / "c")), "--out", str(t / "c"), "--overwrite"]),
    (
        "shard-out-inside-input",
        lambda w, t: ["shard", str(copy(w.prep, t / "c")), "--out", str(t / "c" / "s"), "--overwrite"],
    ),
    ("shard-out-exists", lambda w, t: ["shard", str(w.prep), "--out", str(existing(t / "s", True))]),
    ("shard-missing-input", lambda w, t: ["shard", str(t / "nope"), "--out", str(t / "s")]),
    ("shard-not-preprocessed", lambda w, t: ["shard", str(existing(t / "c", True)), "--out", str(t / "s")]),
    ("shard-max-seq-len-one", lambda w, t: ["shard", str(w.prep), "--out", str(t / "s"), "--max-seq-len", "1"]),
    (
        "shard-valid-fraction-out-of-range",
        lambda w, t: ["shard", str(w.prep), "--out", str(t / "s"), "--valid-fraction", "1.5"],
    ),
    ("shard-valid-fraction-nan", lambda w, t: ["shard", str(w.prep), "--out", str(t / "s"), "--valid-fraction", "nan"]),
    (
        "shard-missing-init-from",
        lambda w, t: ["shard", str(w.prep), "--out", str(t / "s"), "--init-from", str(t / "hf")],
    ),
    (
        "shard-engine-address-scheme-only",
        lambda w, t: ["shard", str(w.prep), "--out", str(t / "s"), "--engine", "dask", "--engine-address", "tcp://"],
    ),
    # ---- pmi-vocab
    (
        "pmi-vocab-out-is-a-corpus-file",
        lambda w, t: [
            "pmi-vocab",
            str(copy(w.prep, t / "c")),
            "--out",
            str(sorted((t / "c").rglob("*.txt*"))[0]),
            "--no-progress",
        ],
    ),
    (
        "pmi-vocab-out-exists",
        lambda w, t: ["pmi-vocab", str(w.prep), "--out", str(existing(t / "pmi.tsv")), "--no-progress"],
    ),
    (
        "pmi-vocab-size-zero",
        lambda w, t: ["pmi-vocab", str(w.prep), "--out", str(t / "pmi.tsv"), "--size", "0", "--no-progress"],
    ),
    (
        "pmi-vocab-missing-input",
        lambda w, t: ["pmi-vocab", str(t / "nope"), "--out", str(t / "pmi.tsv"), "--no-progress"],
    ),
    # ---- pretrain
    ("pretrain-missing-shards", lambda w, t: ["pretrain", str(t / "nope"), "--out", str(t / "r"), *SMALL]),
    (
        "pretrain-out-is-shards",
        lambda w, t: ["pretrain", str(copy(w.shards, t / "s")), "--out", str(t / "s"), "--preset", "tiny", *SMALL],
    ),
    (
        "pretrain-out-inside-shards",
        lambda w, t: [
            "pretrain",
            str(copy(w.shards, t / "s")),
            "--out",
            str(t / "s" / "r"),
            "--preset",
            "tiny",
            *SMALL,
        ],
    ),
    (
        "pretrain-lr-nan",
        lambda w, t: ["pretrain", str(w.shards), "--out", str(t / "r"), "--set", "optim.lr=nan", *SMALL],
    ),
    (
        "pretrain-lr-inf-and-mask-prob",
        lambda w, t: [
            "pretrain",
            str(w.shards),
            "--out",
            str(t / "r"),
            "--set",
            "optim.lr=inf",
            "--set",
            "masking.mask_prob=1.5",
            *SMALL,
        ],
    ),
    (
        "pretrain-mask-prob-nan",
        lambda w, t: ["pretrain", str(w.shards), "--out", str(t / "r"), "--mask-prob", "nan", *SMALL],
    ),
    (
        "pretrain-steps-negative",
        lambda w, t: ["pretrain", str(w.shards), "--out", str(t / "r"), "--steps", "-1", *SMALL],
    ),
    (
        "pretrain-flipped-shard",
        lambda w, t: [
            "pretrain",
            str(_flipped_shard(w, t)),
            "--out",
            str(t / "r"),
            "--preset",
            "tiny",
            "--steps",
            "2",
            *SMALL,
        ],
    ),
    (
        "pretrain-resume-missing-run",
        lambda w, t: ["pretrain", str(w.shards), "--out", str(t / "r"), "--resume", *SMALL],
    ),
    (
        "pretrain-resume-other-batch-size",
        lambda w, t: [
            "pretrain",
            str(w.shards),
            "--out",
            str(copy(w.run, t / "r")),
            "--resume",
            "--steps",
            "4",
            "--batch-size",
            "16",
            *SMALL,
        ],
    ),
    (
        "pretrain-resume-other-preset",
        lambda w, t: [
            "pretrain",
            str(w.shards),
            "--out",
            str(copy(w.run, t / "r")),
            "--resume",
            "--steps",
            "4",
            "--preset",
            "mini",
            *SMALL,
        ],
    ),
    (
        "pretrain-resume-flipped-weights",
        lambda w, t: [
            "pretrain",
            str(w.shards),
            "--out",
            str(damaged_run(w, t, flip_last_byte)),
            "--resume",
            "--steps",
            "4",
            *SMALL,
        ],
    ),
    (
        "pretrain-missing-init-from",
        lambda w, t: ["pretrain", str(w.shards), "--out", str(t / "r"), "--init-from", str(t / "hf"), *SMALL],
    ),
    (
        "pretrain-init-from-truncated-export",
        lambda w, t: [
            "pretrain",
            str(w.shards),
            "--out",
            str(t / "r"),
            "--init-from",
            str(damaged_export(w, t, truncate, "model.safetensors")),
            *SMALL,
        ],
    ),
    (
        "pretrain-broken-config",
        lambda w, t: ["pretrain", str(w.shards), "--out", str(t / "r"), "--config", str(broken_toml(t)), *SMALL],
    ),
    (
        "pretrain-unknown-preset",
        lambda w, t: ["pretrain", str(w.shards), "--out", str(t / "r"), "--preset", "huge", *SMALL],
    ),
    (
        "pretrain-unknown-masking",
        lambda w, t: ["pretrain", str(w.shards), "--out", str(t / "r"), "--masking", "nope", *SMALL],
    ),
    (
        "pretrain-pmi-without-vocabulary",
        lambda w, t: [
            "pretrain",
            str(w.shards),
            "--out",
            str(t / "r"),
            "--masking",
            "pmi",
            "--preset",
            "tiny",
            "--steps",
            "2",
            *SMALL,
        ],
    ),
    (
        "pretrain-resume-metrics-not-utf8",
        lambda w, t: [
            "pretrain",
            str(w.shards),
            "--out",
            str(appended(copy(w.run, t / "r"), "metrics.jsonl", b"\xff\xfe\n")),
            "--resume",
            "--steps",
            "4",
            *SMALL,
        ],
    ),
    (
        "pretrain-resume-garbage-metrics",
        lambda w, t: [
            "pretrain",
            str(w.shards),
            "--out",
            str(run_with_garbage_metrics(w, t)),
            "--resume",
            "--steps",
            "4",
            *SMALL,
        ],
    ),
    ("pretrain-seed-negative", lambda w, t: ["pretrain", str(w.shards), "--out", str(t / "r"), "--seed", "-1", *SMALL]),
    (
        "pretrain-binary-config",
        lambda w, t: [
            "pretrain",
            str(w.shards),
            "--out",
            str(t / "r"),
            "--config",
            str(w.export / "model.safetensors"),
            *SMALL,
        ],
    ),
    (
        "pretrain-config-with-bom",
        lambda w, t: ["pretrain", str(w.shards), "--out", str(t / "r"), "--config", str(bom_toml(t)), *SMALL],
    ),
    (
        "pretrain-batch-larger-than-the-corpus",
        lambda w, t: [
            "pretrain",
            str(w.shards),
            "--out",
            str(t / "r"),
            *TINY_STEPS,
            "--batch-size",
            "1000000000000",
            *SMALL,
        ],
    ),
    (
        "pretrain-nproc-does-not-divide-the-batch",
        lambda w, t: [
            "pretrain",
            str(w.shards),
            "--out",
            str(t / "r"),
            *TINY_STEPS,
            "--nproc",
            "2",
            "--batch-size",
            "7",
            *SMALL,
        ],
    ),
    (
        "pretrain-resume-fewer-steps",
        lambda w, t: [
            "pretrain",
            str(w.shards),
            "--out",
            str(copy(w.run, t / "r")),
            "--resume",
            "--steps",
            "2",
            *SMALL,
        ],
    ),
    (
        "pretrain-eval-every-without-validation",
        lambda w, t: [
            "pretrain",
            str(write_tiny_shards(t / "s", valid=0)),
            "--out",
            str(t / "r"),
            *TINY_STEPS,
            "--batch-size",
            "8",
            "--set",
            "train.eval_every=2",
            *SMALL,
        ],
    ),
    # ---- export
    ("export-out-is-run", lambda w, t: ["export", str(copy(w.run, t / "r")), "--out", str(t / "r"), "--overwrite"]),
    (
        "export-out-inside-run",
        lambda w, t: ["export", str(copy(w.run, t / "r")), "--out", str(t / "r" / "hf"), "--overwrite"],
    ),
    ("export-out-exists", lambda w, t: ["export", str(w.run), "--out", str(existing(t / "hf", True))]),
    ("export-flipped-weights", lambda w, t: ["export", str(damaged_run(w, t, flip_last_byte)), "--out", str(t / "hf")]),
    (
        "export-truncated-state",
        lambda w, t: ["export", str(damaged_run(w, t, truncate, "state.pt")), "--out", str(t / "hf")],
    ),
    ("export-missing-run", lambda w, t: ["export", str(t / "nope"), "--out", str(t / "hf")]),
    ("export-not-a-run", lambda w, t: ["export", str(existing(t / "r", True)), "--out", str(t / "hf")]),
    # ---- inspect-masks
    ("inspect-masks-uniform-run", lambda w, t: ["inspect-masks", str(w.run), "--text", "w5 w6 w7"]),
    ("inspect-masks-missing-file", lambda w, t: ["inspect-masks", str(w.run), "--file", str(t / "nope.txt")]),
    (
        "inspect-masks-flipped-weights",
        lambda w, t: ["inspect-masks", str(damaged_run(w, t, flip_last_byte)), "--text", "w5"],
    ),
    (
        "inspect-masks-binary-file",
        lambda w, t: ["inspect-masks", str(w.run), "--file", str(newest_checkpoint(w.run) / "model.safetensors")],
    ),
    ("inspect-masks-not-gzip", lambda w, t: ["inspect-masks", str(w.run), "--file", str(existing(t / "x.txt.gz"))]),
    ("inspect-masks-file-is-a-folder", lambda w, t: ["inspect-masks", str(w.run), "--file", str(w.prep)]),
    # ---- finetune-glue
    (
        "finetune-glue-lrs-nan",
        lambda w, t: [
            "finetune-glue",
            "--task",
            "SST-2",
            "--checkpoint",
            str(w.run),
            "--data",
            str(w.glue),
            "--out",
            str(t / "g"),
            "--lrs",
            "nan",
            "--quick",
        ],
    ),
    (
        "finetune-glue-lrs-inf",
        lambda w, t: [
            "finetune-glue",
            "--task",
            "SST-2",
            "--checkpoint",
            str(w.run),
            "--data",
            str(w.glue),
            "--out",
            str(t / "g"),
            "--lrs",
            "1e-4,inf",
            "--quick",
        ],
    ),
    (
        "finetune-glue-unknown-task",
        lambda w, t: [
            "finetune-glue",
            "--task",
            "NOPE",
            "--checkpoint",
            str(w.run),
            "--data",
            str(w.glue),
            "--out",
            str(t / "g"),
            "--quick",
        ],
    ),
    (
        "finetune-glue-missing-data",
        lambda w, t: [
            "finetune-glue",
            "--task",
            "SST-2",
            "--checkpoint",
            str(w.run),
            "--data",
            str(t / "nope"),
            "--out",
            str(t / "g"),
            "--quick",
        ],
    ),
    (
        "finetune-glue-task-not-in-data",
        lambda w, t: [
            "finetune-glue",
            "--task",
            "RTE",
            "--checkpoint",
            str(w.run),
            "--data",
            str(w.glue),
            "--out",
            str(t / "g"),
            "--quick",
        ],
    ),
    (
        "finetune-glue-out-is-run",
        lambda w, t: [
            "finetune-glue",
            "--task",
            "SST-2",
            "--checkpoint",
            str(copy(w.run, t / "r")),
            "--data",
            str(w.glue),
            "--out",
            str(t / "r"),
            "--quick",
        ],
    ),
    (
        "finetune-glue-flipped-weights",
        lambda w, t: [
            "finetune-glue",
            "--task",
            "SST-2",
            "--checkpoint",
            str(damaged_run(w, t, flip_last_byte)),
            "--data",
            str(w.glue),
            "--out",
            str(t / "g"),
            "--quick",
        ],
    ),
    (
        "finetune-glue-bad-grid",
        lambda w, t: [
            "finetune-glue",
            "--task",
            "SST-2",
            "--checkpoint",
            str(w.run),
            "--data",
            str(w.glue),
            "--out",
            str(t / "g"),
            "--grid",
            "banana",
        ],
    ),
    # ---- probe
    (
        "probe-out-exists",
        lambda w, t: ["probe", str(w.run), "--data", str(w.glue), "--out", str(existing(t / "p.json"))],
    ),
    (
        "probe-out-inside-run",
        lambda w, t: ["probe", str(copy(w.run, t / "r")), "--data", str(w.glue), "--out", str(t / "r" / "probe.json")],
    ),
    (
        "probe-l2-nan",
        lambda w, t: ["probe", str(w.run), "--data", str(w.glue), "--out", str(t / "p.json"), "--l2", "nan"],
    ),
    (
        "probe-task-not-in-data",
        lambda w, t: ["probe", str(w.run), "--data", str(w.glue), "--out", str(t / "p.json"), "--task", "mrpc"],
    ),
    (
        "probe-flipped-weights",
        lambda w, t: [
            "probe",
            str(damaged_run(w, t, flip_last_byte)),
            "--data",
            str(w.glue),
            "--out",
            str(t / "p.json"),
        ],
    ),
    (
        "probe-seed-negative",
        lambda w, t: ["probe", str(w.run), "--data", str(w.glue), "--out", str(t / "p.json"), "--seed", "-1"],
    ),
    # ---- blimp
    (
        "blimp-truncated-export",
        lambda w, t: [
            "blimp",
            str(damaged_export(w, t, truncate, "model.safetensors")),
            "--data",
            str(w.blimp),
            "--out",
            str(t / "b.json"),
            "--no-progress",
        ],
    ),
    (
        "blimp-broken-export-config",
        lambda w, t: [
            "blimp",
            str(damaged_export(w, t, lambda p: p.write_text("{"), "config.json")),
            "--data",
            str(w.blimp),
            "--out",
            str(t / "b.json"),
            "--no-progress",
        ],
    ),
    (
        "blimp-export-without-tokenizer",
        lambda w, t: [
            "blimp",
            str(damaged_export(w, t, Path.unlink, "tokenizer.json")),
            "--data",
            str(w.blimp),
            "--out",
            str(t / "b.json"),
            "--no-progress",
        ],
    ),
    (
        "blimp-out-exists",
        lambda w, t: [
            "blimp",
            str(w.run),
            "--data",
            str(w.blimp),
            "--out",
            str(existing(t / "b.json")),
            "--no-progress",
        ],
    ),
    (
        "blimp-out-inside-run",
        lambda w, t: [
            "blimp",
            str(copy(w.run, t / "r")),
            "--data",
            str(w.blimp),
            "--out",
            str(t / "r" / "blimp.json"),
            "--no-progress",
        ],
    ),
    (
        "blimp-missing-data",
        lambda w, t: ["blimp", str(w.run), "--data", str(t / "nope"), "--out", str(t / "b.json"), "--no-progress"],
    ),
    (
        "blimp-unknown-paradigm",
        lambda w, t: [
            "blimp",
            str(w.run),
            "--data",
            str(w.blimp),
            "--out",
            str(t / "b.json"),
            "--paradigms",
            "nope",
            "--no-progress",
        ],
    ),
    (
        "blimp-unknown-method",
        lambda w, t: [
            "blimp",
            str(w.run),
            "--data",
            str(w.blimp),
            "--out",
            str(t / "b.json"),
            "--method",
            "nope",
            "--no-progress",
        ],
    ),
    (
        "blimp-identical-pair",
        lambda w, t: [
            "blimp",
            str(w.run),
            "--data",
            str(blimp_identical_pairs(w, t)),
            "--out",
            str(t / "b.json"),
            "--no-progress",
        ],
    ),
    (
        "blimp-reference-score-nan",
        lambda w, t: [
            "blimp",
            str(w.run),
            "--data",
            str(blimp_with_summary(w, t, "NaN")),
            "--out",
            str(t / "b.json"),
            "--no-progress",
        ],
    ),
    (
        "blimp-reference-score-a-percentage",
        lambda w, t: [
            "blimp",
            str(w.run),
            "--data",
            str(blimp_with_summary(w, t, "50.6")),
            "--out",
            str(t / "b.json"),
            "--no-progress",
        ],
    ),
    (
        "blimp-export-with-another-tokenizer",
        lambda w, t: [
            "blimp",
            str(w.run),
            str(damaged_export(w, t, lambda p: shutil.copy2(w.prep / "tokenizer.json", p), "tokenizer.json")),
            "--data",
            str(w.blimp),
            "--out",
            str(t / "b.json"),
            "--no-progress",
        ],
    ),
    (
        "blimp-export-weights-not-as-config-says",
        lambda w, t: [
            "blimp",
            str(w.run),
            str(
                damaged_export(
                    w,
                    t,
                    lambda p: p.write_text(json.dumps({**json.loads(p.read_text()), "intermediate_size": 8})),
                    "config.json",
                )
            ),
            "--data",
            str(w.blimp),
            "--out",
            str(t / "b.json"),
            "--no-progress",
        ],
    ),
    # ---- variance
    ("variance-one-mask", lambda w, t: ["variance", str(w.run), "--masks", "1"]),
    ("variance-no-sentences", lambda w, t: ["variance", str(w.run), "--sentences", "0"]),
    ("variance-flipped-weights", lambda w, t: ["variance", str(damaged_run(w, t, flip_last_byte))]),
    ("variance-missing-run", lambda w, t: ["variance", str(t / "nope")]),
    # ---- compare
    (
        "compare-out-is-a-file",
        lambda w, t: [
            "compare",
            str(w.shards),
            "--out",
            str(existing(t / "c")),
            "--preset",
            "tiny",
            "--steps",
            "2",
            *SMALL,
        ],
    ),
    (
        "compare-glue-data-missing",
        lambda w, t: [
            "compare",
            str(w.shards),
            "--out",
            str(t / "c"),
            "--preset",
            "tiny",
            "--steps",
            "2",
            "--glue-tasks",
            "rte",
            "--glue-data",
            str(t / "nope"),
            *SMALL,
        ],
    ),
    (
        "compare-pmi-without-vocabulary",
        lambda w, t: [
            "compare",
            str(w.shards),
            "--out",
            str(t / "c"),
            "--preset",
            "tiny",
            "--steps",
            "2",
            "--strategies",
            "uniform,pmi",
            "--seeds",
            "1",
            *SMALL,
        ],
    ),
    (
        "compare-unknown-strategy",
        lambda w, t: ["compare", str(w.shards), "--out", str(t / "c"), "--strategies", "nope", *SMALL],
    ),
    (
        "compare-out-is-shards",
        lambda w, t: [
            "compare",
            str(copy(w.shards, t / "s")),
            "--out",
            str(t / "s"),
            "--preset",
            "tiny",
            "--steps",
            "2",
            *SMALL,
        ],
    ),
    ("compare-zero-seeds", lambda w, t: ["compare", str(w.shards), "--out", str(t / "c"), "--seeds", "0", *SMALL]),
    (
        "compare-blimp-missing",
        lambda w, t: [
            "compare",
            str(w.shards),
            "--out",
            str(t / "c"),
            "--preset",
            "tiny",
            "--steps",
            "2",
            "--blimp",
            str(t / "nope"),
            *SMALL,
        ],
    ),
    (
        "compare-step-costs-missing",
        lambda w, t: [
            "compare",
            str(w.shards),
            "--out",
            str(t / "c"),
            "--preset",
            "tiny",
            "--time-budget",
            "2s",
            "--step-costs",
            str(t / "nope.json"),
            *SMALL,
        ],
    ),
    (
        "compare-step-costs-not-json",
        lambda w, t: [
            "compare",
            str(w.shards),
            "--out",
            str(t / "c"),
            "--preset",
            "tiny",
            "--time-budget",
            "2s",
            "--step-costs",
            str(existing(t / "costs.json")),
            *SMALL,
        ],
    ),
    (
        "compare-step-costs-without-budget",
        lambda w, t: [
            "compare",
            str(w.shards),
            "--out",
            str(t / "c"),
            "--preset",
            "tiny",
            "--steps",
            "2",
            "--strategies",
            "uniform",
            "--step-costs",
            str(step_costs(t, "uniform")),
            *SMALL,
        ],
    ),
    (
        "compare-step-costs-lacks-an-arm",
        lambda w, t: [
            "compare",
            str(w.shards),
            "--out",
            str(t / "c"),
            "--preset",
            "tiny",
            "--time-budget",
            "2s",
            "--strategies",
            "uniform,uniform@0.3",
            "--step-costs",
            str(step_costs(t, "uniform")),
            *SMALL,
        ],
    ),
    (
        "compare-gpus-without-cuda",
        lambda w, t: [
            "compare",
            str(w.shards),
            "--out",
            str(t / "c"),
            "--preset",
            "tiny",
            "--steps",
            "2",
            "--gpus",
            "2",
            *SMALL,
        ],
    ),
    (
        "compare-gpus-per-run-without-gpus",
        lambda w, t: [
            "compare",
            str(w.shards),
            "--out",
            str(t / "c"),
            "--preset",
            "tiny",
            "--steps",
            "2",
            "--gpus-per-run",
            "2",
            *SMALL,
        ],
    ),
    (
        "compare-gpus-and-engine-dask",
        lambda w, t: [
            "compare",
            str(w.shards),
            "--out",
            str(t / "c"),
            "--preset",
            "tiny",
            "--steps",
            "2",
            "--gpus",
            "2",
            "--engine",
            "dask",
            *SMALL,
        ],
    ),
    (
        "compare-engine-address-not-a-url",
        lambda w, t: [
            "compare",
            str(w.shards),
            "--out",
            str(t / "c"),
            "--preset",
            "tiny",
            "--steps",
            "2",
            "--engine",
            "dask",
            "--engine-address",
            "notaurl",
            *SMALL,
        ],
    ),
    # ---- plot
    ("plot-missing-run", lambda w, t: ["plot", str(t / "nope"), "--out", str(t / "p.png")]),
    ("plot-unknown-format", lambda w, t: ["plot", str(w.run), "--out", str(t / "p.txt")]),
    ("plot-out-inside-run", lambda w, t: ["plot", str(copy(w.run, t / "r")), "--out", str(t / "r" / "metrics.jsonl")]),
    ("plot-nothing-finite", lambda w, t: ["plot", str(run_with_nan_metrics(w, t)), "--out", str(t / "p.png")]),
    ("plot-garbage-metrics", lambda w, t: ["plot", str(run_with_garbage_metrics(w, t)), "--out", str(t / "p.png")]),
    ("plot-nothing-a-number", lambda w, t: ["plot", str(run_with_list_metrics(w, t)), "--out", str(t / "p.png")]),
    # ---- quickstart
    ("quickstart-negative-steps", lambda w, t: ["quickstart", "--out", str(t / "q"), "--steps", "-1"]),
    ("quickstart-lr-nan", lambda w, t: ["quickstart", "--out", str(t / "q"), "--set", "optim.lr=nan"]),
    ("quickstart-unknown-masking", lambda w, t: ["quickstart", "--out", str(t / "q"), "--masking", "nope"]),
    # ---- the overwrite rule (docs/reliability.md): broad paths, what mapnet did not write, links, checkpoints
    ("preprocess-out-dot-overwrite", lambda w, t: ["preprocess", str(w.text), "--out", ".", "--overwrite"]),
    ("preprocess-out-empty-overwrite", lambda w, t: ["preprocess", str(w.text), "--out", "", "--overwrite"]),
    (
        "preprocess-out-users-folder-overwrite",
        lambda w, t: ["preprocess", str(w.text), "--out", str(users_folder(t / "o")), "--overwrite"],
    ),
    (
        "preprocess-out-corpus-with-users-file",
        lambda w, t: ["preprocess", str(w.text), "--out", str(with_users_file(copy(w.prep, t / "o"))), "--overwrite"],
    ),
    (
        "preprocess-out-shards-overwrite",
        lambda w, t: ["preprocess", str(w.text), "--out", str(copy(w.shards, t / "o")), "--overwrite"],
    ),
    ("preprocess-input-is-a-corpus", lambda w, t: ["preprocess", str(copy(w.prep, t / "in")), "--out", str(t / "o")]),
    (
        "preprocess-input-holds-a-corpus",
        lambda w, t: ["preprocess", str(_text_and_corpus(w, t)), "--out", str(t / "o")],
    ),
    ("shard-out-dot-overwrite", lambda w, t: ["shard", str(w.prep), "--out", ".", "--overwrite", *SHARDABLE]),
    ("shard-out-parent-overwrite", lambda w, t: ["shard", str(w.prep), "--out", "..", "--overwrite", *SHARDABLE]),
    (
        "shard-out-users-folder-overwrite",
        lambda w, t: ["shard", str(w.prep), "--out", str(users_folder(t / "s")), "--overwrite", *SHARDABLE],
    ),
    (
        "shard-out-shards-with-users-file",
        lambda w, t: [
            "shard",
            str(w.prep),
            "--out",
            str(with_users_file(copy(w.shards, t / "s"), "pmi-notes.tsv")),
            "--overwrite",
            *SHARDABLE,
        ],
    ),
    (
        "shard-out-link-overwrite",
        lambda w, t: [
            "shard",
            str(w.prep),
            "--out",
            str(symlink_to(copy(w.shards, t / "s"), t / "link")),
            "--overwrite",
            *SHARDABLE,
        ],
    ),
    (
        "pmi-vocab-out-corpus-settings-overwrite",
        lambda w, t: [
            "pmi-vocab",
            str(w.prep),
            "--out",
            str(copy(w.prep, t / "c") / "settings.toml"),
            "--overwrite",
            "--no-progress",
        ],
    ),
    (
        "pmi-vocab-out-users-file-overwrite",
        lambda w, t: ["pmi-vocab", str(w.prep), "--out", str(existing(t / "pmi.tsv")), "--overwrite", "--no-progress"],
    ),
    ("pretrain-out-dot", lambda w, t: ["pretrain", str(w.shards), "--out", ".", "--preset", "tiny", *SMALL]),
    ("pretrain-out-empty", lambda w, t: ["pretrain", str(w.shards), "--out", "", "--preset", "tiny", *SMALL]),
    (
        "pretrain-out-inside-checkpoints",
        lambda w, t: ["pretrain", str(w.shards), "--out", str(newest_checkpoint(copy(w.run, t / "r")) / "r2"), *SMALL],
    ),
    ("export-out-dot-overwrite", lambda w, t: ["export", str(w.run), "--out", ".", "--overwrite"]),
    (
        "export-out-a-sibling-checkpoint",
        lambda w, t: ["export", str(w.run), "--out", str(newest_checkpoint(copy(w.run, t / "r"))), "--overwrite"],
    ),
    (
        "export-out-export-with-users-readme",
        lambda w, t: ["export", str(w.run), "--out", str(with_users_file(copy(w.export, t / "hf"))), "--overwrite"],
    ),
    (
        "export-out-users-folder-overwrite",
        lambda w, t: ["export", str(w.run), "--out", str(users_folder(t / "hf")), "--overwrite"],
    ),
    (
        "export-out-link-overwrite",
        lambda w, t: [
            "export",
            str(w.run),
            "--out",
            str(symlink_to(copy(w.export, t / "hf"), t / "link")),
            "--overwrite",
        ],
    ),
    (
        "finetune-glue-out-inside-checkpoints",
        lambda w, t: [
            "finetune-glue",
            "--task",
            "SST-2",
            "--checkpoint",
            str(w.run),
            "--data",
            str(w.glue),
            "--out",
            str(newest_checkpoint(copy(w.run, t / "r")) / "ft"),
            "--quick",
        ],
    ),
    (
        "finetune-glue-out-home",
        lambda w, t: [
            "finetune-glue",
            "--task",
            "SST-2",
            "--checkpoint",
            str(w.run),
            "--data",
            str(w.glue),
            "--out",
            str(Path.home()),
            "--quick",
        ],
    ),
    (
        "probe-out-users-file-overwrite",
        lambda w, t: ["probe", str(w.run), "--data", str(w.glue), "--out", str(existing(t / "p.json")), "--overwrite"],
    ),
    (
        "blimp-out-users-file-overwrite",
        lambda w, t: [
            "blimp",
            str(w.run),
            "--data",
            str(w.blimp),
            "--out",
            str(existing(t / "b.json")),
            "--overwrite",
            "--no-progress",
        ],
    ),
    (
        "blimp-out-link-overwrite",
        lambda w, t: [
            "blimp",
            str(w.run),
            "--data",
            str(w.blimp),
            "--out",
            str(symlink_to(existing(t / "b.json"), t / "link.json")),
            "--overwrite",
            "--no-progress",
        ],
    ),
    (
        "compare-out-root",
        lambda w, t: ["compare", str(w.shards), "--out", "/", "--preset", "tiny", "--steps", "2", *SMALL],
    ),
    (
        "plot-out-users-image-overwrite",
        lambda w, t: ["plot", str(w.run), "--out", str(existing(t / "p.png")), "--overwrite"],
    ),
    ("plot-out-dot", lambda w, t: ["plot", str(w.run), "--out", ".", "--overwrite"]),
    ("quickstart-out-dot-overwrite", lambda w, t: ["quickstart", "--out", ".", "--overwrite"]),
    ("quickstart-out-parent-overwrite", lambda w, t: ["quickstart", "--out", "..", "--overwrite"]),
    ("quickstart-out-empty-overwrite", lambda w, t: ["quickstart", "--out", "", "--overwrite"]),
    (
        "quickstart-out-users-folder-overwrite",
        lambda w, t: ["quickstart", "--out", str(users_folder(t / "q")), "--overwrite"],
    ),
    (
        "quickstart-out-with-users-notes-overwrite",
        lambda w, t: ["quickstart", "--out", str(quickstart_folder(w, t)), "--overwrite"],
    ),
    (
        "quickstart-out-run-with-users-file-overwrite",
        lambda w, t: ["quickstart", "--out", str(quickstart_folder(w, t, "run/notes.txt")), "--overwrite"],
    ),
    # ---- config
    ("config-lr-nan", lambda w, t: ["config", "show", "--set", "optim.lr=nan"]),
    ("config-lr-minus-inf", lambda w, t: ["config", "show", "--set", "optim.lr=-inf", "--set", "train.steps=-1"]),
    ("config-unknown-preset", lambda w, t: ["config", "show", "--preset", "huge"]),
    ("config-missing-file", lambda w, t: ["config", "show", "--config", str(t / "nope.toml")]),
    ("config-binary-config", lambda w, t: ["config", "show", "--config", str(w.export / "model.safetensors")]),
    ("config-config-with-bom", lambda w, t: ["config", "show", "--config", str(bom_toml(t))]),
    ("config-seed-negative", lambda w, t: ["config", "show", "--set", "train.seed=-1"]),
    ("config-integer-beyond-64-bits", lambda w, t: ["config", "show", "--set", "train.steps=9223372036854775808"]),
]


def _text_and_corpus(w: World, t: Path) -> Path:
    """A folder of raw text that also holds an earlier preprocess output (it used to be read as text)."""
    folder = t / "in"
    folder.mkdir()
    copy(w.text, folder / "book.txt")
    copy(w.prep, folder / "corpus")
    return folder


def _flipped_shard(w: World, t: Path) -> Path:
    shards = copy(w.shards, t / "s")
    flip_last_byte(sorted(shards.glob("train*.arrow"))[0])
    return shards


def tree_digest(root: Path) -> dict[str, str]:
    """relative path -> sha256 (or "link -> target" / "dir") of everything under root, links not followed."""
    out = {}
    for path in sorted(root.rglob("*")):
        rel = str(path.relative_to(root))
        if path.is_symlink():
            out[rel] = f"link -> {path.readlink()}"
        elif path.is_dir():
            out[rel] = "dir"
        else:
            out[rel] = hashlib.sha256(path.read_bytes()).hexdigest()
    return out


def one_line_failure(res) -> str:
    """The message the user sees, asserting it is one line and not a traceback."""
    assert res.exit_code != 0, f"exit 0:\n{res.output}"
    if isinstance(res.exception, MapnetError):
        text = str(res.exception)
        assert text and "\n" not in text, text
        return text
    # click's usage errors: SystemExit(2) with one "Error: ..." line (after "Usage:" and "Try ...")
    assert isinstance(res.exception, SystemExit), f"traceback: {res.exception!r}\n{res.output}"
    errors = [line for line in res.output.splitlines() if line.startswith("Error:")]
    assert len(errors) == 1, res.output
    assert "Traceback" not in res.output, res.output
    return errors[0]


@pytest.mark.parametrize("name,make", CASES, ids=[c[0] for c in CASES])
def test_a_fault_is_one_line_nonzero_and_touches_nothing(name, make, world, tmp_path, monkeypatch):
    case = tmp_path / "case"
    case.mkdir()
    monkeypatch.chdir(case)  # `--out .`, `''` and `..` aim at the case folder and its parent
    argv = make(world, case)
    world_before, case_before = tree_digest(world.root), tree_digest(case)
    res = CliRunner().invoke(app, argv)
    message = one_line_failure(res)
    assert tree_digest(world.root) == world_before, f"{name} changed the world's files ({message})"
    after = tree_digest(case)
    assert after == case_before, (
        f"{name} changed, added or removed files in its folder: "
        f"{sorted(set(after.items()) ^ set(case_before.items()))} ({message})"
    )


def test_the_sweep_is_as_large_as_reliability_md_says():
    """docs/reliability.md reports the sweep's size; a case added or removed must update it."""
    text = (Path(__file__).resolve().parents[1] / "docs" / "reliability.md").read_text(encoding="utf-8")
    commands = {argv_command(make) for _, make in CASES}
    assert f"{len(CASES)} bad inputs and faults" in text, len(CASES)
    assert f"across all {len(commands)} subcommands" in text, sorted(commands)
    per_command = Counter(argv_command(make) for _, make in CASES).most_common()
    listed = ", ".join(f"{command} {count}" for command, count in per_command)
    assert f"({listed})" in " ".join(text.split()), listed


def argv_command(make) -> str:
    # The command a case runs, without running it: its id's prefix, which CASES keep equal to the command.
    name = next(n for n, m in CASES if m is make)
    return next(cmd for cmd in COMMAND_NAMES if name.startswith(cmd + "-"))


COMMAND_NAMES = (
    "preprocess",
    "shard",
    "pmi-vocab",
    "pretrain",
    "export",
    "inspect-masks",
    "finetune-glue",
    "probe",
    "blimp",
    "variance",
    "compare",
    "plot",
    "quickstart",
    "config",
)
