"""Counting host syncs: the points where the host waits for the device's results.

    with host_syncs.counting() as prof:
        train_step(...)
    host_syncs.count(prof.events())        # {"item": 0, "nonzero": 0, "tolist": 1, "cuda": 0}

On an accelerator each sync empties the queue of work the host had launched ahead, so a step
with one per micro-batch runs at the speed of its slowest launch. The count is read from the
profiler's record of operators, which is the same on every device, so a CPU test can count the
syncs a GPU step would make:

- `item`: `aten::_local_scalar_dense`: `.item()`, `float(t)`, `int(t)`, `bool(t)`, `if t:`;
- `nonzero`: `aten::nonzero`: `.nonzero()`, boolean-mask indexing `t[mask]`, `masked_select`;
- `tolist`: `Tensor.tolist`, which is not an operator: `counting` wraps it in a labelled range;
- `cuda`: on CUDA, the runtime's own waits (`cudaStreamSynchronize`, `cudaDeviceSynchronize`,
  `cudaEventSynchronize`, the synchronous `cudaMemcpy`): what a device-to-host read costs there.

Not counted: whatever runs under a host-side range (`HOST_SIDE`: the batch's data and masks are
drawn on the host by design, `masking.strategy.to_device`), PyTorch's optimizers, which read
their step counters with `.item()` from host tensors (a host read, no device wait, on every device),
and `torch._assert_async`, whose CPU kernel reads its argument (`item`) where the CUDA one is a
device-side assert that the host never waits for (`DEVICE_CHECKS`).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterable, Iterator

import torch
from torch.profiler import ProfilerActivity, profile, record_function

HOST_SIDE = ("mapnet.data", "mapnet.masks", "mapnet.to_device", "Optimizer.step#", "Optimizer.zero_grad#")
DEVICE_CHECKS = ("aten::_assert_async",)
OPERATORS = {"aten::_local_scalar_dense": "item", "aten::nonzero": "nonzero", "Tensor.tolist": "tolist"}
CUDA_WAITS = {"cudaStreamSynchronize", "cudaDeviceSynchronize", "cudaEventSynchronize", "cudaMemcpy"}
KINDS = ("item", "nonzero", "tolist", "cuda")


@contextlib.contextmanager
def labelled_tolist() -> Iterator[None]:
    """`Tensor.tolist` inside a profiler range of its own name while the block runs (it is not an operator)."""
    plain = torch.Tensor.tolist

    def tolist(self):
        with record_function("Tensor.tolist"):
            return plain(self)

    torch.Tensor.tolist = tolist
    try:
        yield
    finally:
        torch.Tensor.tolist = plain


@contextlib.contextmanager
def counting(cuda: bool = False, **profile_kwargs) -> Iterator[profile]:
    """A `torch.profiler.profile` over the block, with `tolist` visible to `count`."""
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if cuda else [])
    with labelled_tolist(), profile(activities=activities, **profile_kwargs) as prof:
        yield prof


def ancestors(event) -> Iterator:
    """The profiler ranges `event` ran inside, innermost first."""
    parent = event.cpu_parent
    while parent is not None:
        yield parent
        parent = parent.cpu_parent


def host_side(event) -> bool:
    return any(parent.name.startswith(HOST_SIDE) or parent.name in DEVICE_CHECKS for parent in ancestors(event))


def count(events: Iterable, within=None) -> dict[str, int]:
    """The syncs among profiler `events`, by kind; `within`: only those inside that range (one of the
    events, e.g. a `ProfilerStep*`)."""
    out = dict.fromkeys(KINDS, 0)
    for ev in events:
        kind = OPERATORS.get(ev.name) or ("cuda" if ev.name in CUDA_WAITS else None)
        if kind is None or host_side(ev):
            continue
        if within is not None and not any(parent is within for parent in ancestors(ev)):
            continue
        out[kind] += 1
    return out


__all__ = ["HOST_SIDE", "KINDS", "ancestors", "counting", "count", "host_side", "labelled_tolist"]
