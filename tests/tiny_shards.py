"""Tiny shard folders in the documented format (docs/formats.md), written directly.

Training tests need a few hundred short, learnable sequences in a second, not
a corpus: each sequence here repeats one token with some noise, so a masked
token is predictable from the rest of its sequence and the loss visibly falls
within a few dozen steps of a tiny model. They are read back
through the real `ShardReader`, which checks the manifest.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.ipc as ipc

SPECIALS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
SPECIAL_IDS = {"pad": 0, "unk": 1, "cls": 2, "sep": 3, "mask": 4}


def _sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def write_tokenizer(path: Path, vocab_size: int, bpe: bool = False) -> None:
    """Word-level tokens w5, w6, ...; `bpe`: the same vocabulary as a BPE model without merges (what the
    commands that read a checkpoint's tokenizer, e.g. inspect-masks, accept)."""
    from tokenizers import Tokenizer, models, pre_tokenizers

    vocab = {tok: i for i, tok in enumerate(SPECIALS)}
    vocab.update({f"w{i}": i for i in range(len(SPECIALS), vocab_size)})
    model = models.BPE(vocab, [], unk_token="[UNK]") if bpe else models.WordLevel(vocab, unk_token="[UNK]")
    tok = Tokenizer(model)
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    tok.add_special_tokens(SPECIALS)
    tok.save(str(path))


def sequences(
    n: int, seq_len: int, vocab_size: int, rng: np.random.Generator, pad_last: int = 0, split_vocab: bool = False
) -> np.ndarray:
    """Each sequence repeats one token, with 1 in 5 positions replaced by noise. `split_vocab`: themes come
    from the lower half of the ordinary tokens and noise from the upper half, so a type is either
    predictable from its sequence or never."""
    ordinary = vocab_size - len(SPECIALS)
    half = ordinary // 2 if split_vocab else 0
    theme = rng.integers(0, half or ordinary, size=(n, 1))
    noise = rng.integers(half, ordinary, size=(n, seq_len - 2))
    body = len(SPECIALS) + np.where(rng.random((n, seq_len - 2)) < 0.2, noise, theme)
    out = np.concatenate([np.full((n, 1), SPECIAL_IDS["cls"]), body, np.full((n, 1), SPECIAL_IDS["sep"])], 1)
    if pad_last and n:
        out[-1, seq_len - pad_last :] = SPECIAL_IDS["pad"]
    return out.astype(np.uint16)


def write_tiny_shards(
    root: Path,
    train: int = 96,
    valid: int = 24,
    seq_len: int = 32,
    vocab_size: int = 64,
    seed: int = 0,
    files_per_split: int = 2,
    split_vocab: bool = False,
    bpe: bool = False,
) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(seed)
    write_tokenizer(root / "tokenizer.json", vocab_size, bpe)
    files, splits = [], {}
    for split, n, pad in (("train", train, 5), ("valid", valid, 7)):
        data = sequences(n, seq_len, vocab_size, rng, pad_last=pad, split_vocab=split_vocab)
        for k, part in enumerate(np.array_split(data, files_per_split)):
            name = f"{split}-{k:05d}.arrow"
            column = pa.FixedSizeListArray.from_arrays(pa.array(part.reshape(-1), pa.uint16()), seq_len)
            table = pa.table({"input_ids": column})
            with ipc.new_file(str(root / name), table.schema) as writer:
                writer.write_table(table)
            files.append(
                {
                    "name": name,
                    "split": split,
                    "sequences": len(part),
                    "tokens": int((part != 0).sum()),
                    "bytes": (root / name).stat().st_size,
                    "sha256": _sha(root / name),
                }
            )
        splits[split] = {
            "sequences": n,
            "tokens": int((data != 0).sum()),
            "documents": n,
            "padding_fraction": float((data == 0).mean()) if data.size else 0.0,
        }
    manifest = {
        "schema": "mapnet.shards/1",
        "created": "2024-01-01T00:00:00+00:00",
        "mapnet_version": "test",
        "max_seq_len": seq_len,
        "dtype": "uint16",
        "vocab_size": vocab_size,
        "special_ids": SPECIAL_IDS,
        "tokenizer_sha256": _sha(root / "tokenizer.json"),
        "packing": "fill",
        "files": files,
        "splits": splits,
        "source": {"path": "tests/tiny_shards.py", "manifest_sha256": ""},
        "settings": {},
    }
    (root / "manifest.json").write_text(json.dumps(manifest, indent=2))
    return root
