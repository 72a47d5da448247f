"""The value of ``tierlog.log.cleaner.state``: led partitions only, ``null`` without a
cleaner, topic names with dashes, and values that are not one are refused."""

from __future__ import annotations

import pytest

from tierlog.broker.cleaner_state import decode, encode


def test_round_trip_of_the_led_partitions() -> None:
    states = {("user-events", 0): {"dirty_ratio": 0.5, "last_clean": None},
              ("user-events", 1): {"dirty_ratio": 0.1, "last_clean": None}}  # fmt: skip
    value = encode(states, lambda topic, partition: partition == 1)
    assert value == '{"user-events-1":{"dirty_ratio":0.1,"last_clean":null}}'
    assert decode(value) == {("user-events", 1): {"dirty_ratio": 0.1, "last_clean": None}}


def test_no_cleaner_is_null() -> None:
    assert encode(None, lambda *_: True) == "null"
    assert decode("null") is None


@pytest.mark.parametrize("value", ["", "[]", '{"nopartition":{}}', '{"t-0":1}'])
def test_what_is_not_a_state_is_refused(value: str) -> None:
    with pytest.raises(ValueError):
        decode(value)
