"""The PMI vocabulary: PMI_n against hand computation, bounded-memory counting, the verified file,
`mapnet pmi-vocab`, and PMI-masked pretraining (run.json, exact resume, refusals)."""

from __future__ import annotations

import itertools
import json
import math
import os
from collections import Counter
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
import torch
from typer.testing import CliRunner

from mapnet_cli.cli import app
from mapnet_cli.errors import MapnetError
from mapnet_cli.masking import pmi_vocab
from mapnet_cli.model import checkpoint
from mapnet_cli.settings import FrequencySettings, MapnetSettings, MaskingSettings, PmiSettings, SpanSettings, resolve
from mapnet_cli.train import pretrain


class FakeCorpus:
    """What `build_vocabulary` reads from a preprocessed corpus: chunks of sentence lines."""

    def __init__(self, lines: list[str], per_chunk: int = 3):
        self.lines, self.per_chunk = lines, per_chunk
        self.path, self.manifest_sha256 = Path("fake"), "0" * 64

    def chunks(self):
        for i in range(0, len(self.lines), self.per_chunk):
            part = self.lines[i : i + self.per_chunk]
            yield SimpleNamespace(lines=part, nbytes=sum(len(x) + 1 for x in part))


def exact_counts(lines: list[str], max_n: int = 5) -> tuple[Counter, dict[int, int]]:
    counts, totals = Counter(), {k: 0 for k in range(1, max_n + 1)}
    for line in lines:
        w = line.split()
        for k in range(1, max_n + 1):
            totals[k] += max(0, len(w) - k + 1)
            counts.update(tuple(w[i : i + k]) for i in range(len(w) - k + 1))
    return counts, totals


def brute_force_pmi(gram: tuple, counts: Counter, totals: dict) -> float:
    """log p(gram) - max over all 2^(n-1) - 1 proper compositions of sum log p(part), by enumeration."""
    n = len(gram)
    logp = lambda g: math.log(counts[g] / totals[len(g)])
    best = -math.inf
    for cuts in itertools.product([0, 1], repeat=n - 1):
        if not any(cuts):
            continue
        parts, start = [], 0
        for i, c in enumerate(cuts, 1):
            if c:
                parts.append(gram[start:i])
                start = i
        parts.append(gram[start:])
        best = max(best, sum(logp(p) for p in parts))
    return logp(gram) - best


def test_bigram_pmi_is_the_textbook_value():
    # a b | a b | a c: N1 = 6, N2 = 3; p(ab) = 2/3, p(a) = 3/6, p(b) = 2/6 -> PMI = log((2/3) / (1/2 * 1/3)) = log 4
    counts, totals = exact_counts(["a b", "a b", "a c"])
    assert math.isclose(pmi_vocab.pmi_n(("a", "b"), counts.__getitem__, totals), math.log(4))


def test_trigram_pmi_takes_the_best_segmentation_by_hand():
    lines = ["new york city is big", "new york is big", "york city is old", "new york city"]
    counts, totals = exact_counts(lines)
    # N1 = 16, N2 = 12, N3 = 8. c(new york city) = 2, c(new york) = 3, c(york city) = 3, c(new) = 3,
    # c(york) = 4, c(city) = 3. Segmentations: (new)(york)(city): log 3/16 + log 4/16 + log 3/16;
    # (new york)(city): log 3/12 + log 3/16; (new)(york city): log 3/16 + log 3/12. Best: -2.7726 (the last two).
    assert (totals[1], totals[2], totals[3]) == (16, 12, 8)
    best = max(math.log(3 / 16) + math.log(4 / 16) + math.log(3 / 16), math.log(3 / 12) + math.log(3 / 16))
    by_hand = math.log(2 / 8) - best
    got = pmi_vocab.pmi_n(("new", "york", "city"), counts.__getitem__, totals)
    assert math.isclose(got, by_hand)
    assert math.isclose(got, brute_force_pmi(("new", "york", "city"), counts, totals))


def test_every_ranked_score_matches_enumeration_on_a_small_corpus():
    g = np.random.default_rng(0)
    words = [f"x{i}" for i in range(8)]
    lines = [
        " ".join(g.choice(words, g.integers(3, 12), p=np.array([8, 6, 5, 4, 3, 2, 1, 1]) / 30)) for _ in range(200)
    ]
    vocab = pmi_vocab.build_vocabulary(FakeCorpus(lines), size=1000, min_count=2)
    counts, totals = exact_counts(lines)
    assert vocab.entries and vocab.header["exact_counts"] and vocab.header["prune_floor"] == 0
    for text, n, c, score in vocab.entries:
        gram = tuple(text.split())
        assert len(gram) == n and counts[gram] == c >= 2
        assert math.isclose(score, brute_force_pmi(gram, counts, totals), abs_tol=1e-9)
    by_len = Counter(n for _, n, _, _ in vocab.entries)
    assert set(by_len) <= {2, 3, 4, 5}
    for n in by_len:  # per length, by falling score
        scores = [s for _, m, _, s in vocab.entries if m == n]
        assert scores == sorted(scores, reverse=True)


def test_vocabulary_size_is_split_by_length_as_in_the_paper():
    g = np.random.default_rng(1)
    lines = [" ".join(g.choice([f"y{i}" for i in range(5)], 20)) for _ in range(400)]
    vocab = pmi_vocab.build_vocabulary(FakeCorpus(lines), size=40, min_count=2)
    assert vocab.header["entries_by_length"] == {"2": 20, "3": 10, "4": 5, "5": 5}


def test_pruned_counts_are_bounded_and_nothing_above_the_floor_is_lost():
    g = np.random.default_rng(2)
    zipf = 1 / np.arange(1, 60)
    lines = [
        " ".join(g.choice([f"z{i}" for i in range(59)], g.integers(4, 15), p=zipf / zipf.sum())) for _ in range(600)
    ]
    counter = pmi_vocab.NgramCounter(max_entries=3000)
    for i in range(0, len(lines), 20):
        counter.add_sentences(lines[i : i + 20])
    exact, _ = exact_counts(lines)
    names = {v: k for k, v in counter.words.items()}
    assert counter.prunes > 0 and counter.floor > 0
    kept = {tuple(names[i] for i in key): (c, counter.delta.get(key, 0)) for key, c in counter.table.items()}
    assert len(kept) <= 3000 + 20 * 14 * 4
    for gram, f in exact.items():
        if len(gram) < 2:
            continue
        if gram in kept:
            c, d = kept[gram]
            assert c <= f <= c + d, gram
        else:
            assert f <= counter.floor, gram
    unpruned = pmi_vocab.NgramCounter(max_entries=10**7)
    unpruned.add_sentences(lines)
    assert {tuple(names[i] for i in k): c for k, c in unpruned.table.items()} == {
        k: v for k, v in exact.items() if len(k) >= 2
    }


# ---------------------------------------------------------------- the file
def test_file_round_trips_and_is_refused_when_damaged(tmp_path):
    vocab = pmi_vocab.Vocabulary([("new york", 2, 12, 3.5), ("new york city", 3, 5, 2.25)], {"size": 2})
    path = tmp_path / "pmi.tsv"
    sha = pmi_vocab.write_vocabulary(vocab, path)
    back = pmi_vocab.read_vocabulary(path)
    assert back.entries == vocab.entries and back.header["size"] == 2 and len(sha) == 64
    data = path.read_bytes()
    for damaged in (data[:-3], data.replace(b"new york\t2\t12", b"new yorl\t2\t12"), b"hello\n"):
        path.write_bytes(damaged)
        with pytest.raises(MapnetError):
            pmi_vocab.read_vocabulary(path)
    with pytest.raises(MapnetError, match="not found"):
        pmi_vocab.read_vocabulary(tmp_path / "missing.tsv")


def test_a_failed_write_leaves_the_old_file_and_no_temporary(tmp_path):
    path = tmp_path / "pmi.tsv"
    pmi_vocab.write_vocabulary(pmi_vocab.Vocabulary([("a b", 2, 3, 1.0)], {}), path)
    before = path.read_bytes()

    with pytest.raises(TypeError):  # fails inside the write (the header cannot be serialised)
        pmi_vocab.write_vocabulary(pmi_vocab.Vocabulary([("c d", 2, 3, 1.0)], {"bad": object()}), path)
    assert path.read_bytes() == before
    assert sorted(os.listdir(tmp_path)) == ["pmi.tsv"]


# ---------------------------------------------------------------- the command and training
PMI_TRAIN = [
    "model.max_position=64",
    "shard.max_seq_len=64",
    "train.batch_size=8",
    "train.steps=6",
    "train.eval_every=0",
    "train.eval_sequences=8",
    "train.checkpoint_every=3",
    "optim.warmup.steps=2",
    "logging.progress=false",
    "masking.strategy=pmi",
]


@pytest.fixture(scope="module")
def vocab_file(synthetic_shards, tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("pmi") / "pmi.tsv"
    res = CliRunner().invoke(
        app,
        ["pmi-vocab", str(synthetic_shards.parent / "prep"), "--out", str(out), "--min-count", "3", "--no-progress"],
    )
    assert res.exit_code == 0, res.output
    return out


def test_cli_builds_a_vocabulary_of_the_corpus(vocab_file, synthetic_shards):
    v = pmi_vocab.read_vocabulary(vocab_file)
    assert v.entries and v.header["exact_counts"] and v.header["min_count"] == 3
    assert v.header["corpus"]["path"] == str((synthetic_shards.parent / "prep").resolve())
    assert all(c >= 3 for _, _, c, _ in v.entries)
    bad = CliRunner().invoke(app, ["pmi-vocab", str(synthetic_shards), "--out", str(vocab_file.parent / "x.tsv")])
    assert bad.exit_code != 0 and isinstance(bad.exception, MapnetError)  # shards are not a preprocessed corpus


def test_pmi_pretraining_records_the_vocabulary_and_resumes_exactly(vocab_file, synthetic_shards, tmp_path):
    s = resolve(None, {"model": {"preset": "tiny"}}, [*PMI_TRAIN, f"masking.pmi.vocab={vocab_file}"])
    straight = pretrain(s, synthetic_shards, tmp_path / "a")
    pretrain(s, synthetic_shards, tmp_path / "b", stop_at=3)
    resumed = pretrain(s, synthetic_shards, tmp_path / "b", resume=True)
    from safetensors.torch import load_file

    wa, wb = load_file(str(straight / "model.safetensors")), load_file(str(resumed / "model.safetensors"))
    assert all(torch.equal(wa[k], wb[k]) for k in wa)
    run = json.loads((tmp_path / "a" / "run.json").read_text())
    assert run["pmi_vocab"]["sha256"] == checkpoint.read_config(straight)["pmi_vocab_sha256"]
    assert run["pmi_vocab"]["entries"] == len(pmi_vocab.read_vocabulary(vocab_file).entries)
    # Another vocabulary under the same name: resume refuses, naming it.
    other = tmp_path / "other.tsv"
    pmi_vocab.write_vocabulary(pmi_vocab.Vocabulary([("a b", 2, 3, 1.0)], {}), other)
    s2 = resolve(None, {"model": {"preset": "tiny"}}, [*PMI_TRAIN, f"masking.pmi.vocab={other}", "train.steps=9"])
    with pytest.raises(MapnetError, match="another PMI vocabulary"):
        pretrain(s2, synthetic_shards, tmp_path / "b", resume=True)


def test_pmi_without_or_with_a_damaged_vocabulary_is_one_line(vocab_file, synthetic_shards, tmp_path):
    runner = CliRunner()
    args = [
        "pretrain",
        str(synthetic_shards),
        "--out",
        str(tmp_path / "r"),
        "--preset",
        "tiny",
        "--masking",
        "pmi",
        "--steps",
        "2",
        "--set",
        "model.max_position=64",
        "--set",
        "shard.max_seq_len=64",
        "--set",
        "logging.progress=false",
    ]
    missing = runner.invoke(app, args)
    assert isinstance(missing.exception, MapnetError) and "mapnet pmi-vocab" in str(missing.exception)
    damaged = tmp_path / "pmi.tsv"
    damaged.write_bytes(vocab_file.read_bytes()[:-10])
    res = runner.invoke(app, [*args, "--set", f"masking.pmi.vocab={damaged}"])
    assert isinstance(res.exception, MapnetError) and "body_sha256" in str(res.exception)


def test_settings_refuse_weights_and_foreign_knobs_for_unit_strategies():

    assert not MaskingSettings(strategy="span", mask_prob=0.3).problems()
    for bad, needle in [
        ({"strategy": "whole-word", "mapnet": MapnetSettings(importance="ht")}, "mapnet.importance"),
        ({"strategy": "span", "mapnet": MapnetSettings(importance="none")}, "mapnet.importance"),
        ({"strategy": "pmi", "frequency": FrequencySettings(mix_uniform=0.5)}, "mix_uniform"),
        ({"strategy": "whole-word", "span": SpanSettings(p=0.3)}, "span.p"),
        ({"strategy": "uniform", "pmi": PmiSettings(vocab="x.tsv")}, "pmi.vocab"),
        ({"strategy": "span", "span": SpanSettings(max_words=0)}, "span.max_words"),
        ({"strategy": "pmi", "mask_count": "bernoulli"}, "mask_count"),
    ]:
        problems = MaskingSettings(**bad).problems()
        assert any(needle in p for p in problems), (bad, problems)


def test_compare_knows_the_unit_arms_and_their_rates():
    from mapnet_cli import compare

    assert compare.parse_strategies("uniform,whole-word,span,pmi,span@0.3") == [
        "uniform",
        "whole-word",
        "span",
        "pmi",
        "span@0.3",
    ]
    assert compare.strategy_masking("whole-word@0.4", 100) == {"strategy": "whole-word", "mask_prob": 0.4}
    assert compare.strategy_masking("pmi", 100) == {"strategy": "pmi"}
