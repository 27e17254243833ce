"""cpu_features.py: native bf16 read from /proc/cpuinfo, and pretrain's one-line warning where bf16 is emulated."""

from __future__ import annotations

import json

import pytest
import torch

from mapnet_cli import cpu_features
from mapnet_cli.commands.progress import warn_emulated_bf16
from mapnet_cli.settings import resolve
from mapnet_cli.train import pretrain

# Shortened real /proc/cpuinfo lines: an AMD EPYC (Zen 4, AVX512-BF16), an Intel Sapphire Rapids (AMX), an
# Intel Skylake server (AVX-512 without BF16), a Graviton3 (Arm FEAT_BF16) and a Graviton2 (none).
ZEN4 = "processor\t: 0\nflags\t\t: fpu sse2 avx2 avx512f avx512_bf16 avx512_vnni\n"
SPR = "processor\t: 0\nflags\t\t: fpu avx2 avx512f amx_bf16 amx_tile amx_int8\n"
SKYLAKE = "processor\t: 0\nflags\t\t: fpu sse2 avx2 avx512f avx512bw avx512_vnni\nbugs\t\t: bf16_spectre\n"
GRAVITON3 = "processor\t: 0\nFeatures\t: fp asimd sve bf16 i8mm\nCPU implementer\t: 0x41\n"
GRAVITON2 = "processor\t: 0\nFeatures\t: fp asimd evtstrm aes pmull sha1 sha2 crc32 atomics\n"


@pytest.mark.parametrize(
    "cpuinfo, native", [(ZEN4, True), (SPR, True), (SKYLAKE, False), (GRAVITON3, True), (GRAVITON2, False), ("", False)]
)
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


@pytest.mark.parametrize(
    "cpuinfo, precision, warned",
    [
        (SKYLAKE, "bf16", True),
        (ZEN4, "bf16", False),
        (SKYLAKE, "fp32", False),
        (None, "bf16", False),
        (SKYLAKE, "bf16-native", False),
    ],
)  # it trains in fp32 there
def test_pretrain_warns_once_where_a_cpu_would_emulate_bf16(tmp_path, monkeypatch, capsys, cpuinfo, precision, warned):
    path = tmp_path / "cpuinfo"
    if cpuinfo is not None:
        path.write_text(cpuinfo)
    monkeypatch.setattr(cpu_features, "CPUINFO", path)
    warn_emulated_bf16(
        resolve(None, {"model": {"preset": "tiny"}}, [f"train.precision={precision}", "train.device=cpu"])
    )
    err = capsys.readouterr().err
    assert (err.count("warning:") == 1 and "train.precision=fp32" in err) if warned else err == ""


@pytest.mark.parametrize(
    "cpuinfo, precision, bf16",
    [
        (ZEN4, "bf16-native", True),
        (SPR, "bf16-native", True),
        (SKYLAKE, "bf16-native", False),
        (None, "bf16-native", False),
        (SKYLAKE, "bf16", True),
        (ZEN4, "auto", False),
        (ZEN4, "fp32", False),
    ],
)
def test_bf16_native_autocasts_on_a_cpu_only_where_its_flags_name_bf16(tmp_path, monkeypatch, cpuinfo, precision, bf16):
    path = tmp_path / "cpuinfo"  # None: unreadable, as on macOS (nothing is claimed: fp32)
    if cpuinfo is not None:
        path.write_text(cpuinfo)
    monkeypatch.setattr(cpu_features, "CPUINFO", path)
    t = resolve(None, {"model": {"preset": "tiny"}}, [f"train.precision={precision}"]).train
    assert t.autocasts_bf16(torch.device("cpu")) is bf16


@pytest.mark.parametrize("supported", [True, False])
def test_on_cuda_bf16_native_asks_the_gpu_and_auto_does_not(monkeypatch, supported):
    asked = []
    monkeypatch.setattr(
        torch.cuda, "is_bf16_supported", lambda including_emulation=True: asked.append(including_emulation) or supported
    )
    native = resolve(None, {"model": {"preset": "tiny"}}, ["train.precision=bf16-native"]).train
    assert native.autocasts_bf16(torch.device("cuda")) is supported and asked == [False]  # a V100 emulates it
    assert resolve(None, {"model": {"preset": "tiny"}}, []).train.autocasts_bf16(torch.device("cuda")) is True
    assert asked == [False]  # auto does not ask: bf16 on every CUDA device, as before


def _two_steps(shards, out, precision):
    sets = [
        f"train.precision={precision}",
        "train.steps=2",
        "train.batch_size=8",
        "train.eval_every=2",
        "train.eval_sequences=16",
        "train.device=cpu",
        "logging.progress=false",
    ]
    pretrain(resolve(None, {"model": {"preset": "tiny"}}, sets), shards, out)
    losses = [json.loads(line)["loss"] for line in (out / "metrics.jsonl").read_text().splitlines() if '"loss"' in line]
    return json.loads((out / "run.json").read_text())["precision"], losses


@pytest.mark.parametrize("cpuinfo, same_as", [(ZEN4, "bf16"), (SKYLAKE, "fp32")])
def test_a_bf16_native_run_trains_as_the_precision_it_resolved_to_and_records_it(
    tmp_path, monkeypatch, cpuinfo, same_as
):
    from tiny_shards import write_tiny_shards

    shards = write_tiny_shards(tmp_path / "shards")
    (tmp_path / "cpuinfo").write_text(cpuinfo)
    monkeypatch.setattr(cpu_features, "CPUINFO", tmp_path / "cpuinfo")
    native, native_losses = _two_steps(shards, tmp_path / "native", "bf16-native")
    named, named_losses = _two_steps(shards, tmp_path / "named", same_as)
    other, other_losses = _two_steps(shards, tmp_path / "other", "fp32" if same_as == "bf16" else "bf16")
    assert (native, named) == (same_as, same_as) and other != same_as
    assert native_losses == named_losses and native_losses != other_losses  # bf16 rounding moves the losses
