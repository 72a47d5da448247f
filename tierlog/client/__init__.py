"""A small blocking Kafka client on tierlog's own codecs: metadata, offsets and raw fetch.

It returns record batches as the broker sent them (bytes), which is what readers that
decode straight to Arrow want (``tierlog.spark``); a general-purpose consumer or producer
is confluent-kafka's job. ``connection`` owns one socket; ``log_client`` owns a cluster view.
The asyncio side (``async_connection``, over ``frame_stream``) is imported explicitly; the
broker's server reads its connections through ``frame_stream`` too.
"""

from tierlog.client.connection import BrokerConnection, ConnectionClosedError
from tierlog.client.log_client import (
    EARLIEST,
    LATEST,
    BrokerAddress,
    ClientError,
    FetchResult,
    LogClient,
    PartitionInfo,
    parse_bootstrap,
)

__all__ = [
    "EARLIEST",
    "LATEST",
    "BrokerAddress",
    "BrokerConnection",
    "ClientError",
    "ConnectionClosedError",
    "FetchResult",
    "LogClient",
    "PartitionInfo",
    "parse_bootstrap",
]
