"""A cheap downstream probe: logistic regression on frozen encoder features, at every checkpoint.

    doc = probe_run(find_checkpoints(every=[Path("runs/mini")]), Path("glue_data"), ProbeConfig(task="SST-2"))
    doc["checkpoints"][0]["mean"]["score"]            # dev accuracy of the probe on mean-pooled features
    rank_correlation(doc, json.load(open("out/glue/results.json")))   # Spearman, probe vs fine-tuning

Fine-tuning a checkpoint takes minutes to hours on a CPU; this takes seconds, so it can follow a run at every
evaluation. For one task (SST-2 by default): a seeded subset of training rows and the dev set, encoded exactly as
fine-tuning encodes them; the frozen encoder's `[CLS]` and mean-pooled last-layer states (`mean` is the headline:
the model never trained `[CLS]`); a standardised L2 logistic regression fitted in float64 by L-BFGS from zero
weights; the task's GLUE metric on dev. The only randomness is the training subset; the random-init control is
probed too, as the floor pretraining has to beat. `rank_correlation` gives Spearman's correlation between probe
and fine-tuning scores of the same checkpoints (matched by weights hash): does the cheap probe rank checkpoints
the way fine-tuning does? The steps in full: docs/evaluation.md#a-cheap-probe-at-every-checkpoint-mapnet-probe,
and what that page leaves out: docs/internals.md#evaluationprobepy.
"""

from __future__ import annotations

import hashlib
import math
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

from ..errors import MapnetError
from .glue import metrics as M
from .glue.encode import Encoded
from .glue.pretrained import CheckpointRef
from .glue.tasks import TASKS, Split, TaskData, load_task, task_spec

SCHEMA = "mapnet.probe/1"
POOLINGS = ("cls", "mean")


@dataclass(frozen=True)
class ProbeConfig:
    task: str = "SST-2"
    train_examples: int = 4000  # training rows the probe is fitted on (0: all)
    dev_examples: int = 0  # dev rows per dev set (0: all), the fixed subset finetune.max_dev takes
    seed: int = 0  # draws the training subset; the random-init control's fine-tuning seed
    max_seq_len: int = 128  # tokens per input, specials included (also capped by max_position)
    l2: float = 1e-3  # L2 penalty on the (standardised-feature) weights
    max_iter: int = 200  # L-BFGS iterations at most
    batch_size: int = 256  # sequences per forward pass
    pooling: str = "mean"  # which feature gives `score` (both are always reported)

    def problems(self) -> list[str]:
        out = []
        if self.train_examples < 0 or self.dev_examples < 0:
            out.append("probe example counts must be >= 0")
        if self.seed < 0:  # numpy's generator refuses it only when the training rows are drawn
            out.append(f"probe seed must be >= 0 (got {self.seed})")
        if not 8 <= self.max_seq_len <= 8192:
            out.append(f"probe max_seq_len must be in [8, 8192] (got {self.max_seq_len})")
        if self.l2 < 0 or not math.isfinite(self.l2):
            out.append(f"probe l2 must be a finite number >= 0 (got {self.l2})")
        if self.max_iter < 1 or self.batch_size < 1:
            out.append("probe max_iter and batch_size must be >= 1")
        if self.pooling not in POOLINGS:
            out.append(f"probe pooling must be one of {', '.join(POOLINGS)} (got {self.pooling!r})")
        return out


# ---------------------------------------------------------------- data
def train_subset(split: Split, n: int, seed: int) -> tuple[Split, np.ndarray]:
    """At most n rows drawn without replacement with `seed` (order kept), and their indices."""
    if n <= 0 or len(split) <= n:
        keep = np.arange(len(split))
    else:
        keep = np.sort(np.random.default_rng(seed).choice(len(split), size=n, replace=False))
    return split.rows(keep), keep


def load_probe_data(glue_dir: Path, cfg: ProbeConfig) -> tuple[TaskData, np.ndarray]:
    from .glue.tasks import subset

    spec = task_spec(cfg.task)
    if spec.is_regression:
        raise MapnetError(f"the probe is a classifier; {spec.name} is a regression task")
    data = load_task(spec, glue_dir)
    data.train, keep = train_subset(data.train, cfg.train_examples, cfg.seed)
    data.dev = [subset(d, cfg.dev_examples) for d in data.dev]
    return data, keep


# ---------------------------------------------------------------- features
def pooled_features(encoder, data: Encoded, pad_id: int, batch_size: int, device=None) -> dict[str, np.ndarray]:
    """{'cls': (n, H), 'mean': (n, H)} float64 features of the frozen encoder, in the split's order."""
    import torch

    from .glue.finetune import collate

    device = device or torch.device("cpu")
    encoder = encoder.to(device).eval()
    n, hidden = len(data), encoder.cfg.hidden
    out = {k: np.empty((n, hidden), dtype=np.float64) for k in POOLINGS}
    order = np.argsort(data.lengths, kind="stable")  # similar lengths together: little padding
    with torch.inference_mode():
        for start in range(0, n, batch_size):
            idx = order[start : start + batch_size]
            ids, mask, _ = collate(data, idx, pad_id, device, regression=False)
            h = encoder(ids, mask).float()
            keep = torch.ones(h.shape[:2], device=device) if mask is None else mask.float()
            mean = (h * keep[..., None]).sum(1) / keep.sum(1, keepdim=True)
            out["cls"][idx] = h[:, 0].double().cpu().numpy()
            out["mean"][idx] = mean.double().cpu().numpy()
    return out


# ---------------------------------------------------------------- the classifier
@dataclass
class LogisticProbe:
    mean: np.ndarray
    std: np.ndarray
    weight: np.ndarray  # (H, C)
    bias: np.ndarray  # (C,)
    train_loss: float
    iterations: int

    def predict(self, x: np.ndarray) -> np.ndarray:
        z = (x - self.mean) / self.std
        return np.argmax(z @ self.weight + self.bias, axis=1)


def fit_logistic(x: np.ndarray, y: np.ndarray, classes: int, l2: float = 1e-3, max_iter: int = 200) -> LogisticProbe:
    """Multinomial logistic regression on standardised x by L-BFGS (float64, from zero): deterministic."""
    import torch
    import torch.nn.functional as F

    x = np.asarray(x, dtype=np.float64)
    mu = x.mean(0)
    sd = x.std(0)
    sd = np.where(sd > 1e-8, sd, 1.0)  # a constant feature carries nothing; leave it at 0 after centring
    z = torch.from_numpy((x - mu) / sd)
    t = torch.from_numpy(np.asarray(y, dtype=np.int64))
    w = torch.zeros(x.shape[1], classes, dtype=torch.float64, requires_grad=True)
    b = torch.zeros(classes, dtype=torch.float64, requires_grad=True)
    opt = torch.optim.LBFGS(
        [w, b],
        lr=1.0,
        max_iter=max_iter,
        tolerance_grad=1e-9,
        tolerance_change=1e-12,
        history_size=20,
        line_search_fn="strong_wolfe",
    )

    def closure():
        opt.zero_grad()
        loss = F.cross_entropy(z @ w + b, t) + 0.5 * l2 * (w * w).sum()
        loss.backward()
        return loss

    opt.step(closure)
    with torch.no_grad():
        loss = float(F.cross_entropy(z @ w + b, t) + 0.5 * l2 * (w * w).sum())
    n_iter = int(opt.state[opt._params[0]].get("n_iter", 0))
    return LogisticProbe(mu, sd, w.detach().numpy().copy(), b.detach().numpy().copy(), loss, n_iter)


# ---------------------------------------------------------------- one checkpoint
def probe_checkpoint(
    ref: CheckpointRef, data: TaskData, cfg: ProbeConfig, cache_dir: Path | None = None, device=None
) -> dict:
    """Probe scores of one checkpoint (or random-init control) on `data`: per pooling, the dev metrics."""
    from ..model.bert import build_encoder
    from .glue.encode import TextEncoder
    from .glue.pretrained import load_architecture, load_encoder_state, random_encoder

    t0 = time.perf_counter()
    spec = data.spec
    if ref.init == "random":
        arch, settings = load_architecture(ref)
        encoder = random_encoder(arch, ref.init_seed, cfg.seed)
    else:
        state, arch, settings = load_encoder_state(ref)
        encoder = build_encoder(arch)
        encoder.load_state_dict(state)
    text = TextEncoder(
        ref.path / "tokenizer.json", settings.preprocess, min(cfg.max_seq_len, arch.max_position), cache_dir
    )
    splits = [text.encode(s.entry, s.text_a, s.text_b, s.labels) for s in (data.train, *data.dev)]
    feats = [pooled_features(encoder, s, text.pad_id, cfg.batch_size, device) for s in splits]
    train, devs = splits[0], splits[1:]
    out = {
        "checkpoint": ref.key,
        "run": ref.run,
        "step": ref.step,
        "sha256": ref.sha,
        "path": str(ref.path),
        "init": ref.init,
    }
    for pooling in POOLINGS:
        probe = fit_logistic(feats[0][pooling], train.labels, spec.num_outputs, cfg.l2, cfg.max_iter)
        entries = {}
        for dev, f in zip(devs, feats[1:]):
            values = M.compute(spec.metrics, probe.predict(f[pooling]), dev.labels)
            entries[dev.entry] = {"metrics": values, "score": M.entry_score(values)}
        out[pooling] = {
            "entries": entries,
            "score": float(np.mean([e["score"] for e in entries.values()])),
            "train_accuracy": M.accuracy(probe.predict(feats[0][pooling]), train.labels),
            "train_loss": probe.train_loss,
            "iterations": probe.iterations,
        }
    out["score"] = out[cfg.pooling]["score"]
    out["seconds"] = round(time.perf_counter() - t0, 3)
    return out


# ---------------------------------------------------------------- a run
def check_text_paths(refs: list[CheckpointRef]) -> None:
    """Every checkpoint's architecture, settings and tokenizer read before the first is probed (a problem of the
    last one came after the others were probed): its special tokens found, and every id it gives a row of its
    model's embedding table."""
    from ..data.bpe import check_fits
    from .glue.encode import TextEncoder
    from .glue.pretrained import load_architecture

    seen = set()
    for ref in refs:
        if ref.path in seen:  # a run's random-init control reads its checkpoint's
            continue
        seen.add(ref.path)
        arch, settings = load_architecture(ref)
        text = TextEncoder(ref.path / "tokenizer.json", settings.preprocess, arch.max_position)
        check_fits(text.tokenizer, ref.path / "tokenizer.json", arch.vocab_size, f"checkpoint {ref.path}")


def probe_run(
    refs: list[CheckpointRef],
    glue_dir: Path,
    cfg: ProbeConfig,
    out_path: Path | None = None,
    control: bool = True,
    note: Callable[[str], None] = lambda _: None,
    device=None,
) -> dict:
    """Probe every checkpoint in `refs` (and, with `control`, each architecture's random-init control);
    the document is written to `out_path` (atomically) after every checkpoint when given, with
    "complete": false and "planned" (how many entries it will hold) until the last one, as `mapnet blimp`'s:
    a probe stopped part-way leaves valid JSON that says it is partial."""
    from ..atomic import json_safe, write_json
    from .glue.pretrained import with_controls

    problems = cfg.problems()
    if problems:
        raise MapnetError("invalid probe settings: " + "; ".join(problems))
    cfg = ProbeConfig(**{**asdict(cfg), "task": task_spec(cfg.task).name})
    data, keep = load_probe_data(Path(glue_dir), cfg)  # input problems surface before any encoder runs
    todo, controls = with_controls(refs, "both" if control else "pretrained")
    check_text_paths(todo)
    doc = {
        "schema": SCHEMA,
        "complete": False,
        "planned": len(todo),
        "task": cfg.task,
        "config": asdict(cfg),
        "data": {
            "train_rows": len(data.train),
            "train_subset_sha256": hashlib.sha256(keep.astype(np.int64).tobytes()).hexdigest(),
            "dev_rows": {d.entry: len(d) for d in data.dev},
        },
        "controls": controls,
        "checkpoints": [],
    }
    cache = Path(out_path).parent / "cache" if out_path is not None else None
    for ref in todo:
        note(f"probing {ref.run}@{ref.step} ({ref.init})")
        doc["checkpoints"].append(probe_checkpoint(ref, data, cfg, cache, device))
        doc["complete"] = len(doc["checkpoints"]) == len(todo)
        if out_path is not None:
            write_json(Path(out_path), json_safe(doc))
    return doc


# ---------------------------------------------------------------- does the probe rank like fine-tuning?
def rank_correlation(probe_doc: dict, glue_doc: dict, pooling: str | None = None) -> dict:
    """Spearman between probe scores and fine-tuning scores of the probe's task, over the pretrained
    checkpoints both documents hold (matched by weights sha256): overall and per run."""
    pooling = pooling or probe_doc["config"]["pooling"]
    entries = TASKS[probe_doc["task"]].entries
    tuned = {
        ck["sha256"]: ck for ck in glue_doc["summary"]["checkpoints"] if ck.get("init", "pretrained") == "pretrained"
    }
    pairs = []
    for ck in probe_doc["checkpoints"]:
        ft = tuned.get(ck["sha256"])
        if ck["init"] != "pretrained" or ft is None or not all(e in ft["entries"] for e in entries):
            continue
        pairs.append(
            {
                "run": ck["run"],
                "step": ck["step"],
                "sha256": ck["sha256"],
                "probe": ck[pooling]["score"],
                "finetune": float(np.mean([ft["entries"][e] for e in entries])),
            }
        )

    def rho(group: list[dict]) -> float | None:
        if len(group) < 3:
            return None
        return M.spearman([p["probe"] for p in group], [p["finetune"] for p in group])

    runs = list(dict.fromkeys(p["run"] for p in pairs))
    return {
        "task": probe_doc["task"],
        "pooling": pooling,
        "n": len(pairs),
        "spearman": rho(pairs),
        "per_run": {r: {"n": len(g), "spearman": rho(g)} for r in runs for g in [[p for p in pairs if p["run"] == r]]},
        "pairs": pairs,
    }
