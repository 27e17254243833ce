"""Where each arm puts its masks, and what its encoder learned, by token frequency (real text).

    uv run python experiments/learned-masking-tiny/mass_by_frequency.py runs/real-text arms-tiny
    uniform,mapnet,mapnet-ht,frequency-ht

For every arm and seed, on each held-out set's evaluation sequences (train.eval_seed, eval_pick
"spread", as `mapnet compare` evaluates them), with token types ranked by their count in the
training split (top-100 types, 101-1000, rarer; `loss_by_frequency.frequency_rank`):

- mask share: the arm's expected share of masked positions in each group, sum_i pi_i / sum_i K,
  where pi_i is the arm's inclusion probability under its final weights — K/n for uniform and
  stratified (each position equally likely), the HT design's pi for MAP-Net with HT weights and
  for frequency-HT (proposal, temperature, capping, mixture: `ht_inclusion` / `frequency_masks`),
  and K p_i for the paper's MAP-Net (the first-order approximation of Gumbel-top-k without the
  exploration coin: where MAP-Net's own masks go).
- loss: the final encoder's held-out loss on the masked tokens of each group (fixed uniform masks).

Prints mean ± std over seeds. Writes nothing.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from loss_by_frequency import EVAL_SEED, EVAL_SEQUENCES, frequency_rank  # noqa: E402

from mapnet_cli.data.shards import ShardReader  # noqa: E402
from mapnet_cli.evaluation.variance.target import load_target  # noqa: E402
from mapnet_cli.masking.mapnet.objective import ht_inclusion  # noqa: E402
from mapnet_cli.masking.strategy import frequency_masks, token_counts  # noqa: E402
from mapnet_cli.masking.uniform import eligible_positions, mask_counts  # noqa: E402
from mapnet_cli.model import checkpoint  # noqa: E402
from mapnet_cli.settings import MaskingSettings  # noqa: E402
from mapnet_cli.train import build_eval_set  # noqa: E402

GROUPS = ("top-100 types", "types 101-1000", "rarer types")


def inclusion(target, ids: torch.Tensor, counts: np.ndarray | None) -> torch.Tensor:
    """(S, T) expected masked positions of this checkpoint's arm on `ids` (see the module doc)."""
    m = target.settings.masking
    eligible = eligible_positions(ids, target.reader.special_ids)
    k = mask_counts(eligible.sum(1), m.mask_prob)
    n = eligible.sum(1, keepdim=True).clamp(min=1)
    if m.strategy == "frequency":
        scores = (torch.from_numpy(counts).double() + 1.0).pow(-m.frequency.power)
        g = torch.Generator().manual_seed(0)
        _, _, pi = frequency_masks(
            ids,
            eligible,
            scores,
            m.mask_prob,
            m.mix_uniform,
            torch.rand(ids.shape, generator=g),
            torch.rand(len(ids), generator=g),
        )
        return pi
    if m.strategy == "mapnet":
        with torch.no_grad():
            log_p = target.proposal.eval()(ids, ids != target.reader.special_ids["pad"], eligible).double()
        if m.mapnet.importance == "ht":
            return ht_inclusion(log_p, eligible, k, m)
        return log_p.exp() * k[:, None]
    return torch.where(eligible, k[:, None] / n, torch.zeros((), dtype=torch.float64))


def main(root: str, folder: str, arms: str, seeds: int = 3) -> None:
    train = ShardReader(f"{root}/shards", "train", verify="size")
    rank = frequency_rank(train)
    counts = token_counts(train)
    for held in ("heldout-books", "heldout-wiki"):
        data = build_eval_set(
            ShardReader(f"{root}/{held}", "valid", verify="size"),
            EVAL_SEQUENCES,
            EVAL_SEED,
            MaskingSettings(),
            "spread",
        )
        ids = torch.from_numpy(data.ids.astype(np.int64))
        r = torch.from_numpy(rank)[ids]
        bucket = {"top-100 types": r < 100, "types 101-1000": (r >= 100) & (r < 1000), "rarer types": r >= 1000}
        eligible = eligible_positions(ids, train.special_ids)
        print(
            f"\n{held}: share of eligible tokens "
            + ", ".join(f"{g} {float((bucket[g] & eligible).sum() / eligible.sum()):.1%}" for g in GROUPS)
        )
        for arm in arms.split(","):
            shares, losses = [], []
            for seed in range(seeds):
                ckpt = checkpoint.latest_checkpoint(f"{root}/{folder}/runs/{arm}/seed-{seed}")
                target = load_target(ckpt, f"{root}/{held}")
                pi = inclusion(target, ids, counts)
                shares.append([float(pi[bucket[g]].sum() / pi.sum()) for g in GROUPS])
                with torch.no_grad():
                    tl = target.model.eval()(data.inputs, None, data.mask, targets=ids).token_losses
                masked = r[data.mask]
                losses.append(
                    [
                        float(
                            tl[
                                (masked < 100)
                                if g == GROUPS[0]
                                else ((masked >= 100) & (masked < 1000))
                                if g == GROUPS[1]
                                else (masked >= 1000)
                            ].mean()
                        )
                        for g in GROUPS
                    ]
                )
            sm, ss = np.mean(shares, 0), np.std(shares, 0, ddof=1) if seeds > 1 else np.zeros(3)
            lm, ls = np.mean(losses, 0), np.std(losses, 0, ddof=1) if seeds > 1 else np.zeros(3)
            print(
                f"  {arm:24} mask share "
                + ", ".join(f"{a:.1%} ± {s:.1%}" for a, s in zip(sm, ss))
                + " | loss "
                + ", ".join(f"{a:.3f} ± {s:.3f}" for a, s in zip(lm, ls))
            )


if __name__ == "__main__":
    main(*sys.argv[1:4], *map(int, sys.argv[4:5]))
