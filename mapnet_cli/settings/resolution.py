"""Settings resolution, stated once: defaults < model preset < training recipe < fine-tuning protocol
< config files (in order) < CLI flags < `--set`, then one check that names every problem.

    resolve("run.toml", {"model": {"preset": "tiny"}}, ["optim.lr=3e-4"])
    resolve(config, {"finetune": flags}, assignments, protocol="quick")   # finetune-glue --quick

Unknown keys and type errors do not stop resolution: each bad key keeps its earlier value, and
`resolve` reports them together with every section's range problems in one `MapnetError` line.
"""

from __future__ import annotations

import math
import tomllib
import typing
from dataclasses import is_dataclass, replace
from pathlib import Path
from typing import Any, Literal, get_args, get_origin

from ..errors import MapnetError
from .field import INT64
from .moved import migrate, moved_to
from .presets import PRESETS, preset
from .presets import protocol as named_protocol
from .recipes import RECIPES, SHAPES, default_recipe, recipe_layer
from .tree import SECTIONS, Settings, flat


def _section_class(name: str):
    return typing.get_type_hints(Settings)[name]


def _coerce(key: str, value: Any, annotation) -> Any:
    """Check `value` against a field's annotation; return it in the field's type."""
    origin = get_origin(annotation)
    if origin is Literal:
        choices = get_args(annotation)
        # By type too: 1 == True, yet `compile = 1` is not `compile = true`.
        if not any(value == c and type(value) is type(c) for c in choices):
            shown = ", ".join(str(c).lower() if isinstance(c, bool) else repr(c) for c in choices)  # TOML's spelling
            raise MapnetError(f"{key} must be one of {shown} (got {value!r})")
        return value
    if origin is tuple:
        if not isinstance(value, (list, tuple)):
            raise MapnetError(f"{key} must be a list (got {type(value).__name__} {value!r})")
        args = get_args(annotation)
        if len(args) == 2 and args[1] is Ellipsis:
            return tuple(_coerce(f"{key}[{i}]", v, args[0]) for i, v in enumerate(value))
        if len(value) != len(args):
            raise MapnetError(f"{key} must have {len(args)} items (got {len(value)})")
        return tuple(_coerce(f"{key}[{i}]", v, a) for i, (v, a) in enumerate(zip(value, args)))
    if annotation is bool:
        if not isinstance(value, bool):
            raise MapnetError(f"{key} must be true or false (got {value!r})")
        return value
    if annotation is int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise MapnetError(f"{key} must be an integer (got {value!r})")
        if not INT64[0] <= value <= INT64[1]:  # `--set train.seed=2**64`-sized: tomllib reads it, TOML does not
            raise MapnetError(f"{key} must be an integer of at most 64 bits, as TOML's (got {value})")
        return value
    if annotation is float:
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise MapnetError(f"{key} must be a number (got {value!r})")
        # TOML reads nan and inf as numbers, and the sections' range checks let NaN through (NaN < 0 is
        # false): refused here, once for every float setting, beside the other bad keys.
        try:
            number = float(value)
        except OverflowError:  # an integer beyond every float
            number = math.inf
        if not math.isfinite(number):
            raise MapnetError(f"{key} must be a finite number (got {value!r})")
        return number
    if annotation is str:
        if not isinstance(value, str):
            raise MapnetError(f"{key} must be a string (got {value!r})")
        return value
    raise TypeError(f"unsupported settings type for {key}: {annotation}")  # a bug, not user input


def apply(settings: Settings, updates: dict[str, dict[str, Any]], source: str) -> Settings:
    """Return `settings` with `updates` ({section: {key: value}}) checked and applied."""
    settings, errors = _apply(settings, updates, source)
    if errors:
        raise MapnetError("; ".join(errors))
    return settings


def _apply(settings: Settings, updates: dict[str, dict[str, Any]], source: str) -> tuple[Settings, list[str]]:
    """`apply` that skips a bad key and goes on, returning every unknown key and type error: `resolve`
    reports them together with the range problems, so one run of a command names all that is wrong."""
    changed, errors = {}, []
    for section_name, values in updates.items():
        if section_name not in SECTIONS:
            errors.append(f"unknown settings section {section_name!r} in {source} (known: {', '.join(SECTIONS)})")
            continue
        if not isinstance(values, dict):
            errors.append(f"{section_name} in {source} must be a table of keys")
            continue
        section = changed.get(section_name, getattr(settings, section_name))
        changed[section_name] = _update(section, values, section_name, source, errors)
    return replace(settings, **changed), errors


def _update(table, values: dict[str, Any], path: str, source: str, errors: list[str]):
    """`table` (a section, or a table inside one: masking.mapnet) with `values` applied key by key; each problem
    appended to `errors`, its key left as it was."""
    hints = typing.get_type_hints(type(table), include_extras=False)
    new = {}
    for key, value in values.items():
        full = f"{path}.{key}"
        if key not in hints:
            where = moved_to(full)
            errors.append(
                f"unknown setting {full!r} in {source}"
                if where is None
                else f"{full!r} in {source} is now {where} (mapnet 0.2 gave each masking strategy and each "
                "warm-up a table of its own: CHANGELOG)"
            )
        elif is_dataclass(current := getattr(table, key)):
            if isinstance(value, dict):
                new[key] = _update(current, value, full, source, errors)
            else:
                errors.append(f"{full} in {source} must be a table of keys (got {value!r})")
        else:
            try:
                new[key] = _coerce(full, value, hints[key])
            except MapnetError as exc:
                errors.append(str(exc))
    return replace(table, **new)


def parse_assignment(text: str) -> tuple[str, str, Any]:
    """Parse a `--set section.key=value` string (`key` may go deeper: `masking.mapnet.lr=1e-3`); the value is read
    as TOML, else as a bare string."""
    if "=" not in text or "." not in text.split("=", 1)[0]:
        raise MapnetError(f"--set expects section.key=value (got {text!r})")
    dotted, raw = text.split("=", 1)
    section, key = dotted.strip().split(".", 1)
    if not all(key.split(".")):
        raise MapnetError(f"--set expects section.key=value (got {text!r})")
    try:
        value = tomllib.loads(f"v = {raw.strip()}")["v"]
    except tomllib.TOMLDecodeError:
        value = raw.strip()
    return section, key, value


def _set(tree: dict, section: str, key: str, value: Any) -> None:
    """tree[section][k1][k2]... = value for a dotted `key` (a flag's or a --set's)."""
    *path, last = key.split(".")
    table = tree.setdefault(section, {})
    for part in path:
        table = table.setdefault(part, {}) if isinstance(table.get(part, {}), dict) else {}
    table[last] = value


def load_toml(path: str | Path) -> dict[str, Any]:
    """A TOML file the user names (--config, a recipe, an --init-from folder's settings.toml), every way it can fail
    as one line: tomllib raises UnicodeDecodeError on bytes that are not UTF-8, and reads a BOM as "Invalid statement
    (at line 1, column 1)", which points at nothing the user can see."""
    path = Path(path)
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        raise MapnetError(f"config file not found: {path}") from None
    except IsADirectoryError:
        raise MapnetError(f"config path is a folder, not a TOML file: {path}") from None
    except OSError as exc:
        raise MapnetError(f"config file {path} is unreadable ({exc.strerror or exc})") from None
    if raw.startswith(b"\xef\xbb\xbf"):
        raise MapnetError(
            f"{path} starts with a UTF-8 byte-order mark, which the TOML reader refuses; save it without "
            "one (as UTF-8 without BOM)"
        )
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise MapnetError(
            f"{path} is not UTF-8 text (byte 0x{raw[exc.start]:02x} at offset {exc.start}); a config "
            "file is TOML, which is UTF-8 text: is it the file you meant?"
        ) from None
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise MapnetError(f"{path} is not valid TOML: {exc}") from None


def resolve(
    config: str | Path | list[str | Path] | tuple[str | Path, ...] | None = None,
    overrides: dict[str, dict[str, Any]] | None = None,
    assignments: list[str] | tuple[str, ...] = (),
    extra_sections: tuple[str, ...] = ("recipe",),
    base: Settings | None = None,
    check_ignored: bool = True,
    protocol: str | None = None,
    base_is_run: bool = False,
) -> Settings:
    """Defaults < model preset < training recipe < fine-tuning `protocol` < config files (in order) < CLI
    flags (`overrides`, then `--set`).

    `config` is one TOML file or several applied in order (a recipe, then a
    run config). `extra_sections` names top-level tables a file may carry that
    are not settings; they are skipped here. By default that is a recipe's
    `[recipe]` table, so every recipe doubles as a config file for any command.
    The model preset is the last one named (flags, then the files from the last), and so is the recipe
    (train.recipe), which otherwise is the preset's own (`recipes.default_recipe`); where no preset is named, a
    recipe with a shape (`recipes.SHAPES`) brings its own model sizes; `protocol` is
    `finetune-glue --protocol` (or `--quick`) and `compare --glue-protocol`; `None` adds no layer.
    `check_ignored=False` lets a masking setting the strategy would ignore through (`compare`'s base
    settings, whose arms each take the ones they use).
    `base_is_run`: `base` is a run's own settings (`--resume`, a checkpoint's), which already hold the recipe
    it trained with and whatever was set over it; naming that recipe again adds no layer (re-applying it would
    undo those settings, and would give a shaped recipe's run, recorded as preset `custom`, the `custom`
    preset's values instead of its shape's).
    """
    paths = [] if config is None else [config] if isinstance(config, (str, Path)) else list(config)
    file_layers = [(p, {k: v for k, v in load_toml(p).items() if k not in extra_sections}) for p in paths]
    cli_values: dict[str, dict[str, Any]] = {}
    errors: list[str] = []
    for section, values in (overrides or {}).items():
        for key, value in flat(values).items():  # a flag not given is None: it sets nothing
            if value is not None:
                _set(cli_values, section, key, value)
    for text in assignments:
        try:
            section, key, value = parse_assignment(text)
        except MapnetError as exc:
            errors.append(str(exc))
            continue
        _set(cli_values, section, key, value)

    preset_name, recipe_name = (
        _named(cli_values, file_layers, "model", "preset"),
        _named(cli_values, file_layers, "train", "recipe"),
    )
    # `base` replaces defaults < preset when a command continues from an earlier
    # output (a checkpoint's own settings.toml): its model is what was trained, so it takes a recipe
    # only when one is named, and never the recipe's architecture.
    # An unknown preset or recipe is named below by its setting's own check, beside every other bad setting.
    known = isinstance(preset_name, str) and preset_name in PRESETS
    # A recipe's own shape, only where nothing names a preset and no earlier weights decide the model.
    shape = SHAPES.get(recipe_name) if base is None and preset_name is None and isinstance(recipe_name, str) else None
    settings = (
        base if base is not None else preset(preset_name) if known else preset(shape.preset) if shape else Settings()
    )
    if base is None and recipe_name is None:
        recipe_name = default_recipe(preset_name if known else None)
    recipe = []
    if base_is_run and base is not None and recipe_name == base.train.recipe:
        recipe_name = None  # already in the run's settings
    if isinstance(recipe_name, str) and recipe_name in RECIPES:
        # A recipe gives its warm-ups in steps, or under a time budget as fractions of it: which, the layers
        # above it decide (the budget is a flag or a config file's), as the preset decides the recipe.
        budget = _named(cli_values, file_layers, "train", "time_budget")
        budgeted = bool(budget) if budget is not None else bool(settings.train.time_budget)
        layer = recipe_layer(recipe_name, settings.model.preset, keep_architecture=base is not None, budgeted=budgeted)
        if shape:
            layer = {**layer, "model": {**layer.get("model", {}), **shape.model_values()}}
        recipe = [(f"recipe {recipe_name}", layer)]
    protocol_layer = []
    if protocol is not None:
        try:
            protocol_layer = [(f"protocol {protocol}", {"finetune": dict(named_protocol(protocol).finetune)})]
        except MapnetError as exc:
            errors.append(str(exc))
    for path, values in [*recipe, *protocol_layer, *file_layers, ("command-line flags", cli_values)]:
        settings, bad = _apply(settings, values, str(path))
        errors += bad
    problems = errors + settings.problems(ignored=check_ignored)  # a key with a type error keeps its earlier value
    if problems:
        raise MapnetError("invalid settings: " + "; ".join(problems))
    return settings


def _named(cli_values: dict, file_layers: list, section: str, key: str):
    """section.key as the flags give it, else as the last config file that names it gives it, else None."""
    value = cli_values.get(section, {}).get(key)
    for _, values in reversed(file_layers):
        table = values.get(section)
        value = value if value is not None else (table.get(key) if isinstance(table, dict) else None)
    return value


def from_dict(values: dict[str, Any], source: str) -> Settings:
    """Rebuild settings written by `Settings.to_toml` (a run's settings.toml, by this mapnet or an earlier one:
    its keys are moved where they are now, `moved.migrate`)."""
    settings, errors = _apply(Settings(), migrate(values), source)
    problems = errors + settings.problems()
    if problems:
        raise MapnetError(f"invalid settings in {source}: " + "; ".join(problems))
    return settings
