"""Held-out loss of the final uniform and MAP-Net checkpoints, split by how frequent the masked token is.

    uv run python experiments/real-text-cpu/loss_by_frequency.py runs/real-text tiny --json F.json  # after its .sh

Real text has no token kinds, so this is its stand-in for the synthetic corpus's per-kind loss:
token types are ranked by their count in the training split, and the masked tokens of each
held-out set (the same evaluation sequences and masks as `mapnet compare`: train.eval_seed,
eval_pick "spread") are grouped into the 100 most frequent types, types 101-1000, and the rest.
Prints mean ± std over the 3 seeds and each group's share of the masked tokens; `--json` also writes every
seed's value (`{held: {"share": {group: f}, strategy: {group: [per seed]}}}`), the raw the README's tables read.
"""

from __future__ import annotations

import argparse

import numpy as np
import torch

from mapnet_cli import atomic
from mapnet_cli.data.shards import ShardReader
from mapnet_cli.model import checkpoint
from mapnet_cli.settings import MaskingSettings
from mapnet_cli.train import build_eval_set

EVAL_SEQUENCES, EVAL_SEED, SEEDS = 256, 1234, 3  # as in experiments/common/real-text-cpu.toml


def frequency_rank(train: ShardReader) -> np.ndarray:
    """rank[token id] = 0 for the most frequent type in the training split."""
    counts = np.zeros(train.vocab_size, np.int64)
    for start in range(0, len(train), 4096):
        block = train.take(np.arange(start, min(start + 4096, len(train)))).reshape(-1).astype(np.int64)
        counts += np.bincount(block, minlength=train.vocab_size)
    rank = np.empty(train.vocab_size, np.int64)
    rank[np.argsort(-counts, kind="stable")] = np.arange(train.vocab_size)
    return rank


def main(root: str, preset: str, json_out: str | None = None) -> None:
    raw: dict[str, dict] = {}
    rank = frequency_rank(ShardReader(f"{root}/shards", "train", verify="size"))
    for held in ("heldout-books", "heldout-wiki"):
        data = build_eval_set(
            ShardReader(f"{root}/{held}", "valid", verify="size"),
            EVAL_SEQUENCES,
            EVAL_SEED,
            MaskingSettings(),
            "spread",
        )
        targets = torch.from_numpy(data.ids.astype(np.int64))
        r = rank[targets[data.mask].numpy()]
        groups = {"top-100 types": r < 100, "types 101-1000": (r >= 100) & (r < 1000), "rarer types": r >= 1000}
        print(f"{held}: share of masked tokens " + ", ".join(f"{k} {m.mean():.1%}" for k, m in groups.items()))
        raw[held] = {"share": {k: float(m.mean()) for k, m in groups.items()}}
        for strategy in ("uniform", "mapnet"):
            per_seed = []
            for seed in range(SEEDS):
                model, _ = checkpoint.load_model(
                    checkpoint.latest_checkpoint(f"{root}/{preset}/runs/{strategy}/seed-{seed}")
                )
                model.eval()
                with torch.no_grad():
                    losses = model(data.inputs, None, data.mask, targets=targets).token_losses.numpy()
                per_seed.append([losses[m].mean() for m in groups.values()] + [losses.mean()])
            mean, std = np.mean(per_seed, 0), np.std(per_seed, 0, ddof=1)
            cells = ", ".join(f"{k} {a:.3f} ± {s:.3f}" for k, a, s in zip([*groups, "all"], mean, std))
            print(f"  {strategy:8} {cells}")
            raw[held][strategy] = {k: [float(v[i]) for v in per_seed] for i, k in enumerate([*groups, "all"])}
    if json_out:
        atomic.write_json(json_out, raw)  # a killed run leaves no half-written JSON


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("root", help="the folder of real_text_cpu.sh (shards, heldout-books, heldout-wiki, PRESET/runs)")
    ap.add_argument("preset", help="the compare folder under ROOT: tiny or mini")
    ap.add_argument("--json", help="also write each seed's values here")
    args = ap.parse_args()
    main(args.root, args.preset, args.json)
