"""`preprocess` and `shard --engine dask`: the same bytes as the local pool for 1, 2 and 3 tasks, resumable per
task, one-line errors. On real text (three small Project Gutenberg books) and a Dask cluster started here, in
this process (threads, localhost only: no scheduler to reach, no network)."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from mapnet_cli.cli import app
from mapnet_cli.data import preprocess_tasks, shard_tasks
from mapnet_cli.data.engine import balanced_groups
from mapnet_cli.data.preprocess import run_preprocess
from mapnet_cli.data.shard_writer import run_shard
from mapnet_cli.errors import MapnetError
from mapnet_cli.settings import resolve

BOOKS = (
    "gutenberg/potter-the-tailor-of-gloucester-pg14868.txt.gz",
    "gutenberg/carroll-feeding-the-mind-pg35535.txt.gz",
    "gutenberg/hawthorne-fire-worship-pg9223.txt.gz",
)
# Parts of 150 sentences: part boundaries fall inside tasks and between them, so the merge is exercised.
BASE = [
    "preprocess.vocab_size=600",
    "preprocess.sentences_per_part=150",
    "preprocess.strip_gutenberg=true",
    "shard.max_seq_len=64",
    "shard.valid_fraction=0.2",
    "shard.sequences_per_file=100",
]


def settings(*extra: str):
    return resolve(None, None, [*BASE, *extra])


def inputs(shared_data: Path) -> list[Path]:
    return [shared_data / b for b in BOOKS]


def manifest(folder: Path) -> dict:
    m = json.loads((folder / "manifest.json").read_text(encoding="utf-8"))
    m.pop("created")  # the one field that is the time of the run
    return m


def assert_same_output(a: Path, b: Path) -> None:
    """Every file byte for byte, the manifest but for its time stamp; settings.toml records how it ran."""
    files = sorted(p.relative_to(a) for p in a.rglob("*") if p.is_file())
    assert files == sorted(p.relative_to(b) for p in b.rglob("*") if p.is_file())
    for rel in files:
        if rel.name not in ("manifest.json", "settings.toml"):
            assert (a / rel).read_bytes() == (b / rel).read_bytes(), rel
    assert manifest(a) == manifest(b)


@pytest.fixture(scope="module")
def pool_prep(tmp_path_factory, shared_data) -> Path:
    """The local process pool's output (2 forked workers): the reference. Built before the cluster starts."""
    out = tmp_path_factory.mktemp("engine") / "pool"
    run_preprocess(inputs(shared_data), out, settings("preprocess.workers=2"))
    assert len(manifest(out)["parts"]) >= 4
    return out


@pytest.fixture(scope="module")
def cluster(pool_prep):
    from distributed import LocalCluster

    before = os.environ.get("TOKENIZERS_PARALLELISM")  # shard tasks set it, here in this process
    with LocalCluster(n_workers=2, processes=False, threads_per_worker=1, dashboard_address=":0") as c:
        yield c.scheduler_address
    if before is None:
        os.environ.pop("TOKENIZERS_PARALLELISM", None)
    else:
        os.environ["TOKENIZERS_PARALLELISM"] = before


def dask_preprocess(shared_data, out, address, *extra):
    return run_preprocess(
        inputs(shared_data), out, settings("preprocess.workers=2", "engine.name=dask", *extra), engine_address=address
    )


def test_preprocess_gives_the_pools_bytes_for_1_2_and_3_tasks_and_in_process(pool_prep, cluster, shared_data, tmp_path):
    for tasks in (1, 2, 3, 7):  # 7: more tasks than files, so each book is cut into byte ranges
        result = dask_preprocess(shared_data, tmp_path / f"t{tasks}", cluster, f"engine.tasks={tasks}")
        assert (result.engine, result.tasks_resumed) == ("dask", 0)
        assert result.tasks == tasks if tasks <= 3 else result.tasks > 3
        assert_same_output(pool_prep, tmp_path / f"t{tasks}")
        assert not (tmp_path / f".t{tasks}.tasks").exists()  # removed once published
    run_preprocess(inputs(shared_data), tmp_path / "inproc", settings("preprocess.workers=1"))
    in_process = manifest(tmp_path / "inproc")
    assert in_process["settings"].pop("workers") == 1
    reference = manifest(pool_prep)
    reference["settings"].pop("workers")
    assert in_process == reference
    assert (tmp_path / "inproc" / "tokenizer.json").read_bytes() == (pool_prep / "tokenizer.json").read_bytes()


def test_relative_paths_and_skipped_files_are_recorded_as_in_process(cluster, shared_data, tmp_path, monkeypatch):
    """Tasks read absolute paths (a worker's working folder is not the command's); the manifest keeps the
    paths as given, and a binary file found in a folder is skipped and counted the same."""
    (tmp_path / "in").mkdir()
    for book in BOOKS[:2]:
        (tmp_path / "in" / Path(book).name).symlink_to(shared_data / book)
    (tmp_path / "in" / "zz.bin").write_bytes(b"\0\1\2" * 100)
    monkeypatch.chdir(tmp_path)
    run_preprocess(["in"], "inproc", settings("preprocess.workers=1"))
    run_preprocess(["in"], "dask", settings("preprocess.workers=1", "engine.name=dask"), engine_address=cluster)
    assert manifest(tmp_path / "dask")["skipped_binary_files"] == ["in/zz.bin"]
    assert [i["path"] for i in manifest(tmp_path / "dask")["inputs"]] == sorted(f"in/{Path(b).name}" for b in BOOKS[:2])
    assert_same_output(tmp_path / "inproc", tmp_path / "dask")


def test_one_file_cut_into_parts_gives_its_bytes_and_counts(cluster, shared_data, tmp_path):
    """One plain-text file, many documents, invalid UTF-8 and over-long paragraphs spread through it, cut
    into 1 to 5 byte ranges: the same parts and the same counts (pieces cut, invalid bytes) as in-process."""
    import gzip

    text = gzip.decompress((shared_data / BOOKS[1]).read_bytes())
    paragraphs = text.replace(b"\r\n", b"\n").split(b"\n\n")
    chunks = []
    for i, para in enumerate(paragraphs):
        if i % 7 == 3:
            para += b" caf\xe9 \xff"  # invalid UTF-8, replaced and counted
        if i % 11 == 5:
            para = b" ".join([para] * 12)  # longer than preprocess.max_chunk_chars: cut into pieces
        chunks.append(para)
    (tmp_path / "one.txt").write_bytes(b"\n\n".join(chunks))
    extra = ("preprocess.max_chunk_chars=1000", "preprocess.workers=1")
    run_preprocess([tmp_path / "one.txt"], tmp_path / "inproc", settings(*extra))
    counts = manifest(tmp_path / "inproc")["counts"]
    assert counts["invalid_utf8_replaced"] > 0 and counts["chunks_cut"] > 0
    for tasks in (2, 3, 5):
        result = run_preprocess(
            [tmp_path / "one.txt"],
            tmp_path / f"t{tasks}",
            settings(*extra, "engine.name=dask", f"engine.tasks={tasks}"),
            engine_address=cluster,
        )
        assert result.tasks == tasks
        assert_same_output(tmp_path / "inproc", tmp_path / f"t{tasks}")


def test_an_interrupted_preprocess_goes_on_from_its_finished_tasks(
    pool_prep, cluster, shared_data, tmp_path, monkeypatch
):
    started: list[int] = []

    def task_1_dies(index: int) -> None:
        started.append(index)
        if index == 1:
            raise RuntimeError("worker lost")

    monkeypatch.setattr(preprocess_tasks, "before_task", task_1_dies)
    out = tmp_path / "prep"
    with pytest.raises(
        MapnetError, match=r"preprocess task 1 failed after 0 retries: RuntimeError: worker lost; .*same command again"
    ):
        dask_preprocess(shared_data, out, cluster, "engine.tasks=3", "engine.retries=0")
    assert not out.exists() and not list(tmp_path.glob(".prep.*.tmp-*"))  # nothing half-published
    assert (tmp_path / ".prep.tasks" / "task-00000.json").is_file()
    assert not (tmp_path / ".prep.tasks" / "task-00001.json").exists()

    started.clear()
    monkeypatch.setattr(preprocess_tasks, "before_task", started.append)
    result = dask_preprocess(shared_data, out, cluster, "engine.tasks=3", "engine.retries=0")
    assert 0 not in started and 1 in started  # the finished task was not run again
    # (task 2 may have finished in the first run, found done by the driver or by itself, or been cancelled)
    assert result.tasks_resumed >= 1
    assert_same_output(pool_prep, out)


def test_a_failed_task_is_retried_by_the_engine(pool_prep, cluster, shared_data, tmp_path, monkeypatch):
    started: list[int] = []

    def dies_once(index: int) -> None:
        started.append(index)
        if index == 1 and started.count(1) == 1:
            raise RuntimeError("worker lost")

    monkeypatch.setattr(preprocess_tasks, "before_task", dies_once)
    dask_preprocess(shared_data, tmp_path / "prep", cluster, "engine.tasks=2", "engine.retries=1")
    assert sorted(started) == [0, 1, 1]
    assert_same_output(pool_prep, tmp_path / "prep")


def test_bad_input_in_a_task_is_one_line_at_once_not_retried(pool_prep, cluster, shared_data, tmp_path, monkeypatch):
    started: list[int] = []

    def bad_input(index: int) -> None:
        started.append(index)
        if index == 1:
            raise MapnetError("part 1: not UTF-8 text")  # what a task says of bad input: every retry would too

    monkeypatch.setattr(preprocess_tasks, "before_task", bad_input)
    with pytest.raises(MapnetError) as caught:
        dask_preprocess(shared_data, tmp_path / "prep", cluster, "engine.tasks=2", "engine.retries=2")
    assert str(caught.value) == "part 1: not UTF-8 text" and started.count(1) == 1


def test_a_finished_task_of_other_settings_is_run_again(pool_prep, cluster, shared_data, tmp_path, monkeypatch):
    """An interrupted run left task 0 done with other settings: the next command, with these, does not reuse it."""

    def task_1_dies(index: int) -> None:
        if index == 1:
            raise RuntimeError("worker lost")

    monkeypatch.setattr(preprocess_tasks, "before_task", task_1_dies)
    out = tmp_path / "prep"
    with pytest.raises(MapnetError, match="preprocess task 1 failed"):
        dask_preprocess(shared_data, out, cluster, "engine.tasks=2", "engine.retries=0", "preprocess.lowercase=false")
    assert (tmp_path / ".prep.tasks" / "task-00000.json").is_file()
    started: list[int] = []
    monkeypatch.setattr(preprocess_tasks, "before_task", started.append)
    result = dask_preprocess(shared_data, out, cluster, "engine.tasks=2")
    assert sorted(started) == [0, 1] and result.tasks_resumed == 0
    assert_same_output(pool_prep, out)


def test_the_tokenizer_sample_is_the_same_whatever_ran(pool_prep, cluster, shared_data, tmp_path):
    sample = "preprocess.tokenizer_sample_bytes=40000"
    run_preprocess(inputs(shared_data), tmp_path / "inproc", settings("preprocess.workers=1", sample))
    dask_preprocess(shared_data, tmp_path / "dask", cluster, "engine.tasks=3", sample)
    tok = (tmp_path / "dask" / "tokenizer.json").read_bytes()
    assert tok == (tmp_path / "inproc" / "tokenizer.json").read_bytes()
    assert tok != (pool_prep / "tokenizer.json").read_bytes()  # trained on less than all the sentences
    assert not (tmp_path / "dask" / "tokenizer-sample.txt").exists()


def test_the_merge_cuts_parts_where_the_local_writer_does_whatever_the_block_size(pool_prep, tmp_path):
    """The pool's parts, concatenated, are a task file: merged back (in blocks that cut documents anywhere)
    they give the same part files and counts."""
    import hashlib

    from mapnet_cli.data.preprocess import PartWriter

    m = manifest(pool_prep)
    text = b"".join((pool_prep / p["name"]).read_bytes() for p in m["parts"])
    (tmp_path / "task.txt").write_bytes(text)
    for block in (97, 4096, 1 << 20):
        writer = PartWriter(tmp_path / f"b{block}" / "sentences", 150)
        preprocess_tasks._merge(tmp_path / "task.txt", {"sha256": hashlib.sha256(text).hexdigest()}, writer, block)
        writer.close()
        assert writer.parts == m["parts"]
        assert (writer.documents, writer.sentences, writer.words) == (
            m["counts"]["documents"],
            m["counts"]["sentences"],
            m["counts"]["words"],
        )
        for p in m["parts"]:
            assert (tmp_path / f"b{block}" / p["name"]).read_bytes() == (pool_prep / p["name"]).read_bytes()
    with pytest.raises(MapnetError, match="does not match its task record"):
        preprocess_tasks._merge(
            tmp_path / "task.txt", {"sha256": "0" * 64}, PartWriter(tmp_path / "x" / "sentences", 150)
        )


# ---------------------------------------------------------------- shard
@pytest.fixture(scope="module")
def pool_shards(pool_prep) -> Path:
    out = pool_prep.parent / "pool-shards"
    run_shard(pool_prep, out, settings("shard.workers=1"))
    return out


def test_shard_gives_the_same_bytes_for_1_2_and_3_tasks(pool_prep, pool_shards, cluster, tmp_path):
    for tasks in (1, 2, 3):
        summary = run_shard(
            pool_prep,
            tmp_path / f"s{tasks}",
            settings("shard.workers=1", "engine.name=dask", f"engine.tasks={tasks}"),
            engine_address=cluster,
        )
        assert (summary["engine"], summary["tasks"], summary["tasks_resumed"]) == ("dask", tasks, 0)
        assert_same_output(pool_shards, tmp_path / f"s{tasks}")
        assert not (tmp_path / f".s{tasks}.tasks").exists()


def test_an_interrupted_shard_goes_on_from_its_finished_tasks(pool_prep, pool_shards, cluster, tmp_path, monkeypatch):
    started: list[int] = []

    def task_2_dies(index: int) -> None:
        started.append(index)
        if index == 2:
            raise RuntimeError("worker lost")

    monkeypatch.setattr(shard_tasks, "before_task", task_2_dies)
    s = settings("shard.workers=1", "engine.name=dask", "engine.tasks=3", "engine.retries=0")
    with pytest.raises(MapnetError, match="shard task 2 failed"):
        run_shard(pool_prep, tmp_path / "s", s, engine_address=cluster)
    assert not (tmp_path / "s").exists()
    started.clear()
    monkeypatch.setattr(shard_tasks, "before_task", started.append)
    summary = run_shard(pool_prep, tmp_path / "s", s, engine_address=cluster)
    assert started == [2] and summary["tasks_resumed"] == 2
    assert_same_output(pool_shards, tmp_path / "s")


# ---------------------------------------------------------------- the command line
def test_help_lists_the_engines_and_a_missing_extra_is_one_line(tmp_path, shared_data, monkeypatch):
    runner = CliRunner()
    for command in ("preprocess", "shard"):
        help_text = runner.invoke(app, [command, "--help"], terminal_width=200).output
        assert "--engine" in help_text and "<local|dask>" in help_text and "--tasks" in help_text
    monkeypatch.setitem(sys.modules, "distributed", None)  # as if the extra were not installed
    result = runner.invoke(
        app, ["preprocess", str(shared_data / BOOKS[0]), "--out", str(tmp_path / "p"), "--engine", "dask"]
    )
    assert isinstance(result.exception, MapnetError) and "\n" not in str(result.exception)
    assert "pip install 'mapnet[distributed]'" in str(result.exception)
    assert not (tmp_path / "p").exists() and not (tmp_path / ".p.tasks").exists()
    result = runner.invoke(
        app,
        [
            "preprocess",
            str(shared_data / BOOKS[0]),
            "--out",
            str(tmp_path / "p"),
            "--engine-address",
            "tcp://127.0.0.1:8786",
        ],
    )
    assert isinstance(result.exception, MapnetError) and "--engine-address needs --engine dask" in str(result.exception)


@pytest.mark.parametrize("command", ["preprocess", "shard"])
@pytest.mark.parametrize(
    "address, env",
    [
        ("notaurl", None),
        ("tcp://", None),
        ("tcp://head", None),
        ("ftp://head:8786", None),
        ("tcp://head:99999", None),
        (None, "garbage"),
    ],
)
def test_a_malformed_scheduler_address_is_one_line_before_any_work(
    command, address, env, pool_prep, shared_data, tmp_path, monkeypatch
):
    """`--engine-address notaurl`, `shard --engine-address tcp://` and DASK_SCHEDULER_ADDRESS=garbage were 78-85-line
    tracebacks from inside Dask's Client(); now one line saying where the address came from and the form expected."""
    if env is None:
        monkeypatch.delenv("DASK_SCHEDULER_ADDRESS", raising=False)
    else:
        monkeypatch.setenv("DASK_SCHEDULER_ADDRESS", env)
    given = str(shared_data / BOOKS[0]) if command == "preprocess" else str(pool_prep)
    argv = [command, given, "--out", str(tmp_path / "o"), "--engine", "dask"]
    result = CliRunner().invoke(app, argv + (["--engine-address", address] if address else []))
    assert isinstance(result.exception, MapnetError), result.output
    text = str(result.exception)
    where = f"--engine-address {address!r}" if address else f"DASK_SCHEDULER_ADDRESS={env!r}"
    assert text.startswith(f"{where} is not a Dask scheduler address: ") and "tcp://HOST:PORT" in text, text
    assert sorted(p.name for p in tmp_path.iterdir()) == []


@pytest.mark.parametrize("command", ["preprocess", "shard"])
def test_a_scheduler_out_of_reach_is_one_line_and_leaves_no_folder(
    command, pool_prep, shared_data, tmp_path, monkeypatch
):
    """A well-formed address nobody listens at: one line (was Dask's traceback for anything but OSError), and the
    tasks folder is made only once the scheduler answered (it was left behind, empty)."""
    import socket

    from mapnet_cli.data import engine

    with socket.socket() as free:  # a port nothing listens on once this closes
        free.bind(("127.0.0.1", 0))
        port = free.getsockname()[1]
    monkeypatch.setattr(engine, "CONNECT_TIMEOUT", "1s")
    given = str(shared_data / BOOKS[0]) if command == "preprocess" else str(pool_prep)
    result = CliRunner().invoke(
        app,
        [
            command,
            given,
            "--out",
            str(tmp_path / "o"),
            "--engine",
            "dask",
            "--engine-address",
            f"tcp://127.0.0.1:{port}",
        ],
    )
    assert isinstance(result.exception, MapnetError), result.output
    assert str(result.exception).startswith(f"cannot reach the Dask scheduler at tcp://127.0.0.1:{port} (")
    assert sorted(p.name for p in tmp_path.iterdir()) == []


def test_balanced_groups_are_contiguous_and_at_most_the_tasks_asked():
    assert balanced_groups([5, 5, 5], 0) == [range(0, 1), range(1, 2), range(2, 3)]
    assert balanced_groups([5, 5, 5], 7) == [range(0, 1), range(1, 2), range(2, 3)]
    assert balanced_groups([1, 1, 1, 1], 2) == [range(0, 2), range(2, 4)]
    assert balanced_groups([100, 1, 1, 1], 2) == [range(0, 1), range(1, 4)]
    for sizes in ([3, 9, 1, 4, 4, 8, 2], [0, 0, 0], [1] * 10):
        for tasks in range(1, 9):
            groups = balanced_groups(sizes, tasks)
            assert [i for g in groups for i in g] == list(range(len(sizes))) and 1 <= len(groups) <= tasks
