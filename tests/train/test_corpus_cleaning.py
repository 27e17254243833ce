"""A run records its corpus's cleaning (the shards' settings.toml), not the defaults it was resolved with:
export, finetune-glue, probe and blimp read raw text the way the corpus was cleaned."""

from __future__ import annotations

import gzip

import pytest

from mapnet_cli import settings as settings_mod
from mapnet_cli.data.cleaning import cleaning_settings
from mapnet_cli.errors import MapnetError
from mapnet_cli.model.checkpoint import latest_checkpoint, load_settings
from mapnet_cli.train.run_settings import run_settings

TINY = [
    "preprocess.vocab_size=300",
    "preprocess.workers=1",
    "shard.max_seq_len=32",
    "shard.valid_fraction=0.1",
    "model.layers=1",
    "model.hidden=32",
    "model.heads=2",
    "model.intermediate=64",
    "model.max_position=32",
    "train.batch_size=4",
    "train.steps=2",
    "train.eval_sequences=4",
    "train.checkpoint_every=2",
    "optim.warmup.steps=1",
    "logging.progress=false",
    "train.device=cpu",
]


@pytest.mark.slow
def test_a_cased_corpus_makes_a_cased_run(shared_data, tmp_path):
    from mapnet_cli.data.preprocess import run_preprocess
    from mapnet_cli.data.shard_writer import run_shard
    from mapnet_cli.train import pretrain

    with gzip.open(shared_data / "books" / "carroll-alice.txt.gz", "rt", encoding="utf-8") as fh:
        (tmp_path / "alice.txt").write_text("\n".join(fh.read().split("\n")[:600]), encoding="utf-8")
    corpus = settings_mod.resolve(
        overrides={"model": {"preset": "tiny"}},
        assignments=[*TINY, "preprocess.lowercase=false", "preprocess.normalize_punctuation=false"],
    )
    run_preprocess([tmp_path / "alice.txt"], tmp_path / "prep", corpus)
    run_shard(tmp_path / "prep", tmp_path / "shards", corpus)
    # Resolved alone, the settings have the defaults (lower-cased, punctuation normalised), as when the user does
    # not repeat the preprocess flags; a run's settings, resolved at the one place `mapnet pretrain` resolves them,
    # take the corpus's; and the loop refuses settings resolved for other shards rather than change them.
    defaults = settings_mod.resolve(overrides={"model": {"preset": "tiny"}}, assignments=TINY)
    assert defaults.preprocess.lowercase and defaults.preprocess.normalize_punctuation
    with pytest.raises(MapnetError, match="were made with .*'lowercase': False.*resolve a run's settings"):
        pretrain(defaults, tmp_path / "shards", tmp_path / "run")
    assert not (tmp_path / "run").exists()
    resolved = run_settings(
        tmp_path / "shards", tmp_path / "run", resume=False, flags={"model": {"preset": "tiny"}}, assignments=TINY
    )
    pretrain(resolved, tmp_path / "shards", tmp_path / "run")
    recorded = load_settings(latest_checkpoint(tmp_path / "run")).preprocess
    assert cleaning_settings(recorded) == {
        "normalize_punctuation": False,
        "moses_tokenize": True,
        "moses_lang": "en",
        "lowercase": False,
    }
    # ...and what reads text through the run's settings keeps the case the vocabulary was trained on.
    from mapnet_cli.evaluation.blimp.models import find_targets

    target = find_targets([tmp_path / "run"])[-1]
    tok = target.text.tokenise.__self__.tokenizer
    assert any(
        ch.isupper()
        for i in target.text.tokenise(["Alice was beginning to get very tired."])[0]
        for ch in tok.id_to_token(int(i))
    )
