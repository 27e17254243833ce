import pytest

from mapnet_cli.comma_list import comma_list
from mapnet_cli.errors import MapnetError


def test_split_strips_and_drops_empty_items():
    assert comma_list(" a, b ,,c,", "--x") == ["a", "b", "c"]
    assert comma_list("16, 32,", "--batch-sizes", convert=int) == [16, 32]


def test_empty_list_is_an_error_unless_allowed():
    with pytest.raises(MapnetError, match=r"--lrs is empty \(got ' , '\)"):
        comma_list(" , ", "--lrs", convert=float)
    assert comma_list("", "--schemes", allow_empty=True) == []


def test_unknown_item_names_it_and_the_allowed_ones():
    with pytest.raises(MapnetError) as err:
        comma_list("rte,nope", "GLUE task", allowed=["RTE", "SST-2"], key=str.lower)
    assert str(err.value) == "unknown GLUE task 'nope' (choose from RTE, SST-2)"
    assert comma_list("rte,SST-2", "GLUE task", allowed=["RTE", "SST-2"], key=str.lower) == ["rte", "SST-2"]


def test_conversion_error_names_the_bad_item():
    with pytest.raises(MapnetError) as err:
        comma_list("1e-5,fast", "--lrs", convert=float)
    assert str(err.value) == "--lrs must be a comma-separated list of floats: 'fast' is not one (got '1e-5,fast')"
    assert "\n" not in str(err.value)


@pytest.mark.parametrize("bad", ["nan", "inf", "-inf", "NaN", "infinity"])
def test_numbers_that_are_not_numbers_are_refused(bad):
    """float() reads them all; a learning rate of nan would reach torch."""
    with pytest.raises(MapnetError) as err:
        comma_list(f"1e-5,{bad}", "--lrs", convert=float)
    assert (
        str(err.value)
        == f"--lrs must be a comma-separated list of finite numbers: {bad!r} is not one (got '1e-5,{bad}')"
    )
    assert comma_list("1e-5, 2e-5", "--lrs", convert=float) == [1e-5, 2e-5]


@pytest.mark.parametrize("flag", [["--lrs", "nan"], ["--lrs", "2e-5,inf"], ["--grid", "16x-inf"]])
def test_finetune_glue_refuses_a_nan_learning_rate_in_one_line_before_any_work(flag, tmp_path, monkeypatch, capsys):
    from mapnet_cli.cli import main

    argv = [
        "finetune-glue",
        "--task",
        "sst2",
        "--checkpoint",
        tmp_path / "run",
        "--data",
        tmp_path / "glue",
        "--out",
        tmp_path / "out",
        *flag,
    ]
    monkeypatch.setattr("sys.argv", ["mapnet", *map(str, argv)])
    monkeypatch.setenv("COLUMNS", "400")
    with pytest.raises(SystemExit) as done:
        main()
    lines = capsys.readouterr().err.strip().splitlines()
    assert done.value.code == 2 and len(lines) == 1 and "finite numbers" in lines[0], lines
    assert not (tmp_path / "out").exists()
