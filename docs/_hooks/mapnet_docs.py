"""MkDocs hooks of mapnet's manual (mkdocs.yml: `hooks:`). Three jobs, at build time:

1. The reference pages are generated, not written: `reference/cli.md` from the typer app itself (every command,
   argument, option and default, walked through click) and `reference/settings.md` from the settings tree (the
   rows `mapnet config show --docs` prints, `mapnet_cli.settings.field_docs`). They cannot drift from the code.
2. Pages that live outside `docs/` join the site: the README as the home page, the changelog, and every file of
   `experiments/` (each experiment's README becomes its page; its JSON, logs and figures are copied beside it).
3. Links are written as they resolve in the repository (so they work on GitHub too) and translated here to the
   site's layout: `docs/x.md` is the site's `x.md`, `README.md` its `index.md`, `experiments/...` stays.
   A link that resolves to no page of the site is left as written, so `mkdocs build --strict` reports it.
"""

from __future__ import annotations

import posixpath
import re
from pathlib import Path

from mkdocs.structure.files import File, Files

REPO = Path(__file__).resolve().parents[2]
GENERATED = ("reference/cli.md", "reference/settings.md")


# ------------------------------------------------------------------ where a repository file sits in the site
def site_path(repo_path: str) -> str | None:
    """The site's src path of a repository path, or None for a file the site does not hold."""
    if repo_path == "README.md":
        return "index.md"
    if repo_path == "CHANGELOG.md":
        return "changelog.md"
    if repo_path.startswith("docs/"):
        return repo_path[len("docs/") :]
    if repo_path.startswith("experiments/"):
        return repo_path
    return None


def repo_path(src_uri: str) -> str:
    if src_uri == "index.md":
        return "README.md"
    if src_uri == "changelog.md":
        return "CHANGELOG.md"
    if src_uri.startswith("experiments/"):
        return src_uri
    return "docs/" + src_uri


LINK = re.compile(r"(!?\[[^\]]*\]\()([^)\s]+)((?:\s+\"[^\"]*\")?\))")


def translate_links(markdown: str, src_uri: str) -> str:
    """Rewrite the repository-relative links of the page `src_uri` into site-relative ones."""
    here_repo = posixpath.dirname(repo_path(src_uri))
    here_site = posixpath.dirname(src_uri)

    def sub(m: re.Match) -> str:
        target = m.group(2)
        if re.match(r"^[a-z][a-z0-9+.-]*:", target) or target.startswith(("#", "/")):
            return m.group(0)
        path, hash_, anchor = target.partition("#")
        resolved = posixpath.normpath(posixpath.join(here_repo, path))
        in_site = site_path(resolved)
        if in_site is None:
            return m.group(0)
        new = posixpath.relpath(in_site, here_site or ".")
        if path.endswith("/") and not new.endswith("/"):
            new += "/"
        return f"{m.group(1)}{new}{hash_}{anchor}{m.group(3)}"

    out, fenced = [], False
    for line in markdown.split("\n"):
        if line.lstrip().startswith(("```", "~~~")):
            fenced = not fenced
        out.append(line if fenced else LINK.sub(sub, line))
    return "\n".join(out)


# ------------------------------------------------------------------ the generated references
# typer (0.29) builds click-style commands on its own vendored click: commands have `params`, groups
# `list_commands`/`get_command`, parameters `opts`, `secondary_opts`, `default`, `help`; the type is the
# annotation typer read from the signature (`type_descriptor.annotation`), or click's `type` on older typers.
def _is_group(cmd) -> bool:
    return hasattr(cmd, "list_commands")


def _is_argument(param) -> bool:
    return param.param_type_name == "argument"


def _type_name(param) -> str:
    import typing

    if getattr(param, "is_flag", False):
        return "flag"
    annotation = getattr(getattr(param, "type_descriptor", None), "annotation", None)
    if annotation is None:  # click's own parameter type
        choices = getattr(param.type, "choices", None)
        return " \\| ".join(f"`{c}`" for c in choices) if choices else param.type.name.lower()
    while typing.get_origin(annotation) in (typing.Union, getattr(__import__("types"), "UnionType", None)):
        annotation = next(a for a in typing.get_args(annotation) if a is not type(None))
    if typing.get_origin(annotation) is typing.Literal:
        return " \\| ".join(f"`{c}`" for c in typing.get_args(annotation))
    if typing.get_origin(annotation) in (list, tuple):
        inner = typing.get_args(annotation)[0]
        return f"{getattr(inner, '__name__', str(inner)).lower()}, repeatable"
    return {"Path": "path", "str": "text", "int": "integer", "float": "number", "bool": "flag"}.get(
        getattr(annotation, "__name__", ""), str(annotation)
    )


def _default(param) -> str:
    default = param.default
    if _is_argument(param) or default is None or param.required or callable(default):
        return ""
    if isinstance(default, bool):
        if param.secondary_opts:
            return param.opts[0] if default else param.secondary_opts[0]
        return "on" if default else "off"
    if isinstance(default, (list, tuple)):
        return ", ".join(map(str, default))
    return str(getattr(default, "value", default))


def _cell(text: str) -> str:
    return " ".join((text or "").split()).replace("|", "\\|")


def _param_row(param) -> str:
    if _is_argument(param):
        name = f"`{param.name.upper()}`" + ("…" if param.nargs == -1 else "")
        kind = "argument" + ("" if param.required else ", optional")
    else:
        name = " / ".join(f"`{f}`" for f in param.opts + param.secondary_opts)
        kind = _type_name(param)
    default = _default(param)
    return (
        f"| {name} | {kind} | {f'`{_cell(default)}`' if default else ''} | {_cell(getattr(param, 'help', '') or '')} |"
    )


def cli_commands():
    """[(path, command)] of the mapnet app, depth first, in the order `mapnet --help` lists them."""
    import typer

    from mapnet_cli.cli import app

    found = []

    def walk(cmd, path):
        found.append((path, cmd))
        if _is_group(cmd):
            ctx = _context(cmd, path[-1])
            for name in cmd.list_commands(ctx):
                walk(cmd.get_command(ctx, name), [*path, name])

    walk(typer.main.get_command(app), ["mapnet"])
    return found


def _context(cmd, name):
    import typer._click as click  # typer's own click; the commands belong to it

    return click.Context(cmd, info_name=name)


def cli_reference() -> str:
    lines = [
        "# CLI reference",
        "",
        "Generated at build time from the typer app (`mapnet_cli/cli.py`), walked through click: every command,",
        "argument and option with its default, exactly as `mapnet COMMAND --help` states them. Guides to each",
        "command are in the manual's topic pages.",
        "",
    ]
    for path, cmd in cli_commands():
        if cmd.hidden:
            continue
        title = " ".join(path)
        lines += [f"## `{title}`", ""]
        if cmd.help:
            lines += [cmd.help.strip().replace("\b\n", "").strip(), ""]
        if _is_group(cmd):
            ctx = _context(cmd, path[-1])
            subs = [(n, cmd.get_command(ctx, n)) for n in cmd.list_commands(ctx)]
            lines += ["| command | what it does |", "|---|---|"]
            lines += [f"| `{title} {n}` | {_cell(c.get_short_help_str(limit=200))} |" for n, c in subs if not c.hidden]
            lines.append("")
            continue
        ctx = _context(cmd, title)
        lines += ["```", f"{title} {' '.join(cmd.collect_usage_pieces(ctx))}", "```", ""]
        params = [p for p in cmd.params if not getattr(p, "hidden", False)]
        if params:
            lines += ["| argument / option | type | default | meaning |", "|---|---|---|---|"]
            lines += [_param_row(p) for p in params]
            lines.append("")
    return "\n".join(lines)


def settings_reference() -> str:
    from mapnet_cli.settings import field_docs

    lines = [
        "# Settings reference",
        "",
        "Generated at build time from the settings tree (`mapnet_cli/settings/`): the rows `mapnet config show",
        "--docs` prints. Set any of them in a config file (`--config run.toml`, a TOML table per section) or on",
        "the command line (`--set section.key=value`); precedence: defaults < model preset < training recipe <",
        "fine-tuning protocol < config file(s) < CLI flags. `mapnet config show --preset tiny --recipe fast`",
        "prints what a preset and recipe resolve to.",
        "",
    ]
    section = None
    for key, default, doc in field_docs():
        sec = key.split(".", 1)[0]
        if sec != section:
            section = sec
            lines += ["", f"## `{sec}`", "", "| setting | default | meaning |", "|---|---|---|"]
        lines.append(f"| `{key}` | `{_cell(default)}` | {_cell(doc)} |")
    return "\n".join(lines) + "\n"


# ------------------------------------------------------------------ the hooks
def on_files(files: Files, config) -> Files:
    files.append(File.generated(config, "index.md", abs_src_path=str(REPO / "README.md")))
    files.append(File.generated(config, "changelog.md", abs_src_path=str(REPO / "CHANGELOG.md")))
    for path in sorted((REPO / "experiments").rglob("*")):
        if path.is_file() and "__pycache__" not in path.parts:
            files.append(
                File(path.relative_to(REPO).as_posix(), str(REPO), config["site_dir"], config["use_directory_urls"])
            )
    files.append(File.generated(config, "reference/cli.md", content=cli_reference()))
    files.append(File.generated(config, "reference/settings.md", content=settings_reference()))
    return files


def on_page_markdown(markdown: str, page, config, files) -> str:
    return translate_links(markdown, page.file.src_uri)
