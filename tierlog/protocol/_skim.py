"""A structural pre-pass over flexible request frames, run before kio reads them.

Two gaps in kio 0.6.5's native reader make it unsafe to hand it untrusted flexible-version
bytes directly:

1. A compact array's element count is used to preallocate before any element is read. A
   five-byte varint announcing 2**32 - 2 elements makes it request ~34 GB, and Rust aborts
   the whole process on allocation failure: one bad frame would kill the broker. Kafka's
   own parser refuses any collection larger than the bytes that remain; so does this pass.
   (Legacy int32-counted arrays are not affected: kio checks those.)
2. Unknown tagged fields are an error for kio, while KIP-482 says a reader skips them: that
   is how new optional fields reach old brokers. This pass records them, and the frame
   handed to kio is rebuilt without them (a copy, only when there are any).

The pass walks the wire layout of the request's kio schema (header v2 + body): fixed-size
fields are skipped in runs, compact strings/bytes/arrays have their lengths bounded by the
frame, and tagged-field sections are checked tag by tag. It reads no values into Python
objects. Per request schema, the walk is generated as one straight-line Python function
from kio's dataclass metadata (a closure per field cost ~3 µs for a one-partition Produce;
the generated code is several times faster). Truncation shows up as ``IndexError`` from
``data[pos]`` (every function runs over a whole buffer) or as a final position past the
end; loops are bounded because no array may count more elements than bytes remain. Bytes
after the body are left alone (``decode_request`` ignores them, as Kafka does).
"""

from __future__ import annotations

import dataclasses
import itertools
import types
import typing
from collections.abc import Callable
from typing import Any, Final

from kio.schema.request_header.v2.header import RequestHeader as RequestHeaderV2

__all__ = ["SkimError", "skimmer_for"]


class SkimError(Exception):
    """The frame violates the layout (message says where)."""


Buffer = bytes | memoryview
# (count_start, count_end, new_count, [(span_start, span_end), ...]) per tag section with
# unknown tags to drop.
Edit = tuple[int, int, int, list[tuple[int, int]]]
# A generated walker: (data, pos, edits or None) -> position after what it walked. With
# ``edits`` None, unknown tags are refused rather than recorded (inside a known tagged
# field, whose size prefix would go stale if something were cut out of it).
_Walker = Callable[[Buffer, int, list[Edit] | None], int]

_FIXED_SIZES: Final = {
    "bool": 1,
    "int8": 1,
    "uint8": 1,
    "int16": 2,
    "uint16": 2,
    "error_code": 2,
    "int32": 4,
    "uint32": 4,
    "timedelta_i32": 4,
    "int64": 8,
    "uint64": 8,
    "float64": 8,
    "timedelta_i64": 8,
    "datetime_i64": 8,
    "uuid": 16,
}
_VARIABLE: Final = frozenset({"string", "bytes", "records"})


def _read_uvarint(data: Buffer, pos: int) -> tuple[int, int]:
    # Kafka's unsigned varints are at most 5 bytes (32 bits).
    result = 0
    for shift in (0, 7, 14, 21, 28):
        byte = data[pos]
        pos += 1
        result |= (byte & 0x7F) << shift
        if byte < 0x80:
            return result, pos
    raise SkimError(f"varint longer than 5 bytes before {pos}")


def _encode_uvarint(value: int) -> bytes:
    out = bytearray()
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def _tags(data: Buffer, pos: int, edits: list[Edit] | None, known: dict[int, _Walker]) -> int:
    """A non-empty tagged-field section (the generated code inlines the empty case)."""
    count_start = pos
    count, pos = _read_uvarint(data, pos)
    if count > len(data) - pos:
        raise SkimError(f"{count} tagged fields overrun the frame")
    count_end = pos
    unknown: list[tuple[int, int]] = []
    for _ in range(count):
        field_start = pos
        tag, pos = _read_uvarint(data, pos)
        size, pos = _read_uvarint(data, pos)
        field_end = pos + size
        if field_end > len(data):
            raise SkimError(f"tagged field {tag} overruns the frame")
        walker = known.get(tag)
        if walker is None:
            unknown.append((field_start, field_end))
        elif walker(data[pos:field_end], 0, None) != size:
            raise SkimError(f"tagged field {tag} does not fill its {size} bytes")
        pos = field_end
    if unknown:
        if edits is None:
            raise SkimError("unknown tagged field inside a tagged field")
        edits.append((count_start, count_end, count - len(unknown), unknown))
    return pos


def _unwrap_optional(tp: object) -> tuple[object, bool]:
    if typing.get_origin(tp) in (types.UnionType, typing.Union):
        args = [a for a in typing.get_args(tp) if a is not types.NoneType]
        if len(args) == 1:
            return args[0], True
    return tp, False


def _primitive_size(field: dataclasses.Field[Any]) -> int | None:
    """Fixed size of a primitive field, or None for compact strings/bytes."""
    kafka_type = field.metadata["kafka_type"]
    if kafka_type in _FIXED_SIZES:
        return int(_FIXED_SIZES[kafka_type])
    if kafka_type in _VARIABLE:
        return None
    raise TypeError(f"unknown kafka_type {kafka_type!r} of field {field.name}")


class _Generator:
    """Emits the Python source of one walker; ``namespace`` gets what it refers to."""

    def __init__(self, namespace: dict[str, Any], names: itertools.count[int]) -> None:
        self.lines: list[str] = []
        self.namespace = namespace
        self.names = names
        self.pending = 0  # fixed-size bytes not yet added to pos

    def var(self, prefix: str) -> str:
        return f"{prefix}{next(self.names)}"

    def emit(self, depth: int, line: str) -> None:
        self.flush(depth)
        self.lines.append("    " * depth + line)

    def flush(self, depth: int) -> None:
        if self.pending:
            size, self.pending = self.pending, 0
            self.lines.append("    " * depth + f"pos += {size}")

    def varint(self, depth: int, target: str) -> None:
        self.emit(depth, f"{target} = data[pos]")
        self.emit(depth, f"if {target} < 128: pos += 1")
        self.emit(depth, f"else: {target}, pos = _read_uvarint(data, pos)")

    def compact_bytes(self, depth: int) -> None:
        n = self.var("n")
        self.varint(depth, n)
        self.emit(depth, f"if {n}: pos += {n} - 1")

    def legacy_string(self, depth: int) -> None:
        n = self.var("n")
        self.emit(depth, f"{n} = data[pos] << 8 | data[pos + 1]")
        self.emit(depth, "pos += 2")
        self.emit(depth, f"if {n} < 0x8000: pos += {n}")

    def array(self, depth: int, item_size: int | None, item: Callable[[int], None]) -> None:
        n = self.var("n")
        self.varint(depth, n)
        self.emit(depth, f"if {n}:")
        self.emit(depth + 1, f"{n} -= 1")
        # Kafka's rule: never more elements than bytes left (each takes at least one).
        self.emit(depth + 1, f"if {n} * {item_size or 1} > len(data) - pos:")
        self.emit(depth + 2, f"raise SkimError('array of %d elements overruns the frame' % {n})")
        if item_size is not None:
            self.emit(depth + 1, f"pos += {n} * {item_size}")
            return
        self.emit(depth + 1, f"for _ in range({n}):")
        item(depth + 2)
        self.flush(depth + 2)

    def tag_section(self, depth: int, known: dict[int, _Walker]) -> None:
        name = self.var("known")
        self.namespace[name] = known
        self.emit(depth, "if data[pos] == 0: pos += 1")
        self.emit(depth, f"else: pos = _tags(data, pos, edits, {name})")

    def field(self, depth: int, field: dataclasses.Field[Any], is_tag: bool) -> None:
        tp, optional = _unwrap_optional(field.type)
        if typing.get_origin(tp) is tuple:
            (inner, _ellipsis) = typing.get_args(tp)
            if isinstance(inner, type) and dataclasses.is_dataclass(inner):
                entity: type = inner
                self.array(depth, None, lambda d: self.entity(d, entity))
            else:
                size = _primitive_size(field)
                self.array(depth, size, self.compact_bytes)
        elif isinstance(tp, type) and dataclasses.is_dataclass(tp):
            if optional and not is_tag:
                # KIP-893 nullable struct: int8 marker, -1 for null.
                marker = self.var("m")
                self.emit(depth, f"{marker} = data[pos]")
                self.emit(depth, "pos += 1")
                self.emit(depth, f"if {marker} != 0xFF:")
                self.entity(depth + 1, tp)
                self.flush(depth + 1)
            else:
                self.entity(depth, tp)
        else:
            size = _primitive_size(field)
            if size is None:
                self.compact_bytes(depth)
            else:
                self.pending += size

    def entity(self, depth: int, entity_type: type) -> None:
        if not getattr(entity_type, "__flexible__", False):
            raise TypeError(f"{entity_type.__name__} is not a flexible schema")
        known: dict[int, _Walker] = {}
        for field in dataclasses.fields(entity_type):
            tag = field.metadata.get("tag")
            if tag is None:
                self.field(depth, field, is_tag=False)
            else:
                known[int(tag)] = _compile(
                    f"tag_{entity_type.__name__}_{field.name}", _TaggedField(field)
                )
        self.tag_section(depth, known)


class _TaggedField:
    """Body of the walker for one known tagged field's content."""

    def __init__(self, field: dataclasses.Field[Any]) -> None:
        self.field = field

    def __call__(self, gen: _Generator) -> None:
        gen.field(1, self.field, is_tag=True)


_NAMES = itertools.count()
# Generated source by function name, for debugging (``print(_SOURCES[...])``).
_SOURCES: dict[str, str] = {}


def _compile(name: str, body: Callable[[_Generator], None]) -> _Walker:
    namespace: dict[str, Any] = {
        "SkimError": SkimError,
        "_read_uvarint": _read_uvarint,
        "_tags": _tags,
    }
    gen = _Generator(namespace, _NAMES)
    body(gen)
    gen.flush(1)
    source = "\n".join([f"def {name}(data, pos, edits):", *gen.lines, "    return pos"])
    exec(compile(source, f"<skim {name}>", "exec"), namespace)
    _SOURCES[name] = source
    walker: _Walker = namespace[name]
    return walker


def _header_v2(gen: _Generator) -> None:
    # api key, version, correlation id; client id as a *legacy* nullable string (Kafka
    # special-cases it so that any broker can read it); then tagged fields.
    gen.pending += 8
    gen.legacy_string(1)
    gen.tag_section(1, {})


assert [f.name for f in dataclasses.fields(RequestHeaderV2)] == [
    "request_api_key",
    "request_api_version",
    "correlation_id",
    "client_id",
]


def skimmer_for(request_type: type) -> Callable[[Buffer], Buffer]:
    """A checker for frames of a flexible ``request_type`` (header v2 + body).

    The returned function returns the frame itself, or a copy without unknown tagged
    fields, and raises ``SkimError`` where kio must not be let loose on it.
    """

    def whole(gen: _Generator) -> None:
        _header_v2(gen)
        gen.entity(1, request_type)

    version = getattr(request_type, "__version__", "")
    walker = _compile(f"skim_{request_type.__name__}_v{version}", whole)

    def skim(data: Buffer) -> Buffer:
        edits: list[Edit] = []
        try:
            pos = walker(data, 0, edits)
        except IndexError:
            raise SkimError("truncated") from None
        if pos > len(data):  # bytes after the body are ignored, as Kafka does
            raise SkimError("truncated")
        return _rebuild(data, edits) if edits else data

    return skim


def _rebuild(data: Buffer, edits: list[Edit]) -> bytes:
    out = bytearray()
    last = 0
    for count_start, count_end, new_count, spans in edits:
        out += data[last:count_start]
        out += _encode_uvarint(new_count)
        last = count_end
        for start, stop in spans:
            out += data[last:start]
            last = stop
    out += data[last:]
    return bytes(out)
