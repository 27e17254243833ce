"""What a run needs besides its settings, checked before any work, every problem in one line.

    check_run_inputs(settings, reader, shards)     # Run, before the eval set and the model; compare, for
                                                   # every arm before the first one trains

The shards' sequences fit model.max_position, are as long as the recipe's (`recipes.MEASURED_ON`), and the
sequence-length warm-up cuts them into whole pieces; a PMI run's vocabulary is found and intact. A run checks
these itself, but `compare` trains its arms one after another: checked only by each arm's Run, a problem of the
last arm (a `pmi` arm without its vocabulary) would be found after the first ones trained, with their files left
behind.
"""

from __future__ import annotations

from pathlib import Path

from ..errors import MapnetError
from ..settings.recipes import MEASURED_ON


def check_run_inputs(settings, data, shards: Path) -> None:
    """Refuse in one `MapnetError` line whatever `settings` cannot train on `data` (the training
    `ShardReader` of `shards`)."""
    problems = run_input_problems(settings, data, shards)
    if problems:
        raise MapnetError("; ".join(problems))


def run_input_problems(settings, data, shards: Path) -> list[str]:
    """Each thing `settings` cannot train on `data`, one message each (`check_run_inputs`)."""
    model, t, problems = settings.model, settings.train, []
    if data.max_seq_len > model.max_position:
        problems.append(f"shards {shards} hold {data.max_seq_len}-token sequences but model.max_position is "
                        f"{model.max_position}")
    if t.short_seq_len and (t.short_seq_len >= data.max_seq_len or data.max_seq_len % t.short_seq_len):
        problems.append(f"train.short_seq_len ({t.short_seq_len}) must divide the shards' {data.max_seq_len}-token "
                        "sequences into at least two pieces (e.g. 32 or 64 for 128)")
    measured_on = MEASURED_ON.get(t.recipe, {}).get("max_seq_len")
    if measured_on and data.max_seq_len != measured_on:
        # The recipe's batch is sized for these sequences (its tokens per step are what the search measured).
        problems.append(f"recipe {t.recipe} trains on {measured_on}-token sequences but shards {shards} hold "
                        f"{data.max_seq_len}: shard them with `mapnet shard PREP --max-seq-len {measured_on}`, "
                        "or name another recipe")
    if settings.masking.strategy == "pmi":
        from ..masking import pmi_vocab
        from ..masking.pmi_units import find_pmi_vocab

        try:
            pmi_vocab.read_vocabulary(find_pmi_vocab(settings.masking, data.dir, getattr(data, "manifest", {})))
        except MapnetError as exc:
            problems.append(str(exc))
    return problems


__all__ = ["check_run_inputs", "run_input_problems"]
