"""Saved tiny runs for the `mapnet variance` CLI tests: tiny shards + a uniform and a MAP-Net checkpoint."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # tests/tiny_shards.py: shards in the real format
from tiny_shards import write_tiny_shards  # noqa: E402,F401  (re-exported to the tests)

from mapnet_cli import settings as settings_mod  # noqa: E402
from mapnet_cli.atomic import write_json  # noqa: E402
from mapnet_cli.masking.mapnet.proposal import ProposalConfig, ProposalNetwork  # noqa: E402
from mapnet_cli.model import checkpoint  # noqa: E402
from mapnet_cli.model.bert import BertConfig, BertForMLM  # noqa: E402


def tiny_settings(strategy: str):
    return settings_mod.apply(
        settings_mod.Settings(),
        {
            "model": {"layers": 1, "hidden": 16, "heads": 2, "intermediate": 32, "max_position": 32},
            "shard": {"max_seq_len": 32},
            "masking": {
                "strategy": strategy,
                **({"mapnet": {"layers": 1, "hidden": 8, "heads": 2}} if strategy == "mapnet" else {}),
            },
        },
        "test",
    )


def save_run(root: Path, shards: Path, strategy: str) -> Path:
    """A run folder with one checkpoint of a tiny model (and a MAP-Net when strategy == 'mapnet')."""
    settings = tiny_settings(strategy)
    torch.manual_seed(0)
    model = BertForMLM(BertConfig.from_settings(settings.model, 64, 0))
    modules, extra = {"": model}, {"masking": strategy}
    if strategy == "mapnet":
        pcfg = ProposalConfig.from_settings(settings.model, settings.masking)
        proposal = ProposalNetwork(pcfg, model.encoder.tok_embeddings)
        extra["mapnet"] = pcfg.to_dict()  # as every checkpoint with MAP-Net records it
        torch.nn.init.normal_(proposal.score.weight, std=0.5)  # not uniform, so the weights are not all 1
        modules["mapnet"] = proposal
    manifest_sha = json.loads((shards / "manifest.json").read_text())["tokenizer_sha256"]
    checkpoint.save_checkpoint(
        root,
        7,
        modules,
        {"data_position": 0},
        model.cfg,
        settings.to_toml(),
        shards / "tokenizer.json",
        manifest_sha,
        extra,
    )
    write_json(root / "run.json", {"shards": {"path": str(shards)}})
    return root


def summarise_vectors(vectors: torch.Tensor):
    """estimator.Summaries straight from per-example vectors shaped (A, S, M, D), through their Gram matrix."""
    from mapnet_cli.evaluation.variance import estimator as est

    A, S, M, D = vectors.shape
    x = vectors.double().reshape(A * S * M, D)
    return est.summarise((x @ x.T).view(A, S, M, A, S, M))
