"""mapnet_export.json has one reader and one rule (issue 44): a damaged record is the same one-line error in
`preprocess --tokenizer` and in `blimp`, never "an old export"; only a field an old export never wrote keeps its
documented meaning when absent. Real folders: the tiny run exported by `mapnet export`, and a BPE tokenizer
written into a folder as export writes it (preprocess reuses BPE and WordPiece only)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from mapnet_cli.data.bpe import save_tokenizer, train_tokenizer
from mapnet_cli.data.export_record import RECORD, read_export_record
from mapnet_cli.data.preprocess import run_preprocess
from mapnet_cli.errors import MapnetError
from mapnet_cli.evaluation.blimp.models import find_targets
from mapnet_cli.export import cleaning_record, export, write_tokenizer
from mapnet_cli.settings import Settings, resolve

PAPER = Settings().preprocess
CLEANING = cleaning_record(PAPER)
DAMAGED = {
    "not-json": b'{"step": 3, "cleaning": {',
    "not-utf8": b'{"step": 3, "source": "\xff\xfe"}',
    "an-array": b"[1, 2]",
    "cleaning-a-list": json.dumps({"cleaning": ["lowercase"]}).encode(),
    "cleaning-null": json.dumps({"cleaning": None}).encode(),
    "cleaning-short": json.dumps({"cleaning": {"lowercase": True}}).encode(),
    "cleaning-wrong-type": json.dumps({"cleaning": CLEANING | {"lowercase": "yes"}}).encode(),
    "seed-a-string": json.dumps({"cleaning": CLEANING, "pretraining_seed": "0"}).encode(),
    "sha-a-number": json.dumps({"cleaning": CLEANING, "tokenizer_sha256": 5}).encode(),
}
# What `mapnet export` wrote before it recorded the cleaning (6840e9e): its tokenizer does not clean.
OLD_RECORD = {
    "source": "/runs/base/checkpoints/step-00000003",
    "step": 3,
    "tokenizer_sha256": "ab" * 32,
    "mapnet_version": "0.1.0",
    "created": "2026-01-01T00:00:00+00:00",
}


@pytest.fixture(scope="module")
def exported(trained_runs, tmp_path_factory) -> Path:
    """The tiny uniform run as `mapnet export` writes it (read-only: tests copy it)."""
    return export(trained_runs["uniform"], tmp_path_factory.mktemp("record") / "hf")


@pytest.fixture
def bpe_export(tmp_path) -> Path:
    """A folder holding a real BPE tokenizer.json written as export writes it, and export's record."""
    (tmp_path / "text.txt").write_text("It's a cat. And a dog, a cat!\n\nA dog.\n", encoding="utf-8")
    save_tokenizer(train_tokenizer([tmp_path / "text.txt"], 300, 1), tmp_path / "bpe.json")
    folder = tmp_path / "bpe-export"
    folder.mkdir()
    write_tokenizer(tmp_path / "bpe.json", folder / "tokenizer.json", PAPER)
    (folder / RECORD).write_text(json.dumps({**OLD_RECORD, "cleaning": CLEANING}), encoding="utf-8")
    return folder


def preprocess_with(folder: Path, out: Path, **cleaning):
    settings = resolve(None, {"preprocess": {"tokenizer": str(folder / "tokenizer.json"), "workers": 1, **cleaning}})
    return run_preprocess([folder.parent / "text.txt"], out, settings)


@pytest.mark.parametrize("case", list(DAMAGED))
def test_a_damaged_record_is_the_same_one_line_error_in_preprocess_and_blimp(case, exported, bpe_export, tmp_path):
    hf = shutil.copytree(exported, tmp_path / "hf")
    for folder in (hf, bpe_export):
        (folder / RECORD).write_bytes(DAMAGED[case])
    with pytest.raises(MapnetError) as in_blimp:
        find_targets([hf])
    # --bert-text too: the record is read (and so checked) whatever preprocess's own cleaning.
    for cleaning in ({}, {"normalize_punctuation": False, "moses_tokenize": False, "lowercase": False}):
        with pytest.raises(MapnetError) as in_preprocess:
            preprocess_with(bpe_export, tmp_path / "prep", **cleaning)
        assert not (tmp_path / "prep").exists()
        messages = [
            str(e.value).replace(str(f / RECORD), "RECORD") for e, f in ((in_blimp, hf), (in_preprocess, bpe_export))
        ]
        assert messages[0] == messages[1], messages  # one rule, one wording
        assert messages[0].startswith("RECORD is damaged (") and "re-export the run" in messages[0]
        assert "\n" not in messages[0]


def test_an_old_export_without_cleaning_keeps_its_meaning_and_a_fresh_one_is_read_whole(
    exported, trained_runs, bpe_export, tmp_path
):
    from mapnet_cli.model.checkpoint import latest_checkpoint, load_settings, read_config

    ckpt = latest_checkpoint(trained_runs["uniform"])
    record = read_export_record(exported)
    assert record.cleaning == cleaning_record(load_settings(ckpt).preprocess) and record.cleans
    assert record.pretraining_seed == load_settings(ckpt).train.seed
    assert record.tokenizer_sha256 == read_config(ckpt)["tokenizer_sha256"]
    assert read_export_record(tmp_path) is None  # no record: not an export
    # A record that cleans: preprocess refuses to clean its sentences a second time.
    with pytest.raises(MapnetError, match="cleans text itself.*--bert-text"):
        preprocess_with(bpe_export, tmp_path / "prep")
    # An old export's record (no "cleaning"): its tokenizer does not clean, so preprocess cleans, once.
    (bpe_export / RECORD).write_text(json.dumps(OLD_RECORD), encoding="utf-8")
    old = read_export_record(bpe_export)
    assert old.cleaning is None and not old.cleans and old.pretraining_seed == 0
    preprocess_with(bpe_export, tmp_path / "prep")
    lines = (tmp_path / "prep" / "sentences" / "part-00000.txt").read_text(encoding="utf-8").split("\n")
    assert lines[:2] == ["it 's a cat .", "and a dog , a cat !"]
    # A record of an export that cleans nothing (a --bert-text run's): nothing is cleaned twice either.
    (bpe_export / RECORD).write_text(
        json.dumps(
            {
                **OLD_RECORD,
                "cleaning": CLEANING | {"normalize_punctuation": False, "moses_tokenize": False, "lowercase": False},
            }
        ),
        encoding="utf-8",
    )
    preprocess_with(bpe_export, tmp_path / "prep2")
    # blimp on an export whose record has no seed: the documented 0.
    hf = shutil.copytree(exported, tmp_path / "hf")
    (hf / RECORD).write_text(json.dumps(OLD_RECORD), encoding="utf-8")
    assert find_targets([hf])[0].pretraining_seed == 0
