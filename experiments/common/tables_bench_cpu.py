"""docs/performance.md's CPU benchmark tables, from the printouts experiments/bench-cpu/bench_cpu.sh kept: preprocess,
shard, pretraining throughput against Hugging Face (eager, and with `--compile`), MAP-Net's step against uniform, and
`mapnet variance`'s cost. Each cell is the figure as the benchmark printed it (the scripts round from unrounded
timings, so a ratio is never recomputed from two printed figures; the one exception, preprocess's scaling with
workers, divides two sentences-per-second figures printed whole), and each table ends
with the line that says where and when it was measured: the printout's own header (machine, date, load average).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from functools import cache
from pathlib import Path

from compare_tables import markdown

REPO = Path(__file__).resolve().parents[2]
FOLDER = "experiments/bench-cpu"


@cache
def printout(name: str) -> str:
    """The printout's text; one that did not end (no `# exit: 0`) is refused, not read as a short table."""
    path = REPO / FOLDER / f"{name}.txt"
    text = path.read_text(encoding="utf-8")
    if "\n# exit: 0\n" not in text:
        raise SystemExit(f"{path}: the benchmark did not finish (no '# exit: 0' line)")
    return text


def rows(name: str, pattern: str) -> list[re.Match]:
    found = list(re.finditer(pattern, printout(name), re.M))
    if not found:
        raise SystemExit(f"{FOLDER}/{name}.txt: no line matches {pattern!r}")
    return found


def measured(name: str) -> str:
    """'*Measured …*': the machine, the start and the load average before, from the header bench_cpu.sh wrote."""
    text = printout(name)
    machine = re.search(r"^# machine: (\d+) cores, (.+)$", text, re.M)
    started = re.search(r"^# started: (.+?); load before: ([\d.]+)", text, re.M)
    command = re.search(r"^# command: uv run python (.+)$", text, re.M)
    return (
        f"*`{FOLDER}/{name}.txt` (`{command[1]}`): {machine[2]}, {machine[1]} cores, {started[1]}, load average "
        f"{started[2]} before (the benchmarks ran back to back, alone).*"
    )


def preprocess() -> str:
    found = rows(
        "preprocess",
        r"^(?P<run>\dx), (?P<workers>\d) workers?(?:\(s\))?\s+(?P<mb>[\d.]+)\s+(?P<rate>[\d.]+)\s+(?P<sent>\d+)"
        r"\s+[\d,]+\s+[\d.]+\s+[\d.]+\s+(?P<rss>\d+)$",
    )
    one = int(found[0]["sent"])
    body = []
    for m in found:
        rate = m["rate"]
        if m["run"] == "1x" and m["workers"] != "1":  # the scaling with workers: of sentences/s, printed whole
            rate += f" ({int(m['sent']) / one:.2f}×)"
        worker = "worker" if m["workers"] == "1" else "workers"
        body.append(
            [f"{m['run'][0]}×, {m['workers']} {worker}", m["mb"], rate, f"{int(m['sent']):,}", f"{m['rss']} MB"]
        )
    headings = ["run", "text MB", "MB/s", "sentences/s", "peak RSS (main + workers)"]
    return markdown(headings, body) + "\n\n" + measured("preprocess")


def shard() -> str:
    found = rows(
        "shard",
        r"^\s+(?P<corpus>\dx)\s+(?P<mb>[\d.]+)\s+(?P<workers>\d)\s+(?P<rate>[\d.]+)\s+(?P<sent>[\d,]+)"
        r"\s+(?P<main>\d+) MB\s+(?P<worker>\d+) MB\s+(?P<padding>[\d.]+%)$",
    )
    body = [
        [
            f"{m['corpus'][0]}×",
            m["mb"],
            m["workers"],
            m["rate"],
            m["sent"],
            f"{m['main']} MB / –" if m["workers"] == "1" else f"{m['main']} / {m['worker']} MB",
            m["padding"],
        ]
        for m in found
    ]
    headings = ["corpus", "MB", "workers", "MB/s", "sentences/s", "peak RSS main / worker", "padding"]
    return markdown(headings, body) + "\n\n" + measured("shard")


PRESET = (
    r"^\s*(?P<preset>\w+) \(L(?P<layers>\d+)/H(?P<hidden>\d+)/A\d+, [\d.]+M params\): mapnet (?P<mapnet>[\d,]+) tok/s"
)
PRESET += (
    r" \| hf (?P<hf>[\d,]+) tok/s \(attn=\w+\) \| ratio (?P<ratio>[\d.]+)x\n\s+per CPU-second: .*ratio (?P<cpu>[\d.]+)x"
)


def pretrain() -> str:
    body = [
        [f"{m['preset']} (L{m['layers']}/H{m['hidden']})", m["mapnet"], m["hf"], f"**{m['ratio']}×**", f"{m['cpu']}×"]
        for m in rows("pretrain", PRESET)
    ]
    headings = ["preset", "mapnet tok/s", "HF tok/s", "ratio", "ratio per CPU-second"]
    return markdown(headings, body) + "\n\n" + measured("pretrain")


def pretrain_compile() -> str:
    compiled = r"\n\s+torch.compile: .*mapnet\+compile / hf (?P<c_e>[\d.]+)x"
    pattern = PRESET + compiled + r" \| mapnet\+compile / hf\+compile (?P<c_c>[\d.]+)x"
    found = rows("pretrain-compile", pattern)
    lines = [
        ("mapnet eager / HF eager", "ratio"),
        ("mapnet compiled / HF eager", "c_e"),
        ("mapnet compiled / HF compiled", "c_c"),
    ]
    body = [[label] + [f"{m[key]}×" for m in found] for label, key in lines]
    return markdown(["", *(f"`{m['preset']}`" for m in found)], body) + "\n\n" + measured("pretrain-compile")


def mapnet_step() -> str:
    found = rows(
        "mapnet",
        r"^(?P<preset>\w+)\s+(?P<params>[\d.]+M/[\d.]+M)\s+(?P<u>[\d.]+)\s+(?P<m>[\d.]+)\s+(?P<r>[\d.]+)"
        r"\s+(?P<s>[\d.]+)\s+(?P<rs>[\d.]+)$",
    )
    body = [
        [
            m["preset"],
            m["params"],
            f"{float(m['u']):,.0f}",
            f"{float(m['m']):,.0f}",
            f"**{m['r']}×**",
            f"{float(m['s']):,.0f}",
            f"{m['rs']}×",
        ]
        for m in found
    ]
    headings = ["preset", "parameters (encoder / MAP-Net)", "uniform ms", "MAP-Net ms", "ratio"]
    headings += ["MAP-Net + statistics ms", "ratio"]
    return markdown(headings, body) + "\n\n" + measured("mapnet")


VARIANCE = (
    r"^\s*(?P<mode>exact|sketch D=\d+): .*?, (?P<passes>\d+) backward passes in (?P<time>[\d.]+) s .*?peak RSS "
    r"(?P<rss>[\d.]+ GiB) .*?; mask (?P<mask>[\d.]+), sentence (?P<sentence>[\d.]+), total (?P<total>[\d.]+)$"
)


def variance() -> str:
    label = {"exact": "exact (4 GiB budget → recomputed in panels)"}
    body = [
        [
            label.get(m["mode"], m["mode"].replace("sketch D=", "sketch, D = ")),
            m["passes"],
            f"{m['time']} s",
            m["rss"],
            f"{m['mask']} / {m['sentence']} / {m['total']}",
        ]
        for m in rows("variance", VARIANCE)
    ]
    headings = ["gradients", "backward passes", "time", "peak RSS", "mask / sentence / total variance"]
    return markdown(headings, body) + "\n\n" + measured("variance")


TABLES: dict[str, Callable[[], str]] = {
    "bench-cpu-preprocess": preprocess,
    "bench-cpu-shard": shard,
    "bench-cpu-pretrain": pretrain,
    "bench-cpu-pretrain-compile": pretrain_compile,
    "bench-cpu-mapnet": mapnet_step,
    "bench-cpu-variance": variance,
}

if __name__ == "__main__":
    for name, make in TABLES.items():
        print(f"<!-- table: {name} -->\n{make()}\n")
