from __future__ import annotations

import pytest

from tierlog.util.configdef import ConfigDef, ConfigError, ConfigKey, at_least, one_of


@pytest.fixture
def config_def() -> ConfigDef:
    return ConfigDef(
        [
            ConfigKey("a.int", "int", 5, "an int", at_least(1)),
            ConfigKey("a.long", "long", 2**40, "a long"),
            ConfigKey("a.bool", "bool", False, "a bool"),
            ConfigKey("a.string", "string", "x", "a string", one_of("x", "y")),
            ConfigKey("a.list", "list", ["p"], "a list", one_of("p", "q")),
        ]
    )


def test_defaults_fill_unset_keys(config_def: ConfigDef) -> None:
    assert config_def.parse({}) == {
        "a.int": 5,
        "a.long": 2**40,
        "a.bool": False,
        "a.string": "x",
        "a.list": ["p"],
    }


def test_strings_are_parsed_by_type(config_def: ConfigDef) -> None:
    values = config_def.parse(
        {
            "a.int": " 1_000 ",
            "a.long": "9223372036854775807",
            "a.bool": "TRUE",
            "a.string": " y ",
            "a.list": "q, p,,",
        }
    )
    assert values == {
        "a.int": 1000,
        "a.long": 2**63 - 1,
        "a.bool": True,
        "a.string": "y",
        "a.list": ["q", "p"],
    }


def test_typed_values_are_taken_as_given(config_def: ConfigDef) -> None:
    values = config_def.parse({"a.int": 7, "a.bool": True, "a.list": ["q"]})
    assert (values["a.int"], values["a.bool"], values["a.list"]) == (7, True, ["q"])


def test_unknown_key_is_named(config_def: ConfigDef) -> None:
    with pytest.raises(ConfigError) as info:
        config_def.parse({"no.such.key": "1"})
    assert info.value.key == "no.such.key"
    assert "no.such.key" in str(info.value)
    assert "unknown" in info.value.reason


def test_unknown_key_allowed_when_asked(config_def: ConfigDef) -> None:
    assert config_def.parse({"no.such.key": "1"}, allow_unknown=True)["a.int"] == 5


@pytest.mark.parametrize(
    ("key", "raw", "reason_part"),
    [
        ("a.int", "abc", "expected int"),
        ("a.int", "", "expected int"),
        ("a.int", "0", "must be >= 1"),
        ("a.long", "1.5", "expected long"),
        ("a.bool", "yes", "expected bool"),
        ("a.string", "z", "must be one of x, y"),
        ("a.list", "p,r", "got r"),
    ],
)
def test_bad_values_name_the_key(
    config_def: ConfigDef, key: str, raw: str, reason_part: str
) -> None:
    with pytest.raises(ConfigError) as info:
        config_def.parse({key: raw})
    assert info.value.key == key
    assert repr(key) in str(info.value)
    assert reason_part in info.value.reason


@pytest.mark.parametrize(
    ("key", "value"),
    [("a.int", None), ("a.int", b"5"), ("a.int", True), ("a.bool", 1), ("a.list", 3)],
)
def test_wrongly_typed_values_name_the_key(config_def: ConfigDef, key: str, value: object) -> None:
    with pytest.raises(ConfigError) as info:
        config_def.parse({key: value})
    assert info.value.key == key


def test_list_check_accepts_a_tuple(config_def: ConfigDef) -> None:
    assert config_def.parse({"a.list": ("q", "p")})["a.list"] == ["q", "p"]


def test_at_least_and_one_of() -> None:
    assert at_least(3)(3) is None
    assert at_least(3)(2) == "must be >= 3, got 2"
    assert one_of("a", "b")("a") is None
    assert one_of("a", "b")(["a", "c", "d"]) == "must be one of a, b; got c, d"


def test_config_error_is_a_value_error() -> None:
    err = ConfigError("k", "bad")
    assert isinstance(err, ValueError)
    assert str(err) == "config 'k': bad"
