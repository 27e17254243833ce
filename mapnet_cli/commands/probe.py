"""`mapnet probe`: a linear probe on frozen features at every kept checkpoint of a run (seconds, not hours).

    mapnet probe runs/mini --data glue_data --out out/probe-sst2.json
    mapnet probe runs/uniform runs/mapnet --task sst2 --data glue_data --out out/probe.json --seed 1
    mapnet probe runs/mini --data glue_data --out out/probe.json --against out/glue/results.json

For each checkpoint (a run folder: every complete checkpoint; a checkpoint
folder: itself) and, unless --no-control, the random-init control of each
architecture: logistic regression on frozen [CLS] and mean-pooled features,
fitted on --examples training rows drawn with --seed, scored on the dev set
with the task's GLUE metric (see `mapnet_cli/evaluation/probe.py`). With --against
(a `finetune-glue` results.json over the same checkpoints) it adds Spearman's
rank correlation between probe and fine-tuning scores.
"""

import json
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.table import Table

from .. import artefacts
from ..errors import MapnetError
from ..evaluation.device import evaluation_device
from ..output_paths import check_output
from ..run_lock import output_lock
from .options import DeviceOpt, OverwriteOpt
from .shown import cells, shown

HELP = (
    "Linear probe (logistic regression on frozen features) at every checkpoint of a run; JSON, and its rank "
    "correlation with fine-tuning."
)


def probe(
    runs: Annotated[
        list[Path],
        typer.Argument(help="Run folders (every complete checkpoint) or checkpoint folders.", show_default=False),
    ],
    data: Annotated[Path, typer.Option("--data", "-d", help="GLUE folder in the standard layout.", show_default=False)],
    out: Annotated[
        Path,
        typer.Option("--out", "-o", help="JSON file to write (rewritten after every checkpoint).", show_default=False),
    ],
    task: Annotated[str, typer.Option("--task", "-t", help="A GLUE classification task.")] = "sst2",
    examples: Annotated[
        int, typer.Option("--examples", help="Training rows the probe is fitted on, drawn with --seed (0: all).")
    ] = 4000,
    dev_examples: Annotated[int, typer.Option("--dev-examples", help="Dev rows per dev set (0: all).")] = 0,
    seed: Annotated[int, typer.Option("--seed", help="Draws the training rows; the random-init control's seed.")] = 0,
    max_seq_len: Annotated[
        int, typer.Option("--max-seq-len", help="Tokens per input (also capped by the model's max_position).")
    ] = 128,
    l2: Annotated[float, typer.Option("--l2", help="L2 penalty on the weights (standardised features).")] = 1e-3,
    max_iter: Annotated[int, typer.Option("--max-iter", help="L-BFGS iterations at most.")] = 200,
    pooling: Annotated[
        str, typer.Option("--pooling", help="Feature that gives the headline score: mean or cls (both are reported).")
    ] = "mean",
    control: Annotated[
        bool, typer.Option("--control/--no-control", help="Also probe each architecture's random-init control.")
    ] = True,
    against: Annotated[
        Path | None,
        typer.Option(
            "--against",
            help="A finetune-glue results.json: Spearman of probe vs fine-tuning scores over matched checkpoints.",
            show_default=False,
        ),
    ] = None,
    device: DeviceOpt = "cpu",
    overwrite: OverwriteOpt = False,
) -> None:
    """Linear probe at every checkpoint of a run."""
    from ..atomic import json_safe, write_json
    from ..evaluation.glue.pretrained import find_checkpoints
    from ..evaluation.probe import ProbeConfig, probe_run, rank_correlation

    check_output(out, [*runs, data, against], kind=artefacts.PROBE, overwrite=overwrite)
    check_output(
        out.parent / "cache",
        [*runs, data, against],
        kind=artefacts.CACHE,
        reuse=True,
        name="the token cache beside --out",
    )
    dev = evaluation_device(device)
    glue_doc = None
    if against is not None:
        try:
            glue_doc = json.loads(against.read_text(encoding="utf-8"))
            glue_doc["summary"]["checkpoints"]
        except (OSError, ValueError, KeyError, TypeError) as exc:
            raise MapnetError(f"--against {against}: not a readable finetune-glue results.json ({exc})") from None
    cfg = ProbeConfig(
        task=task,
        train_examples=examples,
        dev_examples=dev_examples,
        seed=seed,
        max_seq_len=max_seq_len,
        l2=l2,
        max_iter=max_iter,
        pooling=pooling,
    )
    err = Console(stderr=True)
    refs = find_checkpoints(every=runs)
    with output_lock(out):
        doc = probe_run(
            refs,
            data,
            cfg,
            out,
            control=control,
            note=lambda text: err.print(text, highlight=False, markup=False),
            device=dev,
        )
        if glue_doc is not None:
            doc["correlation"] = rank_correlation(doc, glue_doc)
            write_json(out, json_safe(doc))

    console = Console()
    entries = list(doc["checkpoints"][0]["mean"]["entries"]) if doc["checkpoints"] else []
    table = Table(
        "checkpoint",
        "init",
        *cells(*(f"{e} probe (mean)" for e in entries), *(f"{e} probe (cls)" for e in entries)),
        title=f"Linear probe on frozen features, {shown(doc['task'])} dev "
        f"({doc['data']['train_rows']} training rows, seed {seed})",
    )
    for ck in doc["checkpoints"]:
        table.add_row(
            *cells(
                f"{ck['run']}@{ck['step']}",
                ck["init"],  # a run's name: its folder's, brackets and all
                *(f"{100 * ck['mean']['entries'][e]['score']:.2f}" for e in entries),
                *(f"{100 * ck['cls']['entries'][e]['score']:.2f}" for e in entries),
            )
        )
    console.print(table)
    if "correlation" in doc:
        c = doc["correlation"]
        rho = "not computed (fewer than 3 matched checkpoints)" if c["spearman"] is None else f"{c['spearman']:+.3f}"
        console.print(
            f"Spearman (probe {c['pooling']} vs fine-tuning, {doc['task']}) over {c['n']} checkpoints: {rho}",
            highlight=False,
            markup=False,
        )
        for run, r in c["per_run"].items():
            rr = "-" if r["spearman"] is None else f"{r['spearman']:+.3f}"
            console.print(f"  {run}: {rr} (n={r['n']})", highlight=False, markup=False)
    err.print(f"probe: {out}", highlight=False, markup=False)
