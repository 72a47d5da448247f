"""Broker loggers (KIP-412, config resource type 8): Python's loggers under Kafka's names
and log4j levels, read and changed at runtime as ``kafka-configs --entity-type
broker-loggers`` does. Changes are not stored: a restart goes back to the logging set-up,
as in Kafka.

Kafka's levels map onto Python's: TRACE 5 (below DEBUG; Python has none), DEBUG, INFO, WARN
(WARNING), ERROR, FATAL (CRITICAL), OFF (above CRITICAL: nothing passes); ALL is TRACE.
Kafka's root logger is named ``root``. Sans-I/O apart from the ``logging`` module.
"""

from __future__ import annotations

import logging

ROOT = "root"
TRACE = 5
OFF = logging.CRITICAL + 10
LEVELS = {
    "ALL": TRACE,
    "TRACE": TRACE,
    "DEBUG": logging.DEBUG,
    "INFO": logging.INFO,
    "WARN": logging.WARNING,
    "ERROR": logging.ERROR,
    "FATAL": logging.CRITICAL,
    "OFF": OFF,
}
# Kafka's Log4jController message lists the valid levels in this order.
_VALID = "ALL, DEBUG, ERROR, FATAL, INFO, OFF, TRACE, WARN"


class LoggerError(ValueError):
    """A refused change; ``invalid_request`` tells Kafka's INVALID_REQUEST from
    INVALID_CONFIG, with Kafka's messages."""

    def __init__(self, message: str, *, invalid_request: bool = False) -> None:
        super().__init__(message)
        self.invalid_request = invalid_request


def level_name(level: int) -> str:
    """The Kafka name of a Python level (the nearest at or above it)."""
    for name in ("TRACE", "DEBUG", "INFO", "WARN", "ERROR", "FATAL"):
        if level <= LEVELS[name]:
            return name
    return "OFF"


def loggers() -> dict[str, str]:
    """Every logger this process has made, and the root, with its effective level."""
    found = {ROOT: level_name(logging.getLogger().level)}
    for name, logger in sorted(logging.Logger.manager.loggerDict.items()):
        if isinstance(logger, logging.Logger):
            found[name] = level_name(logger.getEffectiveLevel())
    return found


def _logger(name: str) -> logging.Logger:
    if name == ROOT:
        return logging.getLogger()
    found = logging.Logger.manager.loggerDict.get(name)
    if not isinstance(found, logging.Logger):
        raise LoggerError(f"Logger {name} does not exist!")
    return found


def check(changes: list[tuple[str, int, str | None]]) -> None:
    """Check (logger, operation, level) changes as Kafka's ``validateLoggers``: SET (0) and
    DELETE (1) only, of loggers that exist, to Kafka's levels; the root's is never removed.

    Raises:
        LoggerError: the first change at fault.
    """
    for name, op, value in changes:
        if op not in (0, 1):
            kind = {2: "APPEND", 3: "SUBTRACT"}.get(op, str(op))
            raise LoggerError(
                f"{kind} operation is not allowed for the BROKER_LOGGER resource",
                invalid_request=True,
            )
        _logger(name)
        if op == 1 and name == ROOT:
            raise LoggerError(
                "Removing the log level of the root logger is not allowed",
                invalid_request=True,
            )
        if op == 0 and (value or "").upper() not in LEVELS:
            raise LoggerError(
                f"Cannot set the log level of {name} to {value} as it is not a supported "
                f"log level. Valid log4j levels are {_VALID}"
            )


def apply(changes: list[tuple[str, int, str | None]]) -> None:
    """Apply checked changes: SET a level, DELETE it (the logger follows its parent)."""
    for name, op, value in changes:
        logger = _logger(name)
        logger.setLevel(LEVELS[(value or "").upper()] if op == 0 else logging.NOTSET)
