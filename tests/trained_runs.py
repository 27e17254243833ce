"""Real small checkpoints for the tests that read one: a few `pretrain` steps of a tiny model on tiny shards.

Made by the training loop itself, not assembled by hand, so each carries what
a real checkpoint carries (manifest, settings.toml, tokenizer, config.json's
MAP-Net size, the run's run.json naming its shards) and a loader that drifts
from what training writes fails here first. A few seconds each on one CPU
thread; `conftest.trained_runs` builds them once per session. `pretrain_tiny`
is the real-text one (books, 100 steps, `conftest.pretrained_tiny`).
"""

from __future__ import annotations

from pathlib import Path

from tiny_shards import write_tiny_shards

# One block of width 32 over the 64-token tiny vocabulary; MAP-Net at its default half size.
SETTINGS = [
    "train.recipe=paper",
    "model.layers=1",
    "model.hidden=32",
    "model.heads=2",
    "model.intermediate=64",
    "model.max_position=32",
    "shard.max_seq_len=32",
    "train.batch_size=8",
    "train.steps=3",
    "train.eval_sequences=8",
    "train.checkpoint_every=3",
    "optim.warmup.steps=1",
    "optim.lr=3e-3",
    "logging.progress=false",
]


def train_tiny_run(out: Path, shards: Path, masking: str = "uniform", *extra: str) -> Path:
    """Train the tiny model for train.steps on `shards` into the run folder `out`; return `out`."""
    from mapnet_cli.settings import resolve
    from mapnet_cli.train import pretrain

    settings = resolve(None, {"model": {"preset": "tiny"}}, [*SETTINGS, f"masking.strategy={masking}", *extra])
    pretrain(settings, shards, out)
    return out


def trained_runs(root: Path) -> dict[str, Path]:
    """{"shards", "uniform", "mapnet"}: tiny shards and one finished run of each strategy on them."""
    shards = write_tiny_shards(root / "shards")
    return {
        "shards": shards,
        "uniform": train_tiny_run(root / "uniform", shards),
        "mapnet": train_tiny_run(root / "mapnet", shards, "mapnet"),
    }


BOOKS = ("austen-emma", "carroll-alice", "chesterton-brown")


def pretrain_tiny(root: Path, shared_data: Path, lines_per_book: int = 4000, steps: int = 100) -> Path:
    """preprocess a slice of shared books -> shard (seq len 128) -> pretrain `tiny`; returns the run folder
    (its shards are root/"shards"). Real text, the paper's cleaning: what `conftest.pretrained_tiny` builds."""
    import gzip

    from mapnet_cli import settings as settings_mod
    from mapnet_cli.data.preprocess import run_preprocess
    from mapnet_cli.data.shard_writer import run_shard
    from mapnet_cli.train import pretrain

    text = []
    for name in BOOKS:
        with gzip.open(shared_data / "books" / f"{name}.txt.gz", "rt", encoding="utf-8") as fh:
            text.extend(fh.read().split("\n")[:lines_per_book])
    (root / "books.txt").write_text("\n".join(text), encoding="utf-8")
    settings = settings_mod.resolve(
        overrides={"model": {"preset": "tiny"}},
        assignments=[
            "preprocess.vocab_size=2048",
            "preprocess.workers=1",
            "shard.max_seq_len=128",
            "shard.valid_fraction=0.02",
            "model.max_position=128",
            f"train.steps={steps}",
            "train.batch_size=16",
            "train.device=cpu",
            "train.eval_every=0",
            "train.eval_sequences=16",
            f"train.checkpoint_every={steps}",
            "train.keep_steps=[]",
            "optim.warmup.steps=20",
            "optim.lr=1e-3",
            "train.seed=0",
            "logging.progress=false",
        ],
    )
    run_preprocess([root / "books.txt"], root / "prep", settings)
    run_shard(root / "prep", root / "shards", settings)
    pretrain(settings, root / "shards", root / "tiny")
    return root / "tiny"
