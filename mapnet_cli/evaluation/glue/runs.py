"""One planned fine-tuning run of the GLUE sweep, in the sweep's process or as a task on a worker.

    prepared = prepare(ref, ft, out_dir)                      # a checkpoint's config, weights and text encoder
    train, devs = encode_task(prepared, data["RTE"])
    record = run_one(item, prepared, train, devs, ft, *device_of(ft))
    record = finetune_task({"item": item, "ft": ft, "glue_dir": ..., "out_dir": ..., "threads": 1})  # on a worker

Whichever process runs it, a run is built the same way from the same seeds, so its record is the same (on the CPU,
with as many torch threads); only the sweep's coordinator writes results.json.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, replace
from pathlib import Path

from ...atomic import json_safe
from ...errors import MapnetError
from .finetune import RunConfig, finetune_run
from .pretrained import CheckpointRef, load_architecture, load_encoder_state, random_encoder, random_init_seed
from .tasks import TASKS, TaskData, load_tasks


@dataclass
class Prepared:
    """What every run of one checkpoint needs: its encoder's config and weights (None: a random-init control) and
    the text encoder of its tokenizer and cleaning."""

    ref: CheckpointRef
    cfg: object
    state: dict | None
    text: object  # encode.TextEncoder
    max_len: int

    def make_encoder(self, seed: int):
        from ...model.bert import build_encoder

        # Built the same way in both arms, so the global RNG that the head init and dropout draw from next is in the
        # same state: seed s of the control differs from seed s of the checkpoint only in the encoder weights
        # (random_encoder draws them in a forked RNG).
        enc = build_encoder(self.cfg)
        # copies: every run starts from the pretrained weights, or from this seed's random ones (the control)
        if self.state is not None:
            enc.load_state_dict(self.state)
        else:
            enc.load_state_dict(random_encoder(self.cfg, self.ref.init_seed, seed).state_dict())
        return enc


def prepare(ref: CheckpointRef, ft, out_dir: Path) -> Prepared:
    from .encode import TextEncoder

    if ref.init == "random":
        cfg, ck_settings = load_architecture(ref)
        state = None
    else:
        state, cfg, ck_settings = load_encoder_state(ref)
    if ft.dropout != -1.0:  # fine-tuning's own dropout, in the encoder too (weights are unaffected)
        cfg = replace(cfg, dropout=ft.dropout, attention_dropout=ft.dropout)
    max_len = min(ft.max_seq_len, cfg.max_position)
    text = TextEncoder(ref.path / "tokenizer.json", ck_settings.preprocess, max_len, Path(out_dir) / "cache")
    return Prepared(ref, cfg, state, text, max_len)


def encode_task(prepared: Prepared, data: TaskData) -> tuple:
    """(train, [dev splits]) encoded by the checkpoint's tokenizer (through the sweep's cache), and how many
    examples lost tokens to the length limit."""
    enc = [prepared.text.encode(s.entry, s.text_a, s.text_b, s.labels) for s in (data.train, *data.dev)]
    return enc[0], enc[1:], sum(e.truncated for e in enc)


def device_of(ft) -> tuple:
    """(torch device, precision) where the runs run: "auto" means CUDA if there is one, bf16 autocast on CUDA."""
    import torch

    if ft.device == "cuda" and not torch.cuda.is_available():
        raise MapnetError("finetune.device is cuda but no CUDA device is available")
    cuda = ft.device == "cuda" or (ft.device == "auto" and torch.cuda.is_available())
    dev = torch.device("cuda" if cuda else "cpu")
    precision = "bf16" if ft.precision == "bf16" or (ft.precision == "auto" and dev.type == "cuda") else "fp32"
    return dev, precision


def run_one(item, prepared: Prepared, train, devs, ft, dev, precision: str, on_step=None) -> dict:
    """Fine-tune `item` (a sweep.PlanItem) and return its record for results.json."""
    ref = prepared.ref
    rc = RunConfig(
        batch_size=item.batch_size,
        lr=item.lr,
        seed=item.seed,
        epochs=ft.epochs,
        warmup_ratio=ft.warmup_ratio,
        weight_decay=ft.weight_decay,
        betas=tuple(ft.betas),
        eps=ft.eps,
        length_group=ft.length_group,
        eval_batch_size=ft.eval_batch_size,
        dropout=prepared.cfg.dropout,
        pooling=ft.pooling,
    )
    result = finetune_run(
        lambda seed=item.seed: prepared.make_encoder(seed),
        TASKS[item.task],
        train,
        devs,
        rc,
        prepared.text.pad_id,
        dev,
        precision,
        on_step=on_step,
    )
    init_seed = {"pretraining_seed": ref.init_seed, "torch_seed": random_init_seed(ref.init_seed, item.seed)}
    record = {
        "checkpoint": {
            "key": ref.key,
            "run": ref.run,
            "step": ref.step,
            "sha256": ref.sha,
            "path": str(ref.path),
            "init": ref.init,
        },
        "init": ref.init,
        **({"init_seed": init_seed} if ref.init == "random" else {}),
        "task": item.task,
        "batch_size": item.batch_size,
        "lr": item.lr,
        "seed": item.seed,
        "epochs": result.epochs,
        "steps": result.steps,
        "seconds": round(result.seconds, 3),
        "device": str(dev),
        "precision": precision,
        "train_examples": len(train),
        "config": asdict(rc),
    }
    return json_safe(record)


# A worker runs many runs of one checkpoint and task in a row (the plan's order): what they share is kept here, for
# one (checkpoint, task) at a time, since a checkpoint's weights and a task's encoded data can be large.
_ON_THIS_WORKER: dict = {}


def finetune_task(spec: dict) -> dict:
    """On a worker: one planned run (spec: item, ft, glue_dir, out_dir, threads); its record. A top-level function,
    as Dask pickles it."""
    from ...spread import set_task_threads

    set_task_threads(spec["threads"])
    item, ft = spec["item"], spec["ft"]
    key = (item.ref, item.task, spec["glue_dir"], spec["out_dir"], repr(ft))
    if key not in _ON_THIS_WORKER:
        _ON_THIS_WORKER.clear()
        prepared = prepare(item.ref, ft, Path(spec["out_dir"]))
        train, devs, _ = encode_task(prepared, load_tasks([item.task], Path(spec["glue_dir"]), ft)[item.task])
        _ON_THIS_WORKER[key] = (prepared, train, devs)
    prepared, train, devs = _ON_THIS_WORKER[key]
    return run_one(item, prepared, train, devs, ft, *device_of(ft))


__all__ = ["Prepared", "prepare", "encode_task", "device_of", "run_one", "finetune_task"]
