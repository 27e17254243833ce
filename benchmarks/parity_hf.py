"""Does mapnet's trainer learn as fast as the Hugging Face reference? Both, side by side, one evaluator.

    uv run python benchmarks/parity_hf.py SHARDS --out runs/parity/tiny \\
        --heldout books=runs/real-text/heldout-books --heldout wiki=runs/real-text/heldout-wiki \\
        --preset tiny --steps 3000 --batch 32 --lr 1.5e-3 --warmup 300 --grad-clip 1.0 --eval-every 250 --seeds 0,1
    uv run python benchmarks/parity_hf.py SHARDS --out runs/parity/mini --preset mini --batch 128 \\
        --steps 6000 --lr 1.5e-3 --warmup 600 --grad-clip 1.0 --device cuda        # the GPU table of RESULTS 0
    uv run python benchmarks/parity_hf.py --table runs/parity/tiny/parity.json         # print a finished run again
    uv run python benchmarks/parity_hf.py --table runs/parity/s0/parity.json runs/parity/s1/parity.json  # seeds run
    apart
    uv run python benchmarks/parity_hf.py SHARDS --out runs/parity/tiny-fix --arms mapnet \
        --reference runs/parity/tiny/parity.json --set ...  # a mapnet change against the same reference curves

Needs transformers (a dev dependency: `uv sync` installs it).

The two arms (each seed trains both):
- `mapnet`: `mapnet pretrain`'s own loop (`train.pretrain`, not a copy) with the settings below; a
  checkpoint is written at every evaluation step and scored as soon as it appears.
- `hf`: `transformers.BertForMaskedLM` fed by `DataCollatorForLanguageModeling` (Bernoulli masking,
  80/10/10) and its own loss (mean over the batch's masked tokens) — the usual recipe, written here
  from the library's parts. With `--set model.norm=pre` the reference is `RobertaPreLayerNormForMaskedLM`,
  the Hugging Face class for the pre-LN layout, instead; with `--set model.block=modern` it is
  `ModernBertForMaskedLM`, configured as `mapnet export` writes the modern block (global attention in
  every layer).

What is the same in both: model size, dropout, sequence length, the training sequences of every step
(mapnet's `DataOrder`: epoch e is permutation(seed + e)), batch size, AdamW with mapnet's parameter
groups (decay on matrices and embeddings), learning-rate schedule (mapnet's `lr_factor`), gradient
clipping, precision (bf16 autocast on CUDA, fp32 on the CPU), masking rate. What is not, by design:
each arm's own masking code, loss reduction and initialisation — they are what is being compared.
`--set KEY=VALUE` changes mapnet's settings only (its masking, its loss, its layout), which is how a
suspected cause of a gap is switched off in mapnet alone.

The evaluator (one for both arms; the same as `../shared/tools/hf_mlm_reference.py score`): up to
`--eval-sequences` sequences spread evenly over each set's validation split, 15% of the non-special
positions chosen by numpy's generator with seed 1234, every chosen position replaced by [MASK] (no
80/10/10), mean cross-entropy over the chosen positions in fp32, and top-1 accuracy. Beside each set's
loss the harness prints its **unigram level**: the cross-entropy of the set's chosen tokens under the
training tokens' unigram distribution — the loss of a model that predicts word frequencies and
ignores context, i.e. the plateau. A run has left the plateau when its loss is clearly below it.

Output: `OUT/parity.json` (every curve, every setting, the versions) and one table per set: both
curves (mean over seeds), the difference mapnet - hf per seed, and its largest value after
`--after` steps (default 500). Timing is not compared here (the HF arm computes the head everywhere);
`bench_pretrain.py` compares step costs.
"""

from __future__ import annotations

import argparse
import json
import math
import shutil
import sys
import time
from dataclasses import replace
from pathlib import Path

import numpy as np
import torch

from mapnet_cli import atomic
from mapnet_cli.data.shards import ShardReader
from mapnet_cli.data.unigram import entropy, unigram_log_probs
from mapnet_cli.settings import resolve
from mapnet_cli.train import DataOrder, precision_context, pretrain
from mapnet_cli.train.optim import build_optimizer, build_scheduler
from mapnet_cli.train.record import versions
from mapnet_cli.train.run_loader import load_run

EVAL_SEED, EVAL_RATE, EVAL_CHUNK = 1234, 0.15, 64


# ---------------------------------------------------------------- the one evaluator
class EvalSet:
    """Fixed sequences and fixed all-[MASK] positions of one held-out split, and its unigram level."""

    def __init__(self, name: str, folder: Path, limit: int, log_p: np.ndarray):
        reader = ShardReader(folder, "valid", verify="size")
        if len(reader) == 0:
            sys.exit(f"error: {folder} has no validation sequences")
        rows = np.linspace(0, len(reader) - 1, min(limit, len(reader))).round().astype(np.int64)
        self.name, self.ids, self.special = name, reader.take(rows).astype(np.int64), reader.special_ids
        rng = np.random.default_rng(EVAL_SEED)
        specials = np.isin(self.ids, list(self.special.values()))
        self.chosen = (rng.random(self.ids.shape) < EVAL_RATE) & ~specials
        self.unigram = float(-log_p[self.ids[self.chosen]].mean())
        self.tokenizer_sha = reader.tokenizer_sha256
        self.kinds = reader.token_kinds or {}  # the synthetic corpus's token kinds: a loss for each

    @torch.no_grad()
    def score(self, hidden_and_head, device: torch.device) -> dict:
        """`hidden_and_head(inputs, attention_mask, chosen) -> logits at chosen (N, V)`, row-major."""
        total, correct, n = 0.0, 0, 0
        kinds = {k: torch.as_tensor(v, device=device) for k, v in self.kinds.items()}
        by_kind = {k: [0.0, 0] for k in kinds}
        for start in range(0, len(self.ids), EVAL_CHUNK):
            x = torch.from_numpy(self.ids[start : start + EVAL_CHUNK]).to(device)
            c = torch.from_numpy(self.chosen[start : start + EVAL_CHUNK]).to(device)
            logits = hidden_and_head(x.masked_fill(c, self.special["mask"]), x != self.special["pad"], c).float()
            target = x[c]
            losses = torch.nn.functional.cross_entropy(logits, target, reduction="none")
            total += losses.sum().item()
            correct += int((logits.argmax(-1) == target).sum())
            n += int(c.sum())
            for k, ids in kinds.items():
                of_kind = torch.isin(target, ids)
                by_kind[k][0] += losses[of_kind].sum().item()
                by_kind[k][1] += int(of_kind.sum())
        return {
            "loss": total / n,
            "accuracy": correct / n,
            "tokens": n,
            **{f"loss/{k}": s / m for k, (s, m) in by_kind.items() if m},
        }


def score_all(sets: list[EvalSet], fn, model: torch.nn.Module, device: torch.device) -> dict:
    was = model.training
    model.eval()
    out = {s.name: s.score(fn, device) for s in sets}
    model.train(was)
    return out


# ---------------------------------------------------------------- the mapnet arm: its own loop
def mapnet_settings(args, seed: int):
    flags = [
        f"model.preset={args.preset}",
        f"train.recipe={args.recipe}",
        f"train.steps={args.steps}",
        f"train.batch_size={args.batch}",
        f"train.seed={seed}",
        f"optim.lr={args.lr}",
        f"optim.warmup.steps={args.warmup}",
        f"optim.grad_clip={args.grad_clip}",
        f"masking.mask_prob={args.mask_prob}",
        f"train.checkpoint_every={args.eval_every}",
        "train.keep_last=1",
        "train.keep_steps=[]",
        "train.eval_every=0",
        "train.eval_sequences=64",
        "logging.progress=false",
        f"logging.log_every={args.eval_every}",
        f"train.device={args.device}",
        f"model.max_position={args.seq_len}",
        f"shard.max_seq_len={args.seq_len}",
        "shard.verify=size",
    ]
    if args.dropout is not None:
        flags += [f"model.dropout={args.dropout}", f"model.attention_dropout={args.dropout}"]
    flags += [f"optim.eps={args.eps}"] if args.eps is not None else []
    flags += [f"model.init_std={args.init_std}"] if args.init_std is not None else []
    if args.short_seq_len:
        flags += [f"train.short_seq.len={args.short_seq_len}", f"train.short_seq.steps={args.short_seq_steps}"]
    return resolve(None, None, [*flags, *args.set])


def run_mapnet(args, seed: int, sets: list[EvalSet], out: Path) -> list[dict]:
    settings = mapnet_settings(args, seed)
    device = torch.device("cuda" if args.device == "cuda" else "cpu")
    curve: list[dict] = []
    started = time.perf_counter()

    def on_report(kind: str, data: dict) -> None:
        if kind != "checkpoint":
            return
        run = load_run(data["path"], device=device, verify="size")
        model = run.model

        def logits_at(inputs, attn, chosen):
            return model(inputs, attn, chosen)

        curve.append(
            {
                "step": data["step"],
                "elapsed": round(time.perf_counter() - started, 1),
                **score_all(sets, logits_at, model, device),
            }
        )
        report_point("mapnet", seed, curve[-1])

    pretrain(settings, args.shards, out, on_report=on_report)
    return curve


# ---------------------------------------------------------------- the reference arm
def hf_model(settings, vocab_size: int, pad_id: int, seq_len: int):
    """BertForMaskedLM (post-LN), or RobertaPreLayerNormForMaskedLM for model.norm = "pre", or ModernBertForMaskedLM
    for model.block = "modern", at mapnet's size."""
    m = settings.model
    if m.block == "modern":  # the config `mapnet export` writes: the same computation as mapnet's modern block
        from transformers import ModernBertConfig, ModernBertForMaskedLM

        from mapnet_cli.model.bert import BertConfig as MapnetConfig
        from mapnet_cli.model.hf_modern_layout import hf_config

        return ModernBertForMaskedLM(
            ModernBertConfig.from_dict(hf_config(MapnetConfig.from_settings(m, vocab_size, pad_id)))
        )
    common = dict(
        vocab_size=vocab_size,
        hidden_size=m.hidden,
        num_hidden_layers=m.layers,
        num_attention_heads=m.heads,
        intermediate_size=m.intermediate or 4 * m.hidden,
        hidden_dropout_prob=m.dropout,
        attention_probs_dropout_prob=m.attention_dropout,
        type_vocab_size=1,
        pad_token_id=pad_id,
        layer_norm_eps=m.layer_norm_eps,
        initializer_range=m.init_std,
        tie_word_embeddings=True,
    )
    if m.norm == "pre":
        from transformers import RobertaPreLayerNormConfig, RobertaPreLayerNormForMaskedLM

        # RoBERTa numbers positions from pad_id + 1: pad_id + 1 more rows than tokens.
        cfg = RobertaPreLayerNormConfig(max_position_embeddings=seq_len + pad_id + 1, **common)
        return RobertaPreLayerNormForMaskedLM(cfg)
    from transformers import BertConfig, BertForMaskedLM

    return BertForMaskedLM(BertConfig(max_position_embeddings=seq_len, **common))


def run_hf(args, seed: int, sets: list[EvalSet], train: ShardReader) -> list[dict]:
    from transformers import DataCollatorForLanguageModeling, PreTrainedTokenizerFast

    settings = mapnet_settings(args, seed)
    device = torch.device("cuda" if args.device == "cuda" else "cpu")
    sp = train.special_ids
    tok = PreTrainedTokenizerFast(
        tokenizer_file=str(train.tokenizer_path),
        pad_token="[PAD]",
        unk_token="[UNK]",
        cls_token="[CLS]",
        sep_token="[SEP]",
        mask_token="[MASK]",
    )
    if (tok.mask_token_id, tok.pad_token_id) != (sp["mask"], sp["pad"]):
        sys.exit(f"error: {train.tokenizer_path}'s special ids differ from the shards' manifest")
    collator = DataCollatorForLanguageModeling(tok, mlm=True, mlm_probability=args.mask_prob, return_tensors="pt")
    torch.manual_seed(seed)
    model = hf_model(settings, train.vocab_size, sp["pad"], args.seq_len)
    if args.same_init:  # mapnet's initial weights for this seed, exactly as its run builds them
        from mapnet_cli.export import hf_state_dict
        from mapnet_cli.model.bert import BertConfig
        from mapnet_cli.train.init_from import start_model

        start, _ = start_model(BertConfig.from_settings(settings.model, train.vocab_size, sp["pad"]), seed)
        weights = hf_state_dict(start)
        for key in [k for k in weights if k.endswith("token_type_embeddings.weight")]:
            weights[key] = weights[key][:1]  # export writes two zero rows; the reference has one
        result = model.load_state_dict(weights, strict=False)
        missing = [k for k in result.missing_keys if not k.endswith(("decoder.weight", "decoder.bias"))]  # tied
        probe = torch.from_numpy(train.take(np.arange(2)).astype(np.int64))
        with torch.no_grad():
            same = torch.allclose(model.eval()(input_ids=probe).logits, start.eval()(probe), atol=1e-4)
        if missing or result.unexpected_keys or not same:
            sys.exit(
                f"error: --same-init did not reproduce mapnet's initial model ({missing or result.unexpected_keys})"
            )
        model.train()
        torch.manual_seed(seed)
    model = model.to(device)
    # Fused on CUDA; on the CPU torch's multi-tensor path, as this arm always ran there (not mapnet's fused default).
    optimizer = build_optimizer([model], replace(settings.optim, impl="fused" if device.type == "cuda" else "foreach"))
    scheduler = build_scheduler(optimizer, settings.optim, args.steps)
    autocast = precision_context(device.type == "cuda", device)  # train.precision=auto: bf16 on CUDA only
    order = DataOrder(len(train), seed)
    backbone = model.base_model
    head = (
        model.cls
        if hasattr(model, "cls")
        else model.lm_head
        if hasattr(model, "lm_head")
        else torch.nn.Sequential(model.head, model.decoder)
    )  # ModernBertForMaskedLM: transform, then the tied decoder

    def logits_at(inputs, attn, chosen):  # the head is position-wise: only where the evaluator asks
        return head(backbone(input_ids=inputs, attention_mask=attn.long()).last_hidden_state[chosen])

    curve: list[dict] = []
    started = time.perf_counter()
    model.train()
    for step in range(1, args.steps + 1):
        rows = train.take(order.take((step - 1) * args.batch, args.batch)).astype(np.int64)
        pieces = settings.train.pieces_per_sequence(step - 1, rows.shape[1])
        rows = rows.reshape(len(rows) * pieces, -1)  # the sequence-length warm-up, as mapnet cuts it
        batch = collator([{"input_ids": r} for r in torch.from_numpy(rows)])
        inputs, labels = batch["input_ids"].to(device), batch["labels"].to(device)
        attn = (torch.from_numpy(rows) != sp["pad"]).long().to(device)
        with autocast:
            loss = model(input_ids=inputs, attention_mask=attn, labels=labels).loss
        loss.backward()
        if args.grad_clip:
            torch.nn.utils.clip_grad_norm_(model.parameters(), args.grad_clip)
        optimizer.step()
        scheduler.step()
        optimizer.zero_grad(set_to_none=True)
        if step % args.eval_every == 0 or step == args.steps:
            if not math.isfinite(loss.item()):
                sys.exit(f"error: the reference's loss is {loss.item()} at step {step}")
            curve.append(
                {
                    "step": step,
                    "elapsed": round(time.perf_counter() - started, 1),
                    **score_all(sets, logits_at, model, device),
                }
            )
            report_point("hf", seed, curve[-1])
    return curve


def reference_key(args, sets: list[EvalSet]) -> dict:
    """Everything the hf arm's curves depend on: a reused reference must agree on all of it."""
    model = mapnet_settings(args, 0).model  # the reference's layout follows mapnet's
    return {
        "shards": str(args.shards.resolve()),
        "sets": {s.name: s.unigram for s in sets},
        "preset": args.preset,
        "steps": args.steps,
        "batch": args.batch,
        "lr": args.lr,
        "warmup": args.warmup,
        "grad_clip": args.grad_clip,
        "dropout": args.dropout,
        "mask_prob": args.mask_prob,
        "eval_every": args.eval_every,
        "eps": args.eps,
        "init_std": args.init_std,
        "same_init": args.same_init,
        "short_seq": [args.short_seq_len, args.short_seq_steps],
        "recipe": args.recipe,
        "eval_sequences": args.eval_sequences,
        "device": args.device,
        "norm": model.norm,
        **({"block": model.block} if model.block != "bert" else {}),
    }  # references made before model.block stay valid


def reference_runs(path: Path, key: dict, seeds: list[int]) -> list[dict]:
    old = json.loads(path.read_text())
    if old.get("reference_key") != key:
        differ = sorted(k for k in key if (old.get("reference_key") or {}).get(k) != key[k])
        sys.exit(f"error: {path} was run with other settings ({', '.join(differ)}): its reference curves do not apply")
    runs = [r for r in old["runs"] if r["arm"] == "hf" and r["seed"] in seeds]
    missing = sorted(set(seeds) - {r["seed"] for r in runs})
    if missing:
        sys.exit(f"error: {path} has no hf run for seed(s) {missing}")
    return runs


# ---------------------------------------------------------------- reporting
def report_point(arm: str, seed: int, point: dict) -> None:
    losses = "  ".join(
        f"{k} {v['loss']:.4f}" + "".join(f" {m[5:]} {x:.3f}" for m, x in v.items() if m.startswith("loss/"))
        for k, v in point.items()
        if isinstance(v, dict)
    )
    print(f"[{arm} seed {seed}] step {point['step']:>6}  {losses}  ({point['elapsed']:.0f} s)", flush=True)


def merged(results: list[dict]) -> dict:
    """One result from several parity.json files with the same reference settings (their runs together)."""
    keys = {json.dumps(r["reference_key"], sort_keys=True) for r in results}
    if len(keys) > 1:
        sys.exit("error: these parity.json files were run with different settings")
    seen = {(r["arm"], r["seed"]) for r in results[0]["runs"]}
    out = dict(results[0], runs=list(results[0]["runs"]))
    for other in results[1:]:
        for run in other["runs"]:
            if (run["arm"], run["seed"]) not in seen:
                out["runs"].append(run)
                seen.add((run["arm"], run["seed"]))
    return out


def table(result: dict, after: int) -> str:
    """Per set: mean curves, mapnet - hf per seed, and the largest difference after `after` steps."""
    runs, lines = result["runs"], []
    seeds = sorted({r["seed"] for r in runs}, key=int)
    curve = {(r["arm"], r["seed"]): {p["step"]: p for p in r["curve"]} for r in runs}
    for name, level in result["unigram"].items():
        lines.append(
            f"\n{name}: loss in nats (unigram level {level:.3f}; training-token entropy {result['train_entropy']:.3f})"
        )
        lines.append(f"{'step':>7} {'mapnet':>8} {'hf':>8}   " + "  ".join(f"diff s{s}" for s in seeds))
        steps = sorted(set.intersection(*(set(c) for c in curve.values())))
        worst = -math.inf
        for step in steps:
            mean = {arm: np.mean([curve[(arm, s)][step][name]["loss"] for s in seeds]) for arm in ("mapnet", "hf")}
            diffs = [curve[("mapnet", s)][step][name]["loss"] - curve[("hf", s)][step][name]["loss"] for s in seeds]
            if step > after:
                worst = max(worst, *diffs)
            lines.append(
                f"{step:>7} {mean['mapnet']:>8.3f} {mean['hf']:>8.3f}   " + "  ".join(f"{d:>+7.3f}" for d in diffs)
            )
        lines.append(f"largest mapnet - hf after step {after}: {worst:+.3f} nats")
    return "\n".join(lines)


def main(argv: list[str]) -> None:
    ap = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("shards", type=Path, nargs="?")
    ap.add_argument("--out", type=Path)
    ap.add_argument(
        "--heldout",
        action="append",
        default=[],
        metavar="NAME=FOLDER",
        help="another evaluation set (its validation split); the shards' own split is 'mixed'",
    )
    ap.add_argument("--preset", default="tiny")
    ap.add_argument("--recipe", default="paper", help="mapnet's training recipe the flags below start from (both arms)")
    ap.add_argument("--steps", type=int, default=3000)
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--lr", type=float, default=1.5e-3)
    ap.add_argument("--warmup", type=int, default=300)
    ap.add_argument("--grad-clip", type=float, default=1.0)
    ap.add_argument("--dropout", type=float, default=None, help="hidden and attention dropout (default: the preset's)")
    ap.add_argument("--mask-prob", type=float, default=0.15)
    ap.add_argument("--eps", type=float, default=None, help="Adam epsilon (default: the recipe's)")
    ap.add_argument(
        "--init-std", type=float, default=None, help="std of the weight init, both arms (default: the recipe's)"
    )
    ap.add_argument(
        "--short-seq-len", type=int, default=0, help="sequence-length warm-up: pieces of this many tokens, both arms"
    )
    ap.add_argument("--short-seq-steps", type=int, default=0, help="... for this many steps")
    ap.add_argument("--eval-every", type=int, default=250)
    ap.add_argument("--eval-sequences", type=int, default=1024)
    ap.add_argument("--seeds", default="0,1")
    ap.add_argument("--arms", default="mapnet,hf")
    ap.add_argument(
        "--set", action="append", default=[], metavar="KEY=VALUE", help="a mapnet setting (mapnet arm only)"
    )
    ap.add_argument("--device", choices=["cpu", "cuda"], default="cuda" if torch.cuda.is_available() else "cpu")
    ap.add_argument("--threads", type=int, default=0, help="torch threads (0: torch's default)")
    ap.add_argument("--after", type=int, default=500, help="report the largest difference after this step")
    ap.add_argument("--same-init", action="store_true", help="the hf arm starts from mapnet's initial weights")
    ap.add_argument("--reference", type=Path, help="take the hf curves from this earlier parity.json (same settings)")
    ap.add_argument("--overwrite", action="store_true")
    ap.add_argument(
        "--table",
        type=Path,
        nargs="+",
        help="print the tables of finished parity.json files (runs with "
        "the same settings, e.g. one seed each, are merged) and exit",
    )
    args = ap.parse_args(argv)
    if args.table:
        print(table(merged([json.loads(p.read_text()) for p in args.table]), args.after))
        return
    if args.shards is None or args.out is None:
        ap.error("SHARDS and --out are required")
    if args.threads:
        torch.set_num_threads(args.threads)
    arms = [a for a in args.arms.split(",") if a]
    if not set(arms) <= {"mapnet", "hf"} or not arms:
        ap.error(f"--arms takes mapnet and/or hf (got {args.arms!r})")
    if args.reference and "hf" in arms:
        ap.error("--reference supplies the hf curves: pass --arms mapnet")
    if args.out.exists():
        if not args.overwrite:
            sys.exit(f"error: {args.out} exists (pass --overwrite to replace it)")
        shutil.rmtree(args.out)
    args.out.mkdir(parents=True)

    train = ShardReader(args.shards, "train", verify="size")
    args.seq_len = train.max_seq_len
    log_p = unigram_log_probs(train)
    sets = [EvalSet("mixed", args.shards, args.eval_sequences, log_p)]
    for entry in args.heldout:
        name, _, folder = entry.partition("=")
        sets.append(EvalSet(name, Path(folder), args.eval_sequences, log_p))
        if sets[-1].tokenizer_sha != train.tokenizer_sha256:
            sys.exit(f"error: {folder} was encoded with another tokenizer than {args.shards}")
    seeds = [int(s) for s in args.seeds.split(",")]
    result = {
        "command": " ".join(["python", "benchmarks/parity_hf.py", *argv]),
        "settings": vars(args)
        | {"shards": str(args.shards.resolve()), "out": str(args.out), "table": None, "reference": None},
        "reference_key": reference_key(args, sets),
        "versions": versions(),
        "train_entropy": entropy(log_p),
        "unigram": {s.name: s.unigram for s in sets},
        "runs": [],
    }
    if args.reference:
        result["runs"] += reference_runs(args.reference, result["reference_key"], seeds)
        result["reference"] = str(args.reference.resolve())
    for seed in seeds:
        for arm in arms:
            t0 = time.perf_counter()
            curve = (
                run_mapnet(args, seed, sets, args.out / f"mapnet-seed{seed}")
                if arm == "mapnet"
                else run_hf(args, seed, sets, train)
            )
            result["runs"].append(
                {"arm": arm, "seed": seed, "wall_s": round(time.perf_counter() - t0, 1), "curve": curve}
            )
            atomic.write_text(args.out / "parity.json", json.dumps(result, indent=1, default=str))
    if {r["arm"] for r in result["runs"]} == {"mapnet", "hf"}:
        print(table(result, args.after))


if __name__ == "__main__":
    main(sys.argv[1:])
