"""Data recipes: TOML files naming a corpus, its default inputs and its settings.

    mapnet preprocess --recipe data_recipes/wikitext103.toml --out corpus

A recipe has a `[recipe]` table plus ordinary settings tables (`[preprocess]`, ...). Downloads go to
`$MAPNET_CACHE_DIR` (default `~/.cache/mapnet`), written atomically; members already in the cache are used
without any network.

    [recipe]
    name = "wikitext103"
    description = "..."
    inputs = ["data/books"]          # used when no INPUT is given; relative to the current folder
    url = "https://.../x.zip"        # optional: a zip to download into ~/.cache/mapnet/<name>/
    sha256 = "..."                   # optional: the archive's published sha256, checked when given
    members = ["x/wiki.train.raw"]   # files inside the zip that become the inputs
"""

from __future__ import annotations

import hashlib
import os
import shutil
import urllib.error
import urllib.request
import zipfile
from dataclasses import asdict, dataclass
from pathlib import Path

from ..atomic import atomic_file, sha256_file
from ..errors import MapnetError
from ..settings import load_toml

_KEYS = {"name", "description", "inputs", "url", "sha256", "members"}


@dataclass(frozen=True)
class Recipe:
    path: str
    name: str
    description: str = ""
    inputs: tuple[str, ...] = ()
    url: str = ""
    sha256: str = ""
    members: tuple[str, ...] = ()

    @property
    def downloadable(self) -> bool:
        return bool(self.url)


def load_recipe(path: str | Path) -> Recipe:
    """Read and check the `[recipe]` table of a recipe file (its settings are read by `settings.resolve`)."""
    data = load_toml(path)
    table = data.get("recipe")
    if not isinstance(table, dict):
        raise MapnetError(f"{path} has no [recipe] table")
    unknown = sorted(set(table) - _KEYS)
    problems = [f"unknown key recipe.{k}" for k in unknown]
    for key in ("name", "description", "url", "sha256"):
        if key in table and not isinstance(table[key], str):
            problems.append(f"recipe.{key} must be a string")
    for key in ("inputs", "members"):
        if key in table and not (isinstance(table[key], list) and all(isinstance(v, str) for v in table[key])):
            problems.append(f"recipe.{key} must be a list of strings")
    if not table.get("name"):
        problems.append("recipe.name is required")
    if table.get("members") and not table.get("url"):
        problems.append("recipe.members needs recipe.url")
    if table.get("url") and not table.get("members"):
        problems.append("recipe.url needs recipe.members (the files to use from the archive)")
    if problems:
        raise MapnetError(f"invalid recipe {path}: " + "; ".join(problems))
    return Recipe(
        path=str(path),
        name=table["name"],
        description=table.get("description", ""),
        inputs=tuple(table.get("inputs", ())),
        url=table.get("url", ""),
        sha256=table.get("sha256", "").lower(),
        members=tuple(table.get("members", ())),
    )


def cache_dir() -> Path:
    return Path(os.environ.get("MAPNET_CACHE_DIR") or Path.home() / ".cache" / "mapnet")


def recipe_inputs(recipe: Recipe, *, log=print) -> tuple[list[str], dict]:
    """The recipe's default inputs (downloading its archive if needed) and what to record in the manifest."""
    info = {k: v for k, v in asdict(recipe).items() if v not in ("", ())}
    if not recipe.downloadable:
        if not recipe.inputs:
            raise MapnetError(f"recipe {recipe.path} lists no inputs: give INPUT paths on the command line")
        return list(recipe.inputs), info
    folder = cache_dir() / recipe.name
    targets = [folder / member for member in recipe.members]
    archive = archive_path(recipe.url, folder)
    if not all(t.is_file() for t in targets):
        download(recipe.url, archive, recipe.sha256, log=log)
        extract(archive, recipe.members, folder)
    if archive.is_file():  # the published sha256 is often unknown: record what was used
        info["archive_sha256"] = sha256_file(archive)
    return [str(t) for t in targets], info


def archive_path(url: str, folder: Path) -> Path:
    return folder / (Path(urllib.request.url2pathname(url.rsplit("/", 1)[-1])).name or "download")


def download(url: str, target: Path, expected_sha256: str = "", *, log=print) -> Path:
    """Fetch `url` to `target` (temp file + rename), check sha256 when known; reuse a cached copy."""
    folder = target.parent
    if target.is_file() and (not expected_sha256 or sha256_file(target) == expected_sha256):
        return target
    log(f"downloading {url} -> {target}")
    digest = hashlib.sha256()
    try:
        with urllib.request.urlopen(url, timeout=60) as response, atomic_file(target, "wb") as fh:
            while chunk := response.read(1 << 20):
                fh.write(chunk)
                digest.update(chunk)
            if expected_sha256 and digest.hexdigest() != expected_sha256:
                raise MapnetError(f"{url}: sha256 {digest.hexdigest()} does not match the recipe's {expected_sha256}")
    except (urllib.error.URLError, OSError, TimeoutError) as exc:
        reason = getattr(exc, "reason", exc)
        raise MapnetError(
            f"cannot download {url} ({reason}); offline? Fetch it yourself and pass the files "
            f"as INPUT, or put them under {folder}"
        ) from None
    return target


def extract(archive: Path, members: tuple[str, ...], folder: Path) -> None:
    """Copy `members` out of a zip into `folder`, each file written atomically."""
    try:
        with zipfile.ZipFile(archive) as zf:
            names = set(zf.namelist())
            missing = [m for m in members if m not in names]
            if missing:
                raise MapnetError(f"{archive} has no member(s) {', '.join(missing)}")
            for member in members:
                with zf.open(member) as src, atomic_file(folder / member, "wb") as dst:
                    shutil.copyfileobj(src, dst, 1 << 20)
    except (zipfile.BadZipFile, zipfile.LargeZipFile, EOFError, OSError) as exc:
        raise MapnetError(f"{archive} is not a readable zip archive ({exc}); delete it and retry") from None
