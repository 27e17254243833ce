"""Does an exported tokenizer read text as mapnet does? Ids on 2,000 real sentences, export against mapnet's pipeline.

    uv run python experiments/export-text-parity/export_text_parity.py runs/real-text/prep \\
        --out experiments/export-text-parity/real-text-8192.json      # a preprocessed corpus: its tokenizer + settings
    uv run python experiments/export-text-parity/export_text_parity.py runs/base/checkpoints/step-00400000   # a
    checkpoint: settings.toml

mapnet's pipeline is `TextEncoder` (finetune-glue's, probe's: `data/cleaning.Cleaner`, then the tokenizer); the
export is `AutoTokenizer.from_pretrained` on the files `mapnet export` writes (`export.write_tokenizer`), built
here from the same tokenizer.json and the same recorded preprocess settings. The sentences are
tests/real_text.py's sample (GLUE as released, raw Wikipedia and book sentences, BLiMP; fixed seed), the one
the acceptance test reads. Also measured: the export as it was before issue 36 (the post-processor, and a
Lowercase normaliser only when no vocabulary piece holds an upper-case letter), for the before/after figure.

Prints, per source and in all: sentences whose ids are equal, sentences where the export has an [UNK] that
mapnet's ids do not, and encoding time; writes the figures and the differing sentences to --out as JSON.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "tests"))  # real_text: the sample the acceptance test reads

from real_text import real_sentences  # noqa: E402

from mapnet_cli import atomic  # noqa: E402
from mapnet_cli import settings as settings_mod  # noqa: E402
from mapnet_cli.evaluation.glue.encode import TextEncoder  # noqa: E402
from mapnet_cli.export import SPECIAL_TOKENS, cleaning_record, tokenizer_files, write_tokenizer  # noqa: E402


def source_files(path: Path):
    """(tokenizer.json, preprocess settings) of a preprocessed corpus (manifest.json) or a checkpoint."""
    from mapnet_cli.model.checkpoint import load_settings

    if (path / "manifest.json").is_file() and (path / "sentences").is_dir():
        recorded = json.loads((path / "manifest.json").read_text(encoding="utf-8"))["settings"]
        return path / "tokenizer.json", settings_mod.from_dict({"preprocess": recorded}, str(path)).preprocess
    return path / "tokenizer.json", load_settings(path).preprocess


def old_export_tokenizer(tokenizer: Path, out: Path) -> None:
    """The tokenizer.json `mapnet export` wrote before issue 36 (kept here only to measure it)."""
    from tokenizers import Tokenizer, normalizers, processors

    tok = Tokenizer.from_file(str(tokenizer))
    cls, sep = SPECIAL_TOKENS["cls_token"], SPECIAL_TOKENS["sep_token"]
    tok.post_processor = processors.TemplateProcessing(
        single=f"{cls} $A {sep}",
        pair=f"{cls} $A {sep} $B {sep}",
        special_tokens=[(cls, tok.token_to_id(cls)), (sep, tok.token_to_id(sep))],
    )
    specials = {t.content for t in tok.get_added_tokens_decoder().values()}
    if not any(ch.isupper() for piece in tok.get_vocab() if piece not in specials for ch in piece):
        tok.normalizer = normalizers.Sequence([n for n in (tok.normalizer, normalizers.Lowercase()) if n is not None])
    data = json.loads(tok.to_str())
    for added in data.get("added_tokens", []):
        if added["content"] == SPECIAL_TOKENS["mask_token"]:
            added["lstrip"] = True
    out.write_text(json.dumps(data, ensure_ascii=False), encoding="utf-8")


def measure(folder: Path, sample: list[tuple[str, str]], ours: list[list[int]]) -> dict:
    import transformers

    hf = transformers.AutoTokenizer.from_pretrained(str(folder))
    texts = [t for _, t in sample]
    started = time.perf_counter()
    theirs = hf(texts, add_special_tokens=False)["input_ids"]
    seconds = time.perf_counter() - started
    unk = hf.unk_token_id
    by_source: dict[str, dict] = {}
    differing = []
    for (source, text), a, b in zip(sample, ours, theirs):
        row = by_source.setdefault(source, {"sentences": 0, "equal": 0, "extra_unk_sentences": 0})
        row["sentences"] += 1
        row["equal"] += a == b
        row["extra_unk_sentences"] += unk in b and unk not in a
        if a != b:
            differing.append(
                {
                    "source": source,
                    "text": text,
                    "mapnet": hf.convert_ids_to_tokens(a),
                    "export": hf.convert_ids_to_tokens(b),
                }
            )
    total = {k: sum(r[k] for r in by_source.values()) for k in ("sentences", "equal", "extra_unk_sentences")}
    return {"total": total, "by_source": by_source, "encode_seconds": seconds, "differing": differing}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("source", type=Path, help="a preprocessed corpus folder or a checkpoint folder")
    parser.add_argument("--shared-data", type=Path, default=REPO.parent / "shared" / "data")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=Path, help="write the figures and the differing sentences here (JSON)")
    args = parser.parse_args()

    tokenizer, pre = source_files(args.source)
    sample = real_sentences(args.shared_data, seed=args.seed)
    started = time.perf_counter()
    ours = [ids.tolist() for ids in TextEncoder(tokenizer, pre, 1 << 20).tokenise([t for _, t in sample])]
    mapnet_seconds = time.perf_counter() - started
    results = {}
    with tempfile.TemporaryDirectory() as tmp:
        for name, write in (
            ("export", lambda out: write_tokenizer(tokenizer, out, pre)),
            ("export before issue 36", lambda out: old_export_tokenizer(tokenizer, out)),
        ):
            folder = Path(tmp) / name.replace(" ", "-")
            folder.mkdir()
            write(folder / "tokenizer.json")
            for file, content in tokenizer_files(tokenizer, 512).items():
                (folder / file).write_text(json.dumps(content), encoding="utf-8")
            results[name] = measure(folder, sample, ours)

    print(
        f"{tokenizer} ({sum(1 for _ in json.loads(tokenizer.read_text())['model']['vocab'])} tokens), "
        f"cleaning {cleaning_record(pre)}, {len(sample)} sentences (seed {args.seed})"
    )
    print(f"mapnet's pipeline: {mapnet_seconds:.2f} s")
    for name, r in results.items():
        t = r["total"]
        print(
            f"{name}: equal ids {t['equal']}/{t['sentences']} ({100 * t['equal'] / t['sentences']:.2f}%), "
            f"[UNK] where mapnet has none in {t['extra_unk_sentences']} sentences, {r['encode_seconds']:.2f} s"
        )
        for source, row in r["by_source"].items():
            print(f"    {source:6s} {row['equal']}/{row['sentences']}, extra [UNK] in {row['extra_unk_sentences']}")
    if args.out:
        record = {
            "command": " ".join(["uv run python experiments/export-text-parity/export_text_parity.py", *sys.argv[1:]]),
            "tokenizer": str(tokenizer),
            "tokenizer_sha256": atomic.sha256_file(tokenizer),
            "cleaning": cleaning_record(pre),
            "seed": args.seed,
            "mapnet_seconds": mapnet_seconds,
            "results": {name: {**r, "differing": r["differing"][:50]} for name, r in results.items()},
        }
        atomic.write_json(args.out, record)


if __name__ == "__main__":
    main()
