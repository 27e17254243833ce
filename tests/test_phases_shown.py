"""The progress display names a run's warm-ups where they start and end, for a step run and for a budget run."""

from __future__ import annotations

from mapnet_cli.commands.phases_shown import PhaseNotes, phase_at
from mapnet_cli.settings import resolve


def step(n: int, pieces: int, batch: int, lr: float) -> dict:
    return {"step": n, "pieces": pieces, "batch": batch, "lr": lr}


def test_a_budget_run_names_its_warm_ups_as_fractions_and_each_end_once():
    s = resolve(assignments=["train.time_budget=10m", "train.short_seq.len=16", "train.short_seq.fraction=0.25",
                             "optim.warmup.fraction=0.05", "optim.lr=1e-3", "train.batch_size=64",
                             "train.batch_ramp.start=16", "train.batch_ramp.fraction=0.1"])  # fmt: skip
    notes = PhaseNotes(s)
    first = notes.on_step(step(1, 4, 16, 1e-5))
    assert first == [
        "phase: learning-rate warm-up to 0.001, for the first 5% of the 10m budget",
        "phase: sequence-length warm-up: 16-token pieces (4 a sequence), for the first 25% of the 10m budget; then "
        "whole sequences",
        "phase: batch ramp from 16 to 64 sequences, for the first 10% of the 10m budget",
    ]
    assert notes.eval_note().startswith("  [sequence-length warm-up: trained on 16-token pieces only")
    assert notes.on_step(step(2, 4, 32, 5e-4)) == []
    assert notes.on_step(step(3, 4, 64, 1e-3)) == [
        "phase: learning-rate warm-up over at step 3 (peak 0.001)",
        "phase: batch ramp over at step 3 (64 sequences a step)",
    ]
    said = notes.on_step(step(4, 1, 64, 1e-3))
    assert len(said) == 1 and said[0].startswith("phase: sequence-length warm-up over at step 4: whole sequences")
    assert notes.eval_note() == "" and notes.on_step(step(5, 1, 64, 1e-3)) == []


def test_a_run_without_warm_ups_says_nothing_and_the_summary_names_each_evaluations_phase():
    plain = resolve(assignments=["train.short_seq.len=0", "optim.warmup.steps=0", "train.steps=10"])
    notes = PhaseNotes(plain)
    assert notes.on_step(step(1, 1, plain.train.batch_size, plain.optim.lr)) == [] and notes.eval_note() == ""
    assert phase_at(plain, 5) == ""
    s = resolve(assignments=["train.steps=100", "train.short_seq.len=16", "train.short_seq.steps=40"])
    assert phase_at(s, 40).startswith("warm-up: 16-token pieces") and phase_at(s, 41) == "whole sequences"
