"""Every API at every version in ``SUPPORTED``, sent raw to a live broker: each answer must be
a well-formed response of that version, and the connection must stay usable.

Requests are described once per API as version-independent dicts of Kafka field names and
fitted to each version with ``kio_build.build`` (fields a version lacks are dropped), so an
old version gets exactly the fields it has. This is what catches version-specific encoding
bugs in the handlers: a field missing in an old response class, a nullable one answered with
a value of the wrong type, a response type of the wrong version.
"""

from __future__ import annotations

import dataclasses
import struct
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from kio.index import load_response_schema

from tests.broker.harness import BrokerProcess
from tests.raw_client import RawClient, request
from tierlog.protocol import SUPPORTED, ApiKey, decode_response
from tierlog.records.builder import Record, build_batch

ZERO_UUID = uuid.UUID(int=0)
TOPIC = "pv"
GROUP = "pv-group"
# Topic resource type of the config APIs.
RESOURCE_TOPIC, RESOURCE_BROKER = 2, 4


# -- one version-independent request per API ----------------------------------------------


def produce(v: int, ctx: dict[str, Any]) -> dict[str, Any]:
    batch = build_batch([Record(b"k", b"v%d" % v)])
    return {
        "transactional_id": None,
        "acks": 1,  # acks=0 gets no answer at all
        "timeout": 5000,
        "topic_data": [{"name": TOPIC, "partition_data": [{"index": 0, "records": batch}]}],
    }


def fetch(v: int, ctx: dict[str, Any]) -> dict[str, Any]:
    return {
        "replica_id": -1,
        "max_wait": 0,  # no long poll
        "min_bytes": 0,
        "max_bytes": 1 << 20,
        "isolation_level": 0,
        "session_id": 0,
        "session_epoch": -1,
        "topics": [
            {
                "topic": TOPIC,
                "topic_id": ctx["topic_id"],
                "partitions": [
                    {
                        "partition": 0,
                        "current_leader_epoch": -1,
                        "fetch_offset": 0,
                        "last_fetched_epoch": -1,
                        "log_start_offset": -1,
                        "partition_max_bytes": 1 << 20,
                    }
                ],
            }
        ],
        "forgotten_topics_data": [],
        "rack_id": "",
    }


def list_offsets(v: int, ctx: dict[str, Any]) -> dict[str, Any]:
    return {
        "replica_id": -1,
        "isolation_level": 0,
        "timeout": 5000,
        "topics": [
            {
                "name": TOPIC,
                "partitions": [{"partition_index": 0, "current_leader_epoch": -1, "timestamp": -2}],
            }
        ],
    }


def metadata(v: int, ctx: dict[str, Any]) -> dict[str, Any]:
    return {
        "topics": [{"name": TOPIC, "topic_id": ZERO_UUID}],
        "allow_auto_topic_creation": False,
        "include_cluster_authorized_operations": False,
        "include_topic_authorized_operations": False,
    }


def offset_commit(v: int, ctx: dict[str, Any]) -> dict[str, Any]:
    return {
        "group_id": GROUP,
        "generation_id_or_member_epoch": -1,  # a simple (non-member) commit
        "member_id": "",
        "group_instance_id": None,
        "retention_time": -1,
        "topics": [
            {
                "name": TOPIC,
                "partitions": [
                    {
                        "partition_index": 0,
                        "committed_offset": 1,
                        "committed_leader_epoch": -1,
                        "committed_metadata": "",
                    }
                ],
            }
        ],
    }


def offset_fetch(v: int, ctx: dict[str, Any]) -> dict[str, Any]:
    topics = [{"name": TOPIC, "partition_indexes": [0]}]
    return {
        "group_id": GROUP,
        "topics": topics,
        "groups": [{"group_id": GROUP, "member_id": None, "member_epoch": -1, "topics": topics}],
        "require_stable": False,
    }


def find_coordinator(v: int, ctx: dict[str, Any]) -> dict[str, Any]:
    return {"key": GROUP, "key_type": 0, "coordinator_keys": [GROUP]}


def join_group(v: int, ctx: dict[str, Any]) -> dict[str, Any]:
    # A fresh group per version: v4+ answers MEMBER_ID_REQUIRED at once; older versions
    # complete a one-member rebalance (group.initial.rebalance.delay.ms=0 in the harness).
    return {
        "group_id": f"pv-join-{v}",
        "session_timeout": 10_000,
        "rebalance_timeout": 5_000,
        "member_id": "",
        "group_instance_id": None,
        "protocol_type": "consumer",
        "protocols": [{"name": "range", "metadata": b""}],
        "reason": None,
    }


def heartbeat(v: int, ctx: dict[str, Any]) -> dict[str, Any]:
    return {
        "group_id": GROUP,
        "generation_id": -1,
        "member_id": "nobody",
        "group_instance_id": None,
    }


def leave_group(v: int, ctx: dict[str, Any]) -> dict[str, Any]:
    return {
        "group_id": GROUP,
        "member_id": "nobody",
        "members": [{"member_id": "nobody", "group_instance_id": None, "reason": None}],
    }


def sync_group(v: int, ctx: dict[str, Any]) -> dict[str, Any]:
    return {
        "group_id": GROUP,
        "generation_id": -1,
        "member_id": "nobody",
        "group_instance_id": None,
        "protocol_type": "consumer",
        "protocol_name": "range",
        "assignments": [],
    }


def describe_groups(v: int, ctx: dict[str, Any]) -> dict[str, Any]:
    return {"groups": [GROUP, "pv-no-such-group"], "include_authorized_operations": False}


def list_groups(v: int, ctx: dict[str, Any]) -> dict[str, Any]:
    return {"states_filter": [], "types_filter": []}


def api_versions(v: int, ctx: dict[str, Any]) -> dict[str, Any]:
    return {"client_software_name": "pv-test", "client_software_version": "1.0"}


def create_topics(v: int, ctx: dict[str, Any]) -> dict[str, Any]:
    return {
        "topics": [
            {
                "name": f"pv-created-{v}",
                "num_partitions": 1,
                "replication_factor": 1,
                "assignments": [],
                "configs": [{"name": "retention.ms", "value": "3600000"}],
            }
        ],
        "timeout": 5000,
        "validate_only": False,
    }


def delete_topics(v: int, ctx: dict[str, Any]) -> dict[str, Any]:
    name = f"pv-doomed-{v}"
    return {
        "topic_names": [name],
        "topics": [{"name": name, "topic_id": ZERO_UUID}],
        "timeout": 5000,
    }


def delete_records(v: int, ctx: dict[str, Any]) -> dict[str, Any]:
    return {
        "topics": [{"name": TOPIC, "partitions": [{"partition_index": 0, "offset": v}]}],
        "timeout": 5000,
    }


def init_producer_id(v: int, ctx: dict[str, Any]) -> dict[str, Any]:
    return {
        "transactional_id": None,
        "transaction_timeout": 60_000,
        "producer_id": -1,
        "producer_epoch": -1,
    }


def offset_for_leader_epoch(v: int, ctx: dict[str, Any]) -> dict[str, Any]:
    return {
        "replica_id": -1,
        "topics": [
            {
                "topic": TOPIC,
                "partitions": [{"partition": 0, "current_leader_epoch": -1, "leader_epoch": 0}],
            }
        ],
    }


def describe_log_dirs(v: int, ctx: dict[str, Any]) -> dict[str, Any]:
    return {"topics": None}


def alter_replica_log_dirs(v: int, ctx: dict[str, Any]) -> dict[str, Any]:
    # Into the dir the partition is already in: nothing moves, and the answer is NONE.
    return {"dirs": [{"path": ctx["log_dir"], "topics": [{"name": TOPIC, "partitions": [0]}]}]}


def describe_cluster(v: int, ctx: dict[str, Any]) -> dict[str, Any]:
    return {
        "include_cluster_authorized_operations": True,
        "endpoint_type": 1,
        "include_fenced_brokers": True,
    }


def get_telemetry_subscriptions(v: int, ctx: dict[str, Any]) -> dict[str, Any]:
    return {"client_instance_id": None}


def push_telemetry(v: int, ctx: dict[str, Any]) -> dict[str, Any]:
    # An instance the broker never gave out: it gets a state of its own, whose
    # subscription id is not 0: UNKNOWN_SUBSCRIPTION_ID, a well-formed refusal.
    return {
        "client_instance_id": uuid.UUID(int=99),
        "subscription_id": 0,
        "terminating": False,
        "compression_type": 0,
        "metrics": b"",
    }


def list_config_resources(v: int, ctx: dict[str, Any]) -> dict[str, Any]:
    return {"resource_types": [RESOURCE_TOPIC, RESOURCE_BROKER]}


def describe_topic_partitions(v: int, ctx: dict[str, Any]) -> dict[str, Any]:
    return {"topics": [{"name": TOPIC}], "response_partition_limit": 100, "cursor": None}


def describe_configs(v: int, ctx: dict[str, Any]) -> dict[str, Any]:
    return {
        "resources": [
            {"resource_type": RESOURCE_TOPIC, "resource_name": TOPIC, "configuration_keys": None},
            {"resource_type": RESOURCE_BROKER, "resource_name": "0", "configuration_keys": None},
        ],
        "include_synonyms": True,
        "include_documentation": True,
    }


def alter_configs(v: int, ctx: dict[str, Any]) -> dict[str, Any]:
    return {
        "resources": [
            {
                "resource_type": RESOURCE_TOPIC,
                "resource_name": TOPIC,
                "configs": [{"name": "retention.ms", "value": "86400000"}],
            }
        ],
        "validate_only": False,
    }


def create_partitions(v: int, ctx: dict[str, Any]) -> dict[str, Any]:
    return {
        "topics": [{"name": "pv-grow", "count": v + 2, "assignments": None}],
        "timeout": 5000,
        "validate_only": False,
    }


def delete_groups(v: int, ctx: dict[str, Any]) -> dict[str, Any]:
    return {"groups_names": ["pv-no-such-group"]}


def offset_delete(v: int, ctx: dict[str, Any]) -> dict[str, Any]:
    return {
        "group_id": "pv-no-such-group",
        "topics": [{"name": TOPIC, "partitions": [{"partition_index": 0}]}],
    }


def describe_client_quotas(v: int, ctx: dict[str, Any]) -> dict[str, Any]:
    return {"components": [], "strict": False}


def alter_client_quotas(v: int, ctx: dict[str, Any]) -> dict[str, Any]:
    return {
        "entries": [
            {
                "entity": [{"entity_type": "client-id", "entity_name": f"pv-{v}"}],
                "ops": [{"key": "consumer_byte_rate", "value": 1e9, "remove": False}],
            }
        ],
        "validate_only": True,
    }


def incremental_alter_configs(v: int, ctx: dict[str, Any]) -> dict[str, Any]:
    return {
        "resources": [
            {
                "resource_type": RESOURCE_TOPIC,
                "resource_name": TOPIC,
                "configs": [{"name": "retention.ms", "config_operation": 0, "value": "7200000"}],
            }
        ],
        "validate_only": False,
    }


def alter_partition(v: int, ctx: dict[str, Any]) -> dict[str, Any]:
    # A leader restating its ISR: a single node is its own controller, and accepts it.
    return {
        "broker_id": 0,
        "broker_epoch": -1,
        "topics": [
            {
                "topic_id": ctx["topic_id"],
                "partitions": [
                    {
                        "partition_index": 0,
                        "leader_epoch": 0,
                        "new_isr": [0],
                        "leader_recovery_state": 0,
                        "partition_epoch": 0,
                    }
                ],
            }
        ],
    }


def elect_leaders(v: int, ctx: dict[str, Any]) -> dict[str, Any]:
    # A single node leads everything it has: ELECTION_NOT_NEEDED (84) per partition.
    return {
        "election_type": 0,
        "topic_partitions": [{"topic": TOPIC, "partitions": [0]}],
        "timeout": 5000,
    }


def alter_partition_reassignments(v: int, ctx: dict[str, Any]) -> dict[str, Any]:
    # Reassigning a single node's partition to where it is changes nothing, successfully.
    return {
        "timeout": 5000,
        "allow_replication_factor_change": True,
        "topics": [{"name": TOPIC, "partitions": [{"partition_index": 0, "replicas": [0]}]}],
    }


def list_partition_reassignments(v: int, ctx: dict[str, Any]) -> dict[str, Any]:
    return {"timeout": 5000, "topics": None}


# Transactions: a transactional id no InitProducerId made, so the coordinator answers with
# errors (INVALID_PRODUCER_ID_MAPPING, TRANSACTIONAL_ID_NOT_FOUND, ...): a well-formed
# answer is what is checked; the flows themselves are in test_transactions.py.
def add_partitions_to_txn(v: int, ctx: dict[str, Any]) -> dict[str, Any]:
    topics = [{"name": TOPIC, "partitions": [0]}]
    return {
        "v3_and_below_transactional_id": "pv-txn",
        "v3_and_below_producer_id": 1,
        "v3_and_below_producer_epoch": 0,
        "v3_and_below_topics": topics,
        "transactions": [
            {
                "transactional_id": "pv-txn",
                "producer_id": 1,
                "producer_epoch": 0,
                "verify_only": True,
                "topics": topics,
            }
        ],
    }


def add_offsets_to_txn(v: int, ctx: dict[str, Any]) -> dict[str, Any]:
    return {"transactional_id": "pv-txn", "producer_id": 1, "producer_epoch": 0, "group_id": GROUP}


def end_txn(v: int, ctx: dict[str, Any]) -> dict[str, Any]:
    return {"transactional_id": "pv-txn", "producer_id": 1, "producer_epoch": 0, "committed": True}


def txn_offset_commit(v: int, ctx: dict[str, Any]) -> dict[str, Any]:
    return {
        "transactional_id": "pv-txn",
        "group_id": GROUP,
        "producer_id": 1,
        "producer_epoch": 0,
        "generation_id": -1,
        "member_id": "",
        "group_instance_id": None,
        "topics": [
            {
                "name": TOPIC,
                "partitions": [
                    {
                        "partition_index": 0,
                        "committed_offset": 1,
                        "committed_leader_epoch": -1,
                        "committed_metadata": "",
                    }
                ],
            }
        ],
    }


def write_txn_markers(v: int, ctx: dict[str, Any]) -> dict[str, Any]:
    return {
        "markers": [
            {
                "producer_id": 1,
                "producer_epoch": 0,
                "transaction_result": False,
                "topics": [{"name": "pv-no-such-topic", "partition_indexes": [0]}],
                "coordinator_epoch": 0,
            }
        ]
    }


def describe_producers(v: int, ctx: dict[str, Any]) -> dict[str, Any]:
    return {"topics": [{"name": TOPIC, "partition_indexes": [0]}]}


def describe_transactions(v: int, ctx: dict[str, Any]) -> dict[str, Any]:
    # No ids: an unknown id is answered with start time -1, as Kafka does, which kio's
    # decoder (this test's reader, not a Kafka client) refuses as a negative timestamp.
    return {"transactional_ids": []}


def list_transactions(v: int, ctx: dict[str, Any]) -> dict[str, Any]:
    return {"state_filters": [], "producer_id_filters": [], "duration_filter": -1}


_ANY_ACL = {
    "resource_type_filter": 1,
    "resource_name_filter": None,
    "pattern_type_filter": 1,
    "principal_filter": None,
    "host_filter": None,
    "operation": 1,
    "permission_type": 1,
}


def describe_acls(v: int, ctx: dict[str, Any]) -> dict[str, Any]:
    return dict(_ANY_ACL)  # no authorizer here: SECURITY_DISABLED, well formed


def create_acls(v: int, ctx: dict[str, Any]) -> dict[str, Any]:
    creation = {
        "resource_type": 2,
        "resource_name": TOPIC,
        "resource_pattern_type": 3,
        "principal": "User:alice",
        "host": "*",
        "operation": 3,
        "permission_type": 3,
    }
    return {"creations": [creation]}


def delete_acls(v: int, ctx: dict[str, Any]) -> dict[str, Any]:
    return {"filters": [dict(_ANY_ACL)]}


def describe_user_scram_credentials(v: int, ctx: dict[str, Any]) -> dict[str, Any]:
    return {"users": None}


def alter_user_scram_credentials(v: int, ctx: dict[str, Any]) -> dict[str, Any]:
    upsertion = {
        "name": "alice",
        "mechanism": 1,
        "iterations": 4096,
        "salt": b"s" * 16,
        "salted_password": b"p" * 32,
    }
    return {"deletions": [], "upsertions": [upsertion]}


def consumer_group_heartbeat(v: int, ctx: dict[str, Any]) -> dict[str, Any]:
    # A member joining its own group (one per version: a member id is one client's).
    return {
        "group_id": f"pv-kip848-v{v}",
        "member_id": f"pv-member-v{v}",
        "member_epoch": 0,
        "rebalance_timeout": 30_000,
        "subscribed_topic_names": [TOPIC],
        "topic_partitions": [],
    }


def consumer_group_describe(v: int, ctx: dict[str, Any]) -> dict[str, Any]:
    return {"group_ids": ["pv-kip848-v0"], "include_authorized_operations": False}


REQUESTS: dict[int, Callable[[int, dict[str, Any]], dict[str, Any]]] = {
    ApiKey.PRODUCE: produce,
    ApiKey.FETCH: fetch,
    ApiKey.LIST_OFFSETS: list_offsets,
    ApiKey.METADATA: metadata,
    ApiKey.OFFSET_COMMIT: offset_commit,
    ApiKey.OFFSET_FETCH: offset_fetch,
    ApiKey.FIND_COORDINATOR: find_coordinator,
    ApiKey.JOIN_GROUP: join_group,
    ApiKey.HEARTBEAT: heartbeat,
    ApiKey.LEAVE_GROUP: leave_group,
    ApiKey.SYNC_GROUP: sync_group,
    ApiKey.DESCRIBE_GROUPS: describe_groups,
    ApiKey.LIST_GROUPS: list_groups,
    ApiKey.API_VERSIONS: api_versions,
    ApiKey.CREATE_TOPICS: create_topics,
    ApiKey.DELETE_TOPICS: delete_topics,
    ApiKey.DELETE_RECORDS: delete_records,
    ApiKey.INIT_PRODUCER_ID: init_producer_id,
    ApiKey.OFFSET_FOR_LEADER_EPOCH: offset_for_leader_epoch,
    ApiKey.DESCRIBE_CONFIGS: describe_configs,
    ApiKey.DESCRIBE_LOG_DIRS: describe_log_dirs,
    ApiKey.ALTER_CONFIGS: alter_configs,
    ApiKey.CREATE_PARTITIONS: create_partitions,
    ApiKey.DELETE_GROUPS: delete_groups,
    ApiKey.OFFSET_DELETE: offset_delete,
    ApiKey.DESCRIBE_CLIENT_QUOTAS: describe_client_quotas,
    ApiKey.ALTER_CLIENT_QUOTAS: alter_client_quotas,
    ApiKey.INCREMENTAL_ALTER_CONFIGS: incremental_alter_configs,
    ApiKey.ALTER_PARTITION: alter_partition,
    ApiKey.ELECT_LEADERS: elect_leaders,
    ApiKey.ALTER_PARTITION_REASSIGNMENTS: alter_partition_reassignments,
    ApiKey.LIST_PARTITION_REASSIGNMENTS: list_partition_reassignments,
    ApiKey.ADD_PARTITIONS_TO_TXN: add_partitions_to_txn,
    ApiKey.ADD_OFFSETS_TO_TXN: add_offsets_to_txn,
    ApiKey.END_TXN: end_txn,
    ApiKey.WRITE_TXN_MARKERS: write_txn_markers,
    ApiKey.TXN_OFFSET_COMMIT: txn_offset_commit,
    ApiKey.DESCRIBE_PRODUCERS: describe_producers,
    ApiKey.DESCRIBE_TRANSACTIONS: describe_transactions,
    ApiKey.LIST_TRANSACTIONS: list_transactions,
    ApiKey.DESCRIBE_ACLS: describe_acls,
    ApiKey.CREATE_ACLS: create_acls,
    ApiKey.DELETE_ACLS: delete_acls,
    ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS: describe_user_scram_credentials,
    ApiKey.ALTER_USER_SCRAM_CREDENTIALS: alter_user_scram_credentials,
    ApiKey.ALTER_REPLICA_LOG_DIRS: alter_replica_log_dirs,
    ApiKey.DESCRIBE_CLUSTER: describe_cluster,
    ApiKey.GET_TELEMETRY_SUBSCRIPTIONS: get_telemetry_subscriptions,
    ApiKey.PUSH_TELEMETRY: push_telemetry,
    ApiKey.LIST_CONFIG_RESOURCES: list_config_resources,
    ApiKey.DESCRIBE_TOPIC_PARTITIONS: describe_topic_partitions,
    ApiKey.CONSUMER_GROUP_HEARTBEAT: consumer_group_heartbeat,
    ApiKey.CONSUMER_GROUP_DESCRIBE: consumer_group_describe,
    ApiKey.SASL_HANDSHAKE: lambda v, ctx: {"mechanism": "PLAIN"},
    ApiKey.SASL_AUTHENTICATE: lambda v, ctx: {"auth_bytes": b"\x00alice\x00secret"},
}


def error_codes(entity: Any) -> Iterator[int]:
    """Every ``error_code`` in a response entity, nested ones included."""
    for f in dataclasses.fields(entity):
        value = getattr(entity, f.name)
        if f.name == "error_code":
            yield int(value)
        elif isinstance(value, tuple):
            for item in value:
                if dataclasses.is_dataclass(item):
                    yield from error_codes(item)
        elif dataclasses.is_dataclass(value):
            yield from error_codes(value)


# APIs whose minimal request above must succeed outright (every error code 0). The group
# APIs aimed at unknown members/groups, and JoinGroup v4+ (MEMBER_ID_REQUIRED), answer
# with errors by design: for them a well-formed answer is what is checked.
MUST_SUCCEED = {
    ApiKey.PRODUCE,
    ApiKey.FETCH,
    ApiKey.LIST_OFFSETS,
    ApiKey.METADATA,
    ApiKey.OFFSET_COMMIT,
    ApiKey.OFFSET_FETCH,
    ApiKey.FIND_COORDINATOR,
    ApiKey.LIST_GROUPS,
    ApiKey.API_VERSIONS,
    ApiKey.CREATE_TOPICS,
    ApiKey.DELETE_TOPICS,
    ApiKey.DELETE_RECORDS,
    ApiKey.INIT_PRODUCER_ID,
    ApiKey.OFFSET_FOR_LEADER_EPOCH,
    ApiKey.DESCRIBE_CONFIGS,
    ApiKey.DESCRIBE_LOG_DIRS,
    ApiKey.ALTER_CONFIGS,
    ApiKey.CREATE_PARTITIONS,
    ApiKey.INCREMENTAL_ALTER_CONFIGS,
    ApiKey.ALTER_PARTITION,
    ApiKey.ALTER_PARTITION_REASSIGNMENTS,
    ApiKey.LIST_PARTITION_REASSIGNMENTS,
    ApiKey.DESCRIBE_PRODUCERS,
    ApiKey.LIST_TRANSACTIONS,
    ApiKey.DESCRIBE_CLIENT_QUOTAS,
    ApiKey.ALTER_CLIENT_QUOTAS,
    ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS,
    ApiKey.ALTER_USER_SCRAM_CREDENTIALS,
    ApiKey.ALTER_REPLICA_LOG_DIRS,
    ApiKey.DESCRIBE_CLUSTER,
    ApiKey.GET_TELEMETRY_SUBSCRIPTIONS,
    ApiKey.LIST_CONFIG_RESOURCES,
    ApiKey.DESCRIBE_TOPIC_PARTITIONS,
    ApiKey.CONSUMER_GROUP_HEARTBEAT,
    ApiKey.CONSUMER_GROUP_DESCRIBE,
}


# -- what each answer must say, beyond being well-formed ------------------------------------
# Records in ``pv`` when an API is reached: 20 from the fixture, then one per Produce version.
PRODUCED = 20 + SUPPORTED[ApiKey.PRODUCE][1] - SUPPORTED[ApiKey.PRODUCE][0] + 1


def check_fetch(v: int, r: Any, ctx: dict[str, Any]) -> None:
    partition = r.responses[0].partitions[0]
    assert int(partition.high_watermark) == PRODUCED and partition.records
    if v >= 13:
        assert r.responses[0].topic_id == ctx["topic_id"]


def check_list_offsets(v: int, r: Any, ctx: dict[str, Any]) -> None:
    partition = r.topics[0].partitions[0]
    assert int(partition.offset) == 0  # earliest: DeleteRecords comes later
    if v >= 4:
        assert int(partition.leader_epoch) == 0


def check_metadata(v: int, r: Any, ctx: dict[str, Any]) -> None:
    (topic,) = r.topics
    assert topic.name == TOPIC and [int(p.leader_id) for p in topic.partitions] == [0]
    if v >= 1:
        assert int(r.controller_id) == 0
    if v >= 2:
        assert r.cluster_id
    if v >= 10:
        assert topic.topic_id == ctx["topic_id"]


def check_offset_fetch(v: int, r: Any, ctx: dict[str, Any]) -> None:
    topics = r.groups[0].topics if v >= 8 else r.topics
    assert int(topics[0].partitions[0].committed_offset) == 1


def check_find_coordinator(v: int, r: Any, ctx: dict[str, Any]) -> None:
    node = r.coordinators[0] if v >= 4 else r
    assert int(node.node_id) == 0 and int(node.port) > 0


def check_join_group(v: int, r: Any, ctx: dict[str, Any]) -> None:
    # v4+ asks a new member to rejoin with the id it hands out (KIP-394).
    assert int(r.error_code) == (79 if v >= 4 else 0) and r.member_id


def check_api_versions(v: int, r: Any, ctx: dict[str, Any]) -> None:
    assert {int(k.api_key) for k in r.api_keys} == set(SUPPORTED)


def check_create_topics(v: int, r: Any, ctx: dict[str, Any]) -> None:
    topic = r.topics[0]
    if v >= 5:
        assert (int(topic.num_partitions), int(topic.replication_factor)) == (1, 1)
        configs = {c.name: c.value for c in topic.configs}
        assert configs["retention.ms"] == "3600000"
    if v >= 7:
        assert topic.topic_id.int != 0


def check_delete_topics(v: int, r: Any, ctx: dict[str, Any]) -> None:
    answer = r.responses[0]
    assert answer.name == f"pv-doomed-{v}"
    if v >= 6:
        assert answer.topic_id.int != 0


def check_delete_records(v: int, r: Any, ctx: dict[str, Any]) -> None:
    assert int(r.topics[0].partitions[0].low_watermark) == v


def check_init_producer_id(v: int, r: Any, ctx: dict[str, Any]) -> None:
    assert int(r.producer_id) >= 0 and int(r.producer_epoch) == 0


def check_offset_for_leader_epoch(v: int, r: Any, ctx: dict[str, Any]) -> None:
    partition = r.topics[0].partitions[0]
    assert (int(partition.leader_epoch), int(partition.end_offset)) == (0, PRODUCED)


def check_describe_configs(v: int, r: Any, ctx: dict[str, Any]) -> None:
    topic, broker = r.results
    configs = {c.name: c for c in topic.configs}
    assert "retention.ms" in configs and "num.partitions" in {c.name for c in broker.configs}
    if v >= 3:
        assert configs["retention.ms"].documentation


def check_sasl_outside_a_sasl_listener(v: int, r: Any, ctx: dict[str, Any]) -> None:
    # This listener is PLAINTEXT: Kafka's KafkaApis answers ILLEGAL_SASL_STATE (34).
    assert int(r.error_code) == 34


CHECKS: dict[int, Callable[[int, Any, dict[str, Any]], None]] = {
    ApiKey.SASL_HANDSHAKE: check_sasl_outside_a_sasl_listener,
    ApiKey.SASL_AUTHENTICATE: check_sasl_outside_a_sasl_listener,
    ApiKey.FETCH: check_fetch,
    ApiKey.LIST_OFFSETS: check_list_offsets,
    ApiKey.METADATA: check_metadata,
    ApiKey.OFFSET_FETCH: check_offset_fetch,
    ApiKey.FIND_COORDINATOR: check_find_coordinator,
    ApiKey.JOIN_GROUP: check_join_group,
    ApiKey.API_VERSIONS: check_api_versions,
    ApiKey.CREATE_TOPICS: check_create_topics,
    ApiKey.DELETE_TOPICS: check_delete_topics,
    ApiKey.DELETE_RECORDS: check_delete_records,
    ApiKey.INIT_PRODUCER_ID: check_init_producer_id,
    ApiKey.OFFSET_FOR_LEADER_EPOCH: check_offset_for_leader_epoch,
    ApiKey.DESCRIBE_CONFIGS: check_describe_configs,
}


@pytest.fixture
def broker(tmp_path: Path) -> Iterator[BrokerProcess]:
    """The broker with its metrics endpoint on: the client-metrics APIs are announced."""
    process = BrokerProcess(tmp_path / "data", {"metrics.http.port": "0"}).start()
    try:
        yield process
    finally:
        process.stop()


@pytest.fixture
def prepared(broker: BrokerProcess) -> Iterator[tuple[RawClient, dict[str, Any]]]:
    """A raw connection, topic ``pv`` with data, ``pv-grow`` to add partitions to and one
    ``pv-doomed-<v>`` per DeleteTopics version."""
    client = RawClient(broker.port)
    try:
        topics = [TOPIC, "pv-grow"] + [
            f"pv-doomed-{v}" for v in range(SUPPORTED[ApiKey.DELETE_TOPICS][1] + 1)
        ]
        created = client.call(
            request(
                ApiKey.CREATE_TOPICS,
                7,
                {
                    "topics": [
                        {
                            "name": name,
                            "num_partitions": 1,
                            "replication_factor": 1,
                            "assignments": [],
                            "configs": [],
                        }
                        for name in topics
                    ],
                    "timeout": 5000,
                    "validate_only": False,
                },
            )
        )
        assert [int(t.error_code) for t in created.topics] == [0] * len(topics)
        ctx = {"topic_id": created.topics[0].topic_id, "log_dir": str(broker.data_dir.resolve())}
        # The first FindCoordinator creates __consumer_offsets; until it is loaded the
        # group APIs answer COORDINATOR_NOT_AVAILABLE / NOT_COORDINATOR, as Kafka does.
        deadline = time.monotonic() + 15
        while True:
            found = client.call(request(ApiKey.FIND_COORDINATOR, 3, find_coordinator(3, ctx)))
            if int(found.error_code) == 0:
                break
            assert time.monotonic() < deadline, found
            time.sleep(0.1)
        for _ in range(20):  # records for Fetch, and room for DeleteRecords to advance
            client.call(request(ApiKey.PRODUCE, 9, produce(0, ctx)))
        yield client, ctx
    finally:
        client.close()


CASES = [
    (api_key, version)
    for api_key, (low, high) in sorted(SUPPORTED.items())
    for version in range(low, high + 1)
]


def test_every_api_and_version_answers_well_formed(
    prepared: tuple[RawClient, dict[str, Any]],
) -> None:
    client, ctx = prepared
    problems: list[str] = []
    for api_key, version in CASES:
        name = f"{ApiKey(api_key).name} v{version}"
        body = request(api_key, version, REQUESTS[api_key](version, ctx))
        try:
            response = client.call(body)
        except (ConnectionError, OSError) as exc:
            problems.append(f"{name}: connection lost ({exc})")
            client.reconnect()
            continue
        except Exception as exc:
            problems.append(f"{name}: {type(exc).__name__}: {exc}")
            continue
        if type(response) is not load_response_schema(api_key, version):
            problems.append(f"{name}: answered with {type(response).__qualname__}")
        if api_key in MUST_SUCCEED:
            codes = [c for c in error_codes(response) if c != 0]
            if codes:
                problems.append(f"{name}: error codes {codes}: {response}")
                continue
        check = CHECKS.get(api_key)
        try:
            if check is not None:
                check(version, response, ctx)
        except AssertionError as exc:
            problems.append(f"{name}: wrong answer {response} ({exc})")
    assert not problems, "\n".join(problems)
    # acks=0 gets no answer at all: the next frame on the connection answers what follows.
    client.send(request(ApiKey.PRODUCE, 9, {**produce(9, ctx), "acks": 0}))
    # And the connection is still usable after all of that.
    answer = client.call(request(ApiKey.API_VERSIONS, 3, api_versions(3, ctx)))
    assert int(answer.error_code) == 0


def test_api_versions_of_an_unknown_version_gets_error_35_with_a_v0_body(
    broker: BrokerProcess,
) -> None:
    client = RawClient(broker.port)
    try:
        # Header v2 (as a v3+ ApiVersions request would have), version 99, some body bytes.
        header = struct.pack(">hhih", ApiKey.API_VERSIONS, 99, 4242, 4) + b"test" + b"\x00"
        frame = header + b"\x08future\x021\x00"
        client.sock.sendall(struct.pack(">i", len(frame)) + frame)
        correlation_id, body = decode_response(client.read_frame(), ApiKey.API_VERSIONS, 0)
        assert correlation_id == 4242
        assert int(body.error_code) == 35  # UNSUPPORTED_VERSION
        ranges = {int(k.api_key): (int(k.min_version), int(k.max_version)) for k in body.api_keys}
        assert ranges[ApiKey.API_VERSIONS] == SUPPORTED[ApiKey.API_VERSIONS]
        assert ranges[ApiKey.METADATA] == SUPPORTED[ApiKey.METADATA]
        # The connection stays open: the client retries with a version from the ranges.
        answer = client.call(request(ApiKey.API_VERSIONS, 3, api_versions(3, {})))
        assert int(answer.error_code) == 0
    finally:
        client.close()
