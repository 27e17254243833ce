"""How many GLUE dev examples are longer than the sequences a checkpoint pretrained on.

    uv run python experiments/common/glue_lengths.py CHECKPOINT [--data ../shared/data/glue] [--task SST-2,CoLA,MRPC]
        [--length N]

Each example is encoded exactly as `finetune-glue` encodes it (the checkpoint's cleaning and tokenizer, `[CLS] a
[SEP] b [SEP]`), without the length limit, and compared with the checkpoint's `shard.max_seq_len` (or `--length`):
an encoder trained on 64-token sequences with rotary positions has never attended across more than 63 positions, so
the examples past that length ask it for distances it never saw. Prints one line per task.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np

from mapnet_cli.evaluation.glue.encode import TextEncoder
from mapnet_cli.evaluation.glue.pretrained import find_checkpoints, load_architecture
from mapnet_cli.evaluation.glue.tasks import load_task, task_names, task_spec


def dev_lengths(ref, settings, data: Path, tasks: str) -> list[tuple[str, np.ndarray]]:
    """[(dev entry, every example's length in tokens, specials included)] of the tasks, encoded as fine-tuning
    encodes them for this checkpoint but never cut."""
    text = TextEncoder(ref.path / "tokenizer.json", settings.preprocess, max_len=1 << 30)
    return [
        (split.entry, text.encode(split.entry, split.text_a, split.text_b, split.labels).lengths)
        for name in task_names(tasks)
        for split in load_task(task_spec(name), data).dev
    ]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("checkpoint", type=Path)
    ap.add_argument("--data", type=Path, default=Path(__file__).resolve().parents[3] / "shared" / "data" / "glue")
    ap.add_argument("--task", default="SST-2,CoLA,MRPC")
    ap.add_argument("--length", type=int, help="compare with this length (default: the checkpoint's shard.max_seq_len)")
    args = ap.parse_args(argv)
    ref = find_checkpoints([args.checkpoint])[0]
    _, settings = load_architecture(ref)
    trained = args.length or settings.shard.max_seq_len
    print(f"{ref.label}: pretrained on {settings.shard.max_seq_len}-token sequences; counting examples over {trained}")
    for entry, lengths in dev_lengths(ref, settings, args.data, args.task):
        over = int(np.sum(lengths > trained))
        print(
            f"{entry} dev: {len(lengths):,} examples, {over:,} ({100 * over / len(lengths):.0f}%) longer than "
            f"{trained} tokens (specials included); median {int(np.median(lengths))}, longest {int(lengths.max())}"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
