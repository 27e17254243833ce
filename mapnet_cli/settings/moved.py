"""Keys an earlier mapnet's settings had, and where they are now.

A config file or `--set` with an old key is refused in one line naming the new one (`resolution._apply`); a
run's own settings.toml, written by an earlier mapnet, is read with its keys moved (`migrate`), so every
earlier run folder still resumes, exports and evaluates.
"""

from __future__ import annotations

from typing import Any

# mapnet 0.2: each masking strategy owns a table ([masking.mapnet], [masking.span], ...); a key moved there belongs to
# its strategy's table (`migrate` keeps it only for a run of that strategy).
MOVED = {
    **{
        f"masking.{old}": f"masking.mapnet.{new}"
        for old, new in (
            ("importance", "importance"),
            ("proposal_target", "target"),
            ("proposal_temperature", "temperature"),
            ("map_lr", "lr"),
            ("learnability_decay", "learnability_decay"),
            ("target_floor", "target_floor"),
            ("clip_epsilon", "clip_epsilon"),
            ("explore_start", "explore_start"),
            ("explore_end", "explore_end"),
            ("explore_steps", "explore_steps"),
            ("map_layers", "layers"),
            ("map_hidden", "hidden"),
            ("map_heads", "heads"),
            ("map_dropout", "dropout"),
            ("map_loss_weight", "loss_weight"),
            ("map_loss_on", "loss_on"),
            ("train_map_on_uniform", "train_on_uniform"),
            ("map_train_every", "train_every"),
        )
    },
    "masking.strata_copies": "masking.stratified.copies",
    "masking.frequency_power": "masking.frequency.power",
    "masking.adaptive_score": "masking.adaptive.score",
    "masking.adaptive_decay": "masking.adaptive.decay",
    "masking.adaptive_every": "masking.adaptive.every",
    "masking.adaptive_weights": "masking.adaptive.weights",
    "masking.span_p": "masking.span.p",
    "masking.span_max_words": "masking.span.max_words",
    "masking.pmi_vocab": "masking.pmi.vocab",
    # mapnet 0.2: each warm-up is a table of one shape ([optim.warmup], [train.short_seq], [train.batch_ramp]).
    "optim.warmup_steps": "optim.warmup.steps",
    "optim.warmup_fraction": "optim.warmup.fraction",
    "train.short_seq_len": "train.short_seq.len",
    "train.short_seq_steps": "train.short_seq.steps",
    "train.short_seq_fraction": "train.short_seq.fraction",
    "train.batch_ramp_start": "train.batch_ramp.start",
    "train.batch_ramp_steps": "train.batch_ramp.steps",
    "train.batch_ramp_fraction": "train.batch_ramp.fraction",
}
# One old key that became several: the defensive mixture was shared by MAP-Net's HT, frequency and adaptive masking.
SPLIT = {
    "masking.mix_uniform": (
        "masking.mapnet.mix_uniform",
        "masking.frequency.mix_uniform",
        "masking.adaptive.mix_uniform",
    )
}


def moved_to(dotted: str) -> str | None:
    """Where the old key `dotted` went, in words (None: it is not an old key)."""
    if dotted in MOVED:
        return repr(MOVED[dotted])
    if dotted in SPLIT:
        return " or ".join(repr(k) for k in SPLIT[dotted]) + " (the strategy's own)"
    return None


def migrate(values: dict[str, Any]) -> dict[str, Any]:
    """A run's settings tree as an earlier mapnet wrote it, with its keys where they are now (a copy). A key of a
    strategy the run did not use is dropped: it was ignored then, and that strategy's table keeps its defaults."""
    import copy

    tree = copy.deepcopy(values)
    masking = tree.get("masking") if isinstance(tree.get("masking"), dict) else {}
    strategy = masking.get("strategy", "uniform")
    for old, news in [*((old, (new,)) for old, new in MOVED.items()), *SPLIT.items()]:
        *path, key = old.split(".")
        table = tree
        for part in path:
            table = table.get(part) if isinstance(table, dict) else None
        if not isinstance(table, dict) or key not in table:
            continue
        value = table.pop(key)
        # masking.<strategy>.<key>: the run's own strategy's table only
        new = next((n for n in news if not n.startswith("masking.") or n.split(".")[1] == strategy), None)
        if new is not None:
            *path, key = new.split(".")
            target = tree
            for part in path:
                target = target.setdefault(part, {})
            target.setdefault(key, value)  # a key the file also gives under its new name keeps that value
    return tree


__all__ = ["MOVED", "SPLIT", "migrate", "moved_to"]
