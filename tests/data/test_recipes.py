"""Data recipes: the shipped TOML files, validation, download (file:// only), cache, offline errors."""

from __future__ import annotations

import hashlib
import json
import zipfile
from pathlib import Path

import pytest
from typer.testing import CliRunner

from mapnet_cli.cli import app
from mapnet_cli.data.recipes import load_recipe, recipe_inputs
from mapnet_cli.errors import MapnetError
from mapnet_cli.settings import resolve

REPO = Path(__file__).resolve().parents[2]
RECIPES = sorted(p for p in (REPO / "data_recipes").glob("*.toml") if p.name != "tiny.toml")
# The settings files the experiments' scripts pass with --config (a run's own settings.toml sits deeper, in raw/).
EXPERIMENT_CONFIGS = sorted((REPO / "experiments").glob("*/*.toml"))
WIKITEXT = (
    " \n = Alpha = \n \n Alpha is a letter . It comes first . \n \n = = Use = = \n \n It is used in 1 @,@ 000 words . "
    "\n"
    " \n = Beta = \n \n Beta comes second . \n"
)


@pytest.fixture
def cache(tmp_path, monkeypatch) -> Path:
    folder = tmp_path / "cache"
    monkeypatch.setenv("MAPNET_CACHE_DIR", str(folder))
    return folder


def make_zip(path: Path, members: dict[str, str]) -> str:
    with zipfile.ZipFile(path, "w") as zf:
        for name, text in members.items():
            zf.writestr(name, text)
    return hashlib.sha256(path.read_bytes()).hexdigest()


def write_recipe(path: Path, url: str, sha256: str = "") -> Path:
    sha = f'sha256 = "{sha256}"\n' if sha256 else ""
    path.write_text(
        f'[recipe]\nname = "wt"\nurl = "{url}"\n{sha}members = ["wt/wiki.train.raw"]\n\n'
        '[preprocess]\ninput_format = "wikitext"\nvocab_size = 256\nworkers = 1\n'
    )
    return path


@pytest.mark.parametrize("path", RECIPES, ids=lambda p: p.name)
def test_shipped_recipes_load_and_resolve(path):
    recipe = load_recipe(path)
    assert recipe.name == path.stem and recipe.description
    assert recipe.inputs or (recipe.url.startswith("https://") and recipe.members)
    resolve(config=[path], extra_sections=("recipe",))  # every settings key in it is valid


@pytest.mark.parametrize("path", EXPERIMENT_CONFIGS, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_the_experiments_settings_files_still_resolve(path):
    """A renamed setting (optim.warmup_steps -> optim.warmup.steps) broke real-text-cpu.toml without a failing
    test: every script of experiments/ that passes it stopped at its first `compare`."""
    assert EXPERIMENT_CONFIGS, "no settings file under experiments/*/"
    resolve(config=[path])


def test_paper_recipe_settings():
    settings = resolve(config=[REPO / "data_recipes" / "paper.toml"], extra_sections=("recipe",)).preprocess
    assert settings.strip_gutenberg and settings.doc_separator == "file" and settings.vocab_size == 32768
    assert load_recipe(REPO / "data_recipes" / "paper.toml").inputs == ("data/enwiki/text", "data/books")


def test_invalid_recipes_are_refused(tmp_path):
    bad = tmp_path / "bad.toml"
    bad.write_text('[recipe]\nurl = "https://x/y.zip"\ninputs = "data"\ncolour = "red"\n')
    with pytest.raises(MapnetError) as err:
        load_recipe(bad)
    message = str(err.value)
    for problem in (
        "unknown key recipe.colour",
        "recipe.inputs must be a list",
        "recipe.name is required",
        "recipe.url needs recipe.members",
    ):
        assert problem in message
    (tmp_path / "none.toml").write_text("[preprocess]\nlowercase = false\n")
    with pytest.raises(MapnetError, match="no \\[recipe\\] table"):
        load_recipe(tmp_path / "none.toml")


def test_download_extract_then_cache_without_network(tmp_path, cache):
    archive = tmp_path / "wt.zip"
    sha = make_zip(archive, {"wt/wiki.train.raw": WIKITEXT, "wt/wiki.test.raw": "held out"})
    recipe = load_recipe(write_recipe(tmp_path / "r.toml", archive.as_uri(), sha))
    inputs, info = recipe_inputs(recipe, log=lambda m: None)
    assert inputs == [str(cache / "wt" / "wt" / "wiki.train.raw")]
    assert Path(inputs[0]).read_text() == WIKITEXT and info["archive_sha256"] == sha
    assert not (cache / "wt" / "wt" / "wiki.test.raw").exists()  # only the listed members
    assert not list((cache / "wt").glob(".*.tmp"))  # atomic writes left no temp files
    archive.unlink()  # "offline": the URL is gone, the cache answers
    assert recipe_inputs(recipe, log=lambda m: None)[0] == inputs


def test_offline_and_bad_archives_are_clear_errors(tmp_path, cache):
    missing = write_recipe(tmp_path / "r.toml", (tmp_path / "gone.zip").as_uri())
    with pytest.raises(MapnetError, match="cannot download .*gone.zip.*offline\\?.*pass the files as INPUT"):
        recipe_inputs(load_recipe(missing), log=lambda m: None)
    archive = tmp_path / "wt.zip"
    make_zip(archive, {"wt/wiki.train.raw": WIKITEXT})
    wrong_sha = write_recipe(tmp_path / "r2.toml", archive.as_uri(), "0" * 64)
    with pytest.raises(MapnetError, match="sha256 .* does not match"):
        recipe_inputs(load_recipe(wrong_sha), log=lambda m: None)
    assert not (cache / "wt" / "wt.zip").exists()
    (tmp_path / "notzip.zip").write_bytes(b"not a zip")
    with pytest.raises(MapnetError, match="not a readable zip"):
        recipe_inputs(
            load_recipe(write_recipe(tmp_path / "r3.toml", (tmp_path / "notzip.zip").as_uri())), log=lambda m: None
        )


@pytest.mark.slow
def test_cli_recipe_download_and_local_files_win(tmp_path, cache):
    archive = tmp_path / "wt.zip"
    sha = make_zip(archive, {"wt/wiki.train.raw": WIKITEXT})
    recipe = write_recipe(tmp_path / "r.toml", archive.as_uri())
    runner = CliRunner()
    result = runner.invoke(app, ["preprocess", "--recipe", str(recipe), "--out", str(tmp_path / "o")])
    assert result.exit_code == 0, result.output
    manifest = json.loads((tmp_path / "o" / "manifest.json").read_text())
    assert manifest["recipe"]["name"] == "wt" and manifest["recipe"]["archive_sha256"] == sha
    assert [i["documents"] for i in manifest["inputs"]] == [2] and manifest["inputs"][0]["format"] == "wikitext"
    lines = (tmp_path / "o" / "sentences" / "part-00000.txt").read_text().split("\n")
    assert lines[:4] == ["alpha is a letter .", "it comes first .", "it is used in 1,000 words .", ""]
    # files on the command line replace the recipe's inputs: no download is attempted
    local = tmp_path / "local.raw"
    local.write_text(" = Gamma = \n Gamma is third . \n")
    offline = write_recipe(tmp_path / "off.toml", (tmp_path / "gone.zip").as_uri())
    result = runner.invoke(app, ["preprocess", str(local), "--recipe", str(offline), "--out", str(tmp_path / "o2")])
    assert result.exit_code == 0, result.output
    assert "gamma is third ." in (tmp_path / "o2" / "sentences" / "part-00000.txt").read_text()


@pytest.mark.slow
def test_paper_recipe_on_real_folders(shared_data, tmp_path):
    """paper.toml as-is on a small copy of the shared layout: bookkeeping files excluded, docs right."""
    wiki, books = tmp_path / "wiki-articles" / "enwiki", tmp_path / "gutenberg"
    wiki.mkdir(parents=True)
    books.mkdir()
    (wiki / "AA_wiki_00.txt.gz").symlink_to(shared_data / "wiki-articles/enwiki-2015-wikiextractor/AA_wiki_00.txt.gz")
    (wiki / "MANIFEST.tsv").symlink_to(shared_data / "wiki-articles/enwiki-2015-wikiextractor/MANIFEST.tsv")
    (books / "SHA256SUMS").symlink_to(shared_data / "gutenberg/SHA256SUMS")
    (books / "potter.txt.gz").symlink_to(shared_data / "gutenberg/potter-the-tailor-of-gloucester-pg14868.txt.gz")
    (books / "README.nltk-gutenberg.txt").symlink_to(shared_data / "books/README.nltk-gutenberg.txt")
    result = CliRunner().invoke(
        app,
        [
            "preprocess",
            str(tmp_path / "wiki-articles"),
            str(books),
            "--recipe",
            str(REPO / "data_recipes" / "paper.toml"),
            "--out",
            str(tmp_path / "o"),
            "--vocab-size",
            "1000",
            "--workers",
            "2",
        ],
    )
    assert result.exit_code == 0, result.output
    manifest = json.loads((tmp_path / "o" / "manifest.json").read_text())
    assert [Path(i["path"]).name for i in manifest["inputs"]] == ["AA_wiki_00.txt.gz", "potter.txt.gz"]
    assert [i["documents"] for i in manifest["inputs"]] == [38, 1]
    text = (tmp_path / "o" / "sentences" / "part-00000.txt").read_text()
    assert "the tailor of gloucester" in text
    for boiler in (
        "use of anyone anywhere",
        "start of this project gutenberg",
        "end of this project gutenberg",
        "project gutenberg-tm",
    ):
        assert boiler not in text
