"""Every API of Kafka 4.x's ``ApiKeys``, and what tierlog does with each: answers it, or
refuses it for a stated reason.

``SUPPORTED`` (``versions``) says which versions the broker decodes; this table says why the
other keys are absent, so that a client's "UNSUPPORTED_VERSION" or a tool's "the node does
not support X" has an answer a user can look up (docs/apis.md is written from it by
``tierlog.tools.api_table``, and ``tests/protocol/test_api_catalog.py`` keeps the two tables
and the page in step). The key list is Kafka 4.4's ``ApiKeys`` enum (0-94); keys 4-7 are
listed although Kafka 4.0 removed every version of them, since old tools still send them.

A refused key is answered as Kafka answers a key it does not serve on a listener: it is not
listed in ApiVersions, so clients never send it, and a request that comes anyway closes the
connection (``UnknownApiKeyError``), as Kafka's ``SocketServer`` does.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from enum import Enum
from types import MappingProxyType
from typing import Final

__all__ = ["CATALOG", "KAFKA_APIS", "KAFKA_VERSION", "ApiStatus", "KafkaApi"]

# The Kafka release whose ApiKeys this table follows (checked against its tools in
# tests/integration/test_kafka_tools_apis.py).
KAFKA_VERSION: Final = "4.4"


class ApiStatus(Enum):
    """What tierlog does with one API key."""

    IMPLEMENTED = "implemented"
    # Authentication's APIs (SaslHandshake, SaslAuthenticate): issue 22 wires them.
    SECURITY = "security, issue 22"
    REFUSED = "refused"


@dataclass(frozen=True)
class KafkaApi:
    """One API key: the versions Kafka 4.4's brokers and tools know (None: every version
    was removed), Kafka's name for it, tierlog's status and why."""

    key: int
    kafka_versions: tuple[int, int] | None
    name: str
    status: ApiStatus
    reason: str = ""


_KRAFT = (
    "KRaft only: tierlog keeps its metadata in ZooKeeper (Kafka's pre-KRaft layout), so "
    "there is no Raft quorum"
)
_KRAFT_REGISTRATION = (
    "KRaft only: a tierlog broker registers with an ephemeral /brokers/ids znode and "
    "ZooKeeper's session is its heartbeat"
)
_REMOVED_IN_4 = (
    "removed in Kafka 4.0 (no version left); ZooKeeper-era controller-to-broker RPC. tierlog "
    "brokers follow partition states through ZooKeeper watches"
)
_SHARE_GROUPS = (
    "share groups (KIP-932, queues for Kafka) are not implemented; consumers use classic or "
    "KIP-848 groups"
)
_STREAMS_GROUPS = (
    "the Streams group protocol (KIP-1071) is not implemented; Kafka Streams uses the classic "
    "protocol by default"
)
_DELEGATION_TOKENS = (
    "delegation tokens (KIP-48) authenticate over SASL/SCRAM and need a token store; not "
    "built yet (SASL/SCRAM is; issue 22)"
)
_I, _R = ApiStatus.IMPLEMENTED, ApiStatus.REFUSED

KAFKA_APIS: Final[tuple[KafkaApi, ...]] = (
    KafkaApi(0, (3, 13), "Produce", _I),
    KafkaApi(1, (4, 18), "Fetch", _I),
    KafkaApi(2, (1, 11), "ListOffsets", _I),
    KafkaApi(3, (0, 13), "Metadata", _I),
    KafkaApi(4, None, "LeaderAndIsr", _R, _REMOVED_IN_4),
    KafkaApi(5, None, "StopReplica", _R, _REMOVED_IN_4),
    KafkaApi(6, None, "UpdateMetadata", _R, _REMOVED_IN_4),
    KafkaApi(
        7,
        None,
        "ControlledShutdown",
        _R,
        "removed in Kafka 4.0 (no version left); a stopping tierlog broker deregisters from "
        "ZooKeeper, its controller moves the leaderships away, and it waits to see that",
    ),
    KafkaApi(8, (2, 10), "OffsetCommit", _I),
    KafkaApi(9, (1, 10), "OffsetFetch", _I),
    KafkaApi(10, (0, 6), "FindCoordinator", _I),
    KafkaApi(11, (0, 9), "JoinGroup", _I),
    KafkaApi(12, (0, 4), "Heartbeat", _I),
    KafkaApi(13, (0, 5), "LeaveGroup", _I),
    KafkaApi(14, (0, 5), "SyncGroup", _I),
    KafkaApi(15, (0, 6), "DescribeGroups", _I),
    KafkaApi(16, (0, 5), "ListGroups", _I),
    KafkaApi(17, (0, 1), "SaslHandshake", _I),
    KafkaApi(18, (0, 5), "ApiVersions", _I),
    KafkaApi(19, (2, 7), "CreateTopics", _I),
    KafkaApi(20, (1, 6), "DeleteTopics", _I),
    KafkaApi(21, (0, 2), "DeleteRecords", _I),
    KafkaApi(22, (0, 5), "InitProducerId", _I),
    KafkaApi(23, (2, 4), "OffsetForLeaderEpoch", _I),
    KafkaApi(24, (0, 5), "AddPartitionsToTxn", _I),
    KafkaApi(25, (0, 4), "AddOffsetsToTxn", _I),
    KafkaApi(26, (0, 5), "EndTxn", _I),
    KafkaApi(27, (1, 2), "WriteTxnMarkers", _I),
    KafkaApi(28, (0, 6), "TxnOffsetCommit", _I),
    KafkaApi(29, (1, 3), "DescribeAcls", _I),
    KafkaApi(30, (1, 3), "CreateAcls", _I),
    KafkaApi(31, (1, 3), "DeleteAcls", _I),
    KafkaApi(32, (1, 4), "DescribeConfigs", _I),
    KafkaApi(33, (0, 2), "AlterConfigs", _I),
    KafkaApi(34, (1, 2), "AlterReplicaLogDirs", _I),
    KafkaApi(35, (1, 5), "DescribeLogDirs", _I),
    KafkaApi(36, (0, 2), "SaslAuthenticate", _I),
    KafkaApi(37, (0, 3), "CreatePartitions", _I),
    KafkaApi(38, (1, 3), "CreateDelegationToken", _R, _DELEGATION_TOKENS),
    KafkaApi(39, (1, 2), "RenewDelegationToken", _R, _DELEGATION_TOKENS),
    KafkaApi(40, (1, 2), "ExpireDelegationToken", _R, _DELEGATION_TOKENS),
    KafkaApi(41, (1, 3), "DescribeDelegationToken", _R, _DELEGATION_TOKENS),
    KafkaApi(42, (0, 3), "DeleteGroups", _I),
    KafkaApi(43, (0, 2), "ElectLeaders", _I),
    KafkaApi(44, (0, 1), "IncrementalAlterConfigs", _I),
    KafkaApi(45, (0, 1), "AlterPartitionReassignments", _I),
    KafkaApi(46, (0, 0), "ListPartitionReassignments", _I),
    KafkaApi(47, (0, 0), "OffsetDelete", _I),
    KafkaApi(48, (0, 1), "DescribeClientQuotas", _I),
    KafkaApi(49, (0, 1), "AlterClientQuotas", _I),
    KafkaApi(50, (0, 0), "DescribeUserScramCredentials", _I),
    KafkaApi(51, (0, 0), "AlterUserScramCredentials", _I),
    KafkaApi(52, (0, 2), "Vote", _R, _KRAFT),
    KafkaApi(53, (0, 1), "BeginQuorumEpoch", _R, _KRAFT),
    KafkaApi(54, (0, 1), "EndQuorumEpoch", _R, _KRAFT),
    KafkaApi(
        55,
        (0, 2),
        "DescribeQuorum",
        _R,
        f"{_KRAFT} to describe (kafka-metadata-quorum); the controller is the "
        "/controller znode, shown by DescribeCluster and Metadata",
    ),
    KafkaApi(56, (2, 3), "AlterPartition", _I),
    KafkaApi(
        57,
        (0, 2),
        "UpdateFeatures",
        _R,
        "finalized feature levels (KIP-584) are KRaft's metadata.version and friends; "
        "tierlog announces no features, so there is nothing to update",
    ),
    KafkaApi(
        58, (0, 0), "Envelope", _R, f"{_KRAFT}: brokers forward admin requests to it in Envelopes"
    ),
    KafkaApi(59, (0, 1), "FetchSnapshot", _R, _KRAFT),
    KafkaApi(60, (0, 2), "DescribeCluster", _I),
    KafkaApi(61, (0, 0), "DescribeProducers", _I),
    KafkaApi(62, (0, 4), "BrokerRegistration", _R, _KRAFT_REGISTRATION),
    KafkaApi(63, (0, 2), "BrokerHeartbeat", _R, _KRAFT_REGISTRATION),
    KafkaApi(
        64,
        (0, 0),
        "UnregisterBroker",
        _R,
        "KRaft only: a stopped tierlog broker's registration is an ephemeral znode that "
        "goes away with its session",
    ),
    KafkaApi(65, (0, 0), "DescribeTransactions", _I),
    KafkaApi(66, (0, 2), "ListTransactions", _I),
    KafkaApi(
        67,
        (0, 0),
        "AllocateProducerIds",
        _R,
        "KRaft only: tierlog brokers reserve producer id blocks in ZooKeeper's "
        "/latest_producer_id_block themselves",
    ),
    KafkaApi(68, (0, 1), "ConsumerGroupHeartbeat", _I),
    KafkaApi(69, (0, 1), "ConsumerGroupDescribe", _I),
    KafkaApi(70, (0, 0), "ControllerRegistration", _R, _KRAFT),
    KafkaApi(71, (0, 0), "GetTelemetrySubscriptions", _I),
    KafkaApi(72, (0, 0), "PushTelemetry", _I),
    KafkaApi(
        73,
        (0, 0),
        "AssignReplicasToDirs",
        _R,
        "KRaft only (JBOD, KIP-858): a tierlog broker places replicas in its log.dirs itself",
    ),
    KafkaApi(74, (0, 1), "ListConfigResources", _I),
    KafkaApi(75, (0, 0), "DescribeTopicPartitions", _I),
    KafkaApi(76, (1, 1), "ShareGroupHeartbeat", _R, _SHARE_GROUPS),
    KafkaApi(77, (1, 1), "ShareGroupDescribe", _R, _SHARE_GROUPS),
    KafkaApi(78, (1, 2), "ShareFetch", _R, _SHARE_GROUPS),
    KafkaApi(79, (1, 2), "ShareAcknowledge", _R, _SHARE_GROUPS),
    KafkaApi(80, (0, 1), "AddRaftVoter", _R, _KRAFT),
    KafkaApi(81, (0, 0), "RemoveRaftVoter", _R, _KRAFT),
    KafkaApi(82, (0, 0), "UpdateRaftVoter", _R, _KRAFT),
    KafkaApi(83, (0, 0), "InitializeShareGroupState", _R, _SHARE_GROUPS),
    KafkaApi(84, (0, 0), "ReadShareGroupState", _R, _SHARE_GROUPS),
    KafkaApi(85, (0, 1), "WriteShareGroupState", _R, _SHARE_GROUPS),
    KafkaApi(86, (0, 0), "DeleteShareGroupState", _R, _SHARE_GROUPS),
    KafkaApi(87, (0, 1), "ReadShareGroupStateSummary", _R, _SHARE_GROUPS),
    KafkaApi(88, (0, 1), "StreamsGroupHeartbeat", _R, _STREAMS_GROUPS),
    KafkaApi(89, (0, 1), "StreamsGroupDescribe", _R, _STREAMS_GROUPS),
    KafkaApi(90, (0, 1), "DescribeShareGroupOffsets", _R, _SHARE_GROUPS),
    KafkaApi(91, (0, 0), "AlterShareGroupOffsets", _R, _SHARE_GROUPS),
    KafkaApi(92, (0, 0), "DeleteShareGroupOffsets", _R, _SHARE_GROUPS),
    KafkaApi(93, (0, 0), "StreamsGroupTopologyDescriptionUpdate", _R, _STREAMS_GROUPS),
    KafkaApi(94, (0, 0), "UnregisterController", _R, _KRAFT),
)

CATALOG: Final[Mapping[int, KafkaApi]] = MappingProxyType({api.key: api for api in KAFKA_APIS})
