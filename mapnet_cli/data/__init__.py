"""Data pipeline: raw text -> cleaned sentences (preprocess) -> packed token shards (shard)."""
