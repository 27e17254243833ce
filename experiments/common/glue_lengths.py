"""How many GLUE dev examples are longer than the sequences a checkpoint pretrained on.

    uv run python experiments/common/glue_lengths.py CHECKPOINT [--data ../shared/data/glue] [--task SST-2,CoLA,MRPC]

Each example is encoded exactly as `finetune-glue` encodes it (the checkpoint's cleaning and tokenizer, `[CLS] a
[SEP] b [SEP]`), without the length limit, and compared with the checkpoint's `shard.max_seq_len`: an encoder
trained on 64-token sequences with rotary positions has never attended across more than 63 positions, so the
examples past that length ask it for distances it never saw. Prints one line per task.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np

from mapnet_cli.evaluation.glue.encode import TextEncoder
from mapnet_cli.evaluation.glue.pretrained import find_checkpoints, load_architecture
from mapnet_cli.evaluation.glue.tasks import load_task, task_names, task_spec


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("checkpoint", type=Path)
    ap.add_argument("--data", type=Path, default=Path(__file__).resolve().parents[3] / "shared" / "data" / "glue")
    ap.add_argument("--task", default="SST-2,CoLA,MRPC")
    args = ap.parse_args(argv)
    ref = find_checkpoints([args.checkpoint])[0]
    _, settings = load_architecture(ref)
    trained = settings.shard.max_seq_len
    text = TextEncoder(ref.path / "tokenizer.json", settings.preprocess, max_len=1 << 30)
    print(f"{ref.label}: pretrained on {trained}-token sequences")
    for name in task_names(args.task):
        for split in load_task(task_spec(name), args.data).dev:
            lengths = text.encode(split.entry, split.text_a, split.text_b, split.labels).lengths
            over = int(np.sum(lengths > trained))
            print(f"{split.entry} dev: {len(lengths):,} examples, {over:,} ({100 * over / len(lengths):.0f}%) longer than "
                  f"{trained} tokens (specials included); median {int(np.median(lengths))}, longest {int(lengths.max())}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
