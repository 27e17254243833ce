"""Whether this CPU computes bf16 natively, read from /proc/cpuinfo (Linux).

bf16 autocast on a CPU is a speed lever only where the CPU has bf16 instructions: on x86 AVX512-BF16
(`avx512_bf16`) or AMX (`amx_bf16`), on Arm FEAT_BF16 (`bf16` among the `Features`). Elsewhere oneDNN
emulates bf16 through fp32, and the conversions usually make a step slower than fp32 itself. mapnet measured
only the native case (AMD EPYC with AVX512-BF16: a `mini` step 0.65x its fp32 cost; Intel Xeon with AMX: 0.69x;
experiments/hour-levers).
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


def describe(cpuinfo: str) -> str:
    """The processor's model and its bf16 instructions, e.g. "Intel(R) Xeon(R) Processor; bf16: amx_bf16,
    avx512_bf16": what a measured step cost depends on beyond the core count (a ratio measured on one CPU is not
    another's: experiments/hour-levers measured the narrow shapes' ratios to `mini` 14-26% apart on two CPUs)."""
    model, flags = None, set()
    for line in cpuinfo.splitlines():
        name, sep, values = line.partition(":")
        name = name.strip()
        if sep and name == "model name" and model is None:
            model = values.strip()
        elif sep and name in ("flags", "Features"):
            flags |= NATIVE_BF16 & set(values.split())
    return f"{model or 'unknown model'}; bf16: {', '.join(sorted(flags)) or 'none'}"


def cpu_description(path: Path | None = None) -> str | None:
    """This machine's `describe`, or None where /proc/cpuinfo cannot be read."""
    try:
        return describe((path or CPUINFO).read_text(encoding="utf-8", errors="replace"))
    except OSError:
        return None


def cpu_native_bf16(path: Path | None = None) -> bool | None:
    """This machine's answer (`path`: /proc/cpuinfo), or None where it cannot be read."""
    try:
        return native_bf16((path or CPUINFO).read_text(encoding="utf-8", errors="replace"))
    except OSError:
        return None


__all__ = ["cpu_description", "cpu_native_bf16", "describe", "native_bf16"]
