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
