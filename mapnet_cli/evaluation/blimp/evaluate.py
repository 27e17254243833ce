"""Score BLiMP for a list of models and their controls: accuracies per paradigm, per field and overall.

    suite = load_suite(Path("../shared/data/blimp"))
    doc = blimp_run([Path("runs/tiny")], suite, BlimpConfig(method="word-l2r"), out_path=Path("blimp.json"))
    doc["accuracy"]                                   # the newest checkpoint of the first path, mean over paradigms
    [(m["label"], m["accuracy"]) for m in doc["models"]]   # every checkpoint, then the controls

A pair is right only when the grammatical sentence scores strictly higher: a tie is wrong, or a model
that gives every sentence the same score (or the unigram model on a pair of reordered words) would get
credit for knowing nothing. Accuracy is the mean over paradigms of each paradigm's share of right pairs
(BLiMP's convention, so paradigms weigh the same); a field's is the mean over its paradigms.
The published models' figures (`models_summary.jsonl`) are averaged over exactly the paradigms scored.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

from ...errors import MapnetError
from . import SCORER_VERSION
from .data import REFERENCE_MODELS, Suite
from .models import Target, control_targets, find_targets
from .scoring import METHODS, count_rows, pll_scores, unigram_scores

SCHEMA = "mapnet.blimp/1"
ENTRY_KEYS = ("sha256", "init", "accuracy", "fields", "paradigms")  # what a kept entry must hold to be reused


@dataclass(frozen=True)
class BlimpConfig:
    method: str = "pll"  # "pll" (Salazar et al. 2020) or "word-l2r" (Kauf & Ivanova 2023)
    max_tokens: int = 16384  # tokens per forward pass (rows of one length batched up to this)
    random_control: bool = True  # score each architecture with random weights too
    unigram_control: bool = True  # score the training shards' unigram model too (needs the shards)

    def problems(self) -> list[str]:
        out = []
        if self.method not in METHODS:
            out.append(f"method must be one of {', '.join(METHODS)} (got {self.method!r})")
        if self.max_tokens < 1:
            out.append(f"max_tokens must be >= 1 (got {self.max_tokens})")
        return out


def summarise(suite: Suite, good: np.ndarray, bad: np.ndarray) -> dict:
    """{accuracy, fields, paradigms} from the scores of each pair's two sentences (suite order)."""
    paradigms, fields = {}, {}
    lo = 0
    for p in suite.paradigms:
        g, b = good[lo : lo + len(p)], bad[lo : lo + len(p)]
        lo += len(p)
        right = int((g > b).sum())
        paradigms[p.uid] = {
            "accuracy": right / len(p),
            "right": right,
            "ties": int((g == b).sum()),
            "pairs": len(p),
            "identical": len(p.identical),
            "field": p.field,
        }
        fields.setdefault(p.field, []).append(right / len(p))
    return {
        "accuracy": float(np.mean([v["accuracy"] for v in paradigms.values()])),
        "fields": {f: float(np.mean(v)) for f, v in sorted(fields.items())},
        "paradigms": paradigms,
    }


def references(suite: Suite) -> dict:
    """The published models' mean accuracy (and per field) over the scored paradigms, where the summary has them all."""
    out = {}
    for key, name in REFERENCE_MODELS.items():
        table = suite.references.get(key, {})
        if not all(p.uid in table for p in suite.paradigms):
            continue
        fields = {}
        for p in suite.paradigms:
            fields.setdefault(p.field, []).append(table[p.uid])
        out[name] = {
            "accuracy": float(np.mean([table[p.uid] for p in suite.paradigms])),
            "fields": {f: float(np.mean(v)) for f, v in sorted(fields.items())},
            "paradigms": {p.uid: table[p.uid] for p in suite.paradigms},
        }
    return out


class Scorer:
    """Scores models on one suite: each text path tokenises the suite once, then any number of models.

    scorer = Scorer(suite, cfg)
    scorer.tokenise(targets)                         # before any model runs: text problems surface first
    entry = scorer.score(target, progress=advance)   # {accuracy, fields, paradigms, seconds, ...}
    """

    def __init__(self, suite: Suite, cfg: BlimpConfig = BlimpConfig(), device=None):
        problems = cfg.problems()
        if problems:
            raise MapnetError("invalid BLiMP settings: " + "; ".join(problems))
        self.suite, self.cfg, self.device = suite, cfg, device
        self.sentences = suite.sentences()
        where = {s: i for i, s in enumerate(self.sentences)}
        self.good_at = np.array([where[s] for p in suite.paradigms for s in p.good], dtype=np.int64)
        self.bad_at = np.array([where[s] for p in suite.paradigms for s in p.bad], dtype=np.int64)
        self.ids: dict[str, list[np.ndarray]] = {}

    def tokenise(self, targets: list[Target], note: Callable[[str], None] = lambda _: None) -> None:
        for t in targets:
            if t.text.key not in self.ids:
                note(f"tokenising {len(self.sentences):,} sentences for {t.label}")
                self.ids[t.text.key] = t.text.tokenise(self.sentences)

    def check_fits(self, targets: list[Target]) -> None:
        """Refuse, before any model is scored, a model whose positions cannot hold the longest sentence (+ [CLS],
        [SEP]) of its text path: found while scoring, it came after every model before it was scored."""
        too_short = []
        for t in targets:
            longest = max((len(s) for s in self.ids[t.text.key]), default=0) + 2
            limit = t.arch.get("max_position")
            if t.init != "unigram" and limit is not None and longest > limit:
                too_short.append(f"{t.label} reads {limit} positions, its longest sentence is {longest} tokens")
        if too_short:
            raise MapnetError(
                f"BLiMP sentences too long for the model ([CLS] and [SEP] included): {'; '.join(too_short)}; "
                "score other paradigms (--paradigms)"
            )

    def rows(self, targets: list[Target]) -> int:
        """Masked copies that scoring `targets` runs through an encoder (`tokenise` them first)."""
        return sum(count_rows(self.ids[t.text.key]) for t in targets if t.init != "unigram")

    def score(self, t: Target, progress: Callable[[int], None] = lambda _: None) -> dict:
        self.tokenise([t])
        t0 = time.perf_counter()
        seqs = self.ids[t.text.key]
        if t.init == "unigram":
            scores = unigram_scores(t.build(), seqs)
        else:
            try:
                scores = pll_scores(
                    t.build(),
                    seqs,
                    t.text.cls_id,
                    t.text.sep_id,
                    t.text.mask_id,
                    t.text.word_start,
                    self.cfg.method,
                    self.cfg.max_tokens,
                    self.device,
                    progress,
                )
            except ValueError as exc:
                raise MapnetError(f"{t.label}: {exc}") from None
        return {
            "label": t.label,
            "run": t.run,
            "step": t.step,
            "init": t.init,
            "sha256": t.sha,
            "path": str(t.path),
            **summarise(self.suite, scores[self.good_at], scores[self.bad_at]),
            "seconds": round(time.perf_counter() - t0, 3),
        }

    def describe(self) -> dict:
        s = self.suite
        return {
            "folder": str(s.folder),
            "sha256": s.sha256,
            "paradigms": len(s.paradigms),
            "pairs_per_paradigm": s.pairs_per_paradigm,
            "pairs": s.pairs,
            "sentences": len(self.sentences),
        }


def kept_scores(kept: dict, cfg: BlimpConfig, data: dict, where: str) -> dict[tuple[str, str], dict]:
    """{(sha256, init): entry} of an earlier document of this command, to be reused rather than scored again. A
    model is known by its identity (a checkpoint's weights hash; a control's architecture, tokenizer and seed or its
    shards' manifest), so an entry is the same model's score whatever folder it was read from; it counts only when
    the document scored the same pairs (data, their sha256 included) by the same method and settings."""
    if not isinstance(kept, dict) or kept.get("schema") != SCHEMA or not isinstance(kept.get("models"), list):
        raise MapnetError(
            f"{where} is not a BLiMP file of this mapnet (schema {SCHEMA}): pass --overwrite to replace it"
        )

    def pairs(d: object) -> object:  # the suite by its contents: the folder it was read from may have moved
        return {k: v for k, v in d.items() if k != "folder"} if isinstance(d, dict) else d

    asked = {"method": (cfg.method, "method"), "config": (asdict(cfg), "settings"), "data": (pairs(data), "pairs")}
    differ = [
        words
        for key, (ours, words) in asked.items()
        if (pairs(kept.get(key)) if key == "data" else kept.get(key)) != ours
    ]
    if kept.get("scorer", 1) != SCORER_VERSION:
        differ.append(f"scorer (version {kept.get('scorer')}, this one {SCORER_VERSION})")
    if differ:
        raise MapnetError(
            f"{where} was scored with other {' and '.join(differ)} than asked: resuming would mix two "
            "measurements; pass --overwrite to start again"
        )
    bad = [
        i
        for i, m in enumerate(kept["models"])
        if not isinstance(m, dict)
        or any(k not in m for k in ENTRY_KEYS)
        or not isinstance(m["fields"], dict)
        or not isinstance(m["paradigms"], dict)
    ]
    if bad:
        raise MapnetError(
            f"{where}: model entry {bad[0] + 1} is damaged (it needs {', '.join(ENTRY_KEYS)}); "
            "pass --overwrite to replace the file"
        )
    return {(m["sha256"], m["init"]): m for m in kept["models"] if m["accuracy"] is not None}


def blimp_run(
    paths: list[Path],
    suite: Suite,
    cfg: BlimpConfig = BlimpConfig(),
    out_path: Path | None = None,
    shards: Path | None = None,
    device=None,
    note: Callable[[str], None] = lambda _: None,
    progress: Callable[[int, int], None] = lambda done, total: None,
    kept: dict | None = None,
) -> dict:
    """Score every checkpoint `paths` name, then their controls; the document is written to `out_path`
    (atomically, "complete": false until the last model) after every model when given.
    `progress(rows done, rows in all)` counts masked copies run through an encoder. `kept`: an earlier document
    of the same scoring (`kept_scores`), whose models are taken as they are instead of scored again (a resume)."""
    from ...atomic import json_safe, write_json

    scorer = Scorer(suite, cfg, device)
    reuse = {} if kept is None else kept_scores(kept, cfg, scorer.describe(), str(out_path or "the earlier file"))
    targets = find_targets(paths)
    if not targets:
        raise MapnetError("nothing to score: no checkpoint in " + ", ".join(map(str, paths)))
    controls, links, notes = control_targets(targets, shards, cfg.random_control, cfg.unigram_control)
    notes = suite.identical_notes() + notes
    for text in notes:
        note(text)
    todo = targets + controls
    scorer.tokenise(todo, note)
    scorer.check_fits(todo)
    total, done = scorer.rows(todo), 0

    def advance(rows: int) -> None:
        nonlocal done
        done += rows
        progress(done, total)

    label_of = {t.sha: t.label for t in todo}
    # The headline: the newest checkpoint of the first path (a run's last step, or the one folder given).
    first = max((t for t in targets if t.origin == 0), key=lambda t: -1 if t.step is None else t.step)
    doc = {
        "schema": SCHEMA,
        "complete": False,
        "accuracy": None,
        "headline": first.label,
        "method": cfg.method,
        "config": asdict(cfg),
        "data": scorer.describe(),
        "scorer": SCORER_VERSION,
        "references": references(suite),
        "notes": notes,
        "models": [],
    }

    def kept_entry(t: Target) -> dict:
        entry = {**reuse[t.sha, t.init], "label": t.label, "run": t.run, "step": t.step, "path": str(t.path)}
        entry.pop("controls", None)
        if t.sha in links:
            entry["controls"] = {k: label_of[v] for k, v in links[t.sha].items()}
        return entry

    # The file's models not named again (another run, checkpoints left out this time) stay in it, after the
    # asked ones: a resume with fewer paths must not drop results. One of a label named again, with other
    # weights, is that path's old result and is replaced.
    asked, labels = {(t.sha, t.init) for t in todo}, {t.label for t in todo}
    others = [m for key, m in reuse.items() if key not in asked and m.get("label") not in labels]
    if others:
        named = ", ".join(str(m.get("label")) for m in others)
        note(f"kept {len(others)} result(s) of models not named again: {named}")

    progress(0, total)
    for i, t in enumerate(todo):
        if (t.sha, t.init) in reuse:  # its rows count as done: the bar and ETA are about what is left
            note(f"kept {t.label} ({t.init}): already scored")
            entry = kept_entry(t)
            advance(0 if t.init == "unigram" else count_rows(scorer.ids[t.text.key]))
        else:
            note(f"scoring {t.label} ({t.init})")
            entry = scorer.score(t, advance)
            if t.sha in links:
                entry["controls"] = {k: label_of[v] for k, v in links[t.sha].items()}
        doc["models"].append(entry)
        if t is first:
            doc["accuracy"] = entry["accuracy"]
        if out_path is not None:  # with the kept models still ahead: a stop now must not lose them
            ahead = [kept_entry(u) for u in todo[i + 1 :] if (u.sha, u.init) in reuse]
            write_json(Path(out_path), json_safe({**doc, "models": doc["models"] + ahead + others}))
    doc["models"] += others
    doc["complete"] = True
    if out_path is not None:
        write_json(Path(out_path), json_safe(doc))
    return doc


__all__ = ["SCHEMA", "SCORER_VERSION", "BlimpConfig", "Scorer", "blimp_run", "kept_scores", "summarise", "references"]
