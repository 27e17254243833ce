"""cpu_features.py: native bf16 read from /proc/cpuinfo, and pretrain's one-line warning where bf16 is emulated."""

from __future__ import annotations

import pytest

from mapnet_cli import cpu_features
from mapnet_cli.commands.progress import warn_emulated_bf16
from mapnet_cli.settings import resolve

# Shortened real /proc/cpuinfo lines: an AMD EPYC (Zen 4, AVX512-BF16), an Intel Sapphire Rapids (AMX), an
# Intel Skylake server (AVX-512 without BF16), a Graviton3 (Arm FEAT_BF16) and a Graviton2 (none).
ZEN4 = "processor\t: 0\nflags\t\t: fpu sse2 avx2 avx512f avx512_bf16 avx512_vnni\n"
SPR = "processor\t: 0\nflags\t\t: fpu avx2 avx512f amx_bf16 amx_tile amx_int8\n"
SKYLAKE = "processor\t: 0\nflags\t\t: fpu sse2 avx2 avx512f avx512bw avx512_vnni\nbugs\t\t: bf16_spectre\n"
GRAVITON3 = "processor\t: 0\nFeatures\t: fp asimd sve bf16 i8mm\nCPU implementer\t: 0x41\n"
GRAVITON2 = "processor\t: 0\nFeatures\t: fp asimd evtstrm aes pmull sha1 sha2 crc32 atomics\n"


@pytest.mark.parametrize("cpuinfo, native", [(ZEN4, True), (SPR, True), (SKYLAKE, False), (GRAVITON3, True),
                                             (GRAVITON2, False), ("", False)])
def test_native_bf16_is_read_from_the_flags_lines_only(cpuinfo, native):
    # SKYLAKE's `bugs` line mentions bf16 (a made-up entry): only `flags` and `Features` count.
    assert cpu_features.native_bf16(cpuinfo) is native


def test_an_unreadable_cpuinfo_claims_nothing(tmp_path):
    assert cpu_features.cpu_native_bf16(tmp_path / "none") is None
    (tmp_path / "cpuinfo").write_text(ZEN4)
    assert cpu_features.cpu_native_bf16(tmp_path / "cpuinfo") is True


def test_a_cpu_is_described_by_its_model_and_bf16_instructions(tmp_path):
    xeon = "processor\t: 0\nmodel name\t: Intel(R) Xeon(R) Processor\n" + SPR.split("\n", 1)[1]
    assert cpu_features.describe(xeon * 2) == "Intel(R) Xeon(R) Processor; bf16: amx_bf16"
    assert cpu_features.describe(SKYLAKE) == "unknown model; bf16: none"
    assert cpu_features.describe(GRAVITON3) == "unknown model; bf16: bf16"
    assert cpu_features.cpu_description(tmp_path / "none") is None


@pytest.mark.parametrize("cpuinfo, precision, warned", [(SKYLAKE, "bf16", True), (ZEN4, "bf16", False),
                                                         (SKYLAKE, "fp32", False), (None, "bf16", False)])
def test_pretrain_warns_once_where_a_cpu_would_emulate_bf16(tmp_path, monkeypatch, capsys, cpuinfo, precision, warned):
    path = tmp_path / "cpuinfo"
    if cpuinfo is not None:
        path.write_text(cpuinfo)
    monkeypatch.setattr(cpu_features, "CPUINFO", path)
    warn_emulated_bf16(resolve(None, {"model": {"preset": "tiny"}}, [f"train.precision={precision}", "train.device=cpu"]))
    err = capsys.readouterr().err
    assert (err.count("warning:") == 1 and "train.precision=fp32" in err) if warned else err == ""
