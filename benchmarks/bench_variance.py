"""Time and peak memory of `mapnet variance` on the `mini` model, exact and sketched gradients.

    uv run python benchmarks/bench_variance.py                       # S=32, M=8, T=128, exact + D=4096
    uv run python benchmarks/bench_variance.py --modes 4096 --mapnet # sketch only, with a MAP-Net too
    uv run python benchmarks/bench_variance.py --sentences 8 --masks 4 --modes 4096   # variance_snapshot's size

Each mode runs in a fresh subprocess so its peak RSS (ru_maxrss) is its own.
The model is the `mini` preset (4 layers, H=256, vocab 32768: 11.8M
parameters) at random init on random token sequences: the cost does not
depend on the weights or the text. Exact gradients hold at most
variance.memory_gb of per-example gradients and recompute the rest in panels
(see `estimator.gram_matrix`), so their time grows with S*M / panel.
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import time


def one(
    mode: int, sentences: int, masks: int, seq_len: int, mapnet: bool, memory_gb: float, bootstrap: int, threads: int
) -> dict:
    import torch

    from mapnet_cli.evaluation.variance.measure import analyse, measure
    from mapnet_cli.masking.mapnet.proposal import ProposalConfig, ProposalNetwork
    from mapnet_cli.model.bert import BertConfig, BertForMLM
    from mapnet_cli.settings import preset

    torch.set_num_threads(threads)
    s = preset("mini")
    torch.manual_seed(0)
    model = BertForMLM(BertConfig.from_settings(s.model, 32768, 0))
    proposal = None
    if mapnet:
        proposal = ProposalNetwork(ProposalConfig.from_settings(s.model, s.masking), model.encoder.tok_embeddings)
        torch.nn.init.normal_(proposal.score.weight, std=0.02)
    special = {"pad": 0, "unk": 1, "cls": 2, "sep": 3, "mask": 4}
    g = torch.Generator().manual_seed(1)
    seqs = torch.randint(5, 32768, (sentences, seq_len), generator=g)
    seqs[:, 0], seqs[:, -1] = 2, 3
    rss0 = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    t0 = time.perf_counter()
    meas = measure(model, proposal, seqs, special, 32768, s.masking, masks=masks, project_dim=mode, memory_gb=memory_gb)
    t1 = time.perf_counter()
    res = analyse(meas, (1, 8, 32), bootstrap, clip_epsilon=s.masking.mapnet.clip_epsilon)
    t2 = time.perf_counter()
    u = res["schemes"]["uniform"]
    return {
        "mode": f"sketch D={mode}" if mode else "exact",
        "parameters": meas.gradient["parameters"],
        "examples": meas.gradient["examples"],
        "backward_passes": meas.gradient["evaluations"],
        "gradients_s": round(t1 - t0, 1),
        "per_backward_ms": round(1000 * (t1 - t0) / meas.gradient["evaluations"], 1),
        "analysis_s": round(t2 - t1, 2),
        "peak_rss_gb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20, 2),
        "rss_before_gb": round(rss0 / 2**20, 2),
        "mask_variance": u["mask_variance"]["estimate"],
        "sentence_variance": u["sentence_variance"]["estimate"],
        "total_variance": u["total_variance"]["estimate"],
        "threads": threads,
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sentences", type=int, default=32)
    ap.add_argument("--masks", type=int, default=8)
    ap.add_argument("--seq-len", type=int, default=128)
    ap.add_argument("--modes", default="0,4096", help="comma list: 0 = exact gradients, D = sketch dimension")
    ap.add_argument("--mapnet", action="store_true", help="also MAP-Net schemes (a second set of gradients)")
    ap.add_argument("--memory-gb", type=float, default=4.0, help="variance.memory_gb for exact gradients")
    ap.add_argument("--bootstrap", type=int, default=1000)
    ap.add_argument("--threads", type=int, default=1, help="torch threads (1: on a shared CPU, more threads spin-wait)")
    ap.add_argument("--child", type=int, default=None, help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.child is not None:
        print(json.dumps(one(a.child, a.sentences, a.masks, a.seq_len, a.mapnet, a.memory_gb, a.bootstrap, a.threads)))
        return
    for mode in (int(m) for m in a.modes.split(",")):
        argv = [
            sys.executable,
            __file__,
            "--child",
            str(mode),
            "--sentences",
            str(a.sentences),
            "--masks",
            str(a.masks),
            "--seq-len",
            str(a.seq_len),
            "--memory-gb",
            str(a.memory_gb),
            "--bootstrap",
            str(a.bootstrap),
            "--threads",
            str(a.threads),
        ] + (["--mapnet"] if a.mapnet else [])
        out = subprocess.run(argv, capture_output=True, text=True)
        if out.returncode:
            print(out.stderr, file=sys.stderr)
            raise SystemExit(out.returncode)
        r = json.loads(out.stdout.strip().splitlines()[-1])
        print(
            f"{r['mode']:>14}: S={a.sentences} M={a.masks} T={a.seq_len}, {r['parameters']:,} params, "
            f"{r['examples']} examples, {r['backward_passes']} backward passes in {r['gradients_s']} s "
            f"({r['per_backward_ms']} ms each), analysis {r['analysis_s']} s, peak RSS {r['peak_rss_gb']} GiB "
            f"(model built: {r['rss_before_gb']} GiB); mask {r['mask_variance']:.4g}, sentence "
            f"{r['sentence_variance']:.4g}, total {r['total_variance']:.4g}",
            flush=True,
        )


if __name__ == "__main__":
    main()
