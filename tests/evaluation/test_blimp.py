"""`mapnet blimp`: PLL scoring exact against one masked copy at a time, ties wrong, controls, curves, bad input."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch
from typer.testing import CliRunner

from mapnet_cli.cli import app
from mapnet_cli.errors import MapnetError
from mapnet_cli.evaluation.blimp.data import load_suite
from mapnet_cli.evaluation.blimp.evaluate import BlimpConfig, Scorer, blimp_run, summarise
from mapnet_cli.evaluation.blimp.models import find_targets
from mapnet_cli.evaluation.blimp.scoring import masked_rows, pll_scores, unigram_scores

PARADIGMS = ["adjunct_island", "anaphor_gender_agreement", "determiner_noun_agreement_1"]


@pytest.fixture(scope="module")
def blimp_dir(shared_data) -> Path:
    return shared_data / "blimp"


def _naive_pll(model, text, seq: np.ndarray, method: str) -> float:
    """One masked copy at a time through the full model (every position's logits), word ends found from
    the token strings: an independent computation of what `pll_scores` batches."""
    tok = text.tokenise.__self__.tokenizer
    pieces = [tok.id_to_token(int(i)) for i in seq]
    word = np.cumsum([p.startswith("\u2581") for p in pieces])
    full = np.concatenate([[text.cls_id], seq, [text.sep_id]])
    total = 0.0
    with torch.inference_mode():
        for i in range(len(seq)):
            ids = full.copy()
            hide = [i] + ([j for j in range(i + 1, len(seq)) if word[j] == word[i]] if method == "word-l2r" else [])
            ids[[1 + j for j in hide]] = text.mask_id
            logits = model(torch.from_numpy(ids)[None])[0, 1 + i]
            total += float(torch.log_softmax(logits.double(), -1)[int(seq[i])])
    return total


@pytest.mark.parametrize("method", ["pll", "word-l2r"])
def test_batched_pll_equals_one_masked_copy_at_a_time(pretrained_tiny, blimp_dir, method):
    target = find_targets([pretrained_tiny])[-1]
    model = target.build().eval()
    suite = load_suite(blimp_dir, 4, PARADIGMS)
    sentences = suite.sentences()
    seqs = target.text.tokenise(sentences)
    assert any(len(set(np.cumsum(target.text.word_start[s]))) < len(s) for s in seqs)  # some word has several pieces
    got = pll_scores(
        model,
        seqs,
        target.text.cls_id,
        target.text.sep_id,
        target.text.mask_id,
        target.text.word_start,
        method,
        max_tokens=64,
    )  # small batches: several per length
    want = [_naive_pll(model, target.text, s, method) for s in seqs]
    np.testing.assert_allclose(got, want, rtol=0, atol=2e-3)


def test_word_l2r_hides_the_later_pieces_of_the_same_word_only():
    word_start = np.array([True] * 5 + [True, False, False, True, False])  # ids 5, 8 start words; 6, 7, 9 continue
    ((L, (rows, pos, target, sentence)),) = masked_rows(
        [np.array([5, 6, 7, 8, 9])], 0, 1, 4, word_start, "word-l2r"
    ).items()
    assert L == 7 and pos.tolist() == [1, 2, 3, 4, 5] and target.tolist() == [5, 6, 7, 8, 9]
    assert rows.tolist() == [
        [0, 4, 4, 4, 8, 9, 1],  # t1 begins a 3-piece word: its later pieces are hidden
        [0, 5, 4, 4, 8, 9, 1],  # t2: the earlier piece stays visible
        [0, 5, 6, 4, 8, 9, 1],
        [0, 5, 6, 7, 4, 4, 1],  # the next word: only its own later piece
        [0, 5, 6, 7, 8, 4, 1],
    ]
    ((_, (plain, *_)),) = masked_rows([np.array([5, 6, 7, 8, 9])], 0, 1, 4, word_start, "pll").items()
    assert (plain == 4).sum(1).tolist() == [1, 1, 1, 1, 1]


def test_a_tie_is_wrong(blimp_dir):
    suite = load_suite(blimp_dir, 10, PARADIGMS[:1])
    same = np.zeros(10)
    s = summarise(suite, same, same)
    assert s["accuracy"] == 0.0 and s["paradigms"]["adjunct_island"]["ties"] == 10
    assert summarise(suite, same + 1, same)["accuracy"] == 1.0


def test_the_unigram_model_ties_on_reordered_words(pretrained_tiny, blimp_dir):
    """adjunct_island's pairs hold the same words in another order: frequencies alone cannot tell them
    apart, so every such pair is a tie (summed in a canonical order, not broken by rounding) and wrong."""
    target = find_targets([pretrained_tiny])[-1]
    suite = load_suite(blimp_dir, 50, PARADIGMS[:1])
    p = suite.paradigms[0]
    good, bad = target.text.tokenise(list(p.good)), target.text.tokenise(list(p.bad))
    rng = np.random.default_rng(0)
    log_p = np.log(rng.dirichlet(np.ones(len(target.text.word_start))))
    g, b = unigram_scores(log_p, good), unigram_scores(log_p, bad)
    same_tokens = np.array([sorted(x.tolist()) == sorted(y.tolist()) for x, y in zip(good, bad)])
    assert same_tokens.sum() >= 40
    assert (g[same_tokens] == b[same_tokens]).all()
    s = summarise(suite, g, b)["paradigms"]["adjunct_island"]
    assert s["ties"] == same_tokens.sum() and s["right"] == int((g > b)[~same_tokens].sum())


def test_cli_scores_a_run_with_its_controls_and_the_published_models(pretrained_tiny, blimp_dir, tmp_path):
    out = tmp_path / "blimp.json"
    result = CliRunner().invoke(
        app,
        [
            "blimp",
            str(pretrained_tiny),
            "--data",
            str(blimp_dir),
            "--out",
            str(out),
            "--pairs",
            "20",
            "--paradigms",
            ",".join(PARADIGMS),
            "--no-progress",
        ],
    )
    assert result.exit_code == 0, result.output
    doc = json.loads(out.read_text())
    assert doc["complete"] and doc["data"]["pairs"] == 60 and doc["data"]["paradigms"] == 3
    inits = [m["init"] for m in doc["models"]]
    assert inits == ["pretrained", "random", "unigram"]
    model = doc["models"][0]
    assert doc["accuracy"] == model["accuracy"] and doc["headline"] == model["label"]
    assert model["controls"] == {"random": "random-init", "unigram": "unigram"}
    for m in doc["models"]:
        per = m["paradigms"]
        assert sorted(per) == sorted(PARADIGMS) and all(v["pairs"] == 20 for v in per.values())
        assert m["accuracy"] == pytest.approx(np.mean([v["right"] / 20 for v in per.values()]))
        assert m["fields"]["syntax"] == pytest.approx(
            np.mean([per[u]["accuracy"] for u in per if per[u]["field"] == "syntax"])
        )
    # the published figures of exactly these paradigms, from models_summary.jsonl
    rows = [json.loads(line) for line in (blimp_dir / "models_summary.jsonl").read_text().splitlines() if line.strip()]
    gpt2 = np.mean([r["gpt2"] for r in rows if r.get("UID") in PARADIGMS])
    assert doc["references"]["GPT-2"]["accuracy"] == pytest.approx(gpt2)
    assert {"5-gram", "LSTM", "GPT-2"} <= set(doc["references"])
    assert "5-gram" in result.output and "random-init" in result.output
    # controls score differently from the model (a model that learned nothing would tie with its control)
    assert len({json.dumps(m["paradigms"]) for m in doc["models"]}) == 3


def test_a_run_folder_is_a_curve_headed_by_its_newest_checkpoint(fake_run, blimp_dir):
    doc = blimp_run([fake_run], load_suite(blimp_dir, 5, PARADIGMS[1:]), BlimpConfig())
    assert [(m["run"], m["step"], m["init"]) for m in doc["models"]] == [
        ("fake-bert", 100, "pretrained"),
        ("fake-bert", 200, "pretrained"),
        ("random-init", None, "random"),
    ]
    assert doc["accuracy"] == doc["models"][1]["accuracy"]
    assert doc["notes"] == [
        "no unigram control for fake-bert@100: it records no training shards (give --shards)",
        "no unigram control for fake-bert@200: it records no training shards (give --shards)",
    ]


def _bad_folder(tmp_path: Path, blimp_dir: Path, line: str | None) -> Path:
    folder = tmp_path / "blimp"
    folder.mkdir()
    lines = (blimp_dir / "adjunct_island.jsonl").read_text().splitlines()[:5]
    if line is not None:
        lines[2] = line
    (folder / "adjunct_island.jsonl").write_text("\n".join(lines) + "\n")
    return folder


@pytest.mark.parametrize(
    "line, message",
    [
        (
            '{"sentence_good": "A b.", "field": "syntax", "UID": "adjunct_island"}',
            "adjunct_island.jsonl:3: missing or empty field sentence_bad",
        ),
        ("{not json", "adjunct_island.jsonl:3: not a JSON line"),
        (None, "holds no paradigm file"),
    ],
)
def test_bad_input_is_one_line_and_no_output(fake_run, blimp_dir, tmp_path, line, message):
    folder = _bad_folder(tmp_path, blimp_dir, line) if line is not None else tmp_path / "empty"
    folder.mkdir(exist_ok=True)
    out = tmp_path / "out.json"
    result = CliRunner().invoke(
        app, ["blimp", str(fake_run), "--data", str(folder), "--out", str(out), "--no-progress"]
    )
    assert result.exit_code != 0 and isinstance(result.exception, MapnetError)
    assert message in str(result.exception) and "\n" not in str(result.exception)
    assert not out.exists()


@pytest.mark.parametrize(
    "value, shown", [("50.6", "50.6"), ("-0.1", "-0.1"), ("NaN", "nan"), ("Infinity", "inf"), ("true", None)]
)
def test_a_published_score_outside_0_1_or_not_finite_is_refused_by_file_and_value(
    fake_run, blimp_dir, tmp_path, value, shown
):
    """A percentage, NaN or infinity in models_summary.jsonl was shown as a published figure ("5-gram 5060%")."""
    folder = _bad_folder(tmp_path, blimp_dir, None)
    row = {
        "UID": "adjunct_island",
        "linguistics_term": "island_effects",
        "ngram": 0.5,
        "lstm": 0.6,
        "txl": 0.7,
        "gpt2": 0.8,
    }
    (folder / "models_summary.jsonl").write_text(json.dumps(row).replace('"ngram": 0.5', f'"ngram": {value}') + "\n")
    out = tmp_path / "out.json"
    result = CliRunner().invoke(
        app, ["blimp", str(fake_run), "--data", str(folder), "--out", str(out), "--no-progress"]
    )
    assert isinstance(result.exception, MapnetError), result.output
    text = str(result.exception)
    assert text.startswith(f"{folder / 'models_summary.jsonl'}:1: ngram of adjunct_island is ") and "\n" not in text
    assert (f"is {shown}, not an accuracy" if shown else "is not a number") in text, text
    assert not out.exists() and "scoring" not in result.output


def test_unknown_paradigm_and_method_are_refused(fake_run, blimp_dir, tmp_path):
    with pytest.raises(MapnetError, match="has no paradigm nope"):
        load_suite(blimp_dir, 0, ["nope"])
    result = CliRunner().invoke(
        app, ["blimp", str(fake_run), "--data", str(blimp_dir), "--out", str(tmp_path / "o.json"), "--method", "l2r"]
    )
    assert result.exit_code != 0 and "method must be one of pll, word-l2r" in str(result.exception)


def test_an_exported_folder_scores_as_its_checkpoint(pretrained_tiny, blimp_dir, tmp_path):
    """The export's tokenizer.json reproduces the run's cleaning and its weights map back exactly: the same ids,
    the same scores, pair for pair. Its training shards are not recorded there: --shards gives them."""
    from mapnet_cli.export import export
    from mapnet_cli.train.run_loader import recorded_shards

    folder = export(pretrained_tiny, tmp_path / "hf")
    suite = load_suite(blimp_dir, 10, PARADIGMS)
    ckpt, hf = find_targets([pretrained_tiny])[-1], find_targets([folder])[0]
    assert hf.step is None and hf.label == "hf" and hf.shards is None
    sentences = suite.sentences()
    assert [s.tolist() for s in hf.text.tokenise(sentences)] == [s.tolist() for s in ckpt.text.tokenise(sentences)]
    shards = recorded_shards(pretrained_tiny / "run.json")
    a = blimp_run([pretrained_tiny], suite)
    b = blimp_run([folder], suite, shards=shards)
    strip = lambda doc: [{k: m[k] for k in ("init", "accuracy", "paradigms")} for m in doc["models"]]  # noqa: E731
    assert strip(a) == strip(b)


def test_the_unigram_control_refuses_shards_of_another_tokenizer(fake_run, pretrained_tiny, blimp_dir, tmp_path):
    """Refused before any model is scored, so no partial output is written."""
    from mapnet_cli.train.run_loader import recorded_shards

    other = recorded_shards(pretrained_tiny / "run.json")
    with pytest.raises(MapnetError, match="made with another tokenizer"):
        blimp_run([fake_run], load_suite(blimp_dir, 2, PARADIGMS[:1]), BlimpConfig(random_control=False), shards=other)
    out = tmp_path / "out.json"
    result = CliRunner().invoke(
        app,
        [
            "blimp",
            str(fake_run),
            "--data",
            str(blimp_dir),
            "--out",
            str(out),
            "--pairs",
            "2",
            "--paradigms",
            PARADIGMS[0],
            "--shards",
            str(other),
            "--no-progress",
        ],
    )
    assert result.exit_code != 0 and "made with another tokenizer" in str(result.exception)
    assert not out.exists()


def test_a_folder_without_an_mlm_head_is_refused_before_scoring(pretrained_tiny, blimp_dir, tmp_path):
    """A bare encoder (a BertModel: no cls.predictions.* or lm_head.*) has no predictions to score: one line, no
    output."""
    from safetensors.torch import load_file, save_file

    from mapnet_cli.export import export

    folder = export(pretrained_tiny, tmp_path / "hf")
    weights = load_file(folder / "model.safetensors")
    save_file(
        {k: v for k, v in weights.items() if not k.startswith(("cls.", "lm_head."))}, folder / "model.safetensors"
    )
    out = tmp_path / "out.json"
    first = find_targets([pretrained_tiny])[-1].path  # scored first: the refusal must come before it is
    result = CliRunner().invoke(
        app,
        [
            "blimp",
            str(first),
            str(folder),
            "--data",
            str(blimp_dir),
            "--out",
            str(out),
            "--pairs",
            "2",
            "--paradigms",
            PARADIGMS[0],
            "--no-progress",
        ],
    )
    assert result.exit_code != 0 and "has no MLM head" in str(result.exception)
    assert not out.exists()


# ---------------------------------------------------------------- folders a user hands us: one checked reader
def _damaged_export(fake_run: Path, tmp_path: Path, how: str) -> Path:
    from mapnet_cli.export import export

    folder = export(fake_run, tmp_path / "hf")
    if how == "truncated-weights":
        data = (folder / "model.safetensors").read_bytes()
        (folder / "model.safetensors").write_bytes(data[: len(data) // 2])
    elif how == "broken-config":
        (folder / "config.json").write_text('{"model_type": "bert", ')
    elif how == "no-tokenizer":
        (folder / "tokenizer.json").unlink()
    elif how in ("config-of-other-widths", "config-of-more-layers"):  # weights that do not fit config.json
        config = json.loads((folder / "config.json").read_text())
        key = "intermediate_size" if how == "config-of-other-widths" else "num_hidden_layers"
        (folder / "config.json").write_text(json.dumps({**config, key: config[key] * 2}))
    return folder


@pytest.mark.parametrize(
    "how, message",
    [
        ("truncated-weights", "model.safetensors is not a readable safetensors file"),
        ("broken-config", "config.json is not readable JSON"),
        ("no-tokenizer", "has no tokenizer.json"),
        # found when its weights were loaded for scoring: after the good checkpoint listed before it had been scored
        ("config-of-other-widths", "encoder.blocks.0.ffn_in.weight has shape (64, 32), config.json implies (128, 32)"),
        ("config-of-more-layers", "model.safetensors lacks bert.encoder.layer.1.attention.self.query.weight"),
    ],
)
def test_a_damaged_exported_folder_is_named_in_one_line_before_any_scoring(fake_run, blimp_dir, tmp_path, how, message):
    """The exported folder goes through --init-from's reader (`init_from.open_source`): a truncated model.safetensors
    was a 48-line traceback, a broken config.json "an incomplete checkpoint (no COMPLETE marker)", a missing
    tokenizer.json blamed on --init-from. Listed after a good checkpoint, refused before it is scored."""
    folder = _damaged_export(fake_run, tmp_path, how)
    out = tmp_path / "out.json"
    result = CliRunner().invoke(
        app,
        [
            "blimp",
            str(fake_run),
            str(folder),
            "--data",
            str(blimp_dir),
            "--out",
            str(out),
            "--pairs",
            "2",
            "--paradigms",
            PARADIGMS[0],
            "--no-progress",
        ],
    )
    assert isinstance(result.exception, MapnetError), result.output
    text = str(result.exception)
    assert message in text and str(folder) in text and "\n" not in text
    assert "--init-from" not in text and "COMPLETE" not in text
    assert "scoring" not in result.output and not out.exists()


def test_an_export_with_another_tokenizer_is_refused_by_both_sizes_before_any_scoring(fake_run, blimp_dir, tmp_path):
    """An export whose tokenizer.json was swapped for a larger one reached torch as IndexError on the first sentence
    with an id past the embedding table, after the models listed before it had been scored."""
    from mapnet_cli.data.bpe import save_tokenizer, train_tokenizer
    from mapnet_cli.export import export

    folder = export(fake_run, tmp_path / "hf")
    rows = json.loads((folder / "config.json").read_text())["vocab_size"]
    sentences = tmp_path / "sentences.txt"
    sentences.write_text("\n".join(load_suite(blimp_dir, 50, PARADIGMS).sentences()), encoding="utf-8")
    save_tokenizer(train_tokenizer([sentences], vocab_size=1000, min_frequency=1), folder / "tokenizer.json")
    out = tmp_path / "out.json"
    result = CliRunner().invoke(
        app,
        [
            "blimp",
            str(fake_run),
            str(folder),
            "--data",
            str(blimp_dir),
            "--out",
            str(out),
            "--pairs",
            "5",
            "--paradigms",
            PARADIGMS[0],
            "--no-progress",
        ],
    )
    assert isinstance(result.exception, MapnetError), result.output
    assert str(result.exception).startswith(
        f"{folder / 'tokenizer.json'} gives token ids up to 999 (1000 tokens), but "
        f"the model in {folder} has {rows} embedding rows (ids 0-{rows - 1}): "
    ), result.exception
    assert "scoring" not in result.output and not out.exists()


def test_a_truncated_export_is_exit_2_and_one_line_from_the_shell(fake_run, blimp_dir, tmp_path):
    import subprocess
    import sys

    folder = _damaged_export(fake_run, tmp_path, "truncated-weights")
    out = tmp_path / "out.json"
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "mapnet_cli.cli",
            "blimp",
            str(folder),
            "--data",
            str(blimp_dir),
            "--out",
            str(out),
            "--pairs",
            "2",
            "--paradigms",
            PARADIGMS[0],
            "--no-progress",
        ],
        capture_output=True,
        text=True,
        env={**__import__("os").environ, "OMP_NUM_THREADS": "1"},
    )
    assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr
    assert [line for line in proc.stderr.splitlines() if line.strip()] == [proc.stderr.strip()]
    assert proc.stderr.startswith("error:") and not out.exists()


def test_checkpoint_readers_call_an_exported_folder_what_it_is(fake_run, tmp_path):
    """probe, finetune-glue, export ... read mapnet checkpoints: an exported folder is named as one, not as a
    checkpoint that stopped while being written."""
    from mapnet_cli.export import export
    from mapnet_cli.model.checkpoint import resolve_checkpoint

    folder = export(fake_run, tmp_path / "hf")
    with pytest.raises(MapnetError, match="is a Hugging Face model folder .*not a mapnet run or checkpoint"):
        resolve_checkpoint(folder)
    (folder / "config.json").write_text("{")
    with pytest.raises(MapnetError, match="config.json is not readable JSON"):
        resolve_checkpoint(folder)
    (folder / "config.json").write_text('{"hidden_size": 128}')  # JSON, but neither kind's
    for read in (lambda: resolve_checkpoint(folder), lambda: find_targets([folder])):
        with pytest.raises(MapnetError, match="is neither a mapnet checkpoint's .* nor a Hugging Face model's"):
            read()


# ---------------------------------------------------------------- pairs of one sentence twice
def test_identical_pairs_are_counted_and_named_and_a_paradigm_of_nothing_else_is_refused(fake_run, blimp_dir, tmp_path):
    """BLiMP's own passive_1 has two pairs of one sentence twice: every model ties on them and they count wrong,
    as in the published figures; `identical` counts them beside `ties` and a note names their lines. A paradigm
    made only of such pairs could only score 0%: refused, naming the file."""
    suite = load_suite(blimp_dir, 0, ["passive_1"])
    assert suite.paradigms[0].identical == (325, 811)
    assert suite.identical_notes()[0].startswith(
        "passive_1: 2 of 1000 pairs have two identical sentences (lines 325, 811)"
    )
    # Scores per distinct sentence, looked up as the scorer does: the two pairs tie whatever the model.
    scorer = Scorer(suite)
    scores = np.random.default_rng(0).normal(size=len(scorer.sentences))
    entry = summarise(suite, scores[scorer.good_at], scores[scorer.bad_at])["paradigms"]["passive_1"]
    assert entry["identical"] == 2 and entry["ties"] == 2 and entry["right"] + entry["ties"] <= 1000
    folder = tmp_path / "same"
    folder.mkdir()
    row = {"sentence_good": "The cat sat.", "sentence_bad": "The cat sat. ", "field": "syntax", "UID": "same"}
    (folder / "same.jsonl").write_text((json.dumps(row) + "\n") * 3)
    out = tmp_path / "out.json"
    result = CliRunner().invoke(
        app, ["blimp", str(fake_run), "--data", str(folder), "--out", str(out), "--no-progress"]
    )
    assert isinstance(result.exception, MapnetError)
    assert "same.jsonl: every pair (3) has two identical sentences" in str(result.exception) and not out.exists()


def test_a_model_too_short_for_the_sentences_is_refused_before_any_is_scored(fake_run, blimp_dir, tmp_path):
    """fake_run reads 64 positions; passive_1 has longer sentences in its word-level tokens. Found while scoring, the
    refusal came after every model listed before it had been scored."""
    out = tmp_path / "out.json"
    result = CliRunner().invoke(
        app,
        [
            "blimp",
            str(fake_run),
            "--data",
            str(blimp_dir),
            "--out",
            str(out),
            "--paradigms",
            "passive_1",
            "--no-progress",
        ],
    )
    assert isinstance(result.exception, MapnetError), result.output
    assert "fake-bert@100 reads 64 positions, its longest sentence is" in str(result.exception)
    assert "scoring" not in result.output and not out.exists()


def _blimp(fake_run: Path, blimp_dir: Path, out: Path, *flags: str):
    return CliRunner().invoke(
        app,
        [
            "blimp",
            str(fake_run),
            "--data",
            str(blimp_dir),
            "--out",
            str(out),
            "--pairs",
            "5",
            "--paradigms",
            ",".join(PARADIGMS[1:]),
            "--no-progress",
            *flags,
        ],
    )


def test_resume_keeps_the_models_already_scored_and_scores_the_rest(fake_run, blimp_dir, tmp_path, monkeypatch):
    # A run stopped after its first model left a file with "complete": false; --resume must give the document a
    # run from scratch gives, scoring only what the file lacks.
    full = tmp_path / "full.json"
    assert _blimp(fake_run, blimp_dir, full).exit_code == 0
    whole = json.loads(full.read_text())
    stopped = tmp_path / "stopped.json"
    stopped.write_text(json.dumps({**whole, "complete": False, "models": whole["models"][:1]}))
    scored = []
    original = Scorer.score
    monkeypatch.setattr(
        Scorer, "score", lambda self, t, progress=lambda _: None: scored.append(t.label) or original(self, t, progress)
    )
    result = _blimp(fake_run, blimp_dir, stopped, "--resume")
    assert result.exit_code == 0, result.output
    assert scored == ["fake-bert@200", "random-init"]
    resumed = json.loads(stopped.read_text())
    drop = lambda doc: [{k: v for k, v in m.items() if k != "seconds"} for m in doc["models"]]  # noqa: E731
    assert resumed["complete"] and drop(resumed) == drop(whole) and resumed["accuracy"] == whole["accuracy"]
    # A complete file scores nothing again; a missing one is started.
    scored.clear()
    assert _blimp(fake_run, blimp_dir, stopped, "--resume").exit_code == 0 and scored == []
    assert _blimp(fake_run, blimp_dir, tmp_path / "new.json", "--resume").exit_code == 0 and len(scored) == 3


def test_resume_keeps_models_it_has_not_reached_yet_and_knows_models_by_their_weights(
    fake_run, blimp_dir, tmp_path, monkeypatch
):
    import shutil

    full = tmp_path / "full.json"
    assert _blimp(fake_run, blimp_dir, full).exit_code == 0
    whole = json.loads(full.read_text())
    # Only the control was kept (it comes last), and the resumed scoring stops after its first model: the file must
    # still hold the control.
    stopped = tmp_path / "stopped.json"
    stopped.write_text(json.dumps({**whole, "complete": False, "models": whole["models"][-1:]}))
    original, scored = Scorer.score, []

    def score_once(self, t, progress=lambda _: None):
        if scored:
            raise KeyboardInterrupt  # the job is stopped while scoring its second model
        scored.append(t.label)
        return original(self, t, progress)

    monkeypatch.setattr(Scorer, "score", score_once)
    _blimp(fake_run, blimp_dir, stopped, "--resume")
    left = json.loads(stopped.read_text())
    assert not left["complete"] and [m["label"] for m in left["models"]] == ["fake-bert@100", "random-init"]
    # A run copied elsewhere is the same models (nothing scored again); an entry of the same label with other weights
    # is not (scored again).
    monkeypatch.setattr(
        Scorer, "score", lambda self, t, progress=lambda _: None: scored.append(t.label) or original(self, t, progress)
    )
    scored.clear()
    copy = tmp_path / "elsewhere" / "fake-bert"
    shutil.copytree(fake_run, copy)
    assert _blimp(copy, blimp_dir, full, "--resume").exit_code == 0 and scored == []
    other = {**whole, "models": [{**whole["models"][0], "sha256": "0" * 64}, *whole["models"][1:]]}
    full.write_text(json.dumps(other))
    assert _blimp(fake_run, blimp_dir, full, "--resume").exit_code == 0 and scored == ["fake-bert@100"]


def test_resume_with_fewer_models_keeps_the_results_of_those_not_named_again(fake_run, blimp_dir, tmp_path):
    """`blimp RUN` then `blimp RUN/checkpoints/step-100 --resume`: fake-bert@200's result was dropped from the file."""
    out = tmp_path / "b.json"
    assert _blimp(fake_run, blimp_dir, out).exit_code == 0
    whole = json.loads(out.read_text())
    step_100 = sorted((fake_run / "checkpoints").glob("step-*"))[0]
    result = _blimp(step_100, blimp_dir, out, "--resume")
    assert result.exit_code == 0, result.output
    resumed = json.loads(out.read_text())
    by_label = lambda doc: {m["label"]: (m["sha256"], m["accuracy"]) for m in doc["models"]}  # noqa: E731
    assert by_label(resumed) == by_label(whole) and resumed["complete"]
    assert "kept 1 result(s) of models not named again: fake-bert@200" in result.output
    assert result.output.count("fake-bert@200") >= 2  # in the printed table too, beside the note


@pytest.mark.parametrize(
    "flags, content, message",
    [
        (("--method", "word-l2r"), None, "was scored with other method and settings than asked"),
        (("--pairs", "4"), None, "was scored with other pairs than asked"),
        ((), "{not json", "is not readable JSON"),
        ((), '{"schema": "something else"}', "is not a BLiMP file of this mapnet"),
        ((), "scorer-2", "was scored with other scorer (version 2, this one 1)"),
        ((), "damaged", "model entry 2 is damaged"),
        (("--overwrite",), None, "--resume keeps what --out holds and --overwrite replaces it"),
    ],
)
def test_resume_refuses_a_file_of_another_scoring_in_one_line(fake_run, blimp_dir, tmp_path, flags, content, message):
    out = tmp_path / "b.json"
    assert _blimp(fake_run, blimp_dir, out).exit_code == 0
    doc = json.loads(out.read_text())
    if content == "scorer-2":
        out.write_text(json.dumps({**doc, "scorer": 2}))
    elif content == "damaged":  # an entry without its per-paradigm scores, and one that is not an object at all
        out.write_text(
            json.dumps({**doc, "models": [doc["models"][0], {"sha256": "x", "init": "random", "accuracy": 0.5}, 3]})
        )
    elif content is not None:
        out.write_text(content)
    before = out.read_text()
    result = _blimp(fake_run, blimp_dir, out, "--resume", *flags)
    assert result.exit_code != 0 and isinstance(result.exception, MapnetError), result.output
    assert message in str(result.exception) and "\n" not in str(result.exception)
    assert out.read_text() == before  # nothing written over it
