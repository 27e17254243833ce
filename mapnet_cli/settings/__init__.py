"""One typed settings tree for every mapnet command.

Precedence, stated once: defaults < model preset < config file (TOML) < CLI flags.

    mapnet config show --preset tiny --config run.toml --set optim.lr=3e-4

Every section is a frozen, keyword-only dataclass; each field carries a
one-line doc (`doc=` metadata), shown by `mapnet config show --docs`. Each
section validates itself and reports *all* its problems; `resolve()` joins
them into one `MapnetError` line that names every bad key.

Defaults are the paper's (Chen, "Variance-reduced language pretraining via a
mask proposal network", tables "Hyperparameter for pretraining" and
"Hyperparameter search spaces for fine-tuning"). Where the paper is silent or
ambiguous the choice is marked `(mapnet choice)` in the field doc and in the
README.
"""

from __future__ import annotations

import re
import tomllib
import typing
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import Any, Literal, get_args, get_origin

import tomli_w

from .errors import MapnetError


def _f(default, doc: str, **kw):
    """A dataclass field with its one-line documentation."""
    if isinstance(default, (list, dict)):
        raise TypeError("use tuples for sequence defaults")
    return field(default=default, metadata={"doc": doc, **kw})


# ---------------------------------------------------------------- data: preprocess
@dataclass(frozen=True, kw_only=True)
class PreprocessSettings:
    input_format: Literal["auto", "text", "wikiextractor", "wikitext", "jsonl", "parquet", "arrow"] = _f(
        "auto", "input format; auto decides by extension and by sniffing <doc ...> WikiExtractor markup")
    doc_separator: Literal["blank_line", "line", "file"] = _f(
        "blank_line", "how plain text separates documents: a blank line, every line, or one document per file")
    text_field: str = _f("text", "field/column holding the text in JSONL, Parquet and Arrow inputs")
    strip_gutenberg: bool = _f(False, "remove Project Gutenberg header and licence footer when their markers are found")
    normalize_punctuation: bool = _f(True, "Moses punctuation normalisation (sacremoses MosesPunctNormalizer)")
    lowercase: bool = _f(True, "lower-case the text (the paper lower-cases)")
    moses_tokenize: bool = _f(True, "split punctuation off words with the Moses tokenizer (off for a WordPiece tokenizer, whose own pre-tokenizer does it: preprocess --bert-text)")
    moses_lang: str = _f("en", "language code for the Moses normaliser and tokenizer")
    vocab_size: int = _f(32768, "BPE vocabulary size including special tokens (paper: 32k)")
    min_frequency: int = _f(2, "minimum pair frequency for a BPE merge")
    tokenizer: str = _f("", "reuse this tokenizer.json instead of training one (empty: train)")
    workers: int = _f(0, "worker processes for sentence splitting and tokenisation (0: all cores)")
    max_chunk_chars: int = _f(100_000, "documents are cut into pieces of at most this many characters before spaCy (mapnet choice: bounds memory on huge lines)")
    max_sentence_chars: int = _f(5_000, "sentences longer than this are cut at whitespace (mapnet choice: a run-on 'sentence' is not a sentence)")
    sentences_per_part: int = _f(500_000, "sentences per output part file (parts let shard encode in parallel)")
    on_binary: Literal["error", "skip"] = _f("error", "a binary file named on the command line: stop, or skip it and count it (binary files found inside folders are always skipped and counted)")
    exclude: tuple[str, ...] = _f((), "file-name glob patterns skipped when walking input folders, e.g. [\"README*\", \"*.tsv\"] (hidden files are always skipped)")

    def problems(self) -> list[str]:
        out = []
        if not 256 <= self.vocab_size <= 1 << 20:
            out.append(f"preprocess.vocab_size must be in [256, 1048576] (got {self.vocab_size})")
        if self.min_frequency < 1:
            out.append(f"preprocess.min_frequency must be >= 1 (got {self.min_frequency})")
        if self.workers < 0:
            out.append(f"preprocess.workers must be >= 0 (got {self.workers})")
        if self.max_chunk_chars < 1000:
            out.append(f"preprocess.max_chunk_chars must be >= 1000 (got {self.max_chunk_chars})")
        if self.max_sentence_chars < 100:
            out.append(f"preprocess.max_sentence_chars must be >= 100 (got {self.max_sentence_chars})")
        if self.sentences_per_part < 1:
            out.append(f"preprocess.sentences_per_part must be >= 1 (got {self.sentences_per_part})")
        if not self.text_field:
            out.append("preprocess.text_field must not be empty")
        if any(not pattern for pattern in self.exclude):
            out.append("preprocess.exclude must not contain empty patterns")
        return out


# ---------------------------------------------------------------- data: synthetic corpus
@dataclass(frozen=True, kw_only=True)
class SyntheticSettings:
    documents: int = _f(6000, "documents in the embedded synthetic corpus")
    sentences_per_document: tuple[int, int] = _f((6, 14), "inclusive range of sentences per document")
    seed: int = _f(0, "generator seed; the same seed gives byte-identical text")

    def problems(self) -> list[str]:
        out = []
        if self.documents < 1:
            out.append(f"synthetic.documents must be >= 1 (got {self.documents})")
        lo, hi = self.sentences_per_document
        if not 2 <= lo <= hi:
            out.append(f"synthetic.sentences_per_document must be [lo, hi] with 2 <= lo <= hi (got {[lo, hi]})")
        return out


# ---------------------------------------------------------------- data: shards
@dataclass(frozen=True, kw_only=True)
class ShardSettings:
    max_seq_len: int = _f(512, "tokens per training sequence, [CLS] included (paper: 512)")
    packing: Literal["fill", "whole_sentences"] = _f(
        "fill", "fill: consecutive sentences fill every block to the brim, a sentence that does not fit continues in the next block (mapnet choice: <1% padding); whole_sentences: RoBERTa FULL-SENTENCES, a block ends before a sentence that does not fit and is padded")
    valid_fraction: float = _f(0.01, "fraction of documents held out for validation (1: an evaluation-only shard set, for train.extra_eval)")
    split_unit: Literal["document", "sequence"] = _f("document", "hold out whole documents (no leakage) or packed sequences")
    split_seed: int = _f(0, "seed of the train/validation assignment")
    sequences_per_file: int = _f(65536, "sequences per Arrow file")
    verify: Literal["full", "size"] = _f("full", "on open, check every shard's sha256 (full) or only its size")
    workers: int = _f(0, "tokenizer processes for shard encoding (0: all cores; 1: encode in the main process)")

    def problems(self) -> list[str]:
        out = []
        if self.workers < 0:
            out.append(f"shard.workers must be >= 0 (got {self.workers})")
        if not 8 <= self.max_seq_len <= 8192:
            out.append(f"shard.max_seq_len must be in [8, 8192] (got {self.max_seq_len})")
        if not 0.0 <= self.valid_fraction <= 1.0:
            out.append(f"shard.valid_fraction must be in [0, 1] (got {self.valid_fraction})")
        if self.sequences_per_file < 1:
            out.append(f"shard.sequences_per_file must be >= 1 (got {self.sequences_per_file})")
        return out


# ---------------------------------------------------------------- model
@dataclass(frozen=True, kw_only=True)
class ModelSettings:
    preset: Literal["tiny", "mini", "small", "medium", "base", "custom"] = _f(
        "base", "size preset (paper: base, L12/H768/A12); custom: the sizes below as given (what --init-from records when SOURCE matches no preset)")
    layers: int = _f(12, "Transformer blocks")
    hidden: int = _f(768, "hidden width H")
    heads: int = _f(12, "attention heads A")
    intermediate: int = _f(0, "feed-forward width (0: 4H)")
    max_position: int = _f(512, "learned position embeddings")
    dropout: float = _f(0.1, "dropout on embeddings, attention output and feed-forward (paper: 0.1)")
    attention_dropout: float = _f(0.1, "dropout on attention probabilities (BERT: 0.1)")
    layer_norm_eps: float = _f(1e-12, "LayerNorm epsilon (BERT: 1e-12)")
    init_std: float = _f(0.02, "std of the normal weight init (BERT: 0.02)")
    init_from: str = _f("", "start from this encoder: a mapnet run/checkpoint folder or a local Hugging Face BERT folder (empty: random init); the sizes above come from it (mapnet_cli/init_from.py)")

    def problems(self) -> list[str]:
        out = []
        for name in ("layers", "hidden", "heads", "max_position"):
            if getattr(self, name) < 1:
                out.append(f"model.{name} must be >= 1 (got {getattr(self, name)})")
        if self.heads >= 1 and self.hidden % self.heads:
            out.append(f"model.hidden ({self.hidden}) must be divisible by model.heads ({self.heads})")
        if self.intermediate < 0:
            out.append(f"model.intermediate must be >= 0 (got {self.intermediate})")
        for name in ("dropout", "attention_dropout"):
            if not 0.0 <= getattr(self, name) < 1.0:
                out.append(f"model.{name} must be in [0, 1) (got {getattr(self, name)})")
        if self.init_std <= 0:
            out.append(f"model.init_std must be > 0 (got {self.init_std})")
        return out


# ---------------------------------------------------------------- masking
# Strategies that mask whole units (word_masking.py): unweighted, so importance settings do not apply.
UNIT_STRATEGIES = ("whole-word", "span", "pmi")


@dataclass(frozen=True, kw_only=True)
class MaskingSettings:
    strategy: Literal["uniform", "mapnet", "stratified", "frequency", "whole-word", "span", "pmi"] = _f(
        "uniform", "uniform RandMask baseline; MAP-Net proposals; stratified (fully-explored, Zheng et al. 2020: disjoint masks of one sequence); frequency (static proposal from token counts, HT weights); whole-word; span (SpanBERT random spans); pmi (PMI-Masking n-grams, needs mapnet pmi-vocab)")
    mask_prob: float = _f(0.15, "fraction of eligible tokens masked (paper: 0.15)")
    mask_count: Literal["exact", "bernoulli"] = _f(
        "exact", "exact: round(mask_prob x eligible) positions per sequence, as MAP-Net's K (mapnet choice: same K for both strategies); bernoulli: each position independently")
    replace_mask: float = _f(0.8, "share of chosen positions replaced by [MASK]")
    replace_random: float = _f(0.1, "share replaced by a random token (the rest stay unchanged)")
    importance: Literal["clipped", "unclipped", "none", "ht"] = _f(
        "clipped", "MAP-Net's importance weights: per sequence, the paper's clipped / unclipped ratio or none; ht: per-position Horvitz-Thompson weights (K/n)/pi_i with systematic PPS sampling (mapnet, unbiased for any proposal)")
    mix_uniform: float = _f(0.0, "alpha of the per-token defensive mixture pi = alpha K/n + (1-alpha) pi_proposal (ht and frequency; bounds every weight by 1/alpha)")
    proposal_target: Literal["loss", "gradnorm", "learnability"] = _f(
        "loss", "what MAP-Net learns: loss = the paper's eq. 10; gradnorm = regress log p on log ||softmax - onehot|| at masked positions; learnability = on log of how fast the token type's loss falls (slow minus fast per-type average)")
    proposal_temperature: float = _f(1.0, "masks are drawn from p^(1/T) renormalised (T > 1 flattens the proposal toward uniform)")
    map_lr: float = _f(0.0, "MAP-Net's own peak learning rate (0: optim.lr); same schedule as the encoder's")
    learnability_decay: float = _f(0.99, "learnability: per-step decay of the slow per-token-type loss average (the fast one uses decay^20)")
    target_floor: float = _f(1e-3, "gradnorm / learnability targets are floored at this before the log (keeps every position's mass > 0)")
    strata_copies: int = _f(2, "stratified: each sequence fills this many batch slots, masked with that many disjoint strata (Zheng et al. use all of them)")
    frequency_power: float = _f(0.5, "frequency: the proposal is proportional to count(token type)^-power")
    span_p: float = _f(0.2, "span: p of the geometric span-length distribution in words, p(1-p)^(l-1) (SpanBERT: 0.2)")
    span_max_words: int = _f(10, "span: longest span in words; the geometric is truncated there and renormalised (SpanBERT: 10, mean 3.8)")
    pmi_vocab: str = _f("", "pmi: the PMI vocabulary file of mapnet pmi-vocab (empty: pmi.tsv in the shard folder, else in the corpus the shards were made from)")
    clip_epsilon: float = _f(0.2, "weights are clipped to [1-eps, 1+eps] (paper gives no value; mapnet choice)")
    explore_start: float = _f(1.0, "probability of uniform masking at step 0 (paper: 100%)")
    explore_end: float = _f(0.33, "probability of uniform masking at the end of the schedule (paper: 33%)")
    explore_steps: int = _f(0, "length of the linear exploration schedule in steps (0: the whole run)")
    map_layers: int = _f(0, "MAP-Net blocks (0: as many as the encoder, as in the paper)")
    map_hidden: int = _f(0, "MAP-Net width (0: half the encoder's, as in the paper)")
    map_heads: int = _f(0, "MAP-Net heads (0: half the encoder's)")
    map_dropout: float = _f(
        0.0, "MAP-Net's hidden and attention dropout (paper silent; mapnet choice: 0, so the distribution masks are drawn from is the one inspect-masks shows, and CPU attention keeps its fused kernel)")
    map_loss_weight: float = _f(1e-2, "lambda of the paper's combined loss (paper: 1e-2)")
    map_loss_on: Literal["map", "encoder"] = _f(
        "map", "which term lambda scales: 'map' = L_enc + lambda*L_MAP (mapnet choice, see README), 'encoder' = L_MAP + lambda*L_enc as printed")
    train_map_on_uniform: bool = _f(True, "uniformly masked sequences also train MAP-Net (mapnet choice: more signal early)")

    def problems(self, ignored: bool = True) -> list[str]:
        """Every bad masking setting; `ignored=False` leaves out settings this strategy would ignore
        (`compare` gives each arm the ones it uses and resets the rest, `ignored_keys`)."""
        out = []
        if not 0.0 < self.mask_prob < 1.0:
            out.append(f"masking.mask_prob must be in (0, 1) (got {self.mask_prob})")
        if self.replace_mask < 0 or self.replace_random < 0 or self.replace_mask + self.replace_random > 1.0:
            out.append("masking.replace_mask and masking.replace_random must be >= 0 and sum to <= 1")
        if not 0.0 < self.clip_epsilon < 1.0:
            out.append(f"masking.clip_epsilon must be in (0, 1) (got {self.clip_epsilon})")
        for name in ("explore_start", "explore_end"):
            if not 0.0 <= getattr(self, name) <= 1.0:
                out.append(f"masking.{name} must be in [0, 1] (got {getattr(self, name)})")
        for name in ("explore_steps", "map_layers", "map_hidden", "map_heads"):
            if getattr(self, name) < 0:
                out.append(f"masking.{name} must be >= 0 (got {getattr(self, name)})")
        if not 0.0 <= self.map_dropout < 1.0:
            out.append(f"masking.map_dropout must be in [0, 1) (got {self.map_dropout})")
        if self.map_loss_weight < 0:
            out.append(f"masking.map_loss_weight must be >= 0 (got {self.map_loss_weight})")
        if not 0.0 <= self.mix_uniform <= 1.0:
            out.append(f"masking.mix_uniform must be in [0, 1] (got {self.mix_uniform})")
        if self.proposal_temperature <= 0:
            out.append(f"masking.proposal_temperature must be > 0 (got {self.proposal_temperature})")
        if self.map_lr < 0:
            out.append(f"masking.map_lr must be >= 0 (got {self.map_lr})")
        if not 0.0 <= self.learnability_decay < 1.0:
            out.append(f"masking.learnability_decay must be in [0, 1) (got {self.learnability_decay})")
        if self.target_floor <= 0:
            out.append(f"masking.target_floor must be > 0 (got {self.target_floor})")
        if self.strata_copies < 1:
            out.append(f"masking.strata_copies must be >= 1 (got {self.strata_copies})")
        if self.frequency_power < 0:
            out.append(f"masking.frequency_power must be >= 0 (got {self.frequency_power})")
        if not 0.0 < self.span_p <= 1.0:
            out.append(f"masking.span_p must be in (0, 1] (got {self.span_p})")
        if self.span_max_words < 1:
            out.append(f"masking.span_max_words must be >= 1 (got {self.span_max_words})")
        if self.strategy in UNIT_STRATEGIES and self.importance in ("unclipped", "none", "ht"):
            out.append(f"masking.importance {self.importance!r} does not apply to masking.strategy '{self.strategy}': unit masks "
                       "(whole words, spans, n-grams) are unweighted; importance weights need a proposal's inclusion "
                       "probabilities (use masking.strategy 'mapnet' or 'frequency' for weighted masking)")
        out += self._ignored() if ignored else []
        if self.strategy != "uniform" and self.mask_count != "exact":
            # MAP-Net draws exactly K positions, and its importance ratio compares K-position masks.
            out.append(f"masking.mask_count must be 'exact' with masking.strategy '{self.strategy}'")
        if self.map_hidden > 0 and self.map_heads > 0 and self.map_hidden % self.map_heads:
            out.append(f"masking.map_hidden ({self.map_hidden}) must be divisible by masking.map_heads ({self.map_heads})")
        return out


    def _ignored(self) -> list[str]:
        """Settings given a non-default value that this strategy would silently ignore: refused by name."""
        return [f"masking.{name} = {getattr(self, name)!r} only applies with {where}; here it would be ignored"
                for name, where in self.ignored_keys().items()]

    def ignored_keys(self) -> dict[str, str]:
        """{name: where it applies} of the settings given a non-default value that this strategy ignores."""
        ht = self.strategy == "mapnet" and self.importance == "ht"
        regressed = self.strategy == "mapnet" and self.proposal_target != "loss"
        used = {
            "proposal_temperature": (ht, "masking.importance 'ht' (the paper's Gumbel-top-k draws from p itself)"),
            "mix_uniform": (ht or self.strategy == "frequency", "masking.importance 'ht' or masking.strategy 'frequency'"),
            "proposal_target": (self.strategy == "mapnet", "masking.strategy 'mapnet'"),
            "map_lr": (self.strategy == "mapnet", "masking.strategy 'mapnet'"),
            "learnability_decay": (self.strategy == "mapnet" and self.proposal_target == "learnability",
                                   "masking.proposal_target 'learnability'"),
            "target_floor": (regressed, "masking.proposal_target 'gradnorm' or 'learnability'"),
            "strata_copies": (self.strategy == "stratified", "masking.strategy 'stratified'"),
            "frequency_power": (self.strategy == "frequency", "masking.strategy 'frequency'"),
            "span_p": (self.strategy == "span", "masking.strategy 'span'"),
            "span_max_words": (self.strategy == "span", "masking.strategy 'span'"),
            "pmi_vocab": (self.strategy == "pmi", "masking.strategy 'pmi'"),
        }
        defaults = {f.name: f.default for f in fields(self)}
        return {name: where for name, (applies, where) in used.items() if not applies and getattr(self, name) != defaults[name]}


# ---------------------------------------------------------------- optimisation
@dataclass(frozen=True, kw_only=True)
class OptimSettings:
    lr: float = _f(1e-4, "peak learning rate (paper: 1e-4)")
    betas: tuple[float, float] = _f((0.9, 0.98), "Adam betas (paper: 0.9, 0.98)")
    eps: float = _f(1e-6, "Adam epsilon (paper: 1e-6)")
    weight_decay: float = _f(0.01, "decoupled weight decay, not on biases and LayerNorm (paper: 0.01)")
    warmup_steps: int = _f(10_000, "linear warm-up steps (paper: 10k)")
    schedule: Literal["linear", "constant"] = _f("linear", "after warm-up: linear decay to zero (paper) or constant")
    grad_clip: float = _f(0.0, "clip the global gradient norm to this (0: off)")

    def problems(self) -> list[str]:
        out = []
        if self.lr <= 0:
            out.append(f"optim.lr must be > 0 (got {self.lr})")
        if not all(0.0 <= b < 1.0 for b in self.betas):
            out.append(f"optim.betas must be in [0, 1) (got {list(self.betas)})")
        if self.eps <= 0:
            out.append(f"optim.eps must be > 0 (got {self.eps})")
        if self.weight_decay < 0:
            out.append(f"optim.weight_decay must be >= 0 (got {self.weight_decay})")
        if self.warmup_steps < 0:
            out.append(f"optim.warmup_steps must be >= 0 (got {self.warmup_steps})")
        if self.grad_clip < 0:
            out.append(f"optim.grad_clip must be >= 0 (got {self.grad_clip})")
        return out


# ---------------------------------------------------------------- training run
@dataclass(frozen=True, kw_only=True)
class TrainSettings:
    steps: int = _f(1_000_000, "optimizer steps (paper: 1M)")
    batch_size: int = _f(256, "global batch in sequences per optimizer step (paper: 256)")
    micro_batch_size: int = _f(0, "sequences per device per forward pass; accumulation fills the global batch (0: global batch / world size)")
    seed: int = _f(0, "seed of initial weights, data order and masks")
    precision: Literal["auto", "fp32", "bf16"] = _f("auto", "auto: bf16 autocast on CUDA, fp32 on CPU")
    compile: bool = _f(False, "wrap the model in torch.compile")
    device: Literal["auto", "cpu", "cuda"] = _f("auto", "where to train")
    eval_every: int = _f(2000, "held-out evaluation every N steps (0: only at the end)")
    eval_sequences: int = _f(512, "validation sequences per evaluation set (fixed set, fixed masks), the main one and each train.extra_eval")
    eval_mask_prob: float = _f(
        0.15, "masking rate of the fixed evaluation masks, apart from masking.mask_prob so runs trained at 15% and 40% answer the same questions")
    eval_seed: int = _f(1234, "seed of the evaluation masks: the same for every run so strategies answer identical questions")
    eval_pick: Literal["first", "spread"] = _f(
        "first", "which validation sequences form each eval set: the first eval_sequences, or that many evenly spread over the split (for held-out sets of whole files)")
    extra_eval: tuple[str, ...] = _f(
        (), "more held-out sets, each NAME=SHARD_FOLDER (its validation split, same tokenizer), evaluated beside the main one and logged as eval_loss@NAME, e.g. [\"books=shards/books-heldout\"]")
    checkpoint_every: int = _f(10_000, "write a checkpoint every N steps (0: only at the end)")
    keep_last: int = _f(2, "periodic checkpoints kept (older ones are deleted)")
    keep_steps: tuple[int, ...] = _f((400_000, 600_000, 800_000, 1_000_000), "checkpoints kept for good (paper's sweep)")

    def problems(self) -> list[str]:
        out = []
        for name in ("steps", "batch_size", "eval_sequences", "keep_last"):
            if getattr(self, name) < 1:
                out.append(f"train.{name} must be >= 1 (got {getattr(self, name)})")
        for name in ("micro_batch_size", "eval_every", "checkpoint_every"):
            if getattr(self, name) < 0:
                out.append(f"train.{name} must be >= 0 (got {getattr(self, name)})")
        names = [entry.partition("=")[0] for entry in self.extra_eval]
        for entry, name in zip(self.extra_eval, names):
            # The name becomes part of metric keys and plot file names: plain ASCII only.
            if "=" not in entry or not entry.partition("=")[2] or not re.fullmatch(r"[A-Za-z0-9_-]+", name):
                out.append(f"train.extra_eval entries are NAME=SHARD_FOLDER with NAME of letters, digits, - and _ (got {entry!r})")
        if len(set(names)) != len(names):
            out.append(f"train.extra_eval names must be unique (got {names})")
        return out


# ---------------------------------------------------------------- distributed
@dataclass(frozen=True, kw_only=True)
class DistributedSettings:
    gpus: int = _f(0, "GPUs on this node: start one process per GPU with torchrun (0: no launch)")
    nproc: int = _f(0, "CPU processes on this node (gloo), for tests and debugging (0: no launch)")
    nnodes: int = _f(1, "nodes in the job (passed to torchrun)")
    node_rank: int = _f(0, "this node's rank (passed to torchrun)")
    rdzv_endpoint: str = _f("", "rendezvous host:port for multi-node jobs (passed to torchrun)")
    backend: Literal["auto", "nccl", "gloo"] = _f("auto", "process-group backend (auto: nccl on CUDA, gloo on CPU)")

    def problems(self) -> list[str]:
        out = []
        for name in ("gpus", "nproc", "node_rank"):
            if getattr(self, name) < 0:
                out.append(f"distributed.{name} must be >= 0 (got {getattr(self, name)})")
        if self.nnodes < 1:
            out.append(f"distributed.nnodes must be >= 1 (got {self.nnodes})")
        if self.gpus and self.nproc:
            out.append("distributed.gpus and distributed.nproc cannot both be set")
        if self.node_rank >= self.nnodes:
            out.append(f"distributed.node_rank ({self.node_rank}) must be < distributed.nnodes ({self.nnodes})")
        if self.nnodes > 1 and not self.rdzv_endpoint:
            out.append("distributed.rdzv_endpoint is required when distributed.nnodes > 1")
        return out


# ---------------------------------------------------------------- logging / output
@dataclass(frozen=True, kw_only=True)
class LoggingSettings:
    log_every: int = _f(10, "write a metrics line every N steps")
    progress: bool = _f(True, "show rich progress bars (off when not a terminal)")
    metrics_file: str = _f("metrics.jsonl", "JSON-lines metrics file inside the run folder")
    plain_every_s: float = _f(0.0, "when stderr is not a terminal: at most one plain progress line per N seconds "
                              "(0: one per logging.log_every steps)")
    tensorboard: bool = _f(False, "also write every metric as a TensorBoard scalar in RUN/tb "
                           "(pip install 'mapnet[tensorboard]')")
    wandb: bool = _f(False, "also log every metric to Weights & Biases (pip install 'mapnet[wandb]'; "
                     "WANDB_MODE=offline works without a network)")
    wandb_project: str = _f("mapnet", "W&B project")
    wandb_name: str = _f("", "W&B run name ('' = the run folder's name)")
    wandb_mode: Literal["auto", "online", "offline"] = _f("auto", "W&B mode (auto = WANDB_MODE, else online)")

    def problems(self) -> list[str]:
        out = [f"logging.log_every must be >= 1 (got {self.log_every})"] if self.log_every < 1 else []
        if self.plain_every_s < 0:
            out.append(f"logging.plain_every_s must be >= 0 (got {self.plain_every_s})")
        if self.wandb and not self.wandb_project:
            out.append("logging.wandb_project must not be empty when logging.wandb is true")
        return out


# ---------------------------------------------------------------- fine-tuning (GLUE)
@dataclass(frozen=True, kw_only=True)
class FinetuneSettings:
    batch_sizes: tuple[int, ...] = _f((16, 32), "batch-size grid (paper: 16, 32)")
    learning_rates: tuple[float, ...] = _f((1e-5, 2e-5, 3e-5, 4e-5, 5e-5, 6e-5, 7e-5, 8e-5), "learning-rate grid (paper: 1e-5 ... 8e-5)")
    epochs: int = _f(10, "maximum epochs (paper: 10)")
    warmup_ratio: float = _f(0.06, "warm-up as a fraction of all steps (paper: 0.06)")
    weight_decay: float = _f(0.1, "weight decay (paper: 0.1)")
    betas: tuple[float, float] = _f((0.9, 0.98), "Adam betas (paper: 0.9, 0.98)")
    eps: float = _f(1e-6, "Adam epsilon (as pretraining)")
    seeds: int = _f(10, "seeds per configuration (paper: 10)")
    max_seq_len: int = _f(512, "longest input in tokens, specials included; longer pairs lose tokens from the longer side first (also capped by the model's max_position)")
    seed: int = _f(0, "first fine-tuning seed; the runs of a configuration use seed, seed+1, ...")
    run_score: Literal["best_epoch", "last_epoch"] = _f(
        "best_epoch", "a run's dev score: its best epoch (early stopping within 'maximum epoch 10', as RoBERTa, whose protocol the paper follows) or its last epoch (mapnet choice; every epoch is recorded either way)")
    max_train: int = _f(0, "train on at most N examples, a fixed random subset shared by all runs (0: all)")
    max_dev: int = _f(0, "evaluate on at most N examples per dev set, a fixed random subset (0: all; capped scores are not comparable with published ones)")
    eval_batch_size: int = _f(256, "sequences per evaluation batch")
    length_group: int = _f(50, "length-grouped batching: shuffled chunks of this many batches are sorted by length before batching (1: plain shuffle)")
    malformed_rows: Literal["task", "error", "skip"] = _f(
        "task", "malformed TSV rows: each task's known convention (QQP: skip and count; others: error), or error / skip-and-count everywhere")
    precision: Literal["auto", "fp32", "bf16"] = _f("auto", "auto: bf16 autocast on CUDA, fp32 on CPU")
    device: Literal["auto", "cpu", "cuda"] = _f("auto", "where to fine-tune")

    def problems(self) -> list[str]:
        out = []
        if not 8 <= self.max_seq_len <= 8192:
            out.append(f"finetune.max_seq_len must be in [8, 8192] (got {self.max_seq_len})")
        for name in ("max_train", "max_dev", "seed"):
            if getattr(self, name) < 0:
                out.append(f"finetune.{name} must be >= 0 (got {getattr(self, name)})")
        for name in ("eval_batch_size", "length_group"):
            if getattr(self, name) < 1:
                out.append(f"finetune.{name} must be >= 1 (got {getattr(self, name)})")
        if self.weight_decay < 0:
            out.append(f"finetune.weight_decay must be >= 0 (got {self.weight_decay})")
        if not all(0.0 <= b < 1.0 for b in self.betas):
            out.append(f"finetune.betas must be in [0, 1) (got {list(self.betas)})")
        if self.eps <= 0:
            out.append(f"finetune.eps must be > 0 (got {self.eps})")
        if not self.batch_sizes or min(self.batch_sizes) < 1:
            out.append("finetune.batch_sizes must be a non-empty list of positive integers")
        if not self.learning_rates or min(self.learning_rates) <= 0:
            out.append("finetune.learning_rates must be a non-empty list of positive numbers")
        if self.epochs < 1:
            out.append(f"finetune.epochs must be >= 1 (got {self.epochs})")
        if not 0.0 <= self.warmup_ratio < 1.0:
            out.append(f"finetune.warmup_ratio must be in [0, 1) (got {self.warmup_ratio})")
        if self.seeds < 1:
            out.append(f"finetune.seeds must be >= 1 (got {self.seeds})")
        return out


# ---------------------------------------------------------------- gradient variance (`mapnet variance`)
@dataclass(frozen=True, kw_only=True)
class VarianceSettings:
    sentences: int = _f(64, "validation sequences S, drawn without replacement (the outer level of the two-level design)")
    masks: int = _f(8, "masks M drawn per sequence and scheme (>= 2: a within-sentence variance needs two)")
    project_dim: int = _f(0, "0: exact per-example gradients; D > 0: a seeded sparse Rademacher sketch to D dimensions (unbiased inner products)")
    params: tuple[str, ...] = _f((), "fnmatch patterns of parameter names whose gradient is measured, e.g. [\"encoder.blocks.0.*\"] (empty: every parameter of the MLM model)")
    batch_sizes: tuple[int, ...] = _f((1, 8, 32), "mini-batch sizes B for the batch-mean view (B sequences x 1 mask)")
    bootstrap: int = _f(1000, "bootstrap replicates behind the 95% intervals (0: no intervals)")
    bootstrap_masks: bool = _f(False, "also resample masks within each resampled sentence (two-stage; counts the mask noise twice, so intervals are wider; mapnet choice: off)")
    batch_draws: int = _f(2000, "random pairs of disjoint mini-batches for the direct mini-batch measurement")
    seed: int = _f(0, "seed of the sentence choice, the masks and the bootstrap")
    memory_gb: float = _f(4.0, "exact gradients: GiB of per-example gradients held at once; beyond it they are recomputed in panels")
    method: Literal["loop", "vmap"] = _f("loop", "per-example gradients by a loop of backward passes, or torch.func vmap(grad) (slower on CPU, where attention has no batching rule)")
    every: int = _f(0, "pretrain: record a cheap decomposition in the metrics file every N steps (0: off)")
    snapshot_sentences: int = _f(8, "pretrain snapshots: validation sequences S (fixed across steps)")
    snapshot_masks: int = _f(4, "pretrain snapshots: masks M per sequence (fixed seed across steps)")
    snapshot_project_dim: int = _f(4096, "pretrain snapshots: sketch dimension D (0: exact gradients)")
    schemes: tuple[Literal["uniform", "mapnet_clipped", "mapnet_unclipped", "mapnet_unweighted", "ht", "stratified",
                           "frequency", "oracle"], ...] = _f(
        (), "mapnet variance: masking schemes to measure (empty: uniform, mapnet_clipped/unclipped/unweighted, ht, and the checkpoint's own stratified or frequency; --oracle adds oracle). Pretrain snapshots always measure uniform + the run's own scheme")
    oracle_rounds: int = _f(4, "oracle scheme: random partitions (each ~n/K masked rows) whose per-position scores are combined by root mean square")
    oracle_basis: Literal["proxy", "gradient"] = _f(
        "proxy", "oracle scheme: pi proportional to the encoder's ||softmax - onehot|| (proxy: one forward per row) or to the exact per-position gradient norm (gradient: one backward per position)")

    def problems(self) -> list[str]:
        out = []
        if self.oracle_rounds < 1:
            out.append(f"variance.oracle_rounds must be >= 1 (got {self.oracle_rounds})")
        if self.sentences < 2 or self.snapshot_sentences < 2:
            out.append("variance.sentences and variance.snapshot_sentences must be >= 2 (a between-sentence variance needs two)")
        if self.masks < 2 or self.snapshot_masks < 2:
            out.append("variance.masks and variance.snapshot_masks must be >= 2 (a within-sentence variance needs two)")
        for name in ("project_dim", "snapshot_project_dim", "bootstrap", "batch_draws", "every"):
            if getattr(self, name) < 0:
                out.append(f"variance.{name} must be >= 0 (got {getattr(self, name)})")
        if not self.batch_sizes or min(self.batch_sizes) < 1:
            out.append("variance.batch_sizes must be a non-empty list of positive integers")
        if any(not pattern for pattern in self.params):
            out.append("variance.params must not contain empty patterns")
        if self.memory_gb <= 0:
            out.append(f"variance.memory_gb must be > 0 (got {self.memory_gb})")
        return out


# ---------------------------------------------------------------- the tree
@dataclass(frozen=True, kw_only=True)
class Settings:
    preprocess: PreprocessSettings = field(default_factory=PreprocessSettings)
    synthetic: SyntheticSettings = field(default_factory=SyntheticSettings)
    shard: ShardSettings = field(default_factory=ShardSettings)
    model: ModelSettings = field(default_factory=ModelSettings)
    masking: MaskingSettings = field(default_factory=MaskingSettings)
    optim: OptimSettings = field(default_factory=OptimSettings)
    train: TrainSettings = field(default_factory=TrainSettings)
    distributed: DistributedSettings = field(default_factory=DistributedSettings)
    logging: LoggingSettings = field(default_factory=LoggingSettings)
    finetune: FinetuneSettings = field(default_factory=FinetuneSettings)
    variance: VarianceSettings = field(default_factory=VarianceSettings)

    def problems(self, ignored: bool = True) -> list[str]:
        """Every bad setting; `ignored=False`: not the masking settings the strategy would ignore (`compare`'s base)."""
        sections = [getattr(self, f.name) for f in fields(self)]
        out = [p for sec in sections for p in (sec.problems(ignored) if sec is self.masking else sec.problems())]
        if self.shard.max_seq_len > self.model.max_position:
            out.append(f"shard.max_seq_len ({self.shard.max_seq_len}) exceeds model.max_position ({self.model.max_position})")
        m = self.masking
        if m.importance == "ht" and m.strategy not in ("mapnet", *UNIT_STRATEGIES):
            out.append(f"masking.importance 'ht' weights a MAP-Net proposal; with masking.strategy '{m.strategy}' it does nothing "
                       "(the frequency strategy always uses HT weights)")
        if m.strategy == "stratified" and self.train.batch_size % m.strata_copies:
            out.append(f"train.batch_size ({self.train.batch_size}) must be divisible by masking.strata_copies ({m.strata_copies})")
        if not 0.0 < self.train.eval_mask_prob < 1.0:
            out.append(f"train.eval_mask_prob must be in (0, 1) (got {self.train.eval_mask_prob})")
        return out

    def to_dict(self) -> dict[str, dict[str, Any]]:
        return {f.name: _section_dict(getattr(self, f.name)) for f in fields(self)}

    def to_toml(self) -> str:
        return tomli_w.dumps(self.to_dict())


def _section_dict(section) -> dict[str, Any]:
    return {f.name: (list(v) if isinstance(v := getattr(section, f.name), tuple) else v) for f in fields(section)}


# ---------------------------------------------------------------- presets
def _model_preset(name: str, layers: int, hidden: int, heads: int) -> Settings:
    return Settings(model=ModelSettings(preset=name, layers=layers, hidden=hidden, heads=heads))


PRESETS = {
    "tiny": lambda: _model_preset("tiny", 2, 128, 2),
    "mini": lambda: _model_preset("mini", 4, 256, 4),
    "small": lambda: _model_preset("small", 4, 512, 8),
    "medium": lambda: _model_preset("medium", 8, 512, 8),
    "base": lambda: _model_preset("base", 12, 768, 12),
}


def preset(name: str) -> Settings:
    """The full default settings with the model sized by preset `name`."""
    if name not in PRESETS:
        raise MapnetError(f"unknown preset {name!r} (choose from {', '.join(PRESETS)})")
    return PRESETS[name]()


# ---------------------------------------------------------------- loading
SECTIONS = tuple(f.name for f in fields(Settings))


def _section_class(name: str):
    return typing.get_type_hints(Settings)[name]


def _coerce(key: str, value: Any, annotation) -> Any:
    """Check `value` against a field's annotation; return it in the field's type."""
    origin = get_origin(annotation)
    if origin is Literal:
        choices = get_args(annotation)
        if value not in choices:
            raise MapnetError(f"{key} must be one of {', '.join(map(repr, choices))} (got {value!r})")
        return value
    if origin is tuple:
        if not isinstance(value, (list, tuple)):
            raise MapnetError(f"{key} must be a list (got {type(value).__name__} {value!r})")
        args = get_args(annotation)
        if len(args) == 2 and args[1] is Ellipsis:
            return tuple(_coerce(f"{key}[{i}]", v, args[0]) for i, v in enumerate(value))
        if len(value) != len(args):
            raise MapnetError(f"{key} must have {len(args)} items (got {len(value)})")
        return tuple(_coerce(f"{key}[{i}]", v, a) for i, (v, a) in enumerate(zip(value, args)))
    if annotation is bool:
        if not isinstance(value, bool):
            raise MapnetError(f"{key} must be true or false (got {value!r})")
        return value
    if annotation is int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise MapnetError(f"{key} must be an integer (got {value!r})")
        return value
    if annotation is float:
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise MapnetError(f"{key} must be a number (got {value!r})")
        return float(value)
    if annotation is str:
        if not isinstance(value, str):
            raise MapnetError(f"{key} must be a string (got {value!r})")
        return value
    raise TypeError(f"unsupported settings type for {key}: {annotation}")  # a bug, not user input


def apply(settings: Settings, updates: dict[str, dict[str, Any]], source: str) -> Settings:
    """Return `settings` with `updates` ({section: {key: value}}) checked and applied."""
    settings, errors = _apply(settings, updates, source)
    if errors:
        raise MapnetError("; ".join(errors))
    return settings


def _apply(settings: Settings, updates: dict[str, dict[str, Any]], source: str) -> tuple[Settings, list[str]]:
    """`apply` that skips a bad key and goes on, returning every unknown key and type error: `resolve`
    reports them together with the range problems, so one run of a command names all that is wrong."""
    changed, errors = {}, []
    for section_name, values in updates.items():
        if section_name not in SECTIONS:
            errors.append(f"unknown settings section {section_name!r} in {source} (known: {', '.join(SECTIONS)})")
            continue
        if not isinstance(values, dict):
            errors.append(f"{section_name} in {source} must be a table of keys")
            continue
        cls = _section_class(section_name)
        hints = typing.get_type_hints(cls, include_extras=False)
        section = changed.get(section_name, getattr(settings, section_name))
        new = {}
        for key, value in values.items():
            full = f"{section_name}.{key}"
            if key not in hints:
                errors.append(f"unknown setting {full!r} in {source}")
                continue
            try:
                new[key] = _coerce(full, value, hints[key])
            except MapnetError as exc:
                errors.append(str(exc))
        changed[section_name] = replace(section, **new)
    return replace(settings, **changed), errors


def parse_assignment(text: str) -> tuple[str, str, Any]:
    """Parse a `--set section.key=value` string; the value is read as TOML, else as a bare string."""
    if "=" not in text or "." not in text.split("=", 1)[0]:
        raise MapnetError(f"--set expects section.key=value (got {text!r})")
    dotted, raw = text.split("=", 1)
    section, key = dotted.strip().split(".", 1)
    try:
        value = tomllib.loads(f"v = {raw.strip()}")["v"]
    except tomllib.TOMLDecodeError:
        value = raw.strip()
    return section, key, value


def load_toml(path: str | Path) -> dict[str, Any]:
    path = Path(path)
    try:
        with open(path, "rb") as fh:
            return tomllib.load(fh)
    except FileNotFoundError:
        raise MapnetError(f"config file not found: {path}") from None
    except IsADirectoryError:
        raise MapnetError(f"config path is a folder, not a TOML file: {path}") from None
    except tomllib.TOMLDecodeError as exc:
        raise MapnetError(f"{path} is not valid TOML: {exc}") from None


def resolve(
    config: str | Path | list[str | Path] | tuple[str | Path, ...] | None = None,
    overrides: dict[str, dict[str, Any]] | None = None,
    assignments: list[str] | tuple[str, ...] = (),
    extra_sections: tuple[str, ...] = ("recipe",),
    base: Settings | None = None,
    check_ignored: bool = True,
) -> Settings:
    """Defaults < preset < config files (in order) < CLI flags (`overrides`, then `--set`).

    `config` is one TOML file or several applied in order (a recipe, then a
    run config). `extra_sections` names top-level tables a file may carry that
    are not settings; they are skipped here. By default that is a recipe's
    `[recipe]` table, so every recipe doubles as a config file for any command.
    `check_ignored=False` lets a masking setting the strategy would ignore through (`compare`'s base
    settings, whose arms each take the ones they use).
    """
    paths = [] if config is None else [config] if isinstance(config, (str, Path)) else list(config)
    file_layers = [(p, {k: v for k, v in load_toml(p).items() if k not in extra_sections}) for p in paths]
    cli_values: dict[str, dict[str, Any]] = {}
    errors: list[str] = []
    for section, values in (overrides or {}).items():
        for key, value in values.items():
            if value is not None:
                cli_values.setdefault(section, {})[key] = value
    for text in assignments:
        try:
            section, key, value = parse_assignment(text)
        except MapnetError as exc:
            errors.append(str(exc))
            continue
        cli_values.setdefault(section, {})[key] = value

    preset_name = cli_values.get("model", {}).get("preset")
    for _, values in reversed(file_layers):  # the last file that names a preset wins
        table = values.get("model")
        preset_name = preset_name or (table.get("preset") if isinstance(table, dict) else None)
    # `base` replaces defaults < preset when a command continues from an earlier
    # output (a checkpoint's own settings.toml): its model is what was trained.
    # An unknown preset is named below by model.preset's own check, beside every other bad setting.
    known = isinstance(preset_name, str) and preset_name in PRESETS
    settings = base if base is not None else preset(preset_name) if known else Settings()
    for path, values in [*file_layers, ("command-line flags", cli_values)]:
        settings, bad = _apply(settings, values, str(path))
        errors += bad
    problems = errors + settings.problems(ignored=check_ignored)  # a key with a type error keeps its earlier value
    if problems:
        raise MapnetError("invalid settings: " + "; ".join(problems))
    return settings


def from_dict(values: dict[str, Any], source: str) -> Settings:
    """Rebuild settings written by `Settings.to_toml` (a run's settings.toml)."""
    settings, errors = _apply(Settings(), values, source)
    problems = errors + settings.problems()
    if problems:
        raise MapnetError(f"invalid settings in {source}: " + "; ".join(problems))
    return settings


def field_docs() -> list[tuple[str, str, str]]:
    """(key, default, doc) for every setting, for `mapnet config show --docs`."""
    rows = []
    for sec in fields(Settings):
        cls = _section_class(sec.name)
        for f in fields(cls):
            rows.append((f"{sec.name}.{f.name}", repr(f.default), f.metadata.get("doc", "")))
    return rows


__all__ = [
    "Settings", "PreprocessSettings", "SyntheticSettings", "ShardSettings", "ModelSettings",
    "MaskingSettings", "OptimSettings", "TrainSettings", "DistributedSettings", "LoggingSettings",
    "FinetuneSettings", "VarianceSettings", "PRESETS", "preset", "resolve", "apply", "from_dict", "load_toml",
    "parse_assignment", "field_docs",
]
