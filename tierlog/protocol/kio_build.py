"""Build kio response entities of any version from plain, version-independent values.

kio generates one frozen dataclass per API version, each with its own nested classes. The
handlers describe an answer once, as dicts of Kafka field names (``{"error_code": 0,
"partitions": [{...}]}``) with ints for times and ms durations, and ``build`` fits it to the
requested version: fields the version lacks are dropped, fields the dict lacks take kio's
defaults, and values are converted to kio's types (``ErrorCode``, ``timedelta``,
``datetime``). The per-class field plan is computed once and cached.
"""

from __future__ import annotations

import dataclasses
import datetime
import types
import typing
from collections.abc import Callable, Mapping
from typing import Any

from kio.schema.errors import ErrorCode

_EPOCH = datetime.datetime(1970, 1, 1, tzinfo=datetime.UTC)
_MISSING = dataclasses.MISSING


def _ms_timedelta(value: Any) -> Any:
    return (
        value
        if isinstance(value, datetime.timedelta)
        else datetime.timedelta(milliseconds=int(value))
    )


def _ms_datetime(value: Any) -> Any:
    if value is None or isinstance(value, datetime.datetime):
        return value
    if value < 0:
        return None  # kio writes None as -1 ("no timestamp")
    return _EPOCH + datetime.timedelta(milliseconds=int(value))


def _error_code(value: Any) -> Any:
    return value if isinstance(value, ErrorCode) else ErrorCode(int(value))


_CONVERTERS: dict[str, Callable[[Any], Any]] = {
    "timedelta_i32": _ms_timedelta,
    "timedelta_i64": _ms_timedelta,
    "datetime_i64": _ms_datetime,
    "error_code": _error_code,
}


@dataclasses.dataclass(frozen=True, slots=True)
class _FieldPlan:
    name: str
    convert: Callable[[Any], Any] | None
    nested: type | None  # element class of a tuple of entities, or an entity class
    many: bool
    required: bool


_PLANS: dict[type, tuple[_FieldPlan, ...]] = {}


def _plan(cls: type) -> tuple[_FieldPlan, ...]:
    plan = _PLANS.get(cls)
    if plan is not None:
        return plan
    hints = typing.get_type_hints(cls)
    fields = []
    for f in dataclasses.fields(cls):
        hint = hints[f.name]
        if isinstance(hint, types.UnionType) or typing.get_origin(hint) is typing.Union:
            # Nullable field: plan for the non-None member.
            hint = next(a for a in typing.get_args(hint) if a is not type(None))
        nested: type | None = None
        many = False
        if typing.get_origin(hint) is tuple:
            element = typing.get_args(hint)[0]
            many = True
            if dataclasses.is_dataclass(element):
                nested = element  # type: ignore[assignment]
        elif dataclasses.is_dataclass(hint):
            nested = hint  # type: ignore[assignment]
        required = f.default is _MISSING and f.default_factory is _MISSING
        convert = _CONVERTERS.get(f.metadata.get("kafka_type", ""))
        fields.append(_FieldPlan(f.name, convert, nested, many, required))
    plan = tuple(fields)
    _PLANS[cls] = plan
    return plan


def build(cls: type, data: Mapping[str, Any]) -> Any:
    """An instance of kio entity ``cls`` from ``data`` (see module docstring).

    A required field missing from ``data`` gets an empty tuple (arrays) or raises.

    Raises:
        KeyError: a required scalar field is missing.
    """
    kwargs: dict[str, Any] = {}
    for f in _plan(cls):
        if f.name not in data:
            if f.required:
                if f.many:
                    kwargs[f.name] = ()
                    continue
                raise KeyError(f"{cls.__qualname__}.{f.name} is required")
            continue
        value = data[f.name]
        if value is None:
            pass
        elif f.nested is not None:
            if f.many:
                value = tuple(build(f.nested, item) for item in value)
            elif isinstance(value, Mapping):
                value = build(f.nested, value)
        elif f.convert is not None:
            value = f.convert(value)
        elif f.many:
            value = tuple(value)
        kwargs[f.name] = value
    return cls(**kwargs)


def field(obj: Any, name: str, default: Any = None) -> Any:
    """A request field that only some versions have (``topic_id``, ``group_instance_id``)."""
    return getattr(obj, name, default)


# Every produce request converts its timeout: one timedelta made once, not per call.
_ONE_MS = datetime.timedelta(milliseconds=1)


def millis(value: Any) -> int:
    """A kio duration/time field as int ms (-1 for None)."""
    if value is None:
        return -1
    if isinstance(value, datetime.timedelta):
        return int(value / _ONE_MS)
    if isinstance(value, datetime.datetime):
        return int((value - _EPOCH) / _ONE_MS)
    return int(value)
