"""Settings: defaults from the paper, validation naming the key, and the one precedence rule."""

from __future__ import annotations

import dataclasses
import tomllib
import typing
from dataclasses import fields as dc_fields
from typing import Literal, get_args, get_origin

import pytest
import tomli_w
from hypothesis import given
from hypothesis import settings as hsettings
from hypothesis import strategies as st
from typer.testing import CliRunner

from mapnet_cli import settings as S
from mapnet_cli.cli import app
from mapnet_cli.errors import MapnetError


def test_defaults_follow_the_paper_tables():
    s = S.Settings()
    assert (s.optim.lr, s.optim.betas, s.optim.eps, s.optim.weight_decay) == (1e-4, (0.9, 0.98), 1e-6, 0.01)
    assert (s.optim.warmup.steps, s.optim.schedule) == (10_000, "linear")
    assert (s.train.batch_size, s.shard.max_seq_len, s.train.steps) == (256, 512, 1_000_000)
    assert (s.model.layers, s.model.hidden, s.model.heads, s.model.dropout) == (12, 768, 12, 0.1)
    assert s.masking.mask_prob == 0.15 and (s.masking.mapnet.explore_start, s.masking.mapnet.explore_end) == (1.0, 0.33)
    assert s.masking.mapnet.loss_weight == 1e-2
    assert s.preprocess.vocab_size == 32768 and s.preprocess.lowercase
    ft = s.finetune
    assert ft.batch_sizes == (16, 32) and ft.learning_rates == pytest.approx([i * 1e-5 for i in range(1, 9)])
    assert (ft.epochs, ft.warmup_ratio, ft.weight_decay, ft.seeds) == (10, 0.06, 0.1, 10)
    assert s.train.keep_steps == (400_000, 600_000, 800_000, 1_000_000)
    assert s.problems() == []


@pytest.mark.parametrize(
    "name, dims",
    [
        ("tiny", (2, 128, 2)),
        ("mini", (4, 256, 4)),
        ("small", (4, 512, 8)),
        ("medium", (8, 512, 8)),
        ("base", (12, 768, 12)),
    ],
)
def test_presets(name, dims):
    m = S.preset(name).model
    assert (m.layers, m.hidden, m.heads) == dims and m.preset == name


def test_precedence_defaults_preset_file_flags(tmp_path):
    cfg = tmp_path / "run.toml"
    cfg.write_text('[model]\npreset = "mini"\nlayers = 3\n[optim]\nlr = 5e-4\nwarmup.steps = 7\n')
    s = S.resolve(cfg)
    assert (s.model.layers, s.model.hidden, s.optim.lr, s.optim.warmup.steps) == (3, 256, 5e-4, 7)
    # CLI flags beat the file; --set beats typed flags; a CLI preset beats the file's preset.
    s = S.resolve(cfg, {"optim": {"lr": 1e-3}, "model": {"preset": "tiny"}}, ["optim.warmup.steps=9"])
    assert (s.optim.lr, s.optim.warmup.steps, s.model.preset, s.model.hidden, s.model.layers) == (
        1e-3,
        9,
        "tiny",
        128,
        3,
    )
    # None means "flag not given": it must not override.
    assert S.resolve(cfg, {"optim": {"lr": None}}).optim.lr == 5e-4


@pytest.mark.parametrize("name", ["tiny", "mini", "small"])
def test_sub_base_presets_bring_the_fast_recipe_and_the_paper_recipe_is_the_defaults(name):
    fast = S.resolve(None, {"model": {"preset": name}})
    assert fast.train.recipe == "fast" and fast.model.norm == "pre" and fast.model.dropout == 0.0
    assert fast.optim.eps == 1e-12 and fast.optim.grad_clip == 1.0 and fast.optim.lr > S.Settings().optim.lr
    paper = S.resolve(None, {"model": {"preset": name}, "train": {"recipe": "paper"}})
    # Everything but the recorded name is exactly the preset over the paper's defaults.
    assert S.apply(paper, {"train": {"recipe": "paper"}}, "x") == S.preset(name) and paper.train.recipe == "paper"
    assert paper.optim == S.Settings().optim and paper.model.dropout == 0.1 and paper.model.norm == "post"


@pytest.mark.parametrize("name", ["medium", "base", None])
def test_medium_base_and_no_preset_keep_the_paper_settings_unless_asked(name):
    assert S.resolve(None, {"model": {"preset": name}}).train.recipe == "paper"
    fast = S.resolve(None, {"model": {"preset": name}}, ["train.recipe=fast"])
    assert (fast.train.recipe, fast.model.norm, fast.optim.eps) == ("fast", "pre", 1e-12)


def test_a_recipe_sits_under_the_config_file_and_the_flags(tmp_path):
    cfg = tmp_path / "run.toml"
    cfg.write_text('[model]\npreset = "tiny"\n[optim]\nlr = 2e-3\n')
    s = S.resolve(cfg, {"model": {"dropout": 0.05}})
    assert (s.train.recipe, s.optim.lr, s.model.dropout, s.model.norm) == ("fast", 2e-3, 0.05, "pre")
    cfg.write_text('[model]\npreset = "tiny"\n[train]\nrecipe = "paper"\n')  # a config file may name one too
    assert S.resolve(cfg).model.norm == "post" and S.resolve(cfg, {"train": {"recipe": "fast"}}).model.norm == "pre"
    with pytest.raises(MapnetError) as exc:
        S.resolve(None, {"train": {"recipe": "fastest"}}, ["optim.lr=-1"])
    assert "train.recipe must be one of 'paper', 'fast'" in str(exc.value) and "optim.lr must be > 0" in str(exc.value)


def test_continuing_earlier_weights_takes_a_recipe_only_when_named_and_never_its_architecture():
    base = S.resolve(None, {"model": {"preset": "tiny", "norm": "post"}, "train": {"recipe": "paper"}})
    assert S.resolve(None, {}, base=base) == base  # resume / --init-from: the run's own settings
    named = S.resolve(None, {"train": {"recipe": "fast"}}, base=base)
    assert named.model.norm == "post" and named.optim.eps == 1e-12 and named.train.recipe == "fast"


def test_a_protocol_sits_between_the_preset_and_the_config_file(tmp_path):
    cfg = tmp_path / "run.toml"
    cfg.write_text("[finetune]\nepochs = 5\n")
    s = S.resolve(cfg, {"finetune": {"seeds": 4}}, ["finetune.max_train=7"], protocol="quick")
    # quick sets batch 32, lr 8e-5, 2 seeds, 2 epochs, 2000 examples: the file, the flags and --set win.
    assert (s.finetune.batch_sizes, s.finetune.learning_rates) == ((32,), (8e-5,))
    assert (s.finetune.epochs, s.finetune.seeds, s.finetune.max_train) == (5, 4, 7)
    assert S.resolve(None).finetune == S.Settings().finetune  # no protocol: the paper's defaults
    with pytest.raises(MapnetError) as exc:
        S.resolve(None, assignments=["optim.lr=abc"], protocol="fast")
    assert "unknown fine-tuning protocol 'fast'" in str(exc.value) and "optim.lr must be a number" in str(exc.value)


def test_a_recipe_with_a_shape_trains_it_when_no_preset_is_named_and_a_named_preset_wins(tmp_path, monkeypatch):
    from mapnet_cli.settings import recipes

    monkeypatch.setitem(recipes.SHAPES, "fast", recipes.Shape("mini", (("layers", 6), ("hidden", 128), ("heads", 2))))
    s = S.resolve(None, {"train": {"recipe": "fast"}})
    m = s.model
    assert (m.preset, m.layers, m.hidden, m.heads) == ("custom", 6, 128, 2)
    # The recipe's per-preset values are the shape's preset's (mini: LR 2e-3, 500 steps of pieces), not custom's.
    assert (s.optim.lr, s.train.short_seq.steps, m.norm) == (2e-3, 500, "pre") and recipes.FAST_BY_PRESET["custom"][
        0
    ] != 2e-3
    assert S.resolve(None, {"train": {"recipe": "fast"}}, ["model.layers=3"]).model.layers == 3  # a flag still wins
    named = S.resolve(None, {"model": {"preset": "tiny"}, "train": {"recipe": "fast"}})
    assert (named.model.preset, named.model.layers, named.model.hidden) == ("tiny", 2, 128)
    cfg = tmp_path / "run.toml"
    cfg.write_text('[model]\npreset = "small"\n')  # a config file's preset wins too
    assert (S.resolve(cfg, {"train": {"recipe": "fast"}}).model.hidden, S.resolve(cfg).model.preset) == (512, "small")
    # Continuing earlier weights: they decide the model, never a recipe's shape.
    assert S.resolve(None, {"train": {"recipe": "fast"}}, base=named).model.layers == 2
    # Without sizes the shape is the preset itself, recorded by its name.
    monkeypatch.setitem(recipes.SHAPES, "fast", recipes.Shape("mini"))
    assert (
        S.resolve(None, {"train": {"recipe": "fast"}}).model
        == S.resolve(None, {"model": {"preset": "mini"}, "train": {"recipe": "fast"}}).model
    )
    # `fast` itself has no shape: without a preset it trains the defaults' base.
    monkeypatch.delitem(recipes.SHAPES, "fast")
    assert S.resolve(None, {"train": {"recipe": "fast"}}).model.layers == 12


def test_the_hour_recipe_is_fast_with_the_joined_levers_and_brings_its_shape():
    from mapnet_cli.settings import recipes

    s = S.resolve(None, {"train": {"recipe": "hour", "time_budget": "60m"}})
    fast = S.resolve(None, {"model": {"preset": "mini"}, "train": {"recipe": "fast", "time_budget": "60m"}})
    # L4/H192, section G's amendment's choice, as its 60-minute runs trained it (`--recipe hour` with `tiny`'s shape
    # then, and these sizes as flags): the same settings but the preset's name.
    assert (s.model.preset, s.model.layers, s.model.hidden, s.model.heads, s.model.intermediate) == (
        "custom",
        4,
        192,
        3,
        0,
    )
    chosen_by = S.resolve(
        None,
        {"train": {"recipe": "hour", "time_budget": "60m"}},
        ["model.preset=tiny", "model.layers=4", "model.hidden=192", "model.heads=3"],
    )
    assert dataclasses.replace(chosen_by, model=dataclasses.replace(chosen_by.model, preset="custom")) == s
    # bf16 where the hardware has it (the Xeon of sections G and H has AMX), fp32 where emulated (18x slower).
    assert (s.model.block, s.train.precision, s.train.batch_size, s.masking.mask_prob) == (
        "modern",
        "bf16-native",
        64,
        0.3,
    )
    # Everything else is `fast`'s at that size, the budget's warm-up fractions included.
    assert (s.optim, s.model.norm, s.model.init_std, s.train.short_seq.fraction) == (
        fast.optim,
        fast.model.norm,
        fast.model.init_std,
        fast.train.short_seq.fraction,
    )
    assert recipes.MEASURED_ON["hour"] == {"max_seq_len": 64, "vocab_size": 16384}
    # A named preset wins over the shape, and a flag over a lever.
    named = S.resolve(None, {"model": {"preset": "tiny"}, "train": {"recipe": "hour"}}, ["masking.mask_prob=0.15"])
    assert (named.model.layers, named.model.hidden, named.model.block, named.masking.mask_prob) == (
        2,
        128,
        "modern",
        0.15,
    )


def test_resuming_a_run_with_its_own_recipe_named_again_changes_nothing():
    # `pretrain --resume` with the command line that started the run (hour_cpu.sh reruns it): the hour recipe's run
    # records preset `custom` (its shape's sizes); re-applying the recipe over it gave `custom`'s LR and init
    # (5e-4, 0.02) instead of the shape's `mini` values the run trained with (2e-3, 0.05), and the resume was refused.
    from mapnet_cli.settings import recipes
    from mapnet_cli.train.run_settings import refuse_fixed_changes

    flags = {"train": {"recipe": "hour", "time_budget": "60m"}}
    run = S.resolve(None, flags, ["optim.lr=1e-3"])
    again = S.resolve(None, flags, ["optim.lr=1e-3"], base=run, base_is_run=True)
    assert again == run and (run.optim.lr, run.model.init_std) == (1e-3, 0.05)
    refuse_fixed_changes(run, again)
    # Without the flag the base is only sized (`--init-from`): the named recipe is a layer over it, as before,
    # and a run that names another recipe on resume is still refused.
    assert S.resolve(None, flags, base=run).model.init_std == recipes.FAST_BY_PRESET["custom"][2] != 0.05
    with pytest.raises(MapnetError, match="--resume cannot change"):
        refuse_fixed_changes(run, S.resolve(None, {"train": {"recipe": "fast"}}, base=run, base_is_run=True))


def test_a_recipe_doubles_as_a_config_file(tmp_path):
    cfg = tmp_path / "recipe.toml"
    cfg.write_text('[recipe]\nname = "x"\ninputs = ["synthetic:"]\n[shard]\nmax_seq_len = 64\n')
    assert S.resolve(cfg).shard.max_seq_len == 64
    with pytest.raises(MapnetError, match="unknown settings section 'recipe'"):
        S.resolve(cfg, extra_sections=())


def test_later_config_file_wins(tmp_path):
    a, b = tmp_path / "a.toml", tmp_path / "b.toml"
    a.write_text('[recipe]\nname = "x"\n[model]\npreset = "tiny"\n[shard]\nmax_seq_len = 64\n')
    b.write_text('[model]\npreset = "small"\n')
    s = S.resolve([a, b], extra_sections=("recipe",))
    assert (s.model.preset, s.model.hidden, s.shard.max_seq_len) == ("small", 512, 64)


@pytest.mark.parametrize(
    "toml, message",
    [
        ("[optim]\nlrr = 1\n", "unknown setting 'optim.lrr'"),
        ("[optimm]\nlr = 1\n", "unknown settings section 'optimm'"),
        ('[optim]\nlr = "fast"\n', "optim.lr must be a number"),
        ("[train]\nsteps = 1.5\n", "train.steps must be an integer"),
        ('[preprocess]\nlowercase = "no"\n', "preprocess.lowercase must be true or false"),
        ("[masking]\nmask_prob = 1.5\n", "masking.mask_prob must be in (0, 1)"),
        ('[masking]\nstrategy = "random"\n', "masking.strategy must be one of"),
        ("[optim]\nbetas = [0.9]\n", "optim.betas must have 2 items"),
        ("[model]\nhidden = 100\nheads = 3\n", "model.hidden (100) must be divisible by model.heads (3)"),
        ("[optim\nlr = 1\n", "is not valid TOML"),
    ],
)
def test_validation_names_the_key(tmp_path, toml, message):
    cfg = tmp_path / "bad.toml"
    cfg.write_text(toml)
    with pytest.raises(MapnetError) as exc:
        S.resolve(cfg)
    assert message in str(exc.value) and "\n" not in str(exc.value)


def test_all_problems_reported_at_once():
    with pytest.raises(MapnetError) as exc:
        S.resolve(None, assignments=["optim.lr=-1", "train.steps=0", "shard.valid_fraction=2.0"])
    text = str(exc.value)
    assert "optim.lr" in text and "train.steps" in text and "shard.valid_fraction" in text


def test_set_parses_toml_values_and_bare_strings():
    assert S.parse_assignment("optim.betas=[0.8, 0.9]") == ("optim", "betas", [0.8, 0.9])
    assert S.parse_assignment("masking.strategy=mapnet") == ("masking", "strategy", "mapnet")
    with pytest.raises(MapnetError):
        S.parse_assignment("lr=1")


def test_round_trip_through_toml():
    s = S.resolve(None, {"model": {"preset": "tiny"}}, ["optim.lr=3e-4", "train.keep_steps=[5, 10]"])
    assert S.from_dict(tomllib.loads(s.to_toml()), "test") == s


def test_config_show_cli(tmp_path):
    runner = CliRunner()
    res = runner.invoke(app, ["config", "show", "--preset", "mini", "--set", "optim.lr=0.002"])
    assert res.exit_code == 0, res.output
    shown = tomllib.loads(res.stdout)
    assert shown["model"]["hidden"] == 256 and shown["optim"]["lr"] == 0.002
    res = runner.invoke(app, ["config", "show", "--set", "optim.nope=1"])
    assert res.exit_code != 0 and isinstance(res.exception, MapnetError)
    # A budget is shown as the run would take it: the recipe's warm-ups become fractions of it.
    res = runner.invoke(app, ["config", "show", "--recipe", "hour", "--time-budget", "1h30m"])
    assert res.exit_code == 0, res.output
    shown = tomllib.loads(res.stdout)
    assert shown["train"]["time_budget"] == "1h30m" and shown["optim"]["warmup"]["steps"] == 0
    assert shown["optim"]["warmup"]["fraction"] > 0 and shown["model"]["hidden"] == 192
    res = runner.invoke(app, ["config", "show", "--time-budget", "soon"])
    assert isinstance(res.exception, MapnetError) and "with units" in str(res.exception)


def test_type_errors_are_reported_with_range_errors_at_once():
    """Every bad --set in one message: a type error no longer hides the rest."""
    with pytest.raises(MapnetError) as exc:
        S.resolve(None, assignments=["optim.lr=abc", "masking.mask_prob=1.5", "train.steps=-1", "optim.lrr=1", "lr=1"])
    text = str(exc.value)
    for part in (
        "optim.lr must be a number (got 'abc')",
        "masking.mask_prob must be in (0, 1) (got 1.5)",
        "train.steps must be >= 1 (got -1)",
        "unknown setting 'optim.lrr'",
        "--set expects section.key=value",
    ):
        assert part in text, part
    assert "\n" not in text


def test_config_file_and_flags_errors_are_reported_together(tmp_path):
    cfg = tmp_path / "bad.toml"
    cfg.write_text('[optim]\nlr = "fast"\n[nope]\nx = 1\n')
    with pytest.raises(MapnetError) as exc:
        S.resolve(cfg, {"train": {"steps": 0}}, ["train.batch_size=many"])
    text = str(exc.value)
    for part in (
        "optim.lr must be a number",
        "unknown settings section 'nope'",
        "train.batch_size must be an integer",
        "train.steps must be >= 1",
    ):
        assert part in text, part


# ---------------------------------------------------------------- properties of the parser (hypothesis)
SECTION_CLASSES = typing.get_type_hints(S.Settings)


def leaf_keys(cls, prefix: str = "") -> list[tuple[str, object]]:
    """(dotted key under its section, annotation) of every setting of `cls`, tables inside it walked
    (masking.mapnet)."""
    hints = typing.get_type_hints(cls)
    return [
        item
        for f in dc_fields(cls)
        for item in (
            leaf_keys(hints[f.name], f"{prefix}{f.name}.")
            if dataclasses.is_dataclass(hints[f.name])
            else [(f"{prefix}{f.name}", hints[f.name])]
        )
    ]


KEYS = [(sec.name, key, ann) for sec in dc_fields(S.Settings) for key, ann in leaf_keys(SECTION_CLASSES[sec.name])]


def values_of(annotation) -> st.SearchStrategy:
    """Well-typed values for a settings field (in range or not: validation decides)."""
    origin = get_origin(annotation)
    if origin is Literal:
        return st.sampled_from(get_args(annotation))
    if origin is tuple:
        args = get_args(annotation)
        if len(args) == 2 and args[1] is Ellipsis:
            return st.lists(values_of(args[0]), max_size=4)
        return st.tuples(*map(values_of, args)).map(list)
    return {
        bool: st.booleans(),
        int: st.integers(-(10**6), 10**6),
        str: st.text(max_size=12),
        float: st.floats(-1e6, 1e6, allow_nan=False),
    }[annotation]


def wrong_value(annotation):
    """A value of the wrong type (or outside a Literal's choices) for a field."""
    if get_origin(annotation) is Literal:
        return "not-a-choice"
    return 12 if annotation is str else "abc"


def as_updates(items) -> dict:
    out: dict = {}
    for sec, key, value in items:
        *tables, last = key.split(".")
        table = out.setdefault(sec, {})
        for name in tables:
            table = table.setdefault(name, {})
        table[last] = value
    return out


@hsettings(max_examples=60, deadline=None)
@given(st.lists(st.sampled_from(KEYS).flatmap(lambda k: values_of(k[2]).map(lambda v: (k[0], k[1], v))), max_size=6))
def test_property_any_well_typed_settings_resolve_or_fail_in_one_line_and_round_trip(items):
    try:
        s = S.resolve(None, as_updates(items))
    except MapnetError as exc:
        assert str(exc).startswith("invalid settings: ") and "\n" not in str(exc)
        return
    assert S.from_dict(tomllib.loads(s.to_toml()), "round trip") == s


@hsettings(max_examples=60, deadline=None)
@given(st.lists(st.sampled_from(KEYS), min_size=1, max_size=5, unique_by=lambda k: (k[0], k[1])))
def test_property_every_wrongly_typed_setting_is_named_in_one_message(keys):
    assignments = [f"{sec}.{key}={tomli_w.dumps({'v': wrong_value(ann)})[4:].strip()}" for sec, key, ann in keys]
    with pytest.raises(MapnetError) as exc:
        S.resolve(None, assignments=assignments)
    text = str(exc.value)
    assert "\n" not in text
    for sec, key, _ in keys:
        assert f"{sec}.{key}" in text, (sec, key, text)


@hsettings(max_examples=100, deadline=None)
@given(st.text(max_size=40))
def test_property_set_parsing_never_raises_anything_but_a_mapnet_error(text):
    try:
        section, key, _ = S.parse_assignment(text)
    except MapnetError:
        return
    assert text.split("=", 1)[0].strip() == f"{section}.{key}"


@hsettings(max_examples=100, deadline=None)
@given(st.sampled_from(KEYS).flatmap(lambda k: values_of(k[2]).map(lambda v: (k[0], k[1], v))))
def test_property_set_reads_back_any_toml_value(item):
    sec, key, value = item
    if value == [] or isinstance(value, str) and value.strip() != value:
        return  # an empty list and padded strings are TOML too, but --set strips its value first
    written = tomli_w.dumps({"v": value})[4:].strip()
    assert S.parse_assignment(f"{sec}.{key}={written}") == (sec, key, value)


def test_an_unknown_preset_is_named_with_the_other_bad_settings(tmp_path):
    with pytest.raises(MapnetError) as exc:
        S.resolve(None, {"model": {"preset": "huge"}}, ["optim.lr=abc"])
    assert "model.preset must be one of" in str(exc.value) and "optim.lr must be a number" in str(exc.value)
    cfg = tmp_path / "odd.toml"
    cfg.write_text("model = 5\n")  # a key where a table belongs
    with pytest.raises(MapnetError, match="model in .*odd.toml must be a table of keys"):
        S.resolve(cfg)


def test_compile_is_on_with_cuda_only_unless_forced():
    import torch

    cpu, cuda = torch.device("cpu"), torch.device("cuda")
    resolve = S.resolve
    auto = resolve(None, {}, [])
    assert auto.train.compile == "auto" and auto.train.compiles(cuda) and not auto.train.compiles(cpu)
    assert resolve(None, {}, ["train.compile=true"]).train.compiles(cpu)
    assert not resolve(None, {}, ["train.compile=false"]).train.compiles(cuda)
    with pytest.raises(MapnetError, match="train.compile must be one of 'auto', true, false"):
        resolve(None, {}, ["train.compile=1"])


# ---------------------------------------------------------------- numbers that are not numbers
FLOAT_KEYS = [(sec, key, ann) for sec, key, ann in KEYS if ann is float or float in get_args(ann)]


@pytest.mark.parametrize("bad", ["nan", "inf", "-inf"])
def test_every_float_setting_refuses_nan_and_infinities_beside_the_other_bad_keys(bad):
    """TOML reads nan and inf as floats and the range checks let NaN through (NaN < 0 is false): every float
    setting, and every float in a list setting, is refused at resolution, in the one report."""
    assert len(FLOAT_KEYS) > 30  # every float of the tree, not a hand-picked few
    for sec, key, ann in FLOAT_KEYS:
        value = (
            bad
            if ann is float
            else "[" + ", ".join(bad if a in (float, Ellipsis) else "1" for a in get_args(ann)) + "]"
        )
        with pytest.raises(MapnetError) as exc:
            S.resolve(None, assignments=[f"{sec}.{key}={value}", "train.steps=-1"])
        text = str(exc.value)
        assert "\n" not in text and f"{sec}.{key}" in text and f"must be a finite number (got {bad})" in text, text
        assert "train.steps must be >= 1 (got -1)" in text, text


def test_nan_in_a_config_file_or_a_run_settings_toml_is_refused(tmp_path):
    cfg = tmp_path / "run.toml"
    cfg.write_text("[optim]\nlr = nan\n[masking]\nmask_prob = inf\n")
    with pytest.raises(
        MapnetError,
        match=r"optim.lr must be a finite number \(got nan\); masking.mask_prob must be a "
        r"finite number \(got inf\)",
    ):
        S.resolve(cfg)
    with pytest.raises(MapnetError, match="in settings.toml: optim.lr must be a finite number"):
        S.from_dict({"optim": {"lr": float("nan")}}, "settings.toml")


def run_main(argv: list, monkeypatch, capsys) -> tuple[int, list[str]]:
    """`mapnet ARGV` as the console script runs it (cli.main): exit code and stderr lines."""
    from mapnet_cli.cli import main

    monkeypatch.setattr("sys.argv", ["mapnet", *map(str, argv)])
    monkeypatch.setenv("COLUMNS", "400")
    with pytest.raises(SystemExit) as done:
        main()
    return done.value.code, capsys.readouterr().err.strip().splitlines()


@pytest.mark.parametrize(
    "argv",
    [
        ["--set", "optim.lr=nan", "--set", "masking.mask_prob=1.5"],
        ["--set", "optim.lr=inf", "--mask-prob", "nan"],  # a float flag goes through the same check
        ["--set", "optim.lr=-inf", "--set", "optim.betas=[0.9, nan]"],
    ],
)
def test_pretrain_refuses_nan_and_infinities_in_one_line_before_anything_is_written(
    argv, tmp_path, monkeypatch, capsys
):
    code, lines = run_main(["pretrain", tmp_path / "shards", "--out", tmp_path / "run", *argv], monkeypatch, capsys)
    assert code == 2 and len(lines) == 1 and lines[0].startswith("error: invalid settings: "), lines
    assert lines[0].count("must be") == 2 and ("nan" in lines[0] or "inf" in lines[0]), lines[0]
    assert not (tmp_path / "run").exists()


def test_shard_refuses_a_nan_valid_fraction_with_the_other_bad_settings(tmp_path, monkeypatch, capsys):
    code, lines = run_main(
        [
            "shard",
            tmp_path / "prep",
            "--out",
            tmp_path / "shards",
            "--valid-fraction",
            "nan",
            "--set",
            "shard.max_seq_len=1",
        ],
        monkeypatch,
        capsys,
    )
    assert code == 2 and len(lines) == 1, lines
    assert "shard.valid_fraction must be a finite number (got nan)" in lines[0] and "shard.max_seq_len" in lines[0]


def test_a_warm_up_half_given_names_the_other_half_and_where_its_value_came_from():
    """`--recipe paper --set train.short_seq.steps=1` said "needs train.short_seq.len" as if nothing had set it: the
    message now gives the value the user set, the one it lacks, that the paper recipe has no warm-up, and the fix."""
    with pytest.raises(MapnetError) as info:
        S.resolve(None, {"model": {"preset": "tiny"}, "train": {"recipe": "paper"}}, ["train.short_seq.steps=1"])
    text = str(info.value)
    assert "train.short_seq.steps = 1 would be ignored: train.short_seq.len is 0 (no sequence-length warm-up" in text
    assert "the paper recipe has none, the fast recipe's pieces are 16 tokens" in text
    assert "set train.short_seq.len too, or leave train.short_seq.steps at 0" in text
    with pytest.raises(
        MapnetError,
        match="train.short_seq.len = 8 turns the sequence-length warm-up on: give its length, train.short_seq.steps",
    ):
        S.resolve(None, {"model": {"preset": "tiny"}, "train": {"recipe": "paper"}}, ["train.short_seq.len=8"])
    # The fast recipe sets both: lowering its steps alone is fine.
    assert S.resolve(None, {"model": {"preset": "tiny"}}, ["train.short_seq.steps=1"]).train.short_seq.len == 16


def test_fine_tuning_pools_the_mean_by_default_and_the_paper_protocol_keeps_cls():
    # experiments/pooling-default: [CLS] put a pretrained encoder below random init on SST-2; mean pooling did not.
    assert S.resolve().finetune.pooling == "mean"
    assert S.resolve(protocol="small").finetune.pooling == "mean"
    assert S.resolve(protocol="paper").finetune.pooling == "cls"
    assert S.resolve(protocol="paper", assignments=["finetune.pooling=mean"]).finetune.pooling == "mean"


INT_KEYS = [(sec, key) for sec, key, annotation in KEYS if annotation is int]


@pytest.mark.parametrize("value", [-1, 1 << 63])
def test_every_integer_setting_refuses_a_negative_value_and_one_beyond_64_bits(value):
    """`--seed -1` trained until numpy refused the seed (a traceback, a run folder left); `--set train.seed=2**64`
    until torch did. Every integer setting now has a range: seeds and counts are >= 0 (most >= 1), and every
    integer fits TOML's 64 bits, which a run's settings.toml must hold."""
    accepted = []
    for sec, key in INT_KEYS:
        try:
            S.resolve(None, assignments=[f"{sec}.{key}={value}"])
            accepted.append(f"{sec}.{key}")
        except MapnetError as exc:
            assert key in str(exc), str(exc)  # named (a few checks name a group: "batch_ramp_start, ... must be")
    assert accepted == []


def test_every_seed_declares_its_minimum():
    """Seeds are declared with `seed_setting` (minimum 0, checked for every section): a seed added later is covered."""
    for sec, key in INT_KEYS:
        if key.endswith("seed"):
            field = next(f for f in dataclasses.fields(SECTION_CLASSES[sec]) if f.name == key)
            assert field.metadata.get("minimum") == 0, f"{sec}.{key}"


def test_pretrain_refuses_a_negative_seed_before_anything_is_written(tmp_path, monkeypatch, capsys):
    code, lines = run_main(
        ["pretrain", tmp_path / "shards", "--out", tmp_path / "run", "--seed", "-1"], monkeypatch, capsys
    )
    assert code == 2 and lines == ["error: invalid settings: train.seed must be >= 0 (got -1)"], lines
    assert not (tmp_path / "run").exists()


@pytest.mark.parametrize(
    "content, expected",
    [
        (bytes(range(128, 256)), "is not UTF-8 text (byte 0x80 at offset 0)"),
        (
            b"\xef\xbb\xbf[optim]\nlr = 1e-3\n",
            "starts with a UTF-8 byte-order mark, which the TOML reader refuses; save it without one",
        ),
    ],
    ids=["binary", "bom"],
)
@pytest.mark.parametrize(
    "command", [["config", "show"], ["pretrain", "SHARDS", "--out", "OUT"], ["preprocess", "TEXT", "--out", "OUT"]]
)
def test_a_config_file_not_utf8_or_with_a_bom_is_one_line_in_every_command(
    command, content, expected, tmp_path, monkeypatch, capsys
):
    """A binary --config was a UnicodeDecodeError traceback in pretrain, preprocess and config show; a BOM said
    "Invalid statement (at line 1, column 1)", pointing at nothing the user can see."""
    cfg = tmp_path / "run.toml"
    cfg.write_bytes(content)
    (tmp_path / "t.txt").write_text("Some text. More text.\n")
    names = {"SHARDS": tmp_path / "shards", "OUT": tmp_path / "out", "TEXT": tmp_path / "t.txt"}
    code, lines = run_main([names.get(a, a) for a in command] + ["--config", cfg], monkeypatch, capsys)
    assert code == 2 and len(lines) == 1 and lines[0].startswith(f"error: {cfg} {expected}"), lines
    assert not (tmp_path / "out").exists()
