"""Wall time of `mapnet blimp`'s scoring: one checkpoint over a BLiMP folder, every pair, no controls.

    uv run python benchmarks/bench_blimp.py runs/tiny --data ../shared/data/blimp           # all paradigms
    uv run python benchmarks/bench_blimp.py runs/mini --data ../shared/data/blimp --pairs 200 --threads 2
    uv run python benchmarks/bench_blimp.py runs/tiny --data ../shared/data/blimp --method word-l2r

Times what the command spends: tokenising the suite through the checkpoint's text path, then every
masked copy through the encoder and head (`evaluation/blimp/scoring.pll_scores`). Prints the rows
(masked copies), rows per second and the seconds of each part, with the load average before and after
and the thread count: run it on an otherwise idle machine, or say that it was not.
"""

from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path

import torch

from mapnet_cli.atomic import write_json
from mapnet_cli.evaluation.blimp.data import load_suite
from mapnet_cli.evaluation.blimp.evaluate import BlimpConfig, Scorer
from mapnet_cli.evaluation.blimp.models import find_targets


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument(
        "model", type=Path, help="a checkpoint or run folder (its newest checkpoint), or an exported folder"
    )
    ap.add_argument("--data", type=Path, required=True)
    ap.add_argument("--pairs", type=int, default=0, help="first N pairs per paradigm (0: all)")
    ap.add_argument("--method", default="pll")
    ap.add_argument("--threads", type=int, default=os.cpu_count())
    ap.add_argument("--max-tokens", type=int, default=16384)
    ap.add_argument("--json", type=Path, help="also write the figures here")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    load_before = os.getloadavg()
    suite = load_suite(args.data, args.pairs)
    target = find_targets([args.model])[-1]  # a run's newest checkpoint
    scorer = Scorer(suite, BlimpConfig(method=args.method, max_tokens=args.max_tokens))
    t0 = time.perf_counter()
    scorer.tokenise([target])
    t_tok = time.perf_counter() - t0
    rows = scorer.rows([target])
    entry = scorer.score(target)
    t_score = entry["seconds"]  # building the model included
    acc = entry["accuracy"]
    sentences = scorer.sentences
    out = {
        "model": target.label,
        "method": args.method,
        "paradigms": len(suite.paradigms),
        "pairs": suite.pairs,
        "sentences": len(sentences),
        "rows": rows,
        "threads": args.threads,
        "max_tokens": args.max_tokens,
        "tokenise_s": round(t_tok, 2),
        "score_s": round(t_score, 2),
        "total_s": round(t_tok + t_score, 2),
        "rows_per_s": round(rows / t_score),
        "accuracy": acc,
        "load_before": [round(x, 2) for x in load_before],
        "load_after": [round(x, 2) for x in os.getloadavg()],
        "torch": torch.__version__,
    }
    print(json.dumps(out, indent=1))
    if args.json:
        write_json(args.json, out)


if __name__ == "__main__":
    main()
