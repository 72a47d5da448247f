"""Requests in, responses out: kio entities to and from frames, for the APIs in ``SUPPORTED``.

Server side: ``decode_request(frame)`` reads the request header and body of one frame (as
returned by ``FrameDecoder``), ``encode_response(request, body)`` builds the complete framed
answer (size prefix, response header, body). Client side (the internal client, tools and
tests): ``encode_request`` and ``decode_response``.

Header versions (Kafka's rules, which kio's generated ``__header_schema__`` already follow):
requests use header v1 (int16 client id) for non-flexible versions and v2 (client id still
int16-length, then tagged fields) for flexible ones; responses use header v0 (correlation id)
or v1 (plus tagged fields), except ApiVersions whose response header is always v0 so that a
client can read it before it knows what the broker speaks (KIP-511).

ApiVersions of a version we do not know is the one request that is never refused: Kafka
answers it with a v0 body carrying error 35 and its ranges, and the client retries with a
version from them. ``decode_request`` therefore returns such a request with an empty v0 body
and ``response_version == 0``; ``api_versions_response(request.api_version)`` builds the
matching answer. Everything else that cannot be read raises a ``RequestError`` subclass and
nothing else: kio's decode errors, ``ValueError``, ``UnicodeDecodeError`` and friends are
wrapped in ``MalformedRequestError``. Bytes after a complete body are ignored, as Kafka does
(librdkafka relies on it, see ``decode_request``).

Schema, reader and writer lookups are cached per (api key, version). Flexible requests first
go through a structural pre-pass (``_skim``) that keeps kio 0.6.5 from aborting the process on
a huge compact-array count and drops unknown tagged fields, which kio would refuse.
"""

from __future__ import annotations

import io
import struct
from collections.abc import Callable
from dataclasses import dataclass
from typing import IO, Any, Final, cast

from kio.index import load_request_schema, load_response_schema
from kio.schema.api_versions.v0.request import ApiVersionsRequest as ApiVersionsRequestV0
from kio.schema.request_header.v1.header import RequestHeader as RequestHeaderV1
from kio.schema.request_header.v2.header import RequestHeader as RequestHeaderV2
from kio.serial import entity_reader, entity_writer
from kio.static.primitive import i16, i32
from kio.static.protocol import RequestHeader, RequestPayload, ResponsePayload

from tierlog.protocol._skim import skimmer_for
from tierlog.protocol.errors import (
    MalformedRequestError,
    MalformedResponseError,
    UnknownApiKeyError,
    UnsupportedVersionError,
)
from tierlog.protocol.versions import SUPPORTED, ApiKey, api_versions_response, is_supported

__all__ = [
    "Request",
    "decode_request",
    "decode_response",
    "encode_api_versions_fallback",
    "encode_request",
    "encode_response",
    "response_type_for",
    "warm_codecs",
]

_HEAD: Final = struct.Struct(">hhi")  # api_key, api_version, correlation_id
_RESPONSE_HEAD: Final = struct.Struct(">ii")  # size, correlation_id
_SIZE: Final = struct.Struct(">i")
# Room for size + correlation id, and for header v1 also its (empty) tagged-field count.
_HEADER_V0_SPACE: Final = bytes(8)
_HEADER_V1_SPACE: Final = bytes(9)

_Reader = Callable[[Any, int], tuple[Any, int]]
_Writer = Callable[[IO[bytes], Any], None]


@dataclass(slots=True)
class Request:
    """One decoded request.

    Attributes:
        api_key, api_version, correlation_id, client_id: from the request header.
        header: kio ``RequestHeader`` (v1 or v2) as read.
        body: kio request entity of ``api_version`` (for an ApiVersions request of an
            unknown version: an empty v0 ``ApiVersionsRequest``).
        response_version: the version the answer must have; ``api_version`` except for
            that ApiVersions fallback, where it is 0.
        size: bytes of the frame (header and body), for quotas and metrics.
    """

    api_key: int
    api_version: int
    correlation_id: int
    client_id: str | None
    header: RequestHeader
    body: RequestPayload
    response_version: int
    size: int


@dataclass(frozen=True, slots=True)
class _Codec:
    request_type: type[RequestPayload]
    response_type: type[ResponsePayload]
    read_header: _Reader
    read_body: _Reader
    # Flexible requests only: the pre-pass guarding kio (see ``_skim``).
    skim: Callable[[bytes | memoryview], bytes | memoryview] | None
    flexible_response_header: bool


_CODECS: dict[tuple[int, int], _Codec] = {}
# The codecs ``decode_request`` may use: only pairs in ``SUPPORTED``. Kept apart from
# ``_CODECS``, which also holds what a client in the same process built (a SaslHandshake
# encoded by a test or a tool), so a request the broker does not serve is never decoded.
_SERVED: dict[tuple[int, int], _Codec] = {}
_RESPONSE_WRITERS: dict[type[Any], _Writer] = {}


def _build(api_key: int, api_version: int) -> _Codec:
    request_type = load_request_schema(api_key, api_version)
    response_type = load_response_schema(api_key, api_version)
    codec = _Codec(
        request_type=request_type,
        response_type=response_type,
        read_header=cast(_Reader, entity_reader(request_type.__header_schema__)),
        read_body=cast(_Reader, entity_reader(request_type)),
        skim=skimmer_for(request_type) if request_type.__flexible__ else None,
        flexible_response_header=response_type.__header_schema__.__flexible__,
    )
    _CODECS[(api_key, api_version)] = codec
    return codec


def _codec(api_key: int, api_version: int) -> _Codec:
    codec = _CODECS.get((api_key, api_version))
    return codec if codec is not None else _build(api_key, api_version)


def _response_writer(response_type: type[Any]) -> _Writer:
    writer = _RESPONSE_WRITERS.get(response_type)
    if writer is None:
        writer = cast(_Writer, entity_writer(response_type))
        _RESPONSE_WRITERS[response_type] = writer
    return writer


def response_type_for(api_key: int, api_version: int) -> type[ResponsePayload]:
    """The kio response class answering (``api_key``, ``api_version``)."""
    return _codec(api_key, api_version).response_type


def warm_codecs() -> int:
    """Builds every reader and writer in ``SUPPORTED`` now (broker start-up), not on the
    first request of each kind; returns how many (api key, version) pairs there are."""
    count = 0
    for api_key, (low, high) in SUPPORTED.items():
        for version in range(low, high + 1):
            _response_writer(_codec(api_key, version).response_type)
            count += 1
    return count


def _readonly(frame: bytes | bytearray | memoryview) -> bytes | memoryview:
    # kio's native readers refuse writable buffers.
    if type(frame) is bytes:
        return frame
    if isinstance(frame, memoryview):
        return frame if frame.readonly else frame.toreadonly()
    return bytes(frame)


def decode_request(frame: bytes | bytearray | memoryview) -> Request:
    """Reads one request frame (without its size prefix).

    Raises:
        UnknownApiKeyError: the API key is not in ``SUPPORTED``.
        UnsupportedVersionError: the version is outside ``SUPPORTED`` (never for
            ApiVersions, see the module docstring).
        MalformedRequestError: too short, garbage or truncated.

    Bytes after the body are ignored, as Kafka ignores them: librdkafka up to at least
    2.16 sends three stray bytes after a flexible MetadataRequest for all topics
    (librdkafka#5049: a 4-byte placeholder for a 1-byte null array length).
    """
    data = _readonly(frame)
    size = len(data)
    if size < _HEAD.size:
        raise MalformedRequestError(f"frame of {size} bytes is too short for a request header")
    api_key, api_version, correlation_id = _HEAD.unpack_from(data, 0)
    codec = _SERVED.get((api_key, api_version))
    if codec is None:
        if not is_supported(api_key, api_version):
            if api_key == ApiKey.API_VERSIONS:
                return _api_versions_fallback(data, api_version, correlation_id)
            if api_key not in SUPPORTED:
                raise UnknownApiKeyError(api_key, api_version, correlation_id)
            raise UnsupportedVersionError(api_key, api_version, correlation_id)
        codec = _SERVED[(api_key, api_version)] = _codec(api_key, api_version)
    try:
        if codec.skim is not None:
            data = codec.skim(data)
        header, header_size = codec.read_header(data, 0)
        body, _ = codec.read_body(data, header_size)
    except Exception as exc:  # kio raises its own errors, ValueError, TypeError, ...
        raise MalformedRequestError(
            f"cannot read {codec.request_type.__name__} v{api_version}: {exc}",
            api_key,
            api_version,
            correlation_id,
        ) from exc
    return Request(
        api_key,
        api_version,
        correlation_id,
        header.client_id,
        header,
        body,
        api_version,
        size,
    )


def _api_versions_fallback(
    data: bytes | memoryview, api_version: int, correlation_id: int
) -> Request:
    # The body of an unknown version is not read (we cannot know its layout); the header
    # is read as Kafka would (v2 from ApiVersions v3 on), with v1 and a bare header as
    # fallbacks: only the correlation id really matters for the answer.
    header: RequestHeader | None = None
    layouts: tuple[type[RequestHeader], ...] = (
        (RequestHeaderV2, RequestHeaderV1) if api_version >= 3 else (RequestHeaderV1,)
    )
    for layout in layouts:
        try:
            header = entity_reader(layout)(data, 0)[0]
            break
        except Exception:  # try the next, simpler header layout
            continue
    if header is None:
        header = RequestHeaderV1(
            request_api_key=i16(ApiKey.API_VERSIONS),
            request_api_version=i16(api_version),
            correlation_id=i32(correlation_id),
            client_id=None,
        )
    return Request(
        int(ApiKey.API_VERSIONS),
        api_version,
        correlation_id,
        header.client_id,
        header,
        ApiVersionsRequestV0(),
        0,
        len(data),
    )


def encode_response(request: Request, body: ResponsePayload) -> bytes:
    """The framed answer to ``request``: size prefix, response header, ``body``.

    Args:
        request: what ``decode_request`` returned.
        body: kio response entity of ``request.response_version``.

    Raises:
        TypeError: ``body`` is not the response type of that API and version (a bug in
            the caller, not a protocol error).
    """
    codec = _codec(request.api_key, request.response_version)
    return _encode_framed(codec, request.correlation_id, body)


def _encode_framed(codec: _Codec, correlation_id: int, body: ResponsePayload) -> bytes:
    if type(body) is not codec.response_type:
        raise TypeError(
            f"expected {codec.response_type.__module__}.{codec.response_type.__name__}, "
            f"got {type(body).__module__}.{type(body).__name__}"
        )
    buffer = io.BytesIO()
    # Placeholder for size + correlation id, then the empty tagged-field set of header v1.
    buffer.write(_HEADER_V1_SPACE if codec.flexible_response_header else _HEADER_V0_SPACE)
    _response_writer(codec.response_type)(buffer, body)
    view = buffer.getbuffer()
    _RESPONSE_HEAD.pack_into(view, 0, len(view) - 4, correlation_id)
    view.release()
    return buffer.getvalue()


def encode_api_versions_fallback(correlation_id: int) -> bytes:
    """The framed v0 ApiVersions answer with error 35 and our ranges, header v0.

    For a connection layer that only has the correlation id of an ApiVersions request;
    ``decode_request`` + ``encode_response`` produce the same bytes.
    """
    codec = _codec(ApiKey.API_VERSIONS, 0)
    return _encode_framed(codec, correlation_id, api_versions_response(-1))


# --- client side -------------------------------------------------------------------------


def encode_request(
    body: RequestPayload, correlation_id: int, client_id: str | None = "tierlog"
) -> bytes:
    """The framed request: size prefix, request header (v1 or v2, per kio), ``body``."""
    header_type = body.__header_schema__
    header = header_type(
        request_api_key=body.__api_key__,
        request_api_version=body.__version__,
        correlation_id=i32(correlation_id),
        client_id=client_id,
    )
    buffer = io.BytesIO()
    buffer.write(bytes(4))
    cast(_Writer, entity_writer(header_type))(buffer, header)
    cast(_Writer, entity_writer(type(body)))(buffer, body)
    view = buffer.getbuffer()
    _SIZE.pack_into(view, 0, len(view) - 4)
    view.release()
    return buffer.getvalue()


def decode_response(
    frame: bytes | bytearray | memoryview, api_key: int, api_version: int
) -> tuple[int, ResponsePayload]:
    """Reads a response frame (without its size prefix) to a request of ``api_version``.

    Returns:
        The correlation id and the kio response entity.

    Bytes after the body are ignored, as in ``decode_request``.

    Raises:
        MalformedResponseError: it does not parse.
    """
    data = _readonly(frame)
    try:
        response_type = load_response_schema(api_key, api_version)
        header, header_size = entity_reader(response_type.__header_schema__)(data, 0)
        body, _ = entity_reader(response_type)(data, header_size)
    except Exception as exc:
        raise MalformedResponseError(
            f"cannot read response to API {api_key} v{api_version}: {exc}"
        ) from exc
    return int(header.correlation_id), body
