"""Whether this CPU computes bf16 natively, read from /proc/cpuinfo (Linux).

bf16 autocast on a CPU is a speed lever only where the CPU has bf16 instructions: on x86 AVX512-BF16
(`avx512_bf16`) or AMX (`amx_bf16`), on Arm FEAT_BF16 (`bf16` among the `Features`). Elsewhere oneDNN
emulates bf16 through fp32, and the conversions usually make a step slower than fp32 itself. mapnet measured
only the native case (AMD EPYC with AVX512-BF16: a `mini` step 0.65x its fp32 cost, experiments/hour-levers).
Where /proc/cpuinfo is absent (macOS, Windows) nothing is claimed.
"""

from __future__ import annotations

from pathlib import Path

CPUINFO = Path("/proc/cpuinfo")
NATIVE_BF16 = {"avx512_bf16", "amx_bf16", "bf16"}  # x86 AVX512-BF16, x86 AMX, Arm FEAT_BF16


def native_bf16(cpuinfo: str) -> bool:
    """True when any processor's flags (x86 `flags`, Arm `Features`) name a bf16 instruction set."""
    for line in cpuinfo.splitlines():
        name, sep, values = line.partition(":")
        if sep and name.strip() in ("flags", "Features") and NATIVE_BF16 & set(values.split()):
            return True
    return False


def cpu_native_bf16(path: Path | None = None) -> bool | None:
    """This machine's answer (`path`: /proc/cpuinfo), or None where it cannot be read."""
    try:
        return native_bf16((path or CPUINFO).read_text(encoding="utf-8", errors="replace"))
    except OSError:
        return None


__all__ = ["cpu_native_bf16", "native_bf16"]
