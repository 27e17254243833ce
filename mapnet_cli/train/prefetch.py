"""The next step's micro-batches, prepared by a background thread while this step runs.

    batches = StepPrefetcher(run_batches, enabled=True)     # run_batches(step, position) -> list
    for step ...:
        micro = batches.get(step, position, after=(step + 1, position + n) if step + 1 < end else None)
    batches.close()

Exact because a step's micro-batches are a pure function of (step, data position): the data order is a seeded
permutation, every random draw of every strategy (MAP-Net's included) comes from streams keyed by (seed, step,
slot), and nothing reads the weights or the global torch RNG. So exact resume, 1 x 8 = 2 x 4 and keyed randomness
are untouched (tests/train/test_prefetch.py checks the losses bit for bit). A thread, so that reading the shards,
drawing the masks and the pinned copies overlap the device's work where the host limits the step. Measured on a
2-core CPU it costs more than it moves (a step 2-14% slower; docs/performance.md), so `train.prefetch` is off by
default; on a GPU it is unmeasured. Why exactly, why a thread and one batch ahead, out-of-order requests:
docs/internals.md#trainprefetchpy.
"""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Generic, TypeVar

from torch.profiler import record_function

T = TypeVar("T")


class StepPrefetcher(Generic[T]):
    """`make(step, position, ...)`, one call ahead, in a background thread (or inline when not `enabled`)."""

    def __init__(self, make: Callable[..., T], enabled: bool):
        self._make = make
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="mapnet-batches") if enabled else None
        self._ahead: tuple[tuple, Future] | None = None

    def get(self, step: int, position: int, *rest, after: tuple | None = None) -> T:
        """The batches of `step` at data `position`; then starts making `after` = (step, position, ...), if given.

        `rest`: more arguments of `make` the batches depend on (a budget run's pieces per sequence, which its
        clock decides): batches made ahead with other arguments are dropped and made again here.
        An exception raised while making them in the background is raised here, by the step that needs them.
        """
        ahead, self._ahead = self._ahead, None
        key = (step, position, *rest)
        if ahead is not None and ahead[0] == key:
            # The part of making them that the background thread did not finish during the last step: what is
            # left of the batches' cost on this thread (benchmarks/profile_step.py shows it; the profiler
            # does not see the background thread's own ranges).
            with record_function("mapnet.prefetch_wait"):
                out = ahead[1].result()
        else:
            if ahead is not None:
                _settle(ahead[1])
            out = self._make(*key)
        if self._pool is not None and after is not None:
            self._ahead = (tuple(after), self._pool.submit(self._make, *after))
        return out

    def close(self) -> None:
        """Wait for the pending batch (its result and any error are dropped) and stop the thread."""
        if self._ahead is not None:
            _settle(self._ahead[1])
            self._ahead = None
        if self._pool is not None:
            self._pool.shutdown(wait=True)
            self._pool = None

    def __enter__(self) -> StepPrefetcher[T]:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def _settle(future: Future) -> None:
    """Wait for a batch nobody will use: its error, if any, belongs to a step that never ran."""
    if not future.cancel():
        future.exception()


__all__ = ["StepPrefetcher"]
