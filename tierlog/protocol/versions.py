"""Which APIs, at which versions, the broker implements, and the ApiVersions answer built from it.

``SUPPORTED`` is the single table: ``decode_request`` rejects anything outside it and
``api_versions_response`` advertises it. Rules behind the numbers:

- Minimums stay as low as kio has schemas for (Kafka 4.0's baselines, KIP-896), because
  aiokafka speaks only old, non-flexible versions. Produce starts at 3 and Fetch at 4: the
  first versions of record batch v2, the only format the log stores.
- Maximums are at most kio's newest schema, and stop before any version whose meaning we
  could not honour: ones that only exist for KRaft controllers, transactions v2
  (KIP-890 part 2), two-phase commit (KIP-939) or the topic-ID-only OffsetCommit and
  OffsetFetch v10 (KIP-848 groups work without them: clients pick v9).
- Clients pick ``min(client max, broker max)`` per API (kafka-wire.md lists what each
  client asks for); every client version there falls inside these ranges.
"""

from __future__ import annotations

import datetime
from collections.abc import Mapping
from enum import IntEnum
from types import MappingProxyType
from typing import Final, TypeAlias, TypeVar

import kio.schema.api_versions.v0.response as av0
import kio.schema.api_versions.v1.response as av1
import kio.schema.api_versions.v2.response as av2
import kio.schema.api_versions.v3.response as av3
import kio.schema.api_versions.v4.response as av4
from kio.static.primitive import i16, i32Timedelta

from tierlog.protocol.errors import ErrorCode

__all__ = [
    "ADVERTISED",
    "SUPPORTED",
    "TELEMETRY_APIS",
    "ApiKey",
    "ApiVersionsResponse",
    "api_versions_response",
    "is_supported",
]


class ApiKey(IntEnum):
    """Kafka API keys of the APIs tierlog implements."""

    PRODUCE = 0
    FETCH = 1
    LIST_OFFSETS = 2
    METADATA = 3
    OFFSET_COMMIT = 8
    OFFSET_FETCH = 9
    FIND_COORDINATOR = 10
    JOIN_GROUP = 11
    HEARTBEAT = 12
    LEAVE_GROUP = 13
    SYNC_GROUP = 14
    DESCRIBE_GROUPS = 15
    LIST_GROUPS = 16
    SASL_HANDSHAKE = 17
    API_VERSIONS = 18
    CREATE_TOPICS = 19
    DELETE_TOPICS = 20
    DELETE_RECORDS = 21
    INIT_PRODUCER_ID = 22
    OFFSET_FOR_LEADER_EPOCH = 23
    ADD_PARTITIONS_TO_TXN = 24
    ADD_OFFSETS_TO_TXN = 25
    END_TXN = 26
    WRITE_TXN_MARKERS = 27
    TXN_OFFSET_COMMIT = 28
    DESCRIBE_ACLS = 29
    CREATE_ACLS = 30
    DELETE_ACLS = 31
    DESCRIBE_CONFIGS = 32
    ALTER_CONFIGS = 33
    ALTER_REPLICA_LOG_DIRS = 34
    DESCRIBE_LOG_DIRS = 35
    SASL_AUTHENTICATE = 36
    CREATE_PARTITIONS = 37
    DELETE_GROUPS = 42
    ELECT_LEADERS = 43
    INCREMENTAL_ALTER_CONFIGS = 44
    ALTER_PARTITION_REASSIGNMENTS = 45
    LIST_PARTITION_REASSIGNMENTS = 46
    OFFSET_DELETE = 47
    DESCRIBE_CLIENT_QUOTAS = 48
    ALTER_CLIENT_QUOTAS = 49
    DESCRIBE_USER_SCRAM_CREDENTIALS = 50
    ALTER_USER_SCRAM_CREDENTIALS = 51
    ALTER_PARTITION = 56
    DESCRIBE_CLUSTER = 60
    DESCRIBE_PRODUCERS = 61
    DESCRIBE_TRANSACTIONS = 65
    LIST_TRANSACTIONS = 66
    CONSUMER_GROUP_HEARTBEAT = 68
    CONSUMER_GROUP_DESCRIBE = 69
    GET_TELEMETRY_SUBSCRIPTIONS = 71
    PUSH_TELEMETRY = 72
    LIST_CONFIG_RESOURCES = 74
    DESCRIBE_TOPIC_PARTITIONS = 75


SUPPORTED: Final[Mapping[int, tuple[int, int]]] = MappingProxyType(
    {
        # Produce: v3 is the first with record batch v2 (transactional id). v11 adds only
        # the TRANSACTION_ABORTABLE error. v12 means "transactions v2 (KIP-890 part 2):
        # no AddPartitionsToTxn needed", which we do not implement; v13 (topic IDs) needs
        # v12 below it, so 11 is the ceiling. kafka-python asks v9, librdkafka v10.
        ApiKey.PRODUCE: (3, 11),
        # Fetch: v4 is the first with record batch v2 / isolation level. v13+ uses topic
        # IDs (Metadata serves stable ones); v14 adds OffsetMovedToTieredStorage; v15
        # moves ReplicaId into ReplicaState (KIP-903); v16 adds NodeEndpoints (KIP-951,
        # librdkafka's choice). v17 (ReplicaDirectoryId, KIP-853) and v18 (HighWatermark
        # from KRaft followers, KIP-1166) exist only for KRaft controllers.
        ApiKey.FETCH: (4, 16),
        # ListOffsets: v1 is kio's (and Kafka 4's) baseline. v7 MAX_TIMESTAMP (KIP-734),
        # v8 EARLIEST_LOCAL (-4, KIP-405), v9 LATEST_TIERED (-5, KIP-1005), v10 async
        # remote lookups (KIP-1075: request timeout only), v11 EARLIEST_PENDING_UPLOAD
        # (-6, KIP-1023): all answerable by a broker with a remote tier. kafka-python asks 11.
        ApiKey.LIST_OFFSETS: (1, 11),
        # Metadata: every version; v10+ carries topic IDs, v13 a top-level error code.
        ApiKey.METADATA: (0, 13),
        # OffsetCommit: v2 is the baseline; v9 is v8 plus KIP-848 member epochs (librdkafka
        # and the Java consumer with group.protocol=consumer commit with it; a consumer
        # group's member must). v10 drops topic names for IDs: not needed, clients pick 9.
        ApiKey.OFFSET_COMMIT: (2, 9),
        # OffsetFetch: v1 baseline; v8 batches groups; v9 adds KIP-848 member id/epoch
        # (checked for consumer groups, ignored for classic ones). v10 is topic-ID only.
        ApiKey.OFFSET_FETCH: (1, 9),
        # FindCoordinator: v4 batches keys (KIP-699); v6 adds the share-group key type
        # (KIP-932), which is answered with an error. kafka-python asks 6.
        ApiKey.FIND_COORDINATOR: (0, 6),
        # Classic group protocol, all versions: JoinGroup v8 adds a reason (KIP-800), v9
        # lets the leader skip assignment (KIP-814); LeaveGroup v5 reasons.
        ApiKey.JOIN_GROUP: (0, 9),
        ApiKey.HEARTBEAT: (0, 4),
        ApiKey.LEAVE_GROUP: (0, 5),
        ApiKey.SYNC_GROUP: (0, 5),
        # DescribeGroups v6 returns GROUP_ID_NOT_FOUND (KIP-1043).
        ApiKey.DESCRIBE_GROUPS: (0, 6),
        # ListGroups v4 filters by state (KIP-518), v5 by type (KIP-848: classic or
        # consumer).
        ApiKey.LIST_GROUPS: (0, 5),
        # ApiVersions: v3 flexible + client software name, v4 allows feature min 0.
        ApiKey.API_VERSIONS: (0, 4),
        # CreateTopics: v2 baseline; v5 returns configs, v7 topic IDs.
        ApiKey.CREATE_TOPICS: (2, 7),
        # DeleteTopics: v1 baseline; v6 may name topics by ID.
        ApiKey.DELETE_TOPICS: (1, 6),
        ApiKey.DELETE_RECORDS: (0, 2),
        # InitProducerId: v3 lets a producer resume its id/epoch, v4 PRODUCER_FENCED,
        # v5 TRANSACTION_ABORTABLE. v6 adds two-phase commit (KIP-939): not implemented.
        ApiKey.INIT_PRODUCER_ID: (0, 5),
        # Transactions v1 (KIP-98 with KIP-890 part 1). AddPartitionsToTxn v4 is the
        # brokers' batched verify-only form (leaders ask coordinators; clients stay at
        # v3); v5 and EndTxn v5 / TxnOffsetCommit v5 / AddOffsetsToTxn v5 are
        # transactions v2 (KIP-890 part 2: no AddPartitionsToTxn, epoch bump per
        # transaction), which we do not implement. AddOffsetsToTxn v4 only adds the
        # TRANSACTION_ABORTABLE code. WriteTxnMarkers v1 is the flexible baseline (v0 was
        # removed in Kafka 4); v2 carries the transaction version of transactions v2.
        ApiKey.ADD_PARTITIONS_TO_TXN: (0, 4),
        ApiKey.ADD_OFFSETS_TO_TXN: (0, 4),
        ApiKey.END_TXN: (0, 4),
        ApiKey.WRITE_TXN_MARKERS: (1, 1),
        ApiKey.TXN_OFFSET_COMMIT: (0, 4),
        # Admin views of transactions (KIP-664): kafka-transactions.sh. ListTransactions v1
        # filters by duration (KIP-994), v2 by a transactional id pattern (KIP-1152).
        ApiKey.DESCRIBE_PRODUCERS: (0, 0),
        ApiKey.DESCRIBE_TRANSACTIONS: (0, 0),
        ApiKey.LIST_TRANSACTIONS: (0, 2),
        # KIP-848's consumer group protocol (Kafka 4.x clients with group.protocol=consumer).
        # ConsumerGroupHeartbeat v1 adds regex subscriptions and makes the member id the
        # client's (KIP-1082);
        # ConsumerGroupDescribe v1 adds each member's type, consumer or classic (KIP-1099).
        ApiKey.CONSUMER_GROUP_HEARTBEAT: (0, 1),
        ApiKey.CONSUMER_GROUP_DESCRIBE: (0, 1),
        # OffsetForLeaderEpoch: v2 baseline (leader epoch fencing), v3 ReplicaId, v4 flexible.
        ApiKey.OFFSET_FOR_LEADER_EPOCH: (2, 4),
        ApiKey.DESCRIBE_CONFIGS: (1, 4),
        # DescribeLogDirs: v1 is kio's baseline; v4 adds each dir's total/usable bytes
        # (kafka-reassign-partitions asks it); v5 says whether a dir is cordoned (KIP-1066):
        # tierlog cordons none, so always false. AlterReplicaLogDirs (KIP-113) moves a
        # replica between this broker's log.dirs; v2 is v1 made flexible.
        ApiKey.DESCRIBE_LOG_DIRS: (1, 5),
        ApiKey.ALTER_REPLICA_LOG_DIRS: (1, 2),
        ApiKey.ALTER_CONFIGS: (0, 2),
        ApiKey.CREATE_PARTITIONS: (0, 3),
        ApiKey.DELETE_GROUPS: (0, 2),
        # OffsetDelete (KIP-496): one version; kafka-consumer-groups --delete-offsets.
        ApiKey.OFFSET_DELETE: (0, 0),
        # Client quotas (KIP-546): v1 is flexible; byte-rate quotas only (quotas.py).
        ApiKey.DESCRIBE_CLIENT_QUOTAS: (0, 1),
        ApiKey.ALTER_CLIENT_QUOTAS: (0, 1),
        ApiKey.INCREMENTAL_ALTER_CONFIGS: (0, 1),
        # ACLs: Kafka 4 answers v1-v3 of each (v0, without pattern types, was removed by
        # KIP-896); v2 is flexible, v3 only adds the USER resource type (KIP-679).
        ApiKey.DESCRIBE_ACLS: (1, 3),
        ApiKey.CREATE_ACLS: (1, 3),
        ApiKey.DELETE_ACLS: (1, 3),
        # SCRAM credentials (KIP-554): one version each; the client sends salted passwords.
        ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS: (0, 0),
        ApiKey.ALTER_USER_SCRAM_CREDENTIALS: (0, 0),
        # ElectLeaders: v0 is preferred-only (KIP-183), v1 adds the election type (KIP-460:
        # PREFERRED or UNCLEAN) and a top-level error, v2 is flexible; all of kio's.
        ApiKey.ELECT_LEADERS: (0, 2),
        # AlterPartitionReassignments (KIP-455): v1 adds allow_replication_factor_change
        # (KIP-860), honoured with INVALID_REPLICATION_FACTOR. ListPartitionReassignments
        # has only v0.
        ApiKey.ALTER_PARTITION_REASSIGNMENTS: (0, 1),
        ApiKey.LIST_PARTITION_REASSIGNMENTS: (0, 0),
        # AlterPartition (KIP-497): leaders -> controller. kio has v2 (topic IDs) and v3
        # (replica broker epochs, KIP-903); v3's epochs are not checked, so only v2.
        ApiKey.ALTER_PARTITION: (2, 2),
        # DescribeCluster (KIP-700): v1 adds the endpoint type (brokers, or KRaft
        # controllers: refused with UNSUPPORTED_ENDPOINT_TYPE), v2 fenced brokers (KIP-1073;
        # a ZooKeeper-mode broker is live or absent, never fenced).
        ApiKey.DESCRIBE_CLUSTER: (0, 2),
        # Client metrics (KIP-714): Java clients >= 3.7 push their metrics; the broker
        # exports them on its Prometheus endpoint (tierlog/broker/client_metrics/).
        ApiKey.GET_TELEMETRY_SUBSCRIPTIONS: (0, 0),
        ApiKey.PUSH_TELEMETRY: (0, 0),
        # ListConfigResources: v0 was ListClientMetricsResources (client-metrics names
        # only); v1 (KIP-1142) lists topics, brokers, client-metrics and groups too.
        ApiKey.LIST_CONFIG_RESOURCES: (0, 1),
        # DescribeTopicPartitions (KIP-966): Kafka 4's admin client describes topics with it
        # (paged by a cursor), falling back to Metadata when a broker lacks it.
        ApiKey.DESCRIBE_TOPIC_PARTITIONS: (0, 0),
        # SASL (issue 22): on SASL listeners the connection's SaslSession answers them
        # (connection_security.py); elsewhere their handlers answer ILLEGAL_SASL_STATE, as
        # Kafka's KafkaApis does. Advertised always: librdkafka looks for them.
        ApiKey.SASL_HANDSHAKE: (0, 1),
        ApiKey.SASL_AUTHENTICATE: (0, 2),
    }
)

# What ApiVersions advertises: SUPPORTED, except that Produce is announced from v0 as
# Kafka 4 does (KAFKA-18659). librdkafka before 2.11.1 gates its "MsgVer1" feature on
# Produce v2 being in range, and without it refuses compressed produce; requests at v0-2
# are still rejected by ``decode_request``. No client picks them: they choose the highest
# common version.
ADVERTISED: Final[Mapping[int, tuple[int, int]]] = MappingProxyType(
    {**SUPPORTED, ApiKey.PRODUCE: (0, SUPPORTED[ApiKey.PRODUCE][1])}
)


def is_supported(api_key: int, api_version: int) -> bool:
    """Whether ``decode_request`` accepts this API at this version."""
    bounds = SUPPORTED.get(api_key)
    return bounds is not None and bounds[0] <= api_version <= bounds[1]


ApiVersionsResponse: TypeAlias = (
    av0.ApiVersionsResponse
    | av1.ApiVersionsResponse
    | av2.ApiVersionsResponse
    | av3.ApiVersionsResponse
    | av4.ApiVersionsResponse
)

_NO_THROTTLE: Final = i32Timedelta.parse(datetime.timedelta(0))


_Entry = TypeVar(
    "_Entry", av0.ApiVersion, av1.ApiVersion, av2.ApiVersion, av3.ApiVersion, av4.ApiVersion
)

# APIs a broker may leave out of its answer: the client-metrics pair, which Kafka announces
# only when a metrics reporter receives client metrics (KIP-714) and tierlog only when its
# metrics endpoint is on; otherwise Java clients would push metrics nobody can read.
TELEMETRY_APIS: Final = frozenset({ApiKey.GET_TELEMETRY_SUBSCRIPTIONS, ApiKey.PUSH_TELEMETRY})

# Built once per (entry class, hidden keys): the answer never changes while the broker runs
# (only throttle time does).
_RANGES: dict[tuple[type, frozenset[int]], tuple[object, ...]] = {}


def _ranges(entry: type[_Entry], hidden: frozenset[int]) -> tuple[_Entry, ...]:
    cached = _RANGES.get((entry, hidden))
    if cached is None:
        cached = tuple(
            entry(api_key=i16(key), min_version=i16(low), max_version=i16(high))
            for key, (low, high) in sorted(ADVERTISED.items())
            if key not in hidden
        )
        _RANGES[(entry, hidden)] = cached
    return cached  # type: ignore[return-value]


def api_versions_response(
    version: int, throttle_time_ms: int = 0, *, hidden: frozenset[int] = frozenset()
) -> ApiVersionsResponse:
    """The broker's ApiVersions answer to a request of ``version``.

    A version outside ``SUPPORTED`` (a newer client) gets a v0 body with error 35
    (UNSUPPORTED_VERSION) and the full ranges, so that it can retry with a version we know
    (KIP-511); ``encode_response`` sends it with response header v0.

    Args:
        version: the ``api_version`` of the ApiVersions request.
        throttle_time_ms: quota throttle, for v1+.
        hidden: keys of ``ADVERTISED`` to leave out (``TELEMETRY_APIS`` when the broker
            has nowhere to export client metrics).

    Returns:
        A kio ``ApiVersionsResponse`` of that version, or of v0 if it is unknown.
    """
    throttle = (
        _NO_THROTTLE
        if throttle_time_ms == 0
        else i32Timedelta.parse(datetime.timedelta(milliseconds=throttle_time_ms))
    )
    ok = ErrorCode.none
    if version == 4:
        keys4 = _ranges(av4.ApiVersion, hidden)
        return av4.ApiVersionsResponse(error_code=ok, api_keys=keys4, throttle_time=throttle)
    if version == 3:
        keys3 = _ranges(av3.ApiVersion, hidden)
        return av3.ApiVersionsResponse(error_code=ok, api_keys=keys3, throttle_time=throttle)
    if version == 2:
        keys2 = _ranges(av2.ApiVersion, hidden)
        return av2.ApiVersionsResponse(error_code=ok, api_keys=keys2, throttle_time=throttle)
    if version == 1:
        keys1 = _ranges(av1.ApiVersion, hidden)
        return av1.ApiVersionsResponse(error_code=ok, api_keys=keys1, throttle_time=throttle)
    error = ErrorCode.none if version == 0 else ErrorCode.unsupported_version
    return av0.ApiVersionsResponse(error_code=error, api_keys=_ranges(av0.ApiVersion, hidden))
