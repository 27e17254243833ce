"""experiments/common/glue_lengths.py: GLUE dev examples longer than the sequences a checkpoint pretrained on (section
H's MRPC caveat), counted on the real MRPC dev set through the checkpoint's own cleaning and tokenizer."""

from __future__ import annotations

import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "experiments" / "common"))

import glue_lengths  # noqa: E402


def test_the_count_over_a_length_is_what_fine_tuning_at_that_length_cuts(pretrained_tiny, shared_data, capsys):
    from mapnet_cli.evaluation.glue.encode import TextEncoder
    from mapnet_cli.evaluation.glue.pretrained import find_checkpoints, load_architecture
    from mapnet_cli.evaluation.glue.tasks import load_task, task_spec

    glue = shared_data / "glue"
    ref = find_checkpoints([pretrained_tiny])[0]
    _, settings = load_architecture(ref)
    # Fine-tuning with max_seq_len 48 cuts exactly the examples longer than 48: the other path (pair truncation,
    # longest side first) must agree with the uncut lengths the script counts.
    dev = load_task(task_spec("MRPC"), glue).dev[0]
    cut = TextEncoder(ref.path / "tokenizer.json", settings.preprocess, max_len=48).encode(
        dev.entry, dev.text_a, dev.text_b, dev.labels
    )
    assert 0 < cut.truncated < len(dev) and int(cut.lengths.max()) == 48
    glue_lengths.main([str(pretrained_tiny), "--data", str(glue), "--task", "MRPC", "--length", "48"])
    out = capsys.readouterr().out.splitlines()
    assert out[0].endswith("pretrained on 128-token sequences; counting examples over 48")
    assert out[1].startswith(f"MRPC dev: {len(dev):,} examples, {cut.truncated:,} (")
