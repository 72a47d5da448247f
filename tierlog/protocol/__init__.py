"""Sans-I/O Kafka wire protocol: framing, request/response codecs on kio, the API table.

Bytes in, objects out; nothing here touches sockets, asyncio, fsspec or kazoo. A server
connection uses it as::

    decoder = FrameDecoder(max_frame_bytes)
    for frame in decoder.feed(received):
        request = decode_request(frame)           # RequestError -> close the connection
        body = handle(request)                    # a kio response entity
        send(encode_response(request, body))      # Fetch: encode_fetch_response(...).parts

Modules: ``framing`` (size prefix), ``codec`` (headers and kio entities), ``versions`` (the
``SUPPORTED`` table and the ApiVersions answer), ``fetch_encoder`` (zero-copy FetchResponse),
``errors`` (error codes and exceptions).
"""

from tierlog.protocol.codec import (
    Request,
    decode_request,
    decode_response,
    encode_api_versions_fallback,
    encode_request,
    encode_response,
    warm_codecs,
)
from tierlog.protocol.errors import (
    ErrorCode,
    FrameError,
    FrameTooLargeError,
    MalformedFrameError,
    MalformedRequestError,
    MalformedResponseError,
    ProtocolError,
    RequestError,
    UnknownApiKeyError,
    UnsupportedVersionError,
)
from tierlog.protocol.fetch_encoder import (
    AbortedTransaction,
    EncodedFetchResponse,
    EpochEndOffset,
    FetchPart,
    FetchPartitionData,
    FetchRecords,
    FetchTopicData,
    LeaderIdAndEpoch,
    NodeEndpoint,
    RecordsSlice,
    SnapshotId,
    encode_fetch_response,
)
from tierlog.protocol.framing import DEFAULT_MAX_FRAME_BYTES, FrameDecoder, frame
from tierlog.protocol.versions import (
    ADVERTISED,
    SUPPORTED,
    ApiKey,
    ApiVersionsResponse,
    api_versions_response,
    is_supported,
)

__all__ = [
    "ADVERTISED",
    "DEFAULT_MAX_FRAME_BYTES",
    "SUPPORTED",
    "AbortedTransaction",
    "ApiKey",
    "ApiVersionsResponse",
    "EncodedFetchResponse",
    "EpochEndOffset",
    "ErrorCode",
    "FetchPart",
    "FetchPartitionData",
    "FetchRecords",
    "FetchTopicData",
    "FrameDecoder",
    "FrameError",
    "FrameTooLargeError",
    "LeaderIdAndEpoch",
    "MalformedFrameError",
    "MalformedRequestError",
    "MalformedResponseError",
    "NodeEndpoint",
    "ProtocolError",
    "RecordsSlice",
    "Request",
    "RequestError",
    "SnapshotId",
    "UnknownApiKeyError",
    "UnsupportedVersionError",
    "api_versions_response",
    "decode_request",
    "decode_response",
    "encode_api_versions_fallback",
    "encode_fetch_response",
    "encode_request",
    "encode_response",
    "frame",
    "is_supported",
    "warm_codecs",
]
