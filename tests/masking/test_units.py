"""Whole-word, span (SpanBERT) and PMI unit masking (masking/units.py, masking/pmi_units.py): word boundaries,
budgets, span lengths, determinism."""

from __future__ import annotations

import math
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
import torch

from mapnet_cli.masking import pmi_vocab
from mapnet_cli.masking.pmi_units import PmiTraining, greedy_chain, pmi_units
from mapnet_cli.masking.uniform import TRAIN_MASKS, SequenceRNG, eligible_positions, mask_counts, sequence_keys
from mapnet_cli.masking.units import (
    SpanTraining,
    WholeWordTraining,
    budget_mask,
    span_length_probs,
    span_lengths,
    word_start_table,
    words_of,
)
from mapnet_cli.settings import MaskingSettings, PmiSettings, SpanSettings

SPECIAL_IDS = {"pad": 0, "unk": 1, "cls": 2, "sep": 3, "mask": 4}
SPECIALS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
N_WORDS = 30  # ids 5..34 start words ("w0".."w29"), ids 35..64 continue them ("##c0".."##c29")
VOCAB = len(SPECIALS) + 2 * N_WORDS


def wordpiece_tokenizer(path: Path) -> Path:
    from tokenizers import Tokenizer, models, pre_tokenizers

    vocab = {t: i for i, t in enumerate(SPECIALS)}
    vocab.update({f"w{i}": 5 + i for i in range(N_WORDS)})
    vocab.update({f"##c{i}": 5 + N_WORDS + i for i in range(N_WORDS)})
    tok = Tokenizer(models.WordPiece(vocab, unk_token="[UNK]", continuing_subword_prefix="##"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    tok.add_special_tokens(SPECIALS)
    tok.save(str(path))
    return path


@pytest.fixture(scope="module")
def tokenizer(tmp_path_factory) -> Path:
    return wordpiece_tokenizer(tmp_path_factory.mktemp("tok") / "tokenizer.json")


def random_batch(rows: int, T: int, seed: int, cont: float = 0.4) -> torch.Tensor:
    """[CLS] words... [SEP] words... [SEP] [PAD]*: words of 1..several tokens (continuations with prob `cont`)."""
    g = np.random.default_rng(seed)
    ids = np.where(g.random((rows, T)) < cont, g.integers(35, 65, (rows, T)), g.integers(5, 35, (rows, T)))
    ids[:, 0] = SPECIAL_IDS["cls"]
    ids[:, T // 2] = SPECIAL_IDS["sep"]
    ids[:, -1] = SPECIAL_IDS["sep"]
    pad = g.integers(0, T // 4, rows)
    for r in range(rows):
        if pad[r]:
            ids[r, T - 1 - pad[r] : T - 1] = SPECIAL_IDS["pad"]
    return torch.from_numpy(ids)


def strategy(cls, tokenizer: Path, **masking):
    settings = SimpleNamespace(masking=MaskingSettings(**masking), train=SimpleNamespace(seed=0))
    data = SimpleNamespace(
        special_ids=SPECIAL_IDS, vocab_size=VOCAB, tokenizer_path=tokenizer, dir=tokenizer.parent, manifest={}
    )
    return cls(settings, None, data)


def words_list(ids_row: torch.Tensor, starts: torch.Tensor) -> list[list[int]]:
    """Plain-Python word segmentation of one row: positions of each word (reference for the tensor code)."""
    out, prev_ok = [], False
    for t, v in enumerate(ids_row.tolist()):
        ok = v not in SPECIAL_IDS.values()
        if ok and (starts[v] or not prev_ok):
            out.append([t])
        elif ok:
            out[-1].append(t)
        prev_ok = ok
    return out


# ---------------------------------------------------------------- word boundaries
def test_word_starts_from_wordpiece_metaspace_and_word_level(tokenizer, tmp_path):
    table = word_start_table(tokenizer, VOCAB)
    assert table[5:35].all() and not table[35:65].any() and table[:5].all()
    from mapnet_cli.data.bpe import METASPACE, save_tokenizer, train_tokenizer

    text = tmp_path / "t.txt"
    text.write_text("the computer computes a computation .\nthe computation of computers .\n" * 50)
    bpe = train_tokenizer([text], 60, 1)
    save_tokenizer(bpe, tmp_path / "bpe.json")
    table = word_start_table(tmp_path / "bpe.json", bpe.get_vocab_size())
    for token, i in bpe.get_vocab().items():
        if i >= 5:
            assert bool(table[i]) == token.startswith(METASPACE), token
    enc = bpe.encode("the computation")
    assert [bool(table[i]) for i in enc.ids].count(True) == 2  # two words, however many pieces
    from tiny_shards import write_tokenizer

    write_tokenizer(tmp_path / "wl.json", 16)
    assert word_start_table(tmp_path / "wl.json", 16).all()


def test_words_of_matches_a_plain_segmentation(tokenizer):
    starts = word_start_table(tokenizer, VOCAB)
    ids = random_batch(16, 40, 0)
    word, _, _ = words_of(ids, eligible_positions(ids, SPECIAL_IDS), starts)
    for r in range(len(ids)):
        for w, positions in enumerate(words_list(ids[r], starts)):
            assert word[r, positions].tolist() == [w] * len(positions)


# ---------------------------------------------------------------- budgets and whole words
@pytest.mark.parametrize("cls,extra", [(WholeWordTraining, {}), (SpanTraining, {})])
@pytest.mark.parametrize("rate", [0.15, 0.4])
def test_units_never_split_a_word_and_the_count_is_within_one_word_of_the_budget(tokenizer, cls, extra, rate):
    s = strategy(cls, tokenizer, strategy="span" if cls is SpanTraining else "whole-word", mask_prob=rate, **extra)
    ids = random_batch(300, 64, 1)
    mask, _ = s.masks(ids, SequenceRNG(range(300)))
    k = mask_counts(eligible_positions(ids, SPECIAL_IDS).sum(1), rate)
    split = off = 0
    for r in range(len(ids)):
        words = words_list(ids[r], s.starts)
        split += sum(len(set(mask[r, w].tolist())) > 1 for w in words)
        longest = max(map(len, words))
        diff = abs(int(mask[r].sum()) - int(k[r]))
        off += diff >= longest or (int(k[r]) >= longest and 2 * diff > longest)
    assert split == 0
    assert off == 0
    assert not (mask & ~eligible_positions(ids, SPECIAL_IDS)).any()


def test_budget_rule_on_a_hand_made_case():
    # One row, words of 3, 1, 2 tokens at positions 1-3, 4, 5-6; keys order the words (4), (5-6), (1-3).
    word = torch.tensor([[-1, 0, 0, 0, 1, 2, 2, -1]])
    start = torch.tensor([[False, True, False, False, True, True, False, False]])
    keys = torch.tensor([[0.0, 0.9, 0.0, 0.0, 0.1, 0.5, 0.0, 0.0]])
    take = lambda k: budget_mask(word, start, keys, torch.tensor([k]))[0].nonzero().flatten().tolist()
    assert take(1) == [4]
    assert take(2) == [4, 5, 6]  # crossing word (5-6): 3 is as close to 2 as 1 is -> kept (ties kept)
    assert take(3) == [4, 5, 6]
    assert take(4) == [4, 5, 6]  # (1-3) would give 6: |6-4| > |3-4|
    assert take(5) == [1, 2, 3, 4, 5, 6]  # 6 is closer to 5 than 3 is
    big = torch.tensor([[0.0, 0.1, 0.0, 0.0, 0.9, 0.5, 0.0, 0.0]])  # the 3-token word comes first
    assert budget_mask(word, start, big, torch.tensor([1]))[0].nonzero().flatten().tolist() == [
        1,
        2,
        3,
    ]  # at least one word


def test_whole_word_masks_per_token_replacement_and_span_per_span(tokenizer):
    ids = random_batch(400, 64, 2)
    keys = sequence_keys(0, 5, range(400), TRAIN_MASKS)
    span = strategy(SpanTraining, tokenizer, strategy="span").micro_batch(ids.numpy(), 5, range(400), keys, "cpu")
    table = word_start_table(tokenizer, VOCAB)
    mixed_span = mixed_word = 0
    for r in range(400):
        for w in words_list(ids[r], table):
            if span.mask[r, w[0]]:
                mixed_span += len(set((span.inputs[r, w] == SPECIAL_IDS["mask"]).tolist())) > 1
    ww = strategy(WholeWordTraining, tokenizer, strategy="whole-word").micro_batch(
        ids.numpy(), 5, range(400), keys, "cpu"
    )
    for r in range(400):
        for w in words_list(ids[r], table):
            if ww.mask[r, w[0]] and len(w) > 1:
                mixed_word += len(set((ww.inputs[r, w] == SPECIAL_IDS["mask"]).tolist())) > 1
    assert mixed_span == 0  # one decision per span (so per word inside it)
    assert mixed_word > 20  # BERT's whole-word masking decides per token
    share = (ww.inputs[ww.mask] == SPECIAL_IDS["mask"]).float().mean().item()
    assert 0.75 < share < 0.85


# ---------------------------------------------------------------- span lengths
def test_span_length_distribution_is_the_truncated_geometric():
    probs = span_length_probs(0.2, 10)
    mean = float((torch.arange(1, 11) * probs).sum())
    assert abs(mean - 3.8) < 0.05  # SpanBERT: "mean span length 3.8"
    assert math.isclose(float(probs[0]), 0.2 / (1 - 0.8**10))
    l = span_lengths(torch.rand(200_000, generator=torch.Generator().manual_seed(0)), 0.2, 10)
    assert l.min() == 1 and l.max() == 10


# Upper 0.1% points of chi-square with df degrees of freedom (tables; no scipy needed).
CHI2_999 = {5: 20.515, 9: 27.877}


def chi_square(observed: np.ndarray, probs: np.ndarray) -> float:
    expected = probs * observed.sum()
    return float(((observed - expected) ** 2 / expected).sum())


@pytest.mark.parametrize("p,max_words", [(0.2, 10), (0.35, 6)])
def test_masked_span_lengths_follow_the_configured_distribution(tokenizer, p, max_words):
    """The first span taken in each sequence (the unit with the smallest key) has the configured
    length distribution; chi-square on 1,500 long sequences, and the other p is rejected."""
    s = strategy(SpanTraining, tokenizer, strategy="span", span=SpanSettings(p=p, max_words=max_words), mask_prob=0.3)
    ids = random_batch(1500, 512, 3, cont=0.3)
    ids[:, 256] = 40  # no document boundary inside: spans are cut only by the segmentation
    eligible = eligible_positions(ids, SPECIAL_IDS)
    rng = SequenceRNG(range(1500))
    word, is_start, run_start = words_of(ids, eligible, s.starts)
    keys = rng.uniform(512)
    unit_start = s.units(ids, word, is_start, run_start, rng, "cpu")
    lengths = []
    for r in range(len(ids)):
        starts = unit_start[r].nonzero().flatten()
        first = int(starts[keys[r, starts].argmin()])
        nxt = [int(t) for t in starts if t > first]
        end = nxt[0] if nxt else int(word[r].ne(-1).nonzero().max()) + 1
        if not nxt:
            continue  # the row's last span is cut by the sequence end
        lengths.append(int(word[r, end - 1] - word[r, first]) + 1)
    observed = np.bincount(lengths, minlength=max_words + 1)[1:]
    df = max_words - 1
    assert chi_square(observed, span_length_probs(p, max_words).numpy()) < CHI2_999[df]
    other = span_length_probs(0.5 if p < 0.3 else 0.15, max_words).numpy()
    assert chi_square(observed, other) > 3 * CHI2_999[df]  # the test can tell distributions apart


def test_spans_are_whole_segments_and_only_the_last_taken_is_cut(tokenizer):
    s = strategy(SpanTraining, tokenizer, strategy="span")
    ids = random_batch(200, 128, 4)
    eligible = eligible_positions(ids, SPECIAL_IDS)
    word, is_start, run_start = words_of(ids, eligible, s.starts)
    rng = SequenceRNG(range(200))
    keys = rng.uniform(128)
    units = s.units(ids, word, is_start, run_start, rng, "cpu")
    mask = budget_mask(word, units, keys, mask_counts(eligible.sum(1), 0.15))
    for r in range(200):
        starts = units[r].nonzero().flatten().tolist()
        bounds = starts + [128]
        partial = 0
        for a, b in zip(bounds, bounds[1:]):
            m = [bool(mask[r, t]) for t in range(a, b) if eligible[r, t]]
            if any(m) and not all(m):
                partial += 1
                assert m == sorted(m, reverse=True)  # the cut span keeps its left part
        assert partial <= 1


# ---------------------------------------------------------------- PMI units
def test_greedy_chain_matches_a_left_to_right_loop():
    g = torch.Generator().manual_seed(0)
    longest = torch.randint(1, 6, (50, 37), generator=g)
    chain = greedy_chain(longest)
    for r in range(50):
        expected, w = set(), 0
        while w < 37:
            expected.add(w)
            w += int(longest[r, w])
        assert set(chain[r].nonzero().flatten().tolist()) == expected


def test_pmi_units_are_vocabulary_ngrams_longest_first_never_across_a_boundary(tokenizer, tmp_path):
    entries = [("w1 w2c3", 2, 20, 3.0), ("w1 w2c3 w4", 3, 12, 4.0), ("w5 w6", 2, 15, 2.0), ("w6 w7", 2, 15, 2.0)]
    path = tmp_path / "pmi.tsv"
    pmi_vocab.write_vocabulary(pmi_vocab.Vocabulary(entries, {"test": True}), path)
    s = strategy(PmiTraining, tokenizer, strategy="pmi", pmi=PmiSettings(vocab=str(path)))
    from tokenizers import Tokenizer

    tok = Tokenizer.from_file(str(tokenizer))
    text = "w1 w2c3 w4 w9 w5 w6 w7 w1 w2c3"
    body = tok.encode(text, add_special_tokens=False).ids
    ids = torch.tensor([[2, *body, 3, *tok.encode("w6 w7 w5", add_special_tokens=False).ids, 3]])
    eligible = eligible_positions(ids, SPECIAL_IDS)
    word, is_start, run_start = words_of(ids, eligible, s.starts)
    units = pmi_units(s.matcher, ids, word, is_start, run_start)
    starts = [tok.id_to_token(int(ids[0, t])) for t in units[0].nonzero().flatten()]
    # (w1 w2c3 w4) (w9) (w5 w6) (w7) (w1 w2c3) | (w6 w7) (w5)
    assert starts == ["w1", "w9", "w5", "w7", "w1", "w6", "w5"]


def test_pmi_matcher_ignores_padding_and_truncation_in_the_tokenizer_json(tokenizer, tmp_path):
    """A Hugging Face tokenizer.json may enable padding/truncation; padded rows hold [PAD] and were dropped."""
    from tokenizers import Tokenizer

    from mapnet_cli.masking.pmi_units import PmiMatcher

    padded = Tokenizer.from_file(str(tokenizer))
    padded.enable_padding(pad_id=SPECIAL_IDS["pad"], pad_token="[PAD]", length=8)
    padded.enable_truncation(max_length=6)
    padded.save(str(tmp_path / "padded.json"))
    entries = ["w1 w2c3", "w1 w2c3 w4", "w5 w6", "w6 w7 w8c1c2 w9"]
    s = strategy(WholeWordTraining, tokenizer)
    plain = PmiMatcher(entries, tokenizer, SPECIAL_IDS, s.starts, VOCAB)
    other = PmiMatcher(entries, tmp_path / "padded.json", SPECIAL_IDS, s.starts, VOCAB)
    assert plain.entries == 4
    assert other.entries == plain.entries
    assert {n: t.tolist() for n, t in other.tables.items()} == {n: t.tolist() for n, t in plain.tables.items()}


def test_pmi_masks_keep_the_budget_and_draw_units_whole(tokenizer, tmp_path):
    entries = [(f"w{a} w{b}", 2, 10, 1.0) for a in range(0, 30, 3) for b in range(1, 30, 4)]
    entries += [(f"w{a} w{b} w{c}", 3, 10, 1.0) for a, b, c in [(1, 2, 3), (4, 5, 6), (7, 8, 9)]]
    path = tmp_path / "pmi.tsv"
    pmi_vocab.write_vocabulary(pmi_vocab.Vocabulary(entries, {}), path)
    s = strategy(PmiTraining, tokenizer, strategy="pmi", pmi=PmiSettings(vocab=str(path)))
    ids = random_batch(300, 64, 5, cont=0.2)
    rng = SequenceRNG(range(300))
    mask, units = s.masks(ids, rng)
    k = mask_counts(eligible_positions(ids, SPECIAL_IDS).sum(1), 0.15)
    assert units.sum() < eligible_positions(ids, SPECIAL_IDS).logical_and(s.starts[ids]).sum()  # n-grams were found
    for r in range(300):
        words = words_list(ids[r], s.starts)
        assert all(len(set(mask[r, w].tolist())) == 1 for w in words)
        longest = max(map(len, words))
        assert abs(int(mask[r].sum()) - int(k[r])) < longest


# ---------------------------------------------------------------- determinism
@pytest.mark.parametrize("name", ["whole-word", "span", "pmi"])
def test_masks_do_not_depend_on_the_batch_split(tokenizer, tmp_path, name):
    """Slots 0..7 in one micro-batch (1 x 8) or two of four (2 x 4): the same masks and inputs."""
    path = tmp_path / "pmi.tsv"
    pmi_vocab.write_vocabulary(pmi_vocab.Vocabulary([("w1 w2", 2, 10, 1.0), ("w3 w4 w5", 3, 10, 1.0)], {}), path)
    extra = {"pmi": PmiSettings(vocab=str(path))} if name == "pmi" else {}
    s = strategy(
        {"whole-word": WholeWordTraining, "span": SpanTraining, "pmi": PmiTraining}[name],
        tokenizer,
        strategy=name,
        **extra,
    )
    ids = random_batch(8, 48, 6).numpy()
    whole = s.micro_batch(ids, 3, range(8), sequence_keys(7, 3, range(8), TRAIN_MASKS), "cpu")
    parts = [
        s.micro_batch(ids[a:b], 3, range(a, b), sequence_keys(7, 3, range(a, b), TRAIN_MASKS), "cpu")
        for a, b in ((0, 4), (4, 8))
    ]
    assert torch.equal(whole.mask, torch.cat([p.mask for p in parts]))
    assert torch.equal(whole.inputs, torch.cat([p.inputs for p in parts]))
    again = s.micro_batch(ids, 3, range(8), sequence_keys(7, 3, range(8), TRAIN_MASKS), "cpu")
    assert torch.equal(whole.mask, again.mask) and torch.equal(whole.inputs, again.inputs)
    other = s.micro_batch(ids, 4, range(8), sequence_keys(7, 4, range(8), TRAIN_MASKS), "cpu")
    assert not torch.equal(whole.mask, other.mask)


def test_whole_word_is_exactly_uniform_masking_when_every_word_is_one_token(tmp_path):
    """With single-token words the unit keys are uniform's scores and the crossing rule never cuts:
    the same rows get the same masks and inputs as the uniform strategy (the embedded synthetic corpus's case)."""
    from tiny_shards import write_tokenizer

    from mapnet_cli.masking.strategy import UniformTraining

    write_tokenizer(tmp_path / "wl.json", VOCAB)
    ids = random_batch(32, 40, 7, cont=0.0).numpy()
    keys = sequence_keys(3, 1, range(32), TRAIN_MASKS)
    ww = strategy(WholeWordTraining, tmp_path / "wl.json", strategy="whole-word").micro_batch(
        ids, 1, range(32), keys, "cpu"
    )
    uni = strategy(UniformTraining, tmp_path / "wl.json").micro_batch(ids, 1, range(32), keys, "cpu")
    assert torch.equal(ww.mask, uni.mask) and torch.equal(ww.inputs, uni.inputs)
