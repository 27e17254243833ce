"""Settings of the data commands: `preprocess`, the embedded synthetic corpus, `shard`."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from .field import seed_setting, setting


# ---------------------------------------------------------------- data: preprocess
@dataclass(frozen=True, kw_only=True)
class PreprocessSettings:
    input_format: Literal["auto", "text", "wikiextractor", "wikitext", "jsonl", "parquet", "arrow"] = setting(
        "auto", "input format; auto decides by extension and by sniffing <doc ...> WikiExtractor markup"
    )
    doc_separator: Literal["blank_line", "line", "file"] = setting(
        "blank_line", "how plain text separates documents: a blank line, every line, or one document per file"
    )
    text_field: str = setting("text", "field/column holding the text in JSONL, Parquet and Arrow inputs")
    strip_gutenberg: bool = setting(
        False, "remove Project Gutenberg header and licence footer when their markers are found"
    )
    normalize_punctuation: bool = setting(True, "Moses punctuation normalisation (sacremoses MosesPunctNormalizer)")
    lowercase: bool = setting(True, "lower-case the text (the paper lower-cases)")
    moses_tokenize: bool = setting(
        True,
        "split punctuation off words with the Moses tokenizer (off for a WordPiece tokenizer, whose own pre-tokenizer "
        "does it: preprocess --bert-text)",
    )
    moses_lang: str = setting("en", "language code for the Moses normaliser and tokenizer")
    vocab_size: int = setting(32768, "BPE vocabulary size including special tokens (paper: 32k)")
    min_frequency: int = setting(2, "minimum pair frequency for a BPE merge")
    tokenizer: str = setting("", "reuse this tokenizer.json instead of training one (empty: train)")
    workers: int = setting(0, "worker processes for sentence splitting and tokenisation (0: all cores)")
    max_chunk_chars: int = setting(
        100_000,
        "documents are cut into pieces of at most this many characters before spaCy (mapnet choice: bounds memory on "
        "huge lines)",
    )
    max_sentence_chars: int = setting(
        5_000, "sentences longer than this are cut at whitespace (mapnet choice: a run-on 'sentence' is not a sentence)"
    )
    sentences_per_part: int = setting(500_000, "sentences per output part file (parts let shard encode in parallel)")
    on_binary: Literal["error", "skip"] = setting(
        "error",
        "a binary file named on the command line: stop, or skip it and count it (binary files found inside folders "
        "are always skipped and counted)",
    )
    exclude: tuple[str, ...] = setting(
        (),
        'file-name glob patterns skipped when walking input folders, e.g. ["README*", "*.tsv"] (hidden files are '
        "always skipped)",
    )
    tokenizer_sample_bytes: int = setting(
        0,
        "train the BPE tokenizer on a deterministic sample of about this many bytes of sentences, the same leading "
        "share of every part file (0: on all of them; a corpus of hundreds of GB needs a sample)",
    )

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
        if self.tokenizer_sample_bytes < 0:
            out.append(f"preprocess.tokenizer_sample_bytes must be >= 0 (got {self.tokenizer_sample_bytes})")
        return out


# ---------------------------------------------------------------- data: synthetic corpus
@dataclass(frozen=True, kw_only=True)
class SyntheticSettings:
    documents: int = setting(6000, "documents in the embedded synthetic corpus")
    sentences_per_document: tuple[int, int] = setting((6, 14), "inclusive range of sentences per document")
    seed: int = seed_setting(0, "generator seed; the same seed gives byte-identical text")

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
    max_seq_len: int = setting(512, "tokens per training sequence, [CLS] included (paper: 512)")
    packing: Literal["fill", "whole_sentences"] = setting(
        "fill",
        "fill: consecutive sentences fill every block to the brim, a sentence that does not fit continues in the next "
        "block (mapnet choice: <1% padding); whole_sentences: RoBERTa FULL-SENTENCES, a block ends before a "
        "sentence that does not fit and is padded",
    )
    valid_fraction: float = setting(
        0.01, "fraction of documents held out for validation (1: an evaluation-only shard set, for train.extra_eval)"
    )
    split_unit: Literal["document", "sequence"] = setting(
        "document", "hold out whole documents (no leakage) or packed sequences"
    )
    split_seed: int = seed_setting(0, "seed of the train/validation assignment")
    sequences_per_file: int = setting(65536, "sequences per Arrow file")
    verify: Literal["full", "size"] = setting("full", "on open, check every shard's sha256 (full) or only its size")
    workers: int = setting(0, "tokenizer processes for shard encoding (0: all cores; 1: encode in the main process)")

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


# ---------------------------------------------------------------- data: where preprocess and shard run
ENGINES = ("local", "dask")


@dataclass(frozen=True, kw_only=True)
class EngineSettings:
    name: Literal["local", "dask"] = setting(
        "local",
        "where preprocess and shard run their per-file work, and compare and finetune-glue their runs: local "
        "(this machine's process pool of preprocess.workers / shard.workers; compare, finetune-glue: one run after "
        "another) or dask (tasks on the Dask cluster at --engine-address or DASK_SCHEDULER_ADDRESS, else on a local "
        "one of that many worker processes, engine.workers for compare and finetune-glue); the output bytes are the "
        "same",
    )
    tasks: int = setting(
        0,
        "engine tasks: the input files (preprocess) or part files (shard) are cut into at most this "
        "many contiguous groups of about equal size, one task each (0: one task per file)",
    )
    retries: int = setting(
        2,
        "times the engine reruns a failed task (a lost worker included) before the run stops; "
        "finished tasks are kept, so the same command started again goes on from them",
    )
    workers: int = setting(
        0,
        "compare and finetune-glue with --engine dask and no scheduler address: the local cluster's worker "
        "processes, each running one run at a time (0: as many as runs, at most the machine's "
        "cores / engine.threads)",
    )
    threads: int = setting(
        0,
        "compare and finetune-glue with --engine dask or --gpus: torch threads of each run on its worker (0: the "
        "machine's cores shared among the local workers, torch's default on a cluster's); a run is bit-identical to "
        "the serial one run with as many threads",
    )

    def problems(self) -> list[str]:
        out = []
        if self.tasks < 0:
            out.append(f"engine.tasks must be >= 0 (got {self.tasks})")
        if self.retries < 0:
            out.append(f"engine.retries must be >= 0 (got {self.retries})")
        for name in ("workers", "threads"):
            if getattr(self, name) < 0:
                out.append(f"engine.{name} must be >= 0 (got {getattr(self, name)})")
        return out
