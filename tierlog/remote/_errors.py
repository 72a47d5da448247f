"""Mapping fsspec and backend failures onto the remote tier's errors.

Backends raise their own exceptions (OSError subclasses from s3fs's translation of S3
error codes, botocore/aiohttp connection errors, fsspec timeouts); callers of the remote
tier see only ``RemoteStorageError`` subclasses, with ``retriable`` set when the store
could not be reached. Exception classes are matched by name, so neither botocore nor
aiohttp is imported here.
"""

from __future__ import annotations

import errno
import socket

from tierlog.remote.api import (
    RemoteResourceNotFoundError,
    RemoteStorageError,
    RemoteStorageUnavailableError,
)
from tierlog.util.exceptions import causes

# Protocol -> the pip package that provides it (fsspec's own hints name the package but
# not the command). Protocols missing here get fsspec's message alone.
_PACKAGES = {
    "s3": "s3fs",
    "s3a": "s3fs",
    "gs": "gcsfs",
    "gcs": "gcsfs",
    "abfs": "adlfs",
    "abfss": "adlfs",
    "az": "adlfs",
    "adl": "adlfs",
    "hdfs": "pyarrow",
    "sftp": "paramiko",
    "http": "aiohttp",
    "https": "aiohttp",
}
# Failures meaning "the store cannot be reached right now": retriable.
_NETWORK_ERRNOS = {
    errno.ECONNREFUSED,
    errno.ECONNRESET,
    errno.ECONNABORTED,
    errno.ETIMEDOUT,
    errno.EHOSTUNREACH,
    errno.ENETUNREACH,
    errno.ENETDOWN,
    errno.EPIPE,
    errno.EBUSY,  # s3fs: 503 SlowDown / ServiceUnavailable
    errno.EAGAIN,
    getattr(errno, "EREMOTEIO", -1),  # s3fs: 500 InternalError
}
# botocore / aiohttp / fsspec exception classes (matched by name: none is imported here).
_NETWORK_CLASSES = {
    "EndpointConnectionError",
    "ConnectTimeoutError",
    "ReadTimeoutError",
    "ConnectionClosedError",
    "ProxyConnectionError",
    "HTTPClientError",
    "ClientConnectionError",
    "ClientConnectorError",
    "ServerDisconnectedError",
    "ServerTimeoutError",
    "ClientOSError",
    "ClientPayloadError",
    "FSTimeoutError",
    "IncompleteRead",
    "ResponseStreamingError",
}
_PRECONDITION_CODES = {"PreconditionFailed", "412", "ConditionalRequestConflict", "409"}


def is_unavailable(exc: BaseException) -> bool:
    """True when ``exc`` (or what caused it) says the store cannot be reached."""
    for e in causes(exc):
        if isinstance(e, ConnectionError | TimeoutError | socket.gaierror):
            return True
        if isinstance(e, OSError) and e.errno in _NETWORK_ERRNOS:
            return True
        if any(cls.__name__ in _NETWORK_CLASSES for cls in type(e).__mro__):
            return True
    return False


def precondition_failed(exc: BaseException) -> bool:
    for e in causes(exc):
        if isinstance(e, FileExistsError):
            return True
        response = getattr(e, "response", None)
        if isinstance(response, dict):
            code = str(response.get("Error", {}).get("Code", ""))
            if code in _PRECONDITION_CODES:
                return True
    return False


def translate(exc: BaseException, what: str) -> RemoteStorageError:
    """Map an fsspec/backend exception to the remote tier's errors; ``what`` names the
    operation and object (it starts the message)."""
    if isinstance(exc, RemoteStorageError):
        return exc
    if isinstance(exc, FileNotFoundError):
        return RemoteResourceNotFoundError(f"{what}: not found ({exc})")
    if is_unavailable(exc):
        return RemoteStorageUnavailableError(f"{what}: store unavailable ({exc!r})")
    return RemoteStorageError(f"{what}: {exc!r}")


def missing_package(protocol: str, exc: ImportError) -> RemoteStorageError:
    package = _PACKAGES.get(protocol)
    hint = f"; install it with: pip install {package}" if package else ""
    return RemoteStorageError(
        f"remote storage protocol {protocol}:// is not available ({exc}){hint}"
    )
