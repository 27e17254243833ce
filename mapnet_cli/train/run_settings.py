"""A run's settings, resolved at one place and frozen after it, and what `--resume` may change.

    settings = run_settings(shards, out, resume=False, config=None, flags={...}, assignments=["optim.lr=1e-3"])

Fresh: defaults < preset < recipe < --config < flags (`init_from.resolve`: with model.init_from the sizes are
SOURCE's). `--resume`: the run's own settings (its newest checkpoint's settings.toml) replace defaults < preset;
--config and flags still apply for what may change mid-run (`MAY_CHANGE_ON_RESUME`), anything else is a one-line
error naming it. Then, once: CPU workers for `--nproc`, the corpus's cleaning (`with_corpus_cleaning`), and a
resumed run's step count checked against its checkpoints. Nothing changes the result after this.
"""

from __future__ import annotations

from pathlib import Path

from .. import settings as settings_mod
from ..errors import MapnetError

# What a resumed run may change: how long it trains (a larger --steps, a time budget), how it executes
# (device, precision, compilation, prefetching, micro-batches, processes), what it records and when
# (logging, checkpoints, evaluation frequency, variance snapshots) and what comes after (finetune).
# Everything else made the run what it is — the model, the masking, the optimiser and its schedule, the
# batch size, the sequence-length warm-up, the seed, the held-out sets — and is refused on resume: applied
# from the resume step on, settings.toml would describe the whole run with values it trained with only
# since. An allow-list, so a setting added later is refused on resume until someone decides otherwise.
MAY_CHANGE_ON_RESUME = (
    "train.steps",
    "train.time_budget",
    "train.micro_batch_size",
    "train.precision",
    "train.compile",
    "train.compile_scope",
    "train.compile_mode",
    "train.prefetch",
    "train.device",
    "train.eval_every",
    "train.checkpoint_every",
    "train.keep_last",
    "train.keep_steps",
    "optim.impl",
    "shard.verify",
    "shard.workers",
    "preprocess.workers",
    "logging",
    "distributed",
    "finetune",
    "variance",
)
# Inside a section that may change: what would still split the run (a second metrics file beside the first).
NEVER_ON_RESUME = ("logging.metrics_file",)


def run_settings(
    shards: Path, out: Path, *, resume: bool, config=None, flags: dict | None = None, assignments=()
) -> settings_mod.Settings:
    """The settings `mapnet pretrain` trains `out` with on `shards` (module doc)."""
    from . import init_from
    from .inputs import check_resume_steps

    flags, assignments = flags or {}, list(assignments)
    if resume:
        settings = _resumed(out, config, flags, assignments)
        check_resume_steps(settings, out)  # --steps below the run's newest step: before anything is written
    else:
        settings = init_from.resolve(config, flags, assignments)
    if settings.distributed.nproc and settings.train.device == "auto":  # --nproc means CPU workers, even on a GPU
        settings = settings_mod.apply(settings, {"train": {"device": "cpu"}}, "--nproc")
    return with_corpus_cleaning(settings, Path(shards))


def with_corpus_cleaning(settings, shards: Path):
    """`settings` with the preprocess cleaning settings (`data.cleaning.CLEANING`) of the corpus the shards were
    made from, as `shard` recorded them in the shards' settings.toml.

    How text was cleaned is a fact about the corpus, not a choice of the run: the run's settings.toml is
    what export, finetune-glue, probe and blimp read to clean raw text, so a run must record the corpus's
    values (`--no-lowercase` or `--bert-text` at preprocess time), not the defaults it was resolved with.
    Shards without a settings.toml (written by hand, or by an older mapnet) leave `settings` as they are."""
    from ..data.cleaning import cleaning_settings
    from ..data.shards import find_shard_dir
    from ..model.checkpoint import load_settings

    try:
        folder = find_shard_dir(shards)
    except MapnetError:
        return settings  # no shards (yet): reading them says so, in its own words, where it happens
    if not (folder / "settings.toml").is_file():
        return settings
    corpus = cleaning_settings(load_settings(folder).preprocess)
    if corpus == cleaning_settings(settings.preprocess):
        return settings
    return settings_mod.apply(settings, {"preprocess": corpus}, f"{folder / 'settings.toml'} (the corpus's cleaning)")


def check_corpus_cleaning(settings, shards: Path) -> None:
    """Refuse settings that record another cleaning than the corpus of `shards` was made with: they were not
    resolved for these shards (`run_settings` gives a run the corpus's cleaning; a run's settings.toml is what
    export, finetune-glue, probe and blimp read to clean raw text)."""
    corpus = with_corpus_cleaning(settings, shards)
    if corpus != settings:
        from ..data.cleaning import cleaning_settings

        raise MapnetError(
            f"the settings give the cleaning {cleaning_settings(settings.preprocess)}, but the shards in "
            f"{shards} were made with {cleaning_settings(corpus.preprocess)}: resolve a run's settings "
            "with mapnet_cli.train.run_settings (or with_corpus_cleaning) for its shards"
        )


def _resumed(out: Path, config, flags: dict, assignments: list[str]) -> settings_mod.Settings:
    from ..model import checkpoint

    ckpt = checkpoint.latest_checkpoint(out)
    if ckpt is None:
        raise MapnetError(f"--resume: {out} has no complete checkpoint to continue from")
    base = checkpoint.load_settings(ckpt)
    # A changed strategy leaves the run's own table ignored: named as the change it is, before the rest is checked.
    settings = settings_mod.resolve(config, flags, assignments, base=base, base_is_run=True, check_ignored=False)
    refuse_fixed_changes(base, settings)
    if settings.problems():
        raise MapnetError("invalid settings: " + "; ".join(settings.problems()))
    return settings


def refuse_fixed_changes(base, settings) -> None:
    """One line naming every setting outside MAY_CHANGE_ON_RESUME that the flags or --config changed: silently
    keeping the run's value, or applying the new one from here on, would write a settings.toml that lies
    (preset = "mini" beside tiny sizes; batch_size = 16 for a run that trained on 8 until now)."""
    old, new = settings_mod.flat(base.to_dict()), settings_mod.flat(settings.to_dict())
    changed = [
        f"{key} (the run has {old.get(key)!r}, asked {value!r})"
        for key, value in new.items()
        if (key in NEVER_ON_RESUME or key.split(".")[0] not in MAY_CHANGE_ON_RESUME)
        and key not in MAY_CHANGE_ON_RESUME
        and old.get(key) != value
    ]
    if changed:
        raise MapnetError(
            f"--resume cannot change {', '.join(changed)}: a resumed run continues what it trained; "
            "drop the flag, or start a new run with another --out"
        )


__all__ = [
    "MAY_CHANGE_ON_RESUME",
    "NEVER_ON_RESUME",
    "run_settings",
    "refuse_fixed_changes",
    "with_corpus_cleaning",
    "check_corpus_cleaning",
]
