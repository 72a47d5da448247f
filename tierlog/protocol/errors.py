"""Kafka error codes and the exceptions the protocol layer raises.

``ErrorCode`` is kio's own ``IntEnum`` (``kio.schema.errors.ErrorCode``), re-exported so that
handlers can put it straight into kio response entities. Its members are Kafka's error names
in lower case (``ErrorCode.unknown_topic_or_partition == 3``), each with a ``retriable``
attribute, and cover every code of the Kafka protocol (``tests/protocol/test_errors.py``
pins the values the broker relies on).

Exceptions form one tree under ``ProtocolError`` so that the connection layer can catch
the whole family and nothing else. What the broker does with each:

- ``FrameTooLargeError``, ``MalformedFrameError``: the byte stream cannot be trusted any
  more; close the connection (Kafka does the same for ``socket.request.max.bytes``).
- ``UnknownApiKeyError``, ``UnsupportedVersionError``, ``MalformedRequestError``: the frame
  was well delimited but cannot be answered; Kafka closes the connection here too. The
  one exception, an ApiVersions request of a version we do not know, never raises: it
  decodes to a request that is answered with error 35 (see ``tierlog.protocol.codec``).
"""

from __future__ import annotations

from kio.schema.errors import ErrorCode

__all__ = [
    "ErrorCode",
    "FrameError",
    "FrameTooLargeError",
    "MalformedFrameError",
    "MalformedRequestError",
    "MalformedResponseError",
    "ProtocolError",
    "RequestError",
    "UnknownApiKeyError",
    "UnsupportedVersionError",
]


class ProtocolError(Exception):
    """Base of every error raised by ``tierlog.protocol``."""


class FrameError(ProtocolError):
    """The size-prefixed framing of the byte stream is broken."""


class FrameTooLargeError(FrameError):
    """A frame announces more bytes than ``socket.request.max.bytes`` allows."""

    def __init__(self, size: int, max_bytes: int) -> None:
        super().__init__(f"frame of {size} bytes exceeds the limit of {max_bytes} bytes")
        self.size = size
        self.max_bytes = max_bytes


class MalformedFrameError(FrameError):
    """A frame announces a negative size."""

    def __init__(self, size: int) -> None:
        super().__init__(f"invalid frame size {size}")
        self.size = size


class RequestError(ProtocolError):
    """A complete frame that cannot be turned into a request.

    ``api_key``, ``api_version`` and ``correlation_id`` are set when the frame was long
    enough to carry them (its first 8 bytes), otherwise ``None``.
    """

    def __init__(
        self,
        message: str,
        api_key: int | None = None,
        api_version: int | None = None,
        correlation_id: int | None = None,
    ) -> None:
        super().__init__(message)
        self.api_key = api_key
        self.api_version = api_version
        self.correlation_id = correlation_id


class UnknownApiKeyError(RequestError):
    """The API key is not one this broker implements (see ``SUPPORTED``)."""

    def __init__(self, api_key: int, api_version: int, correlation_id: int) -> None:
        super().__init__(f"unknown API key {api_key}", api_key, api_version, correlation_id)


class UnsupportedVersionError(RequestError):
    """The API is implemented, but not at this version."""

    def __init__(self, api_key: int, api_version: int, correlation_id: int) -> None:
        super().__init__(
            f"API key {api_key} version {api_version} is not supported",
            api_key,
            api_version,
            correlation_id,
        )


class MalformedRequestError(RequestError):
    """The header or body does not parse: truncated, garbage, or trailing bytes."""


class MalformedResponseError(ProtocolError):
    """A response frame (client side) does not parse as the response expected."""
