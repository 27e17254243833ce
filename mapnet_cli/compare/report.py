"""results.json and the comparison table as plain strings (rich is the CLI's)."""

from __future__ import annotations

from pathlib import Path

from ..errors import MapnetError
from .plan import PlannedRun, eval_steps
from .statistics import aggregate, fairness_checks

SCHEMA = "mapnet.compare/1"
RESULTS = "results.json"


def results_document(
    plan: list[PlannedRun],
    runs: list[dict],
    argv: list[str],
    shards: Path,
    glue_control: dict[int, dict] | None = None,
    blimp_control: dict | None = None,
) -> dict:
    from ..atomic import sha256_file
    from ..data.shards import find_shard_dir
    from ..train import versions

    checks = fairness_checks(runs)
    if not checks["same_eval_set"]:
        raise MapnetError(
            "the runs were evaluated on different held-out sets (eval_sha256 differs): their losses are not comparable"
        )
    if not checks["same_extra_eval_sets"]:
        raise MapnetError(
            "the runs' train.extra_eval sets differ (names or eval_sha256@NAME): "
            "their losses on those sets are not comparable"
        )
    if not checks["same_precision"]:
        trained = ", ".join(
            f"{r['strategy']}/seed-{r['seed_index']}: {'+'.join(r['precision'])}" for r in runs if r.get("precision")
        )
        raise MapnetError(
            f"the runs trained in different precisions ({trained}; train.precision=bf16-native resolves "
            "per machine): set train.precision to fp32 or bf16 and rerun the runs that differ"
        )
    strategies = list(dict.fromkeys(pr.strategy for pr in plan))
    levels = [r["unigram"] for r in runs if r.get("unigram")]  # the same shards and held-out sets: the same levels
    return {
        "schema": SCHEMA,
        "command": list(argv),
        "versions": versions(),
        "unigram": levels[0] if levels else None,
        "shards": {
            "path": str(Path(shards).resolve()),
            "manifest_sha256": sha256_file(find_shard_dir(shards) / "manifest.json"),
        },
        "strategies": strategies,
        "seeds": sorted({pr.settings.train.seed for pr in plan}),
        "eval_steps": eval_steps(plan[0].settings.train),
        "checks": checks,
        # Every arm trained for the same training time; each run's steps are what its time bought.
        **({"time_budget": plan[0].settings.train.time_budget} if plan[0].settings.train.time_budget else {}),
        "aggregate": aggregate(runs, strategies, glue_control, blimp_control),
        "runs": runs,
        **({"glue_control": {str(k): v for k, v in sorted(glue_control.items())}} if glue_control else {}),
        **(
            {
                "blimp_control": {
                    "random": {str(k): v for k, v in sorted(blimp_control["random"].items())},
                    "unigram": blimp_control["unigram"],
                }
            }
            if blimp_control
            else {}
        ),
    }


TABLE_HEADER = [
    "strategy",
    "seeds",
    "final eval loss",
    "vs unigram",
    "Δ vs uniform (paired)",
    "accuracy",
    "s/step",
    "steps to target",
]


def pm(ci: dict, fmt: str) -> str:
    if ci["ci95"] is None:
        return format(ci["mean"], fmt)
    return f"{format(ci['mean'], fmt)} ± {format((ci['ci95'][1] - ci['ci95'][0]) / 2, fmt.lstrip('+'))}"


def table_rows(doc: dict) -> tuple[list[str], list[list[str]]]:
    """The comparison table: header and one row per strategy, numbers from `doc['aggregate']`."""
    strategies = doc["aggregate"]["strategies"]
    has_var = any("variance" in a for a in strategies.values())
    has_glue = any("glue" in a for a in strategies.values())
    extra = sorted({m for a in strategies.values() for m in a["final"] if m.startswith("eval_loss@")})
    control = doc["aggregate"].get("glue_control")
    has_blimp = any("blimp" in a for a in strategies.values())
    blimp_control = doc["aggregate"].get("blimp_control")
    header = (
        TABLE_HEADER
        + [f"loss {m.partition('@')[2]}" for m in extra]
        + (["mask var", "total var", "noise scale"] if has_var else [])
        + (["GLUE"] if has_glue else [])
        + (["GLUE Δ vs random init (paired)"] if has_glue and control else [])
        + (BLIMP_HEADER if has_blimp else [])
    )
    rows = []
    for name, a in strategies.items():
        reached = (a.get("steps_to_target") or {}).get("mean_curve")
        diff = (a.get("paired_vs_uniform") or {}).get("eval_loss")
        row = [
            name,
            str(len(a["seeds"])),
            pm(a["final"]["eval_loss"], ".4f"),
            vs_unigram(doc, a["final"]["eval_loss"]["mean"]),
            pm(diff, "+.4f") if diff else "-",
            pm(a["final"]["eval_accuracy"], ".4f"),
            pm(a["seconds_per_step"], ".4f"),
            "no baseline" if "steps_to_target" not in a else "not reached" if reached is None else f"{reached:.1f}",
        ]
        row += [pm(a["final"][m], ".4f") if m in a["final"] else "-" for m in extra]
        if has_var:
            v = a.get("variance")
            ok = v and v["steps"]
            row += (
                [
                    pm(v["mask_variance"][-1], ".4g"),
                    pm(v["total_variance"][-1], ".4g"),
                    pm(v["noise_scale"][-1], ".4g") if ok and "noise_scale" in v else "-",
                ]
                if ok
                else ["-", "-", "-"]
            )
        if has_glue:
            row.append(_points(a.get("glue"), ".2f"))  # in points, as `mapnet finetune-glue` prints it
            if control:
                d = (a.get("glue_vs_random_init") or {}).get("score")
                row.append(_points(d, "+.2f") + (f" (n={d['n']})" if d else ""))
        if has_blimp:
            row += _blimp_cells(a)
        rows.append(row)
    if has_glue and control:  # the control row: GLUE columns only
        row = [CONTROL_ROW, str(len(control["seed_indices"]))] + ["-"] * (
            len(header) - 4 - len(BLIMP_HEADER) * has_blimp
        )
        rows.append(row + [_points(control["glue"], ".2f"), "control"] + ["-"] * (len(BLIMP_HEADER) * has_blimp))
    if has_blimp and blimp_control:  # the BLiMP controls' rows: the BLiMP column only
        for name, n, value in (
            (BLIMP_RANDOM_ROW, len(blimp_control["seed_indices"]), blimp_control["random_init"]),
            (BLIMP_UNIGRAM_ROW, 1, blimp_control["unigram"]),
        ):
            if value is None:
                continue
            cell = _points(value if isinstance(value, dict) else {"mean": value, "ci95": None}, ".1f")
            rows.append([name, str(n)] + ["-"] * (len(header) - 2 - len(BLIMP_HEADER)) + [cell, "control", "-", "-"])
    return header, rows


BLIMP_HEADER = [
    "BLiMP",
    "BLiMP Δ vs uniform (paired)",
    "BLiMP Δ vs random init (paired)",
    "BLiMP Δ vs uniform at uniform's time",
]
BLIMP_RANDOM_ROW = "random-init (BLiMP control)"
BLIMP_UNIGRAM_ROW = "unigram (BLiMP control)"


def _blimp_cells(a: dict) -> list[str]:
    """BLiMP accuracy (points) and its paired margins: over uniform at equal steps, over the seed's random
    encoder, and over uniform at uniform's final training time."""
    if "blimp" not in a:
        return ["-"] * len(BLIMP_HEADER)
    d = (a.get("paired_vs_uniform") or {}).get("blimp")
    r = a.get("blimp_vs_random_init")
    t = a.get("blimp_at_uniform_time") or {}
    at = t.get("paired_vs_uniform")
    reached = sum(v is not None for v in t.get("per_seed", []))
    return [
        _points(a["blimp"], ".1f"),
        _points(d, "+.1f") if d else "-",
        _points(r, "+.1f") + f" (n={r['n']})" if r else "-",
        "-"
        if not t
        else "not reached"
        if at is None
        else _points(at, "+.1f") + f" ({reached} of {len(t['per_seed'])} seeds)",
    ]


CONTROL_ROW = "random-init (control)"


def vs_unigram(doc: dict, loss: float, key: str = "eval_unigram") -> str:
    """The final loss minus the held-out set's unigram level: negative once a run has left the plateau."""
    level = (doc.get("unigram") or {}).get(key)
    return "-" if level is None else f"{loss - level:+.3f}"


def unigram_line(doc: dict) -> str | None:
    u = doc.get("unigram")
    if not u:
        return None
    sets = ", ".join(f"{k.partition('@')[2] or 'main'} {v:.3f}" for k, v in u.items() if k.startswith("eval_unigram"))
    return (
        f"unigram plateau: training tokens' entropy {u['train_entropy']:.3f} nats; held-out sets' unigram level "
        f'{sets} ("vs unigram": final loss minus it; a run near 0 has not learned to use context)'
    )


def _points(ci: dict | None, fmt: str) -> str:
    """A mean_ci of fractions, shown in points (x100)."""
    if not ci:
        return "-"
    mean = format(100 * ci["mean"], fmt)
    if ci["ci95"] is None:
        return mean
    return f"{mean} ± {format(100 * (ci['ci95'][1] - ci['ci95'][0]) / 2, fmt.lstrip('+'))}"
