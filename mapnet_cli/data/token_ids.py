"""Sentences -> token ids with a corpus's tokenizer.json: what `shard` encodes with, in-process, in its local
pool's workers and in engine tasks alike (so every path gives the same ids).

    flat, lengths = encode_lines("prep/tokenizer.json", ["the cat sat .", "it ran ."])
"""

from __future__ import annotations

from itertools import chain
from pathlib import Path

import numpy as np

from ..errors import MapnetError

_TOKENIZERS: dict[str, object] = {}


def load_tokenizer(path: str | Path):
    from tokenizers import Tokenizer

    key = str(path)
    if key not in _TOKENIZERS:
        try:
            tok = Tokenizer.from_file(key)
        except Exception as exc:  # tokenizers raises plain Exception on a bad file
            raise MapnetError(f"{path} is not a readable tokenizers file: {exc}") from None
        # Text that happens to read "[SEP]" must stay text: specials come only from packing.
        tok.encode_special_tokens = True
        # A Hugging Face tokenizer.json may carry truncation or padding: a sentence must be encoded whole.
        tok.no_truncation()
        tok.no_padding()
        _TOKENIZERS[key] = tok
    return _TOKENIZERS[key]


def encode_lines(tokenizer_path: str, lines: list[str]) -> tuple[np.ndarray, np.ndarray]:
    """(concatenated ids as uint32, ids per line as int64)."""
    encodings = load_tokenizer(tokenizer_path).encode_batch_fast(lines, add_special_tokens=False)
    ids = [e.ids for e in encodings]
    lengths = np.fromiter(map(len, ids), dtype=np.int64, count=len(ids))
    flat = np.fromiter(chain.from_iterable(ids), dtype=np.uint32, count=int(lengths.sum()))
    return flat, lengths
