"""remote.log.storage.options: the flat keys, the JSON form, and which values change type."""

from __future__ import annotations

import pytest

from tierlog.remote.storage_options import remote_options
from tierlog.util.configdef import ConfigError

P = "remote.log.storage.options"


def test_flat_keys_nest_and_only_plain_integers_and_booleans_change_type() -> None:
    options = remote_options(
        {
            f"{P}.client_kwargs.endpoint_url": "http://127.0.0.1:5000",
            f"{P}.anon": "False",
            f"{P}.max_concurrency": "8",
            f"{P}.offset": "-5",
            f"{P}.secret": "0123",  # a leading zero: not a number someone wrote
            f"{P}.big": "1e3",
            "unrelated.key": "x",
        }
    )
    assert options == {
        "client_kwargs": {"endpoint_url": "http://127.0.0.1:5000"},
        "anon": False,
        "max_concurrency": 8,
        "offset": -5,
        "secret": "0123",
        "big": "1e3",
    }


def test_the_json_form_keeps_case_and_strings_and_flat_keys_merge_over_it() -> None:
    options = remote_options(
        {
            P: '{"s3_additional_kwargs": {"ServerSideEncryption": "AES256"}, "key": "0123",'
            ' "client_kwargs": {"region_name": "eu-west-1"}}',
            f"{P}.client_kwargs.endpoint_url": "http://127.0.0.1:5000",
            f"{P}.key": "0456",
        }
    )
    assert options == {
        "s3_additional_kwargs": {"ServerSideEncryption": "AES256"},
        "key": "0456",
        "client_kwargs": {"region_name": "eu-west-1", "endpoint_url": "http://127.0.0.1:5000"},
    }
    assert remote_options({P: "  "}) == {}


@pytest.mark.parametrize(
    ("value", "reason"),
    [("{not json", "not JSON"), ('["a"]', "expected a JSON object"), ("3", "JSON object")],
)
def test_a_bad_json_form_names_the_key(value: str, reason: str) -> None:
    with pytest.raises(ConfigError, match=reason) as info:
        remote_options({P: value})
    assert P in str(info.value)


def test_a_flat_key_cannot_replace_a_json_group() -> None:
    with pytest.raises(ConfigError, match="both a value and a group"):
        remote_options({P: '{"client_kwargs": {"a": 1}}', f"{P}.client_kwargs": "x"})
