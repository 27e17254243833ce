"""What the progress display says of a run's warm-ups: where each starts and ends, and why an evaluation taken during
the sequence-length warm-up reads higher than the training loss.

    notes = PhaseNotes(settings)
    for line in notes.on_step(data): print(line)     # data: the loop's "step" report (pieces, batch, lr, step)
    print(f"eval @ {step}: loss ...{notes.eval_note()}")

A held-out sequence is always read whole; during the sequence-length warm-up the model has trained on short pieces
only, so the positions past a piece's length are read untrained and the held-out loss can rise while the training
loss falls. Left unsaid, that looks like divergence (the quickstart's printout did exactly this).
"""

from __future__ import annotations


class PhaseNotes:
    def __init__(self, settings):
        self.settings = settings
        self.seen = False
        self.pieces = 1
        self.batch = settings.train.batch_size
        self.lr_done = False

    def _span(self, phase, what: str) -> str:
        """Where a warm-up of [optim.warmup] / [train.short_seq] / [train.batch_ramp] ends, in the run's own terms."""
        if self.settings.train.time_budget:
            return f"for the first {phase.fraction:.0%} of the {self.settings.train.time_budget} budget"
        return f"{what} step {phase.steps:,}"

    def on_step(self, data: dict) -> list[str]:
        """The lines to print at this step: the phases running when the first step is seen, then each one's end."""
        s, lines = self.settings, []
        step, pieces, batch = data["step"], data.get("pieces", 1), data.get("batch", s.train.batch_size)
        warmup = s.optim.warmup
        peaked = data["lr"] is not None and data["lr"] >= s.optim.lr * (1 - 1e-6)
        if not self.seen:
            self.seen = True
            if (warmup.steps or warmup.fraction) and not peaked:
                lines.append(f"phase: learning-rate warm-up to {s.optim.lr:g}, {self._span(warmup, 'until')}")
            if pieces > 1:
                lines.append(
                    f"phase: sequence-length warm-up: {s.train.short_seq.len}-token pieces ({pieces} a sequence), "
                    f"{self._span(s.train.short_seq, 'until')}; then whole sequences"
                )
            if batch < s.train.batch_size:
                lines.append(
                    f"phase: batch ramp from {batch} to {s.train.batch_size} sequences, "
                    f"{self._span(s.train.batch_ramp, 'until')}"
                )
        else:
            if not self.lr_done and peaked:
                lines.append(f"phase: learning-rate warm-up over at step {step:,} (peak {s.optim.lr:g})")
            if self.pieces > 1 and pieces == 1:
                lines.append(
                    f"phase: sequence-length warm-up over at step {step:,}: whole sequences from here; the positions "
                    f"past {s.train.short_seq.len} are new to the model, so the losses rise for a while, then fall"
                )
            if self.batch < s.train.batch_size <= batch:
                lines.append(f"phase: batch ramp over at step {step:,} ({batch} sequences a step)")
        self.lr_done = self.lr_done or peaked
        self.pieces, self.batch = pieces, batch
        return lines

    def eval_note(self) -> str:
        """A reason beside an evaluation taken during the sequence-length warm-up ('' otherwise)."""
        if self.pieces <= 1:
            return ""
        n = self.settings.train.short_seq.len
        return (
            f"  [sequence-length warm-up: trained on {n}-token pieces only; held-out sequences are read whole, "
            f"their positions past {n} untrained]"
        )


def phase_at(settings, step: int) -> str:
    """The phase of a step run's evaluation at `step` (the quickstart's table): which sequences the model had seen
    ('' for a run without the warm-up, or a budget run, whose warm-up ends at a time, not a known step)."""
    t = settings.train
    if not t.short_seq.len or t.time_budget:
        return ""
    return (
        f"warm-up: {t.short_seq.len}-token pieces (later positions untrained)"
        if step <= t.short_seq.steps
        else "whole sequences"
    )


__all__ = ["PhaseNotes", "phase_at"]
