"""Fine-tuning throughput: length-grouped vs plainly shuffled batches, on real GLUE lengths.

    uv run python benchmarks/bench_glue.py                                   # MRPC train, mini, bs 32
    uv run python benchmarks/bench_glue.py --task sst2 --preset tiny --steps 20 --threads 1   # a quick CPU look

Token lengths come from the real train file (whitespace words x 1.3, plus
specials, capped at --max-len: the tokenizer of a real checkpoint gives
about that), so the padding measured is the padding a sweep pays. Each mode
runs the training step of `finetune_run` (collate, forward, loss, backward,
AdamW) on a random-weight encoder for --steps batches; bf16 autocast on
CUDA. Prints padded-token share, median step time and examples per second.
"""

from __future__ import annotations

import argparse
import statistics
import time
from pathlib import Path

import numpy as np
import torch

from mapnet_cli.evaluation.glue.encode import Encoded
from mapnet_cli.evaluation.glue.finetune import autocast, collate, length_grouped_batches
from mapnet_cli.evaluation.glue.model import SequenceClassifier, task_loss
from mapnet_cli.evaluation.glue.tasks import TASKS, load_task, task_spec
from mapnet_cli.model.bert import BertConfig, Encoder
from mapnet_cli.settings import preset

REPO = Path(__file__).resolve().parents[1]


def fake_encoded(task: str, glue: Path, max_len: int) -> Encoded:
    data = load_task(task_spec(task), glue).train
    words = np.array(
        [
            len(a.split()) + (len(b.split()) if data.text_b else 0)
            for a, b in zip(data.text_a, data.text_b or data.text_a)
        ]
    )
    lengths = np.minimum((words * 1.3).astype(np.int64) + 3, max_len)
    rng = np.random.default_rng(0)
    ids = [rng.integers(5, 1000, size=n) for n in lengths]
    return Encoded("train", ids, lengths, data.labels, 0)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--task", default="mrpc")
    ap.add_argument("--glue", type=Path, default=REPO.parent / "shared" / "data" / "glue")
    ap.add_argument("--preset", default="mini")
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--max-len", type=int, default=128)
    ap.add_argument("--steps", type=int, default=30)
    ap.add_argument("--threads", type=int, default=0, help="torch CPU threads (0: torch's default)")
    args = ap.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    spec = TASKS[task_spec(args.task).name]
    data = fake_encoded(spec.name, args.glue, args.max_len)
    m = preset(args.preset).model
    cfg = BertConfig(
        vocab_size=1000,
        layers=m.layers,
        hidden=m.hidden,
        heads=m.heads,
        intermediate=4 * m.hidden,
        max_position=args.max_len,
    )
    print(
        f"{spec.name} train: {len(data)} examples, mean length {data.lengths.mean():.1f}, "
        f"{args.preset} on {device}, batch {args.batch}"
    )
    for name, group in (("plain shuffle", 1), ("length-grouped", 50)):
        torch.manual_seed(0)
        model = SequenceClassifier(Encoder(cfg), spec.num_outputs, 0.1).to(device)
        opt = torch.optim.AdamW(model.parameters(), lr=1e-5)
        batches = length_grouped_batches(data.lengths, args.batch, group, np.random.default_rng(0))
        real = sum(int(data.lengths[b].sum()) for b in batches)
        padded = sum(len(b) * int(data.lengths[b].max()) for b in batches)
        times = []
        for idx in batches[: args.steps + 3]:
            t0 = time.perf_counter()
            ids, mask, y = collate(data, idx, 0, device, spec.is_regression)
            with autocast(device, "auto"):
                logits = model(ids, mask)
            loss = task_loss(logits, y, spec.is_regression)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            if device.type == "cuda":
                torch.cuda.synchronize()
            times.append(time.perf_counter() - t0)
        step = statistics.median(times[3:])  # the first steps warm up kernels and allocators
        print(
            f"  {name:15s} padding {1 - real / padded:6.1%}   median step {step * 1e3:8.1f} ms   "
            f"{args.batch / step:8.0f} examples/s"
        )


if __name__ == "__main__":
    main()
