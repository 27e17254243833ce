"""The device an evaluating command scores on: `--device` (probe, blimp) or a run's train.device (compare)."""

from __future__ import annotations

from ..errors import MapnetError


def evaluation_device(device: str):
    """`device` (cpu, cuda or auto) as a torch.device: "auto" is CUDA where there is one."""
    import torch

    if device not in ("cpu", "cuda", "auto"):
        raise MapnetError(f"--device must be cpu, cuda or auto (got {device!r})")
    if device == "cuda" and not torch.cuda.is_available():
        raise MapnetError("--device cuda but no CUDA device is available")
    return torch.device("cuda" if device == "cuda" or (device == "auto" and torch.cuda.is_available()) else "cpu")


__all__ = ["evaluation_device"]
