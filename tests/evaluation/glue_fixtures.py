"""Helpers for GLUE tests: small official-layout TSVs and fake (random-weight) checkpoints.

Imported by name (`from glue_fixtures import ...`): pytest puts this folder on sys.path.
"""

from __future__ import annotations

from pathlib import Path

from trained_runs import pretrain_tiny  # noqa: F401  (moved to tests/trained_runs.py; kept importable from here)

from mapnet_cli.evaluation.glue.tasks import TASKS

MNLI_DEV_HEADER = (
    "index",
    "promptID",
    "pairID",
    "genre",
    "sentence1_binary_parse",
    "sentence2_binary_parse",
    "sentence1_parse",
    "sentence2_parse",
    "sentence1",
    "sentence2",
    "label1",
    "label2",
    "label3",
    "label4",
    "label5",
    "gold_label",
)


def write_tsv(path: Path, header, rows, bom: bool = False) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    lines = ([("\ufeff" if bom else "") + "\t".join(header)] if header else []) + ["\t".join(map(str, r)) for r in rows]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def official_rows(task: str, n: int, split: str = "train") -> tuple[tuple, list[tuple]]:
    """n rows in the official GLUE layout of `task` (header, rows), labels cycling through the label set."""
    words = ["the cat sat", "a dog ran far", "it rained all day", "we like green tea", "they left early"]
    a = lambda i: f"{words[i % 5]} number {i} ."  # noqa: E731
    b = lambda i: f"{words[(i + 2) % 5]} again ."  # noqa: E731
    spec = TASKS[task]
    lab = lambda i: spec.labels[i % len(spec.labels)] if spec.labels else f"{(i * 0.7) % 5:.3f}"  # noqa: E731
    if task == "CoLA":
        return None, [("gj04", lab(i), "" if lab(i) == "1" else "*", a(i)) for i in range(n)]
    if task == "SST-2":
        return spec.header, [(a(i) + " ", lab(i)) for i in range(n)]
    if task == "MRPC":
        return spec.header, [(lab(i), 1000 + i, 2000 + i, a(i), b(i)) for i in range(n)]
    if task == "STS-B":
        return spec.header, [
            (i, "main-captions", "MSRvid", "2012test", f"{i:04d}", "none", "none", a(i), b(i), lab(i)) for i in range(n)
        ]
    if task == "QQP":
        return spec.header, [(i, 2 * i + 1, 2 * i + 2, a(i) + "?", b(i) + "?", lab(i)) for i in range(n)]
    if task == "MNLI":
        parse = "( ( x ) )"
        if split == "train":
            return spec.header, [
                (i, i, f"{i}e", "fiction", parse, parse, parse, parse, a(i), b(i), lab(i), lab(i)) for i in range(n)
            ]
        return MNLI_DEV_HEADER, [
            (
                i,
                i,
                f"{i}e",
                "fiction",
                parse,
                parse,
                parse,
                parse,
                a(i),
                b(i),
                lab(i),
                lab(i),
                lab(i + 1),
                lab(i),
                lab(i),
                lab(i),
            )
            for i in range(n)
        ]
    if task in ("QNLI", "RTE", "WNLI"):
        return spec.header, [(i, a(i), b(i), lab(i)) for i in range(n)]
    raise KeyError(task)


def make_glue_dir(root: Path, tasks=tuple(TASKS), n_train: int = 24, n_dev: int = 12) -> Path:
    for task in tasks:
        spec = TASKS[task]
        header, rows = official_rows(task, n_train, "train")
        write_tsv(root / task / "train.tsv", header, rows, bom=task == "MRPC")
        for _, name in spec.dev:
            header, rows = official_rows(task, n_dev, "dev")
            write_tsv(root / task / name, header, rows, bom=task == "MRPC")
    return root


def make_checkpoint(
    run_dir: Path,
    steps=(100,),
    seed: int = 0,
    tokenizer_texts=None,
    hidden: int = 32,
    layers: int = 1,
    max_position: int = 64,
) -> list[Path]:
    """A run folder with random-weight checkpoints at `steps`, a real BPE tokenizer and settings."""
    import torch

    from mapnet_cli import settings as settings_mod
    from mapnet_cli.atomic import sha256_file
    from mapnet_cli.data.bpe import save_tokenizer, train_tokenizer
    from mapnet_cli.model.bert import BertConfig, BertForMLM
    from mapnet_cli.model.checkpoint import save_checkpoint

    run_dir.mkdir(parents=True, exist_ok=True)
    corpus = run_dir / "corpus.txt"
    texts = tokenizer_texts or [official_rows("RTE", 50)[1][i][1].lower() for i in range(50)]
    corpus.write_text("\n".join(texts) + "\n", encoding="utf-8")
    tok = train_tokenizer([corpus], vocab_size=300, min_frequency=1)
    tok_path = run_dir / "tokenizer.json"
    save_tokenizer(tok, tok_path)
    cfg = BertConfig(
        vocab_size=tok.get_vocab_size(),
        layers=layers,
        hidden=hidden,
        heads=2,
        intermediate=2 * hidden,
        max_position=max_position,
    )
    settings = settings_mod.resolve(
        assignments=[
            f"model.hidden={hidden}",
            f"model.layers={layers}",
            "model.heads=2",
            f"model.max_position={max_position}",
            f"shard.max_seq_len={max_position}",
        ]
    )
    out = []
    for i, step in enumerate(steps):
        torch.manual_seed(seed * 1000 + i)
        model = BertForMLM(cfg)
        out.append(
            save_checkpoint(run_dir, step, {"": model}, {}, cfg, settings.to_toml(), tok_path, sha256_file(tok_path))
        )
    return out
