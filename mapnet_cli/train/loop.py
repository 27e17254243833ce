"""MLM pretraining: the run loop (`Run`) over the pieces beside it in this package.

    mapnet pretrain shards/ --out runs/tiny --preset tiny --set train.steps=2000
    mapnet pretrain shards/ --out runs/base --gpus 8
    torchrun --nproc-per-node 8 -m mapnet_cli.cli pretrain shards/ --out runs/base

Library entry point: `pretrain(settings, shards, out, resume=..., on_report=...)`. With `variance.every`, the caller
also passes the measurement (`variance_snapshot=`, `evaluation/variance/snapshot.py`'s, as the CLI does): training
sits below evaluation and never imports it.

The data order and micro-batch split are in `batches.py`, one optimizer step and the loss normalisation in
`step.py`, time (when to stop, the learning rate's position, each step's pieces and batch, the budget's clock) in
`schedule.py`, the masking strategy in `strategies.py`, held-out evaluation in `held_out.py`, run.json and
metrics.jsonl in `record.py`, stops in `stop_signals.py`, the next step's batches in `prefetch.py`; what stays here
is the order they happen in. Reads, dropout, stops, prefetch: docs/internals.md#trainlooppy.
"""

from __future__ import annotations

import gc
import os
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path

import torch
from torch.profiler import record_function

from .. import distributed
from ..data.unigram import entropy, unigram_log_probs
from ..errors import MapnetError, warn
from ..masking.strategy import MicroBatch, to_device
from ..masking.uniform import DROPOUT, TRAIN_MASKS, mix_seed, sequence_keys
from ..model import checkpoint
from ..model.bert import BertConfig
from . import init_from, tracking
from .batches import DataOrder, pieces, rank_micro_slots
from .budget import Clock
from .compile import compile_model
from .held_out import build_eval_set, evaluate, extra_eval_sets
from .inputs import check_resume_steps, check_run_inputs, check_world
from .optim import build_optimizer
from .prefetch import StepPrefetcher
from .record import MetricsLog, memory_bytes, record_budget, write_run_files
from .run_loader import load_run
from .run_settings import check_corpus_cleaning
from .schedule import make_schedule
from .step import NonFiniteLoss, StepContext, precision_context, train_step
from .stop_signals import Stopped, StopSignals, signal_name
from .strategies import training_strategy

HOST = torch.device("cpu")  # where every strategy draws its masks (`to_device` says why)
Report = Callable[[str, dict], None]
# (bare model, MAP-Net or None, validation ShardReader, settings, step) -> a metrics record
VarianceSnapshot = Callable[..., dict]


# ---------------------------------------------------------------- the run
def pretrain(
    settings,
    shards: str | os.PathLike,
    out: str | os.PathLike,
    *,
    resume: bool = False,
    stop_at: int | None = None,
    command_line: Sequence[str] = (),
    on_report: Report | None = None,
    variance_snapshot: VarianceSnapshot | None = None,
    clock: Clock = time.perf_counter,
) -> Path:
    """Train (or continue) the run in `out` on `shards`; return the last checkpoint's path. `clock`: what
    each step's duration is read from (the training time a `train.time_budget` counts; `budget.py`)."""
    check_corpus_cleaning(settings, Path(shards))  # settings are resolved before (run_settings), never changed here
    with distributed.process_group(settings.train.device, settings.distributed.backend) as info:
        run = Run(settings, Path(shards), Path(out), info, resume, list(command_line), variance_snapshot, clock)
        quiet = not info.is_main or on_report is None  # one progress display per job
        failed = True
        try:
            # SIGTERM / SIGUSR1: checkpoint after this step, then stop; a step that does not end is abandoned
            with StopSignals(run.out) as stop:  # (stop_signals.py)
                last = run.train(stop_at, (lambda kind, data: None) if quiet else on_report, stop)
                late = stop.agreed(info, read=True)  # one that came as the run ended: complete, but not forgotten
            failed = False
            if late:
                raise Stopped(late, run.step, last, complete=True)
        except Stopped:
            failed = False  # a stop is no failure: the run resumes (W&B and TensorBoard close it as finished)
            raise
        except Exception as exc:
            reason = compile_failure(exc)
            if reason is None:
                raise
            # `train.compile = auto` compiles on CUDA unasked: a machine without a working backend (no C++
            # compiler, no Triton) must get one line saying what to do, not Inductor's traceback.
            raise MapnetError(
                f"torch.compile failed on this machine ({reason}); --set train.compile=false trains without it"
            ) from None
        finally:
            run.metrics.close(failed)
            # The model's DDP wrapper holds the process group and the gloo work it last ran: freed here (with the
            # reference cycles its hooks make), before the group is destroyed and while Python is alive, not at
            # interpreter shutdown, where a gloo thread releasing its last tensors can abort the process (pytorch
            # PR 179291's account of "terminate called without an active exception", which CI met at the end of a
            # two-process job under load; figures in the CHANGELOG).
            del run
            if info.distributed:
                gc.collect()
        # Every rank leaves together: rank 0 writes the run's last files after the others are done. Only on
        # success: a failed rank must not wait for peers here.
        distributed.barrier(info)
        return last


def compile_failure(exc: BaseException) -> str | None:
    """The first line of a torch.compile backend failure (Inductor could not build its kernels), else None."""
    dynamo = sys.modules.get("torch._dynamo.exc")  # loaded by any compiled call: absent, nothing was compiled
    if dynamo is None or not isinstance(exc, dynamo.BackendCompilerFailed):
        return None
    return next((line.strip() for line in str(exc).splitlines() if line.strip()), type(exc).__name__)


class Run:
    """Everything a training run holds: data, model, optimizer, position, output folder."""

    def __init__(
        self,
        settings,
        shards: Path,
        out: Path,
        info: distributed.DistInfo,
        resume: bool,
        argv: list[str],
        variance_snapshot: VarianceSnapshot | None = None,
        clock: Clock = time.perf_counter,
    ):
        from ..data.shards import ShardReader

        s, t = settings, settings.train
        self.settings, self.out, self.info, self.clock = settings, out, info, clock
        if s.variance.every and variance_snapshot is None:  # a library caller's mistake: never silently skipped
            raise MapnetError(
                "variance.every is set but no variance measurement was passed (pretrain(..., "
                "variance_snapshot=...), as `mapnet pretrain` passes evaluation's)"
            )
        self.variance_snapshot = variance_snapshot
        tracking.require(s.logging)  # every rank, before any work: a missing extra is one line, not a hang
        check_world(s, info.world_size)  # the launcher checked it before torchrun; a job started otherwise, here
        if resume:
            check_resume_steps(s, out)  # before settings.toml is written: it would say steps = 2 beside step 4
        self.micro = t.micro_batch_size or t.batch_size // info.world_size
        self.data = ShardReader(shards, "train", verify=s.shard.verify)
        if len(self.data) == 0:
            raise MapnetError(f"{shards} has no training sequences")
        check_run_inputs(s, self.data, shards, info.world_size)  # what compare also checks for every arm first
        # model.init_from: SOURCE's weights on a fresh start; --resume restores the run's own checkpoint instead.
        # Opened and checked against the shards' tokenizer here, before the held-out sets and the unigram pass.
        self.source = init_from.open_source(s.model.init_from) if s.model.init_from and not resume else None
        if self.source is not None:
            init_from.check_tokenizer(self.source, self.data.tokenizer_path, f"the shards in {shards}")
        if resume:  # shards of another tokenizer: refused here, not after the unigram pass (`_restore` checks again)
            ckpt = checkpoint.latest_checkpoint(out)
            if ckpt is not None and checkpoint.read_config(ckpt).get("tokenizer_sha256") != self.data.tokenizer_sha256:
                raise MapnetError(
                    f"--resume: {ckpt} used another tokenizer than the shards in {shards}; resume on the "
                    "shards the run trained on"
                )
        self.valid = ShardReader(shards, "valid", verify=s.shard.verify)
        self.eval_set = build_eval_set(
            self.valid, t.eval_sequences, t.eval_seed, s.masking, t.eval_pick, t.eval_mask_prob, t.eval_replace
        )
        if self.eval_set is None:  # an explicit train.eval_every was refused by check_run_inputs; the default is not
            warn(
                f"shards {shards} have no validation split: this run is never evaluated (no eval_loss in "
                f"{s.logging.metrics_file}); shard with --valid-fraction 0.01 (or more) to have one"
            )
        self.cfg = BertConfig.from_settings(s.model, self.data.vocab_size, self.data.special_ids["pad"])
        self.tokenizer_sha = self.data.tokenizer_sha256
        self.extra_eval = extra_eval_sets(s, self.tokenizer_sha, self.cfg.max_position, self.eval_set is not None)
        self.unigram = self._unigram_levels() if info.is_main else {}
        self.order = DataOrder(len(self.data), t.seed)

        model, notes = init_from.start_model(self.cfg, t.seed, self.source)  # the same weights on every rank
        self.init_record = self.source.record(notes) if self.source is not None and info.is_main else None
        self.model = model.to(info.device)
        # After the encoder: a MAP-Net run starts from the same encoder weights as a uniform run with this seed.
        self.strategy = training_strategy(s, self.model, self.data, info)
        self.optimizer = build_optimizer(self.strategy.optim_modules, s.optim, lrs=self.strategy.optim_lrs(s.optim.lr))
        # Time, the learning rate's position, each step's pieces and batch: train.steps or train.time_budget's.
        self.schedule = make_schedule(s, self.optimizer, self.data.max_seq_len)
        self.step, self.position = 0, 0
        self.resumed_from = self._restore() if resume else None
        # Rank 0 decides and tells the others, so no rank is left waiting in a collective.
        if not resume and distributed.broadcast_object(info.is_main and bool(checkpoint.list_checkpoints(out)), info):
            raise MapnetError(f"{out} already holds checkpoints; pass --resume to continue it or choose another --out")
        if t.compiles(info.device):
            compile_model(self.model, self.strategy, t)  # train.compile_scope / compile_mode (compile.py)
        d = s.distributed  # distributed.static_graph with accumulation: refused by check_world
        self.ddp = distributed.wrap_model(self.strategy.net, info, d.bucket_cap_mb, d.static_graph)
        self.autocast = precision_context(t.autocasts_bf16(info.device), info.device)  # held-out evaluation's
        self.step_context = StepContext(t.autocasts_bf16(info.device), info.device, t.attention_kernel_on(info.device))
        resume_step = self.step if resume else None
        self.metrics = MetricsLog(out / s.logging.metrics_file, info.is_main, resume_step)
        if info.is_main:
            write_run_files(self, shards, argv)
            self.metrics.sinks = tracking.open_sinks(s, out, resume_step)  # after the folder exists

    def _unigram_levels(self) -> dict:
        """The plateau this run must leave: the training tokens' unigram entropy, and each held-out set's
        cross-entropy under those frequencies on its own masked tokens (`data/unigram.py`)."""
        log_p = unigram_log_probs(self.data)
        levels = {"train_entropy": entropy(log_p)}
        for name, data in ({"": self.eval_set} | self.extra_eval).items():
            if data is not None:
                data.set_unigram_level(log_p)
                levels["eval_unigram" + (f"@{name}" if name else "")] = data.unigram
        return levels

    def _restore(self) -> Path:
        ckpt = checkpoint.latest_checkpoint(self.out)
        if ckpt is None:
            raise MapnetError(f"--resume: {self.out} has no complete checkpoint to continue from")
        # Verified as every reader verifies: a flipped byte is refused by name, as in the shards.
        saved = load_run(ckpt, weights=False, verify=self.settings.shard.verify)
        meta = saved.meta
        if BertConfig.from_dict(meta["model"]) != self.cfg:  # from_dict: older checkpoints lack newer fields
            raise MapnetError(
                f"--resume: {ckpt} was trained with a different model ({meta['model']}); model settings cannot change"
            )
        if meta["tokenizer_sha256"] != self.tokenizer_sha:
            raise MapnetError(f"--resume: {ckpt} used another tokenizer than these shards")
        wanted = self.settings.masking.strategy
        if "masking" not in meta:  # every checkpoint pretrain writes records it
            raise MapnetError(
                f"--resume: {ckpt / checkpoint.CONFIG} does not say which masking it was trained with; "
                "it was not written by `mapnet pretrain` and cannot be continued"
            )
        if meta["masking"] != wanted:
            raise MapnetError(
                f"--resume: {ckpt} was trained with {meta['masking']} masking, not {wanted}; "
                "masking.strategy cannot change"
            )
        self.strategy.check_resume(meta, ckpt)
        saved.load_into(self.strategy.modules)  # into the strategy's own networks: DDP and the optimizer hold them
        # Read on the CPU: the RNG states must stay CPU byte tensors (a CUDA copy is refused), and
        # Optimizer.load_state_dict moves each optimizer tensor to its parameter's device itself.
        state = saved.state("cpu")
        self.optimizer.load_state_dict(state["optimizer"])
        self.schedule.load_state_dict(state, ckpt)  # a step run and a budget run refuse each other's
        checkpoint.set_rng_state(state["rng"])
        self.step, self.position = state["step"], state["data_position"]
        return ckpt

    @property
    def scheduler(self):
        """The learning rate's schedule, which `train_step` steps (the schedule's own)."""
        return self.schedule.lr

    def batches(
        self, step: int, position: int | None = None, n_pieces: int | None = None, size: int | None = None
    ) -> list[MicroBatch]:
        """This rank's micro-batches of `step` from data `position` (default: the run's), each sequence cut into
        `n_pieces` (default: the schedule's), `size` sequences in all (default: the step's batch, the schedule's),
        masked on the host and sent to the device (`to_device`). Reads no state that training changes
        (`prefetch`) when all three are given."""
        t = self.settings.train
        size = size or self.schedule.batch(step)
        indices = self.order.take(self.position if position is None else position, size // self.strategy.copies)
        out = []
        for slots in rank_micro_slots(size, self.info.world_size, self.info.rank, self.micro):
            with record_function("mapnet.data"):
                ids = self.data.take(indices[[s // self.strategy.copies for s in slots]])
                ids, slots = pieces(ids, slots, n_pieces or self.schedule.pieces(step), t.batch_size)
            keys = sequence_keys(t.seed, step, slots, TRAIN_MASKS)
            with record_function("mapnet.masks"):
                batch = self.strategy.micro_batch(ids, step, slots, keys, HOST)
            with record_function("mapnet.to_device"):
                out.append(to_device(batch, self.info.device))
        return out

    def save(self) -> Path | None:
        path = None
        if self.info.is_main:
            state = {
                "optimizer": self.optimizer.state_dict(),
                "rng": checkpoint.rng_state(),
                "data_position": self.position,
                "world_size": self.info.world_size,
                **self.schedule.state_dict(),
            }
            extra = {
                "data_position": self.position,
                "masking": self.settings.masking.strategy,
                **self.strategy.checkpoint_extra(),
            }
            path = checkpoint.save_checkpoint(
                self.out,
                self.step,
                self.strategy.modules,
                state,
                self.cfg,
                self.settings.to_toml(),
                self.data.tokenizer_path,
                self.tokenizer_sha,
                extra,
            )
            t = self.settings.train
            checkpoint.prune(self.out, t.keep_last, t.keep_steps)
        distributed.barrier(self.info)
        return path

    def evaluate(self) -> dict | None:
        if self.eval_set is None:
            return None
        result = evaluate(
            self.model, self.eval_set, self.micro, self.autocast, self.info, self.cfg.pad_id, self.data.token_kinds
        )
        for name, data in self.extra_eval.items():
            on_set = evaluate(self.model, data, self.micro, self.autocast, self.info, self.cfg.pad_id)
            result.update({f"{key}@{name}": value for key, value in on_set.items()})
        return result

    def _log_eval(self, report: Report) -> None:
        ev = self.evaluate()
        if ev is not None:
            self.metrics.write({"kind": "eval", "step": self.step, **ev})
            report("eval", {"step": self.step, **ev})

    def _log_variance(self) -> None:
        """`variance.every`: the cheap gradient-variance decomposition on fixed validation sentences.

        Rank 0 measures on the bare model (no DDP hooks); the others wait at the next collective.
        """
        if not self.info.is_main:
            return
        snap = self.variance_snapshot(
            self.model, getattr(self.strategy, "proposal", None), self.valid, self.settings, self.step
        )
        self.metrics.write({"kind": "variance", **snap})

    def _reads_before(self, step: int, end: int) -> bool:
        """Whether something after optimizer step `step` looks at the weights (an evaluation, a variance
        snapshot, a checkpoint): that step is read, so nothing is evaluated or saved after an unseen
        non-finite step."""
        t, every_variance = self.settings.train, self.settings.variance.every
        return bool(
            (t.eval_every and step % t.eval_every == 0)
            or step == t.steps
            or (every_variance and step % every_variance == 0)
            or (t.checkpoint_every and step % t.checkpoint_every == 0)
            or step in t.keep_steps
            or step == end
        )

    def train(self, stop_at: int | None, report: Report, stop: StopSignals | None = None) -> Path:
        t = self.settings.train
        self.schedule.start(self.step, min(t.steps, stop_at or t.steps))
        if self.resumed_from is not None:
            report("resume", {"path": str(self.resumed_from), "step": self.step})
        if self.init_record is not None:
            report("init_from", self.init_record)
        if self.step == 0 and self.resumed_from is None:
            if self.info.is_main:  # once per run: every later loss is read against it
                self.metrics.write({"kind": "unigram", "step": 0, **self.unigram})
                report("unigram", dict(self.unigram))
            self._log_eval(report)  # the starting point: steps-to-target and loss curves need step 0
            if self.settings.variance.every:
                self._log_variance()
        with StepPrefetcher(self.batches, enabled=t.prefetch) as ahead:
            return self._steps(report, ahead, stop)

    def _steps(self, report: Report, ahead: StepPrefetcher, stop: StopSignals | None) -> Path:
        """The loop: each step asks the schedule what it is, trains, counts its time, records, evaluates, saves."""
        sched, seed, log_every = self.schedule, self.settings.train.seed, self.settings.logging.log_every
        last = checkpoint.latest_checkpoint(self.out)
        # The first step since the last read whose gradient norm was not finite (0: none), kept on the
        # device: reading it every step would stall the device's queue every step (`train_step`).
        first_bad = torch.zeros((), dtype=torch.long, device=self.info.device)
        window = [0, 0.0]  # this rank's tokens, and the time, since the last logged step
        stopped_by = None  # a stop signal's number, once every rank has agreed to stop for it
        while not sched.done(self.step):
            t0 = self.clock()
            if stop is not None:  # from here to after_step: the step a stop request's watchdog bounds
                stop.step_started(self.step + 1)
            sched.begin(self.step)
            torch.manual_seed(mix_seed(DROPOUT, seed, self.step, self.info.rank))
            # Decided on rank 0's seconds, as every rank must: a logging step calls collectives.
            log_step = (self.step + 1) % log_every == 0 or sched.may_end_after(self.step)
            read = log_step or sched.reads_every_step or self._reads_before(self.step + 1, sched.end)
            n_pieces, size = sched.pieces(self.step), sched.batch(self.step)
            st, first_bad = self._train_one(ahead, n_pieces, size, log_step, read, window[0], first_bad, last)
            if stop is not None:
                stop.step_ended()
            dt = self.clock() - t0
            sched.finish(self.step, dt, n_pieces, size, self.info)
            self.step, self.position = self.step + 1, self.position + size // self.strategy.copies
            final = sched.complete(self.step)  # the run's own last step: logged, evaluated, saved
            window[1] += dt
            self._record(st, log_step or final, window, report, n_pieces, size)
            if (self.settings.train.eval_every and self.step % self.settings.train.eval_every == 0) or final:
                self._log_eval(report)
            if self.settings.variance.every and self.step % self.settings.variance.every == 0:
                self._log_variance()
            # A stop signal ends the run here, after this step's checkpoint; one that arrives at the run's last
            # step stops nothing (the run is complete).
            signalled = stop.agreed(self.info, read) if stop is not None else None
            stopped_by = signalled if signalled and not final and self.step < sched.end else None
            last = self._maybe_save(final or stopped_by, read, first_bad, stopped_by, last, report)
            if stopped_by:
                break
        record = sched.record(self.step)
        if record is not None and self.info.is_main:
            record_budget(self.out, record)
            report("budget", record)
        if stopped_by:  # every rank: the checkpoint's path from its step (only rank 0's save returns it)
            raise Stopped(stopped_by, self.step, self.out / "checkpoints" / checkpoint.step_name(self.step))
        return last or checkpoint.latest_checkpoint(self.out)

    def _train_one(
        self,
        ahead: StepPrefetcher,
        n_pieces: int,
        size: int,
        log_step: bool,
        read: bool,
        window_tokens: int,
        first_bad: torch.Tensor,
        last: Path | None,
    ):
        """One optimizer step of `size` sequences cut into `n_pieces` each; (its StepStats, the first bad step)."""
        rows = size * n_pieces  # the sequences the loss averages over
        taken = size // self.strategy.copies  # distinct sequences (a stratified strategy repeats each)
        # The next step's batches, made ahead with prefetch; under a budget its ramp size is decided by this
        # step's time, so this one's is a guess (a wrong guess is made again, never used).
        step, sched = self.step, self.schedule
        following = (
            (step + 1, self.position + taken, sched.pieces(step + 1), sched.batch(step + 1))
            if step + 1 < sched.end
            else None
        )
        batches = ahead.get(step, self.position, n_pieces, size, after=following)
        try:
            st = train_step(
                self.ddp,
                self.optimizer,
                self.scheduler,
                batches,
                scale=self.info.world_size / rows,
                grad_clip=self.settings.optim.grad_clip,
                autocast=self.step_context,
                info=self.info,
                batch_size=rows,
                loss_fn=self.strategy.loss_fn(step, with_stats=log_step, pieces=n_pieces),
                read=read,
                window_tokens=window_tokens,
                first_bad=first_bad if read else None,
                frozen=self.strategy.frozen(step),
            )
        except NonFiniteLoss as exc:
            keep = f"last good checkpoint: {last}" if last else "no checkpoint was written yet"
            raise MapnetError(f"non-finite loss at step {exc.step or step + 1} ({exc}); stopped, {keep}") from None
        if not read:
            first_bad = torch.where(st.finite | (first_bad > 0), first_bad, step + 1)
        self.strategy.after_step()
        return st, first_bad

    def _record(self, st, logged: bool, window: list, report: Report, pieces: int, size: int) -> None:
        """The step's numbers: to metrics.jsonl on a logged step (with the strategy's, a collective), to the
        progress display on every step (with the step's pieces per sequence and batch: the phase it is in)."""
        record = {
            "step": self.step,
            "loss": st.loss,
            "lr": st.lr,
            "grad_norm": st.grad_norm,
            "tokens_per_s": None,
            "masked_tokens": st.masked,
            "tokens": st.tokens,
            "memory_bytes": memory_bytes(self.info.device),
            "elapsed": self.schedule.elapsed,
        }
        if logged:
            record["tokens_per_s"] = st.window_tokens / window[1]
            record.update(self.strategy.metrics())  # a collective: every rank calls it
            self.metrics.write({"kind": "train", **record})
            window[0], window[1] = 0, 0.0
        else:
            window[0] += st.local_tokens
        report("step", {**record, "total": self.schedule.total(self.step), "pieces": pieces, "batch": size})

    def _maybe_save(
        self, must: bool, read: bool, first_bad: torch.Tensor, stopped_by: int | None, last: Path | None, report: Report
    ) -> Path | None:
        """A checkpoint where the settings ask for one, at the end, and when a stop signal ends the run (never
        after a non-finite step nobody read); the newest checkpoint's path."""
        t = self.settings.train
        if stopped_by and not read and int(first_bad):  # one process stops on any step: never save after NaN
            keep = f"last good checkpoint: {last}" if last else "no checkpoint was written yet"
            raise MapnetError(
                f"non-finite loss at step {int(first_bad)} (found when {signal_name(stopped_by)} "
                f"stopped the run); stopped, {keep}"
            )
        if (
            (t.checkpoint_every and self.step % t.checkpoint_every == 0)
            or self.step in t.keep_steps
            or self.step == self.schedule.end
            or must
        ):
            last = self.save() or last
            report("checkpoint", {"step": self.step, "path": str(last)})
        return last


__all__ = ["pretrain", "Run", "Report", "VarianceSnapshot"]
