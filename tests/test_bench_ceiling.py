"""benchmarks/bench_ceiling.py and bench_step_variants.py (issue 46's GPU run, smoke-tested on the CPU): the
step's FLOP count agrees with the model's, and both scripts run end to end and write their figures."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from mapnet_cli.model.bert import BertConfig, flops_per_token

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))
import bench_ceiling  # noqa: E402
import step_bench  # noqa: E402


@pytest.mark.parametrize("norm", ["post", "pre"])
def test_the_counted_products_and_attention_are_the_models_flops(norm):
    cfg = BertConfig(vocab_size=32768, norm=norm)  # base
    B, T, N = 128, 128, 19 * 128  # uniform 15% of 126 eligible positions: 19 per row
    gemms, attn = bench_ceiling.step_gemms(cfg, B, T, N), bench_ceiling.step_attention(cfg, B, T, N, width=19)
    counted = sum(g.flops for g in gemms) + sum(a.flops for a in attn)
    assert counted == pytest.approx(flops_per_token(cfg, T, N / (B * T)) * B * T, rel=1e-12)
    # The last block and the head run at the N masked positions only, its keys and values everywhere.
    at_n = {g.name for g in gemms if g.m == N}
    assert at_n == {
        "last block Q @N",
        "last block out @N",
        "last block FFN in @N",
        "last block FFN out @N",
        "head dense @N",
        "head vocab @N",
    }
    assert sum(g.count for g in gemms if g.name == "QKV") == cfg.layers - 1


def test_the_fused_step_moves_at_least_the_optimizers_bytes():
    cfg = BertConfig(vocab_size=32768)
    parts = bench_ceiling.step_bytes(cfg, 128, 128, 2432, params=110_000_000, matrix_params=100_000_000)
    assert parts["AdamW (fp32 weight, grad, m, v)"] == 28 * 110_000_000
    assert all(v > 0 for v in parts.values())


def run(script: str, out: Path, *args: str) -> dict:
    """`python benchmarks/SCRIPT --smoke --json OUT ARGS`, in this process (tests/scripts.py: no second torch start)."""
    from scripts import run_script

    run_script(ROOT / "benchmarks" / script, "--smoke", "--json", str(out), *args, cwd=ROOT)
    return json.loads(out.read_text())


@pytest.mark.slow  # two scripts that time kernels and a few tiny steps on the CPU
def test_both_scripts_smoke_print_the_floor_and_each_arms_fraction_of_it(tmp_path):
    """One ceiling run serves both scripts, as in gpu_step.sh: the variants read its floor."""
    r = run(
        "bench_ceiling.py", tmp_path / "c.json", "--arms", "eager", "--repeats", "1", "--steps", "1", "--rounds", "1"
    )
    floor = r["floor_ms"]
    assert floor["total"] == pytest.approx(floor["products"] + floor["attention"] + floor["bytes"])
    assert all(floor[k] > 0 for k in ("products", "attention", "bytes"))
    tiny = step_bench.model_config("tiny", 512)
    assert r["flops"] == pytest.approx(flops_per_token(tiny, 32, r["masked"] / (8 * 32)) * 8 * 32, rel=1e-12)
    eager = r["mapnet"]["eager"]
    assert eager["fraction_of_floor"] == pytest.approx(floor["total"] / eager["ms"])
    attention = r["attention"]["blocks 1..L-1"]
    assert isinstance(attention["backends"]["MATH"], float)  # the math kernel runs anywhere
    assert any("scaled_dot_product" in k for k in attention["picked"])  # what the default dispatched to, named

    v = run(
        "bench_step_variants.py",
        tmp_path / "v.json",
        "--arms",
        "eager",
        "foreach",
        "hf",
        "--steps",
        "1",
        "--warmup",
        "1",
        "--ceiling",
        str(tmp_path / "c.json"),
    )
    arms = v["arms"]
    assert set(arms) == {"eager", "foreach", "hf"}
    assert v["floor_ms"] == floor["total"]
    assert arms["eager"]["fraction_of_floor"] == pytest.approx(v["floor_ms"] / arms["eager"]["ms"])
    assert arms["hf"]["fraction_of_floor"] is None  # another model: the floor is mapnet's step's
    assert arms["foreach"]["baseline"] == "eager" and "fused" in arms["foreach"]["prediction"]
    assert all(a["tokens_per_s"] > 0 and a["mfu_measured"] > 0 for a in arms.values())
    # Each arm's own FLOPs: Hugging Face computes its head and last block at every position, mapnet at the masked ones.
    assert arms["hf"]["flops_per_token"] > arms["eager"]["flops_per_token"]


def test_the_cpu_ceiling_script_counts_what_the_step_performs_and_writes_its_figures(tmp_path):
    """bench_cpu_ceiling.py --smoke: every step's FLOPs as FlopCounterMode counts them, split by operator (the
    shares add up to the total), its fraction of the ceilings at its own shapes, and HF's step beside `mini`'s."""
    from scripts import run_script

    out = tmp_path / "cpu.json"
    printed = run_script(
        ROOT / "benchmarks" / "bench_cpu_ceiling.py", "--smoke", "--math-attention", "--json", str(out)
    )
    doc = json.loads(out.read_text())
    assert set(doc["steps"]) == {"hour", "mini fast", "HF BertForMaskedLM, mini"}
    for name, step in doc["steps"].items():
        assert step["flops"] > 0 and step["step_ms"] > 0 and step["products"] > 0, name
        assert abs(sum(step["flops_per_op"].values()) - step["flops"]) < 1e-6 * step["flops"]
        assert 0 < step["shapes_ceiling_fp32"]["fraction"] and f"{name}: " in printed
    assert doc["square"]["fp32_tflops"] > 0 and doc["copy_gb_s"] > 0
    # HF computes the head over every position, mapnet at the masked ones only: more FLOPs for the same batch.
    assert doc["steps"]["HF BertForMaskedLM, mini"]["flops"] > doc["steps"]["mini fast"]["flops"]
    assert "mini fast against HF at the same batch:" in printed
    for name in ("hour", "mini fast"):  # the math kernel timed against the default, round by round
        both = doc["steps"][name]["math_attention"]
        assert len(both["ratios"]) == len(both["default"]) == len(both["math"]) >= 2
        assert both["ratios"] == [m / d for m, d in zip(both["math"], both["default"])]
    # each step timed as its recipe trains on a CPU: the hour recipe's math-cpu kernel, fast's PyTorch pick
    kernels = {name: doc["steps"][name]["attention_kernel"] for name in ("hour", "mini fast")}
    assert kernels == {"hour": "math", "mini fast": "auto"}
    assert "SDPA's kernel in each mapnet step, as its recipe trains on this CPU: hour math, mini fast auto" in printed
