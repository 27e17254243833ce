"""The tables of docs/performance.md that the kept benchmark outputs can give: GPU throughput (section 4's
`gpu_check.log`), where a CPU step's time goes (`benchmarks/profile_step.py` printouts), the batches made one
step ahead, and each masking arm's step cost (`benchmarks/bench_strategies.py` printouts).

    uv run python experiments/common/doc_tables.py --write     # writes them, with every other table of the manual

Each function reads the raw printouts under experiments/ and returns a Markdown table; the figures are the
printouts' own (ratios as the benchmark printed them, from its unrounded times), never retyped.
"""

from __future__ import annotations

import re
from pathlib import Path

import bench_printout

EXPERIMENTS = Path(__file__).resolve().parents[1]


# ---------------------------------------------------------------- GPU throughput (experiments/gpu-h100)
def read_gpu_throughput() -> list[dict[str, str]]:
    """gpu_check.log's `bench_pretrain.py` sections at `base`, one dict of printed figures per shape: batch, seq,
    eager (mapnet, hf, ratio, mfu_mapnet, mfu_hf) and compiled (mapnet_c, hf_c, ratio_c, mfu_mapnet_c, mfu_hf_c)."""
    path = EXPERIMENTS / "gpu-h100" / "gpu_check.log"
    sections = re.findall(
        r"=== throughput and MFU, base, \d+ tokens.*?\n(.*?)(?=\n===|\Z)", path.read_text(encoding="utf-8"), re.S
    )
    if not sections:
        raise SystemExit(f"{path}: no throughput section")
    rows = []
    for text in sections:
        shape = re.search(r"batch (?P<batch>\d+) x seq (?P<seq>\d+)", text)
        eager = re.search(
            r"mapnet (?P<mapnet>[\d,]+) tok/s \| hf (?P<hf>[\d,]+) tok/s.*?\| ratio (?P<ratio>[\d.]+)x \| "
            r"MFU mapnet (?P<mfu_mapnet>[\d.]+)%, hf (?P<mfu_hf>[\d.]+)%",
            text,
        )
        comp = re.search(
            r"torch.compile: mapnet (?P<mapnet_c>[\d,]+) tok/s \| hf (?P<hf_c>[\d,]+) tok/s.*?"
            r"mapnet\+compile / hf\+compile (?P<ratio_c>[\d.]+)x \| "
            r"MFU mapnet\+compile (?P<mfu_mapnet_c>[\d.]+)%, hf\+compile (?P<mfu_hf_c>[\d.]+)%",
            text,
        )
        if not (shape and eager and comp):
            raise SystemExit(f"{path}: a throughput section without its figures")
        rows.append(shape.groupdict() | eager.groupdict() | comp.groupdict())
    return rows


def gpu_throughput() -> str:
    """mapnet vs Hugging Face at `base` on the H100, eager and compiled, with MFU: gpu_check.log's throughput
    sections."""
    rows = [
        "| `base`, tokens × batch | mapnet tok/s (MFU) | HF tok/s (MFU) | ratio | compiled: mapnet (MFU) | compiled: "
        "HF (MFU) |",
        "|---|---|---|---|---|---|",
    ]
    for r in read_gpu_throughput():
        rows.append(
            f"| {r['seq']} × {r['batch']} | {r['mapnet']} ({r['mfu_mapnet']}%) | {r['hf']} ({r['mfu_hf']}%) | "
            f"{r['ratio']}× | {r['mapnet_c']} ({r['mfu_mapnet_c']}%) | {r['hf_c']} ({r['mfu_hf_c']}%) |"
        )
    return "\n".join(rows)


# ---------------------------------------------------------------- profile_step.py printouts (experiments/profile-cpu)
def read_profile(path: Path) -> dict:
    """{part: (ms, share %)}, the step's median ms, and the host syncs of an unread and of a read step."""
    parts, syncs = {}, {False: 0, True: 0}
    for line in path.read_text(encoding="utf-8").splitlines():
        if m := re.match(r"^(\w[\w ()/]*?)\s+([\d.]+)\s+([\d.]+)%$", line):
            parts[m[1]] = (float(m[2]), float(m[3]))
        elif m := re.match(r"^\s+step\s+\d+( \(read\))?\s+(\d+) / (\d+) / (\d+) / (\d+)$", line):
            syncs[bool(m[1])] = max(syncs[bool(m[1])], sum(int(m[i]) for i in range(2, 6)))
    if "step (median)" not in parts:
        raise SystemExit(f"{path}: no profile_step.py printout in it")
    return {"parts": parts, "step": parts["step (median)"][0], "syncs": syncs}


PROFILES = {  # file under experiments/profile-cpu -> the row's words
    "tiny-uniform.txt": "`tiny`, uniform",
    "mini-uniform.txt": "`mini`, uniform",
    "mini-mapnet.txt": "`mini`, mapnet (paper), masks drawn on the device",
    "mini-mapnet-ht.txt": "`mini`, mapnet-ht, masks drawn on the device",
    "mini-mapnet-hostdraws.txt": "`mini`, mapnet (paper), randomness drawn on the host",
    "mini-mapnet-ht-hostdraws.txt": "`mini`, mapnet-ht, randomness drawn on the host",
}


def step_profile() -> str:
    rows = [
        "| preset, masking | step ms | data | masks (host) | to device | forward | backward | optimizer | "
        "host syncs / step (unread, read) |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for name, label in PROFILES.items():
        p = read_profile(EXPERIMENTS / "profile-cpu" / name)
        shares = [
            f"{p['parts'][k][1]:.1f}%"
            for k in ("data", "masks", "to_device", "forward", "backward", "optimizer (w/o read)")
        ]
        rows.append(
            f"| {label} | {p['step']:.1f} | " + " | ".join(shares) + f" | {p['syncs'][False]}, {p['syncs'][True]} |"
        )
    return "\n".join(rows)


def prefetch() -> str:
    """train.prefetch off and on, two alternated rounds per preset (experiments/profile-cpu/prefetch)."""
    rows = [
        "| preset | off: step ms, rounds 1, 2 (data + masks + copies on the loop's thread) | "
        "on: step ms, rounds 1, 2 (what the loop still waits for) | on vs off, rounds 1, 2 |",
        "|---|---|---|---|",
    ]
    for preset in ("tiny", "mini"):
        runs = {
            (on, r): read_profile(EXPERIMENTS / "profile-cpu" / "prefetch" / f"profile-{preset}-prefetch-{on}-{r}.txt")
            for on in ("false", "true")
            for r in (1, 2)
        }
        off, on = [runs["false", r] for r in (1, 2)], [runs["true", r] for r in (1, 2)]
        moved = [sum(p["parts"][k][0] for k in ("data", "masks", "to_device")) for p in off]
        moved_ms, off_ms = sum(moved) / 2, sum(p["step"] for p in off) / 2
        wait = sum(p["parts"]["prefetch_wait"][0] for p in on) / 2
        change = ", ".join(f"{100 * (b['step'] / a['step'] - 1):+.1f}%" for a, b in zip(off, on))
        rows.append(
            f"| `{preset}` | {off[0]['step']:.1f}, {off[1]['step']:.1f} ({moved_ms:.1f} ms, "
            f"{100 * moved_ms / off_ms:.1f}%) | "
            f"{on[0]['step']:.1f}, {on[1]['step']:.1f} ({wait:.2f} ms) | {change} |"
        )
    return "\n".join(rows)


# ---------------------------------------------------------------- bench_strategies.py printouts
def arm_costs(paths: list[Path], presets: list[str], labels: dict[str, str]) -> str:
    """One row per arm, one column per preset: uniform's ms/step and every arm's printed ratio to it (the first
    figure found for an arm in the printouts, in order, wins; each ratio is against its own run's uniform)."""
    costs = {preset: bench_printout.step_costs(paths, preset) for preset in presets}
    rows = ["| arm | " + " | ".join(f"`{p}`" for p in presets) + " |", "|---|" + "---|" * len(presets)]
    for arm, label in labels.items():
        cells = []
        for preset in presets:
            ratio, run = costs[preset].get(arm, (None, None))
            if ratio is None:
                cells.append("–")
            elif arm == "uniform":
                cells.append(f"{run.presets[preset]['uniform'][0]:,.0f} ms ({ratio:.2f}×)")
            else:
                cells.append(f"{ratio:.2f}×")
        rows.append(f"| {label} | " + " | ".join(cells) + " |")
    return "\n".join(rows)


def arm_costs_all() -> str:
    """Every arm of 2026-11-23 (experiments/learned-masking-tiny/bench_strategies.txt: two runs, the second for 30%)."""
    return arm_costs(
        [EXPERIMENTS / "learned-masking-tiny" / "bench_strategies.txt"],
        ["tiny", "mini"],
        {
            "uniform": "uniform",
            "uniform@0.3": "uniform@0.3",
            "stratified": "stratified",
            "frequency-ht": "frequency-ht",
            "mapnet": "mapnet (paper)",
            "mapnet-ht": "mapnet-ht (gradnorm)",
            "mapnet-ht-learnability": "mapnet-ht-learnability",
            "mapnet-ht-1layer": "mapnet-ht, 1-block proposal (`masking.mapnet.layers=1`)",
        },
    )


def arm_costs_lite() -> str:
    """The lite MAP-Net arm beside the full ones (experiments/mapnet-cheap/bench_strategies.txt, section D)."""
    return arm_costs(
        [EXPERIMENTS / "mapnet-cheap" / "bench_strategies.txt"],
        ["tiny", "mini"],
        {
            "uniform": "uniform",
            "mapnet": "mapnet (paper)",
            "mapnet-ht": "mapnet-ht",
            "mapnet-ht-1layer": "mapnet-ht, 1-block proposal",
            "mapnet-ht-lite": "`mapnet-ht-lite`",
        },
    )


if __name__ == "__main__":
    print(gpu_throughput(), step_profile(), prefetch(), arm_costs_all(), arm_costs_lite(), sep="\n\n")


# ---------------------------------------------------------------- the CPU's ceiling (experiments/profile-cpu)
CEILING_RUNS = ("cpu-ceiling.txt", "cpu-ceiling-2.txt", "cpu-ceiling-3.txt")  # runs 1-3 of issue 67 part 1
CEILING_STEPS = {"hour": "`hour` step (bf16)", "mini fast": "`mini` `fast` (fp32)",
                 "HF BertForMaskedLM, mini": "HF `BertForMaskedLM` at `mini` (fp32)"}  # fmt: skip
STEP_LINE = re.compile(
    r"^(?P<name>[^:\n]+): (?P<ms>[\d.]+) ms a step \([\d,]+ tok/s\), (?P<gflop>[\d.]+) GFLOP as performed.*\n"
    r"\s+(?P<rate>\d+) GFLOP/s = .*?; fp32 at its shapes (?P<fp32>\d+) GFLOP/s: (?P<fp32_pct>\d+)%; "
    r"bf16 at its shapes (?P<bf16>\d+) GFLOP/s: (?P<bf16_pct>\d+)%",
    re.M,
)


def read_ceiling(path: Path) -> dict[str, dict[str, str]]:
    """{step name: its figures as printed} of one `benchmarks/bench_cpu_ceiling.py` printout."""
    steps = {m["name"]: m.groupdict() for m in STEP_LINE.finditer(path.read_text(encoding="utf-8"))}
    if set(steps) != set(CEILING_STEPS):
        raise SystemExit(f"{path}: the steps {sorted(steps)}, not {sorted(CEILING_STEPS)}")
    return steps


def cpu_ceiling() -> str:
    """Each step's time, FLOPs as performed, rate and fractions of the fp32 (and, for the bf16 step, bf16) ceiling at
    its own shapes, run by run (experiments/profile-cpu's three printouts)."""
    runs = [read_ceiling(EXPERIMENTS / "profile-cpu" / name) for name in CEILING_RUNS]

    def each(name: str, key: str, f=str) -> str:
        return " / ".join(f(run[name][key]) for run in runs)

    def flops(name: str) -> str:  # the same in every run (one count of the same step): printed once
        counts = {run[name]["gflop"] for run in runs}
        return f"{float(counts.pop()):.1f}" if len(counts) == 1 else each(name, "gflop")

    rows = [
        f"| figure (run 1 / 2 / 3) | {' | '.join(CEILING_STEPS.values())} |",
        "|---|---|---|---|",
        "| ms a step | " + " | ".join(each(n, "ms", lambda v: f"{float(v):.0f}") for n in CEILING_STEPS) + " |",
        "| GFLOP as performed | " + " | ".join(flops(n) for n in CEILING_STEPS) + " |",
        "| GFLOP/s | " + " | ".join(each(n, "rate") for n in CEILING_STEPS) + " |",
        "| fp32 ceiling at its shapes, fraction | "
        + " | ".join(f"{each(n, 'fp32')}: {each(n, 'fp32_pct', lambda v: v + '%')}" for n in CEILING_STEPS)
        + " |",
        "| bf16 ceiling at its shapes, fraction | "
        + f"{each('hour', 'bf16', lambda v: f'{int(v):,}')}: {each('hour', 'bf16_pct', lambda v: v + '%')} | – | – |",
    ]
    return "\n".join(rows)
