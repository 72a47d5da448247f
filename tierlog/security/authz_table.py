"""Which operation on which resource each API checks: the one table that the handlers'
checks and the authorization test matrix are generated from.

Sources: Kafka's documentation, "Operations and Resources on Protocols", and where the
two differ, what ``KafkaApis`` does (noted in the row): Produce checks no IdempotentWrite,
ElectLeaders checks Alter (not ClusterAction), WriteTxnMarkers tries Alter then
ClusterAction. Every API ``tierlog.protocol.versions.ADVERTISED`` lists has a row, plus
those security adds (``SECURITY_APIS``); ``tests/security/test_authz_table.py`` holds that.

A row is a list of ``Check``. A check applies ``when`` its condition holds (always, only
for transactional requests, only for follower fetches...). ``denial`` says what a refused
check does: fail the whole request, fail that resource's entry, or silently leave the
resource out of the answer. ``fallback`` is tried when a check is refused, and the
request proceeds if it passes (CreateTopics: Create on the cluster, else Create on each
topic). The error code of a refusal follows from the resource type (``denial_error``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from enum import Enum
from types import MappingProxyType
from typing import Final

from kio.schema.errors import ErrorCode

from tierlog.security.acl import AclOperation as Op
from tierlog.security.acl import ResourceType as Res

__all__ = [
    "AUTHORIZATION",
    "SECURITY_APIS",
    "ApiAuthorization",
    "Check",
    "Denial",
    "When",
    "denial_error",
]


class When(Enum):
    """When a check applies."""

    ALWAYS = "always"
    TRANSACTIONAL = "the request carries a transactional id"
    IDEMPOTENT = "no transactional id (an idempotent producer)"
    FOLLOWER = "a replica's fetch (replica_id >= 0)"
    CONSUMER = "a consumer's fetch (replica_id < 0)"
    AUTO_CREATE = "a named topic is missing and would be auto-created"
    GROUP_KEY = "the coordinator key is a group"
    TRANSACTION_KEY = "the coordinator key is a transactional id"
    BROKER_RESOURCE = "the config resource is a broker or broker logger"
    TOPIC_RESOURCE = "the config resource is a topic"
    CLIENT_VERSION = "versions below 4 (sent by producers)"
    BROKER_VERSION = "version 4 and above (sent by brokers to verify)"


class Denial(Enum):
    """What a refused check does."""

    REQUEST = "the whole request fails with the error"
    PER_RESOURCE = "that resource's entry carries the error"
    FILTERED = "the resource is left out of the answer, no error"
    BY_RESOURCE_TYPE = "checked on any resource of the type (KIP-679)"


@dataclass(frozen=True)
class Check:
    operation: Op
    resource: Res
    when: When = When.ALWAYS
    denial: Denial = Denial.PER_RESOURCE
    fallback: Check | None = None


@dataclass(frozen=True)
class ApiAuthorization:
    """The checks of one API; ``before_authentication``: allowed on a connection that has
    not authenticated yet (and never authorized)."""

    api_key: int
    name: str
    checks: tuple[Check, ...]
    note: str = ""
    before_authentication: bool = False


def denial_error(resource: Res) -> ErrorCode:
    """Kafka's error code for a refused check on ``resource``."""
    return {
        Res.TOPIC: ErrorCode.topic_authorization_failed,
        Res.GROUP: ErrorCode.group_authorization_failed,
        Res.CLUSTER: ErrorCode.cluster_authorization_failed,
        Res.TRANSACTIONAL_ID: ErrorCode.transactional_id_authorization_failed,
        Res.DELEGATION_TOKEN: ErrorCode.delegation_token_authorization_failed,
    }.get(resource, ErrorCode.cluster_authorization_failed)


_REQ = Denial.REQUEST
_FILTERED = Denial.FILTERED


def _row(
    key: int, name: str, *checks: Check, note: str = "", before: bool = False
) -> ApiAuthorization:
    return ApiAuthorization(key, name, tuple(checks), note, before)


_CLUSTER_ACTION: Final = Check(Op.CLUSTER_ACTION, Res.CLUSTER, denial=_REQ)

_ROWS: Final = (
    _row(
        0,
        "Produce",
        Check(Op.WRITE, Res.TRANSACTIONAL_ID, When.TRANSACTIONAL, _REQ),
        Check(Op.WRITE, Res.TOPIC),
        note="KafkaApis checks no IdempotentWrite here (InitProducerId does)",
    ),
    _row(
        1,
        "Fetch",
        Check(Op.CLUSTER_ACTION, Res.CLUSTER, When.FOLLOWER, _REQ),
        Check(Op.READ, Res.TOPIC, When.CONSUMER),
    ),
    _row(2, "ListOffsets", Check(Op.DESCRIBE, Res.TOPIC)),
    _row(
        3,
        "Metadata",
        Check(Op.DESCRIBE, Res.TOPIC),
        Check(
            Op.CREATE,
            Res.CLUSTER,
            When.AUTO_CREATE,
            _FILTERED,
            fallback=Check(Op.CREATE, Res.TOPIC, When.AUTO_CREATE),
        ),
        note="a listing of all topics leaves out those not describable; KIP-430 operations",
    ),
    _row(8, "OffsetCommit", Check(Op.READ, Res.GROUP, denial=_REQ), Check(Op.READ, Res.TOPIC)),
    _row(
        9,
        "OffsetFetch",
        Check(Op.DESCRIBE, Res.GROUP),
        Check(Op.DESCRIBE, Res.TOPIC),
        note="v8+ per group; offsets of topics not describable are left out or marked",
    ),
    _row(
        10,
        "FindCoordinator",
        Check(Op.DESCRIBE, Res.GROUP, When.GROUP_KEY),
        Check(Op.DESCRIBE, Res.TRANSACTIONAL_ID, When.TRANSACTION_KEY),
    ),
    _row(11, "JoinGroup", Check(Op.READ, Res.GROUP, denial=_REQ)),
    _row(12, "Heartbeat", Check(Op.READ, Res.GROUP, denial=_REQ)),
    _row(13, "LeaveGroup", Check(Op.READ, Res.GROUP, denial=_REQ)),
    _row(14, "SyncGroup", Check(Op.READ, Res.GROUP, denial=_REQ)),
    _row(15, "DescribeGroups", Check(Op.DESCRIBE, Res.GROUP), note="KIP-430 operations"),
    _row(
        16,
        "ListGroups",
        Check(
            Op.DESCRIBE,
            Res.CLUSTER,
            denial=_FILTERED,
            fallback=Check(Op.DESCRIBE, Res.GROUP, denial=_FILTERED),
        ),
        note="never CLUSTER_AUTHORIZATION_FAILED: groups not describable are left out",
    ),
    _row(17, "SaslHandshake", note="part of authentication", before=True),
    _row(18, "ApiVersions", note="before authentication", before=True),
    _row(
        19,
        "CreateTopics",
        Check(Op.CREATE, Res.CLUSTER, denial=_FILTERED, fallback=Check(Op.CREATE, Res.TOPIC)),
        Check(Op.DESCRIBE_CONFIGS, Res.TOPIC, denial=_FILTERED),
        note="DescribeConfigs decides whether the new topic's configs are returned",
    ),
    _row(20, "DeleteTopics", Check(Op.DESCRIBE, Res.TOPIC), Check(Op.DELETE, Res.TOPIC)),
    _row(21, "DeleteRecords", Check(Op.DELETE, Res.TOPIC)),
    _row(
        22,
        "InitProducerId",
        Check(Op.WRITE, Res.TRANSACTIONAL_ID, When.TRANSACTIONAL, _REQ),
        Check(
            Op.IDEMPOTENT_WRITE,
            Res.CLUSTER,
            When.IDEMPOTENT,
            _REQ,
            fallback=Check(Op.WRITE, Res.TOPIC, When.IDEMPOTENT, Denial.BY_RESOURCE_TYPE),
        ),
    ),
    _row(
        23,
        "OffsetForLeaderEpoch",
        Check(
            Op.CLUSTER_ACTION, Res.CLUSTER, denial=_FILTERED, fallback=Check(Op.DESCRIBE, Res.TOPIC)
        ),
    ),
    _row(
        24,
        "AddPartitionsToTxn",
        Check(Op.WRITE, Res.TRANSACTIONAL_ID, When.CLIENT_VERSION, _REQ),
        Check(Op.WRITE, Res.TOPIC, When.CLIENT_VERSION),
        Check(Op.CLUSTER_ACTION, Res.CLUSTER, When.BROKER_VERSION, _REQ),
    ),
    _row(
        25,
        "AddOffsetsToTxn",
        Check(Op.WRITE, Res.TRANSACTIONAL_ID, denial=_REQ),
        Check(Op.READ, Res.GROUP, denial=_REQ),
    ),
    _row(26, "EndTxn", Check(Op.WRITE, Res.TRANSACTIONAL_ID, denial=_REQ)),
    _row(
        27,
        "WriteTxnMarkers",
        Check(Op.ALTER, Res.CLUSTER, denial=_REQ, fallback=_CLUSTER_ACTION),
        note="KafkaApis: Alter on the cluster, else ClusterAction",
    ),
    _row(
        28,
        "TxnOffsetCommit",
        Check(Op.WRITE, Res.TRANSACTIONAL_ID, denial=_REQ),
        Check(Op.READ, Res.GROUP, denial=_REQ),
        Check(Op.READ, Res.TOPIC),
    ),
    _row(29, "DescribeAcls", Check(Op.DESCRIBE, Res.CLUSTER, denial=_REQ)),
    _row(30, "CreateAcls", Check(Op.ALTER, Res.CLUSTER, denial=_REQ)),
    _row(31, "DeleteAcls", Check(Op.ALTER, Res.CLUSTER, denial=_REQ)),
    _row(
        32,
        "DescribeConfigs",
        Check(Op.DESCRIBE_CONFIGS, Res.CLUSTER, When.BROKER_RESOURCE),
        Check(Op.DESCRIBE_CONFIGS, Res.TOPIC, When.TOPIC_RESOURCE),
    ),
    _row(
        33,
        "AlterConfigs",
        Check(Op.ALTER_CONFIGS, Res.CLUSTER, When.BROKER_RESOURCE),
        Check(Op.ALTER_CONFIGS, Res.TOPIC, When.TOPIC_RESOURCE),
    ),
    _row(
        34,
        "AlterReplicaLogDirs",
        Check(Op.ALTER, Res.CLUSTER, denial=_REQ),
        note="every partition answers CLUSTER_AUTHORIZATION_FAILED",
    ),
    _row(
        35,
        "DescribeLogDirs",
        Check(Op.DESCRIBE, Res.CLUSTER, denial=_REQ),
        note="v3+ answers CLUSTER_AUTHORIZATION_FAILED with no dirs",
    ),
    _row(36, "SaslAuthenticate", note="part of authentication", before=True),
    _row(37, "CreatePartitions", Check(Op.ALTER, Res.TOPIC)),
    _row(42, "DeleteGroups", Check(Op.DELETE, Res.GROUP)),
    _row(
        43,
        "ElectLeaders",
        Check(Op.ALTER, Res.CLUSTER, denial=_REQ),
        note="KafkaApis checks Alter (the docs' table says ClusterAction)",
    ),
    _row(
        44,
        "IncrementalAlterConfigs",
        Check(Op.ALTER_CONFIGS, Res.CLUSTER, When.BROKER_RESOURCE),
        Check(Op.ALTER_CONFIGS, Res.TOPIC, When.TOPIC_RESOURCE),
    ),
    _row(45, "AlterPartitionReassignments", Check(Op.ALTER, Res.CLUSTER, denial=_REQ)),
    _row(46, "ListPartitionReassignments", Check(Op.DESCRIBE, Res.CLUSTER, denial=_REQ)),
    _row(47, "OffsetDelete", Check(Op.DELETE, Res.GROUP, denial=_REQ), Check(Op.READ, Res.TOPIC)),
    _row(48, "DescribeClientQuotas", Check(Op.DESCRIBE_CONFIGS, Res.CLUSTER, denial=_REQ)),
    _row(49, "AlterClientQuotas", Check(Op.ALTER_CONFIGS, Res.CLUSTER, denial=_REQ)),
    _row(50, "DescribeUserScramCredentials", Check(Op.DESCRIBE, Res.CLUSTER, denial=_REQ)),
    _row(51, "AlterUserScramCredentials", Check(Op.ALTER, Res.CLUSTER, denial=_REQ)),
    _row(56, "AlterPartition", _CLUSTER_ACTION),
    _row(
        60,
        "DescribeCluster",
        Check(Op.DESCRIBE, Res.CLUSTER, denial=_FILTERED),
        note="no check to describe; without Describe the authorized operations are 0",
    ),
    _row(61, "DescribeProducers", Check(Op.READ, Res.TOPIC)),
    _row(
        65,
        "DescribeTransactions",
        Check(Op.DESCRIBE, Res.TRANSACTIONAL_ID),
        Check(Op.DESCRIBE, Res.TOPIC, denial=_FILTERED),
    ),
    _row(66, "ListTransactions", Check(Op.DESCRIBE, Res.TRANSACTIONAL_ID, denial=_FILTERED)),
    _row(68, "ConsumerGroupHeartbeat", Check(Op.READ, Res.GROUP, denial=_REQ)),
    _row(69, "ConsumerGroupDescribe", Check(Op.DESCRIBE, Res.GROUP), note="per group"),
    _row(71, "GetTelemetrySubscriptions", note="KafkaApis checks nothing (KIP-714)"),
    _row(72, "PushTelemetry", note="KafkaApis checks nothing (KIP-714)"),
    _row(
        74,
        "ListConfigResources",
        Check(Op.DESCRIBE_CONFIGS, Res.CLUSTER, denial=_REQ),
    ),
    _row(
        75,
        "DescribeTopicPartitions",
        Check(Op.DESCRIBE, Res.TOPIC),
        note="a listing of all topics leaves out those not describable; KIP-430 operations",
    ),
)

# API keys that security brings: SaslHandshake and SaslAuthenticate (with authentication,
# not yet in protocol.versions), the three ACL APIs and the two SCRAM credential APIs
# (KIP-554).
SECURITY_APIS: Final = frozenset({17, 29, 30, 31, 36, 50, 51})

AUTHORIZATION: Final[Mapping[int, ApiAuthorization]] = MappingProxyType(
    {row.api_key: row for row in _ROWS}
)
