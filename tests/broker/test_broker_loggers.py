"""broker_loggers: Kafka's level names over Python's loggers, checked as Kafka checks them."""

from __future__ import annotations

import logging
from collections.abc import Iterator

import pytest

from tierlog.broker import broker_loggers
from tierlog.broker.broker_loggers import LoggerError, apply, check, level_name, loggers


@pytest.fixture
def child() -> Iterator[logging.Logger]:
    parent = logging.getLogger("tierlog.test_loggers")
    logger = logging.getLogger("tierlog.test_loggers.child")
    parent.setLevel(logging.WARNING)
    try:
        yield logger
    finally:
        logger.setLevel(logging.NOTSET)
        parent.setLevel(logging.NOTSET)


def test_levels_map_both_ways() -> None:
    for name in ("TRACE", "DEBUG", "INFO", "WARN", "ERROR", "FATAL", "OFF"):
        assert level_name(broker_loggers.LEVELS[name]) == name
    assert level_name(logging.WARNING) == "WARN" and level_name(logging.CRITICAL) == "FATAL"


def test_set_and_delete_change_the_level_at_once(child: logging.Logger) -> None:
    name = child.name
    assert loggers()[name] == "WARN"  # its parent's, effective
    check([(name, 0, "trace")])
    apply([(name, 0, "trace")])
    assert loggers()[name] == "TRACE" and child.isEnabledFor(broker_loggers.TRACE)
    apply([(name, 0, "OFF")])
    assert not child.isEnabledFor(logging.CRITICAL)
    apply([(name, 1, None)])
    assert loggers()[name] == "WARN"


@pytest.mark.parametrize(
    ("change", "message", "invalid_request"),
    [
        (("no.such.logger", 0, "INFO"), "Logger no.such.logger does not exist!", False),
        (("root", 0, "LOUD"), "Cannot set the log level of root to LOUD", False),
        (("root", 1, None), "Removing the log level of the root logger is not allowed", True),
        (("root", 2, "INFO"), "APPEND operation is not allowed", True),
    ],
)
def test_refusals_carry_kafkas_messages(
    change: tuple[str, int, str | None], message: str, invalid_request: bool
) -> None:
    with pytest.raises(LoggerError) as info:
        check([change])
    assert message in str(info.value) and info.value.invalid_request == invalid_request
