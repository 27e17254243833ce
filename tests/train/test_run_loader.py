"""`load_run`: one way to open a checkpoint or run folder, for every command that reads one."""

from __future__ import annotations

import json
import shutil

import pytest
import torch
from safetensors.torch import load_file

from mapnet_cli.errors import MapnetError
from mapnet_cli.model import checkpoint
from mapnet_cli.train.run_loader import load_run


def saved_tensors(ckpt) -> dict[str, torch.Tensor]:
    return load_file(str(ckpt / checkpoint.WEIGHTS))


def test_a_run_folder_and_its_newest_checkpoint_give_the_same_model(trained_runs):
    run_dir = trained_runs["uniform"]
    ckpt = checkpoint.latest_checkpoint(run_dir)
    by_run, by_ckpt = load_run(run_dir), load_run(ckpt)
    assert by_run.checkpoint == by_ckpt.checkpoint == ckpt and by_run.step == 3
    a, b = by_run.model.state_dict(), by_ckpt.model.state_dict()
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)
    stored = saved_tensors(ckpt)
    assert all(torch.equal(a[k], stored[k]) for k in stored)  # exactly what training wrote
    assert by_run.proposal is None  # uniform masking trains no MAP-Net


def test_what_else_a_run_carries(trained_runs):
    run = load_run(trained_runs["uniform"])
    assert run.settings.masking.strategy == "uniform" and run.settings.model.hidden == 32
    assert run.shards == trained_runs["shards"].resolve()  # as run.json records it
    assert run.tokenizer.read_bytes() == (trained_runs["shards"] / "tokenizer.json").read_bytes()
    assert run.meta["path"] == str(run.checkpoint) and run.meta["tokenizer_sha256"]


def test_a_mapnet_run_gives_its_proposal_sharing_the_token_embedding(trained_runs):
    run = load_run(trained_runs["mapnet"])
    assert run.proposal is not None and run.proposal.cfg.to_dict() == run.meta["mapnet"]
    stored = saved_tensors(run.checkpoint)
    own = {k: v for k, v in run.proposal.state_dict().items() if f"mapnet.{k}" in stored}
    assert own and all(torch.equal(v, stored[f"mapnet.{k}"]) for k, v in own.items())
    assert stored["mapnet.score.weight"].abs().sum() > 0  # trained away from its uniform start
    assert run.proposal.tok_embeddings is run.model.encoder.tok_embeddings
    assert load_run(trained_runs["mapnet"], with_proposal=False).proposal is None


def test_weights_false_finds_and_verifies_but_builds_nothing(trained_runs):
    run = load_run(trained_runs["mapnet"], weights=False)
    assert run.model is None and run.proposal is None
    assert run.state()["step"] == 3 and run.state()["data_position"] == 24


def test_a_missing_corrupt_or_absent_checkpoint_is_a_one_line_error(trained_runs, tmp_path):
    def one_line(path, *parts, **kwargs):
        with pytest.raises(MapnetError) as info:
            load_run(path, **kwargs)
        text = str(info.value)
        assert "\n" not in text and all(p in text for p in parts), text

    one_line(tmp_path / "nowhere", "checkpoint not found")
    copy = shutil.copytree(trained_runs["uniform"], tmp_path / "run")
    ckpt = checkpoint.latest_checkpoint(copy)
    data = bytearray((ckpt / checkpoint.WEIGHTS).read_bytes())
    data[-3] ^= 1
    (ckpt / checkpoint.WEIGHTS).write_bytes(bytes(data))
    one_line(copy, "model.safetensors", "sha256")
    one_line(copy, "model.safetensors", "sha256", weights=False)  # verified even when nothing is built
    (ckpt / checkpoint.WEIGHTS).write_bytes(b"\x00garbage" * 64)
    (ckpt / checkpoint.STATE).write_bytes(b"\x00garbage" * 64)
    (ckpt / checkpoint.MANIFEST).unlink()
    one_line(copy, "has no manifest.json", "cannot be verified")
    checkpoint.write_manifest(ckpt)  # past the manifest: the loaders themselves must refuse the garbage
    one_line(copy, "model.safetensors", "truncated or corrupt")
    with pytest.raises(MapnetError, match="state.pt is unreadable"):
        load_run(copy, weights=False).state()


def test_a_run_without_run_json_names_no_shards(trained_runs, tmp_path):
    copy = shutil.copytree(trained_runs["uniform"], tmp_path / "run")
    (copy / "run.json").unlink()
    assert load_run(copy).shards is None


def test_mapnet_weights_without_their_recorded_size_are_refused(trained_runs, tmp_path):
    copy = shutil.copytree(trained_runs["mapnet"], tmp_path / "run")
    ckpt = checkpoint.latest_checkpoint(copy)
    meta = json.loads((ckpt / checkpoint.CONFIG).read_text())
    del meta["mapnet"]  # every checkpoint with MAP-Net weights records its size
    (ckpt / checkpoint.CONFIG).write_text(json.dumps(meta))
    checkpoint.write_manifest(ckpt)
    with pytest.raises(MapnetError) as info:
        load_run(copy)
    assert str(info.value) == (
        f'{ckpt / "config.json"} has MAP-Net weights but no "mapnet" entry (its size); '
        "every mapnet checkpoint with MAP-Net records it"
    )
