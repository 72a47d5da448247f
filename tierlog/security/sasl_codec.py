"""SaslHandshake (17) and SaslAuthenticate (36) frames, read and answered with kio.

The per-connection exchange (``sasl_session``) reads these two requests itself, before a
connection has a principal; every other request goes the usual way through
``tierlog.protocol.decode_request``. Until the wiring stage adds the two APIs to
``tierlog.protocol.versions.SUPPORTED`` (and so to ApiVersions), this module reads them
with kio's entity readers directly; answers go through ``tierlog.protocol.encode_response``
like any other. Versions: SaslHandshake v0-v1, SaslAuthenticate v0-v2 (Kafka 4's ranges).
"""

from __future__ import annotations

import datetime
import functools
import struct
from typing import Any, Final, cast

from kio.index import load_request_schema
from kio.schema.errors import ErrorCode
from kio.serial import entity_reader
from kio.static.primitive import i64Timedelta

from tierlog.protocol import (
    MalformedRequestError,
    Request,
    UnsupportedVersionError,
    encode_response,
)
from tierlog.protocol.codec import response_type_for

__all__ = [
    "SASL_AUTHENTICATE",
    "SASL_HANDSHAKE",
    "SASL_VERSIONS",
    "authenticate_response",
    "decode_sasl_request",
    "handshake_response",
    "peek_api_key",
]

SASL_HANDSHAKE: Final = 17
SASL_AUTHENTICATE: Final = 36
SASL_VERSIONS: Final = {SASL_HANDSHAKE: (0, 1), SASL_AUTHENTICATE: (0, 2)}
_HEAD: Final = struct.Struct(">hhi")


def peek_api_key(frame: bytes) -> int | None:
    """The API key of a request frame, or ``None`` if it is too short to carry one."""
    if len(frame) < 2:
        return None
    return cast(int, struct.unpack_from(">h", frame, 0)[0])


@functools.cache
def _readers(api_key: int, version: int) -> tuple[type[Any], Any, Any]:
    # Looked up once per version: kio resolves a schema by its module path on every call,
    # and each login reads two or three of these (bench/tls.py's logins, profiled).
    request_type = load_request_schema(api_key, version)
    return request_type, entity_reader(request_type.__header_schema__), entity_reader(request_type)


def decode_sasl_request(frame: bytes) -> Request:
    """One SaslHandshake or SaslAuthenticate request frame (without its size prefix).

    Raises:
        UnsupportedVersionError: a version outside ``SASL_VERSIONS``.
        MalformedRequestError: not one of the two APIs, too short, or does not parse.
    """
    data = bytes(frame)
    if len(data) < _HEAD.size:
        raise MalformedRequestError(f"frame of {len(data)} bytes is too short for a request header")
    api_key, version, correlation_id = _HEAD.unpack_from(data, 0)
    bounds = SASL_VERSIONS.get(api_key)
    if bounds is None:
        raise MalformedRequestError(
            f"API {api_key} is not a SASL request", api_key, version, correlation_id
        )
    if not bounds[0] <= version <= bounds[1]:
        raise UnsupportedVersionError(api_key, version, correlation_id)
    request_type, read_header, read_body = _readers(api_key, version)
    try:
        header, offset = read_header(data, 0)
        body, _ = read_body(data, offset)
    except Exception as exc:  # kio raises its own errors, ValueError, IndexError...
        raise MalformedRequestError(
            f"cannot read {request_type.__name__} v{version}: {exc}",
            api_key,
            version,
            correlation_id,
        ) from exc
    return Request(
        api_key,
        version,
        correlation_id,
        header.client_id,
        header,
        body,
        version,
        len(data),
    )


def handshake_response(request: Request, error: ErrorCode, mechanisms: tuple[str, ...]) -> bytes:
    """The framed SaslHandshake answer: an error code and the enabled mechanisms."""
    response_type: Any = response_type_for(SASL_HANDSHAKE, request.api_version)
    return encode_response(request, response_type(error_code=error, mechanisms=mechanisms))


def authenticate_response(
    request: Request,
    error: ErrorCode,
    auth_bytes: bytes = b"",
    error_message: str | None = None,
    session_lifetime_ms: int = 0,
) -> bytes:
    """The framed SaslAuthenticate answer (``session_lifetime_ms`` from v1 on, KIP-368)."""
    response_type: Any = response_type_for(SASL_AUTHENTICATE, request.api_version)
    fields: dict[str, Any] = {
        "error_code": error,
        "error_message": error_message,
        "auth_bytes": auth_bytes,
    }
    if request.api_version >= 1:
        fields["session_lifetime"] = i64Timedelta.parse(
            datetime.timedelta(milliseconds=session_lifetime_ms)
        )
    return encode_response(request, response_type(**fields))
