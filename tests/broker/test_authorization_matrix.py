"""The authorization matrix, modeled on Kafka's ``AuthorizerIntegrationTest`` and generated
from the one table (``tierlog.security.authz_table``): for every API the broker advertises,
a request without the ACLs the table names gets Kafka's error code, and with them it does
not (real broker process, principal ``User:ANONYMOUS``, ACLs created through CreateAcls).

Who is who: the client connects from 127.0.0.1; an admin connection comes from 127.0.0.2
(both loopback, both ANONYMOUS) and holds ``All`` on every resource through ACLs bound to
its host, written into the data dir before the broker starts (the bootstrap case: nobody
could create the first ACL over the wire otherwise). The admin creates and deletes the
client's ACLs with CreateAcls/DeleteAcls; they name host 127.0.0.1, so they never apply
to the admin, and the admin's never to the client.

Each ``Spec`` names an API, a request, the resources it touches and the table's
conditions that hold for it; the grants and the expected refusal are derived from the
table's rows, never written here. An advertised API without a spec fails
``test_every_advertised_api_has_a_spec``.
"""

from __future__ import annotations

import asyncio
import dataclasses
import socket
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from tests.broker.harness import BrokerProcess
from tests.raw_client import RawClient, fetch_body, request
from tierlog.broker.coordination.local import LocalCoordinator
from tierlog.broker.coordination.local_security import LocalAclStore
from tierlog.protocol.versions import ADVERTISED, SUPPORTED
from tierlog.records.builder import Record, build_batch
from tierlog.security.acl import (
    CLUSTER_NAME,
    AccessControlEntry,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourcePattern,
    ResourceType,
)
from tierlog.security.authz_table import AUTHORIZATION, Check, Denial, When, denial_error

CLIENT_HOST, ADMIN_HOST = "127.0.0.1", "127.0.0.2"
ANONYMOUS = "User:ANONYMOUS"
AUTHORIZATION_CODES = frozenset({29, 30, 31, 53})
TOPIC, GROUP, TXN = "matrix-topic", "matrix-group", "matrix-txn"
NO_ID = uuid.UUID(int=0)
Res = ResourceType


@dataclass(frozen=True)
class Spec:
    """One request of the matrix.

    Attributes:
        api_key, version: what is sent.
        body: the request's fields (Kafka's names) given the run's ``Env``.
        names: the resources the request names, by type (the cluster needs none).
        conditions: the table's conditions that hold for this request.
        expected: Kafka's code when the table's rule differs (noted where).
        listed: for an API whose only check filters: whether the response lists the
            resource (left out without the ACL, listed with it).
        raw_errors: the error codes read from the response frame itself, for answers
            kio cannot decode (see ``_describe_transactions_errors``).
    """

    api_key: int
    body: Callable[[Env], dict[str, Any]]
    names: dict[ResourceType, str] = field(default_factory=dict)
    conditions: tuple[When, ...] = ()
    version: int | None = None
    expected: int | None = None
    listed: Callable[[Any], bool] | None = None
    label: str = ""
    raw_errors: Callable[[bytes], set[int]] | None = None

    @property
    def id(self) -> str:
        return f"{AUTHORIZATION[self.api_key].name}{self.label}"


@dataclass
class Env:
    topic_id: uuid.UUID
    counter: int = 0

    def fresh(self, prefix: str) -> str:
        self.counter += 1
        return f"{prefix}-{self.counter}"


def _produce(env: Env) -> dict[str, Any]:
    batch = build_batch([Record(b"k", b"v")])
    return {
        "transactional_id": None,
        "acks": 1,
        "timeout": 5000,
        "topic_data": [{"name": TOPIC, "partition_data": [{"index": 0, "records": batch}]}],
    }


def _offsets(name: str = TOPIC) -> list[dict[str, Any]]:
    partition = {"partition_index": 0, "committed_offset": 0, "committed_metadata": None}
    return [{"name": name, "partitions": [partition]}]


SALTED = {"salt": b"s" * 16, "salted_password": b"p" * 32}

SPECS: tuple[Spec, ...] = (
    Spec(0, _produce, {Res.TOPIC: TOPIC}, version=9),
    Spec(1, lambda e: fetch_body(TOPIC, {0: 0}), {Res.TOPIC: TOPIC}, (When.CONSUMER,), 12),
    Spec(
        1,
        lambda e: {**fetch_body(TOPIC, {0: 0}), "replica_id": 1},
        conditions=(When.FOLLOWER,),
        version=12,
        # KafkaApis answers a follower without ClusterAction per partition, not 31.
        expected=29,
        label="-follower",
    ),
    Spec(
        2,
        lambda e: {
            "replica_id": -1,
            "isolation_level": 0,
            "topics": [{"name": TOPIC, "partitions": [{"partition_index": 0, "timestamp": -1}]}],
        },
        {Res.TOPIC: TOPIC},
        version=7,
    ),
    Spec(
        3,
        lambda e: {
            "topics": [{"name": TOPIC, "topic_id": NO_ID}],
            "allow_auto_topic_creation": False,
            "include_topic_authorized_operations": True,
        },
        {Res.TOPIC: TOPIC},
        version=12,
    ),
    Spec(
        3,
        lambda e: {
            "topics": [{"name": e.fresh("auto"), "topic_id": NO_ID}],
            "allow_auto_topic_creation": True,
            "include_topic_authorized_operations": False,
        },
        conditions=(When.AUTO_CREATE,),
        version=12,
        label="-auto-create",
    ),
    Spec(
        8,
        lambda e: {
            "group_id": GROUP,
            "generation_id_or_member_epoch": -1,
            "member_id": "",
            "topics": _offsets(),
        },
        {Res.GROUP: GROUP, Res.TOPIC: TOPIC},
        version=8,
    ),
    Spec(
        9,
        lambda e: {
            "group_id": GROUP,
            "topics": [{"name": TOPIC, "partition_indexes": [0]}],
        },
        {Res.GROUP: GROUP, Res.TOPIC: TOPIC},
        version=7,
    ),
    Spec(
        10,
        lambda e: {"key_type": 0, "coordinator_keys": [GROUP]},
        {Res.GROUP: GROUP},
        (When.GROUP_KEY,),
        4,
    ),
    Spec(
        10,
        lambda e: {"key_type": 1, "coordinator_keys": [TXN]},
        {Res.TRANSACTIONAL_ID: TXN},
        (When.TRANSACTION_KEY,),
        4,
        label="-transaction",
    ),
    Spec(
        11,
        lambda e: {
            "group_id": GROUP,
            "session_timeout": 10000,
            "rebalance_timeout": 10000,
            "member_id": "",
            "protocol_type": "consumer",
            "protocols": [{"name": "range", "metadata": b""}],
        },
        {Res.GROUP: GROUP},
        version=5,
    ),
    Spec(
        12,
        lambda e: {"group_id": GROUP, "generation_id": 1, "member_id": "m"},
        {Res.GROUP: GROUP},
        version=4,
    ),
    Spec(
        13,
        lambda e: {"group_id": GROUP, "members": [{"member_id": "m"}]},
        {Res.GROUP: GROUP},
        version=4,
    ),
    Spec(
        14,
        lambda e: {"group_id": GROUP, "generation_id": 1, "member_id": "m"},
        {Res.GROUP: GROUP},
        version=4,
    ),
    Spec(
        15,
        lambda e: {"groups": [GROUP], "include_authorized_operations": True},
        {Res.GROUP: GROUP},
        version=5,
    ),
    Spec(
        16,
        lambda e: {},
        {Res.GROUP: GROUP},
        version=4,
        listed=lambda r: any(g.group_id == GROUP for g in r.groups),
    ),
    Spec(
        19,
        lambda e: {
            "topics": [{"name": e.fresh("created"), "num_partitions": 1, "replication_factor": 1}],
            "timeout": 10000,
        },
        # The new topic's configs are answered where DescribeConfigs is allowed: on any.
        {Res.TOPIC: "*"},
        version=7,
    ),
    Spec(
        20,
        lambda e: {"topics": [{"name": "doomed", "topic_id": NO_ID}], "timeout": 10000},
        {Res.TOPIC: "doomed"},
        version=6,
    ),
    Spec(
        21,
        lambda e: {
            "topics": [{"name": TOPIC, "partitions": [{"partition_index": 0, "offset": 0}]}],
            "timeout": 5000,
        },
        {Res.TOPIC: TOPIC},
        version=2,
    ),
    Spec(
        22,
        lambda e: {"transactional_id": TXN, "transaction_timeout": 60000},
        {Res.TRANSACTIONAL_ID: TXN},
        (When.TRANSACTIONAL,),
        4,
    ),
    Spec(
        22,
        lambda e: {"transactional_id": None, "transaction_timeout": 60000},
        conditions=(When.IDEMPOTENT,),
        version=4,
        label="-idempotent",
    ),
    Spec(
        23,
        lambda e: {
            "replica_id": -1,
            "topics": [
                {
                    "topic": TOPIC,
                    "partitions": [{"partition": 0, "leader_epoch": 0, "current_leader_epoch": -1}],
                }
            ],
        },
        {Res.TOPIC: TOPIC},
        version=4,
    ),
    Spec(
        24,
        lambda e: {
            "v3_and_below_transactional_id": TXN,
            "v3_and_below_producer_id": 0,
            "v3_and_below_producer_epoch": 0,
            "v3_and_below_topics": [{"name": TOPIC, "partitions": [0]}],
        },
        {Res.TRANSACTIONAL_ID: TXN, Res.TOPIC: TOPIC},
        (When.CLIENT_VERSION,),
        3,
    ),
    Spec(
        24,
        lambda e: {"transactions": []},
        conditions=(When.BROKER_VERSION,),
        version=4,
        label="-verify",
    ),
    Spec(
        25,
        lambda e: {
            "transactional_id": TXN,
            "producer_id": 0,
            "producer_epoch": 0,
            "group_id": GROUP,
        },
        {Res.TRANSACTIONAL_ID: TXN, Res.GROUP: GROUP},
        version=3,
    ),
    Spec(
        26,
        lambda e: {
            "transactional_id": TXN,
            "producer_id": 0,
            "producer_epoch": 0,
            "committed": False,
        },
        {Res.TRANSACTIONAL_ID: TXN},
        version=3,
    ),
    Spec(
        27,
        lambda e: {
            "markers": [
                {
                    "producer_id": 999_999,
                    "producer_epoch": 0,
                    "transaction_result": False,
                    "topics": [{"name": TOPIC, "partition_indexes": [0]}],
                    "coordinator_epoch": 0,
                }
            ]
        },
        version=1,
    ),
    Spec(
        28,
        lambda e: {
            "transactional_id": TXN,
            "group_id": GROUP,
            "producer_id": 0,
            "producer_epoch": 0,
            "generation_id": -1,
            "member_id": "",
            "topics": _offsets(),
        },
        {Res.TRANSACTIONAL_ID: TXN, Res.GROUP: GROUP, Res.TOPIC: TOPIC},
        version=3,
    ),
    Spec(
        29,
        lambda e: {
            "resource_type_filter": 1,
            "resource_name_filter": None,
            "pattern_type_filter": 1,
            "principal_filter": None,
            "host_filter": None,
            "operation": 1,
            "permission_type": 1,
        },
        version=3,
    ),
    Spec(
        30,
        lambda e: {
            "creations": [
                {
                    "resource_type": 2,
                    "resource_name": "other",
                    "resource_pattern_type": 3,
                    "principal": "User:nobody",
                    "host": "*",
                    "operation": 3,
                    "permission_type": 3,
                }
            ]
        },
        version=3,
    ),
    Spec(
        31,
        lambda e: {
            "filters": [
                {
                    "resource_type_filter": 2,
                    "resource_name_filter": "other",
                    "pattern_type_filter": 3,
                    "principal_filter": "User:nobody",
                    "host_filter": None,
                    "operation": 1,
                    "permission_type": 1,
                }
            ]
        },
        version=3,
    ),
    Spec(
        32,
        lambda e: {
            "resources": [{"resource_type": 2, "resource_name": TOPIC, "configuration_keys": None}]
        },
        {Res.TOPIC: TOPIC},
        (When.TOPIC_RESOURCE,),
        4,
    ),
    Spec(
        32,
        lambda e: {
            "resources": [{"resource_type": 4, "resource_name": "0", "configuration_keys": None}]
        },
        conditions=(When.BROKER_RESOURCE,),
        version=4,
        label="-broker",
    ),
    Spec(
        33,
        lambda e: {
            "resources": [
                {
                    "resource_type": 2,
                    "resource_name": TOPIC,
                    "configs": [{"name": "retention.ms", "value": "86400000"}],
                }
            ],
            "validate_only": True,
        },
        {Res.TOPIC: TOPIC},
        (When.TOPIC_RESOURCE,),
        2,
    ),
    Spec(
        34,
        lambda e: {
            "dirs": [{"path": "/nowhere", "topics": [{"name": TOPIC, "partitions": [0]}]}],
        },
        version=2,
    ),
    Spec(35, lambda e: {"topics": None}, version=4),
    Spec(
        37,
        lambda e: {
            "topics": [{"name": TOPIC, "count": 2, "assignments": None}],
            "timeout": 5000,
            "validate_only": True,
        },
        {Res.TOPIC: TOPIC},
        version=3,
    ),
    Spec(42, lambda e: {"groups_names": [GROUP]}, {Res.GROUP: GROUP}, version=2),
    Spec(
        43,
        lambda e: {
            "election_type": 0,
            "topic_partitions": [{"topic": TOPIC, "partitions": [0]}],
            "timeout": 5000,
        },
        version=2,
    ),
    Spec(
        44,
        lambda e: {
            "resources": [
                {
                    "resource_type": 2,
                    "resource_name": TOPIC,
                    "configs": [
                        {"name": "retention.ms", "config_operation": 0, "value": "86400000"}
                    ],
                }
            ],
            "validate_only": True,
        },
        {Res.TOPIC: TOPIC},
        (When.TOPIC_RESOURCE,),
        1,
    ),
    Spec(
        45,
        lambda e: {
            "timeout": 5000,
            "topics": [{"name": TOPIC, "partitions": [{"partition_index": 0, "replicas": [0]}]}],
        },
        version=0,
    ),
    Spec(46, lambda e: {"timeout": 5000, "topics": None}, version=0),
    Spec(
        47,
        lambda e: {
            "group_id": GROUP,
            "topics": [{"name": TOPIC, "partitions": [{"partition_index": 0}]}],
        },
        {Res.GROUP: GROUP, Res.TOPIC: TOPIC},
        version=0,
    ),
    Spec(48, lambda e: {"components": [], "strict": False}, version=1),
    Spec(
        68,  # a member joining a consumer group (KIP-848)
        lambda e: {
            "group_id": GROUP,
            "member_id": e.fresh("matrix-member"),
            "member_epoch": 0,
            "rebalance_timeout": 30_000,
            "subscribed_topic_names": [TOPIC],
            "topic_partitions": [],
        },
        {Res.GROUP: GROUP},
        version=1,
    ),
    Spec(
        69,
        lambda e: {"group_ids": [GROUP], "include_authorized_operations": True},
        {Res.GROUP: GROUP},
        version=1,
    ),
    Spec(
        49,
        lambda e: {
            "entries": [
                {
                    "entity": [{"entity_type": "client-id", "entity_name": "app"}],
                    "ops": [{"key": "producer_byte_rate", "value": 1048576.0, "remove": False}],
                }
            ],
            "validate_only": True,
        },
        version=1,
    ),
    Spec(50, lambda e: {"users": None}, version=0),
    Spec(
        51,
        lambda e: {
            "deletions": [],
            "upsertions": [{"name": "alice", "mechanism": 1, "iterations": 4096, **SALTED}],
        },
        version=0,
    ),
    Spec(
        56,
        lambda e: {
            "broker_id": 0,
            "broker_epoch": -1,
            "topics": [
                {
                    "topic_id": e.topic_id,
                    "partitions": [
                        {
                            "partition_index": 0,
                            "leader_epoch": 0,
                            "new_isr": [0],
                            "partition_epoch": 0,
                        }
                    ],
                }
            ],
        },
        version=2,
    ),
    Spec(
        60,
        lambda e: {"include_cluster_authorized_operations": True},
        version=0,
        # Describing needs nothing; the cluster's operations are 0 without Describe.
        listed=lambda r: r.cluster_authorized_operations > 0,
    ),
    Spec(
        61,
        lambda e: {"topics": [{"name": TOPIC, "partition_indexes": [0]}]},
        {Res.TOPIC: TOPIC},
        version=0,
    ),
    Spec(
        65,
        lambda e: {"transactional_ids": [TXN]},
        {Res.TRANSACTIONAL_ID: TXN},
        version=0,
        raw_errors=lambda frame: _describe_transactions_errors(frame),
    ),
    Spec(
        66,
        lambda e: {"state_filters": [], "producer_id_filters": []},
        {Res.TRANSACTIONAL_ID: TXN},
        version=0,
        listed=lambda r: any(t.transactional_id == TXN for t in r.transaction_states),
    ),
    Spec(71, lambda e: {"client_instance_id": NO_ID}, version=0),
    Spec(
        72,
        lambda e: {
            "client_instance_id": NO_ID,
            "subscription_id": 0,
            "terminating": False,
            "compression_type": 0,
            "metrics": b"",
        },
        version=0,
    ),
    Spec(74, lambda e: {}, version=0),
    Spec(
        75,
        lambda e: {
            "topics": [{"name": TOPIC}],
            "response_partition_limit": 2000,
            "cursor": None,
        },
        {Res.TOPIC: TOPIC},
        version=0,
    ),
)


def _describe_transactions_errors(frame: bytes) -> set[int]:
    """The one state's error code of a DescribeTransactions v0 answer (flexible): a refused
    id is answered with start time -1, as Kafka does, which kio's decoder refuses as a
    negative timestamp. Layout: correlation id (4), header tags (1), throttle (4), the
    states' compact length (1), then the first state's error code (2)."""
    assert frame[9] == 2, "expected one transaction state"
    return {int.from_bytes(frame[10:12], "big", signed=True)}


def _applies(check: Check, conditions: tuple[When, ...]) -> bool:
    return check.when is When.ALWAYS or check.when in conditions


def grants(spec: Spec) -> list[tuple[AclOperation, ResourceType, str]]:
    """What the table says the request needs: every applicable check's operation on its
    resource (the first choice, not its fallback)."""
    needed = []
    for check in AUTHORIZATION[spec.api_key].checks:
        if not _applies(check, spec.conditions):
            continue
        if check.resource is Res.CLUSTER:
            needed.append((check.operation, Res.CLUSTER, CLUSTER_NAME))
        elif check.resource in spec.names:
            needed.append((check.operation, check.resource, spec.names[check.resource]))
        elif check.denial is not Denial.FILTERED:
            # A resource the request creates (CreateTopics' new names): its fallback is
            # on the cluster or this check is on a name the spec cannot know in advance.
            needed.append((check.operation, check.resource, "*"))
    return needed


def expected_refusal(spec: Spec) -> int | None:
    """Kafka's code for the request without ACLs: the first applicable check that fails
    the request or its resource; None when every check only filters."""
    if spec.expected is not None:
        return spec.expected
    for check in AUTHORIZATION[spec.api_key].checks:
        if not _applies(check, spec.conditions):
            continue
        if check.denial in (Denial.REQUEST, Denial.PER_RESOURCE):
            return int(denial_error(check.resource))
        fallback = check.fallback
        if fallback is not None and fallback.denial is Denial.PER_RESOURCE:
            return int(denial_error(fallback.resource))
    return None


def error_codes(value: Any) -> set[int]:
    """Every ``*error_code`` field anywhere in a kio response."""
    found: set[int] = set()
    if isinstance(value, _Codes):
        return set(value.error_code_set)
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        for f in dataclasses.fields(value):
            item = getattr(value, f.name)
            if f.name.endswith("error_code") and isinstance(item, int):
                found.add(int(item))
            else:
                found |= error_codes(item)
    elif isinstance(value, tuple | list):
        for item in value:
            found |= error_codes(item)
    return found


class AdminClient(RawClient):
    """A RawClient whose connection comes from ``ADMIN_HOST``."""

    def __init__(self, port: int) -> None:
        self.port = port
        self.timeout = 10.0
        self.correlation_id = 0
        self.sock = self._connect()

    def _connect(self) -> socket.socket:
        return socket.create_connection(
            ("127.0.0.1", self.port), timeout=self.timeout, source_address=(ADMIN_HOST, 0)
        )

    def reconnect(self) -> None:
        self.sock.close()
        self.sock = self._connect()


def _acl(host: str, operation: AclOperation, rtype: ResourceType, name: str) -> dict[str, Any]:
    return {
        "resource_type": rtype,
        "resource_name": name,
        "resource_pattern_type": PatternType.LITERAL,
        "principal": ANONYMOUS,
        "host": host,
        "operation": operation,
        "permission_type": AclPermissionType.ALLOW,
    }


def bootstrap_admin(data_dir: Path) -> None:
    """The admin's ``All`` on every resource type, from ``ADMIN_HOST``, written into the
    single node's metadata store before the broker first runs."""

    async def write() -> None:
        coordinator = LocalCoordinator(data_dir)
        store = LocalAclStore(coordinator)
        entry = AccessControlEntry(ANONYMOUS, ADMIN_HOST, AclOperation.ALL, AclPermissionType.ALLOW)
        for rtype, name in (
            (Res.CLUSTER, CLUSTER_NAME),
            (Res.TOPIC, "*"),
            (Res.GROUP, "*"),
            (Res.TRANSACTIONAL_ID, "*"),
        ):
            await store.update(ResourcePattern(rtype, name), lambda cur: cur | {entry})
        await coordinator.stop()

    data_dir.mkdir(parents=True)
    asyncio.run(write())


@pytest.fixture(scope="module")
def secured(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[BrokerProcess, Env]]:
    data = tmp_path_factory.mktemp("authz") / "data"
    bootstrap_admin(data)
    broker = BrokerProcess(
        data,
        {
            "authorizer.class.name": "kafka.security.authorizer.AclAuthorizer",
            "offsets.topic.num.partitions": "1",
            "transaction.state.log.num.partitions": "1",
        },
    ).start()
    try:
        admin = AdminClient(broker.port)
        created = admin.call(
            request(
                19,
                7,
                {
                    "topics": [
                        {"name": n, "num_partitions": 1, "replication_factor": 1}
                        for n in (TOPIC, "doomed")
                    ],
                    "timeout": 10000,
                },
            )
        )
        assert error_codes(created) == {0}, created
        topic_id = created.topics[0].topic_id
        # A group (committed offsets) and a transactional id, for the listing APIs; each
        # is retried while its coordinator creates and loads its internal topic.
        for key_type, key in ((0, GROUP), (1, TXN)):
            find = request(10, 4, {"key_type": key_type, "coordinator_keys": [key]})
            _until_ok(lambda find=find: admin.call(find))
        commit = request(
            8,
            8,
            {
                "group_id": GROUP,
                "generation_id_or_member_epoch": -1,
                "member_id": "",
                "topics": _offsets(),
            },
        )
        _until_ok(lambda: admin.call(commit))
        init = request(22, 4, {"transactional_id": TXN, "transaction_timeout": 60000})
        _until_ok(lambda: admin.call(init))
        admin.close()
        yield broker, Env(topic_id)
    finally:
        broker.stop()


def _until_ok(call: Callable[[], Any], tries: int = 50) -> Any:
    """``call()`` until its answer has no error (coordinators loading), bounded."""
    for _ in range(tries):
        answer = call()
        if error_codes(answer) <= {0}:
            return answer
        time.sleep(0.2)
    raise AssertionError(f"still failing after {tries} tries: {answer}")


def _reset_client_acls(admin: AdminClient) -> None:
    deleted = admin.call(
        request(
            31,
            3,
            {
                "filters": [
                    {
                        "resource_type_filter": 1,
                        "resource_name_filter": None,
                        "pattern_type_filter": 1,
                        "principal_filter": ANONYMOUS,
                        "host_filter": CLIENT_HOST,
                        "operation": 1,
                        "permission_type": 1,
                    }
                ]
            },
        )
    )
    assert error_codes(deleted) <= {0}, deleted


def test_every_advertised_api_has_a_spec() -> None:
    wanted = {key for key in ADVERTISED if not AUTHORIZATION[key].before_authentication}
    missing = sorted(AUTHORIZATION[key].name for key in wanted - {s.api_key for s in SPECS})
    assert missing == [], f"APIs the authorization matrix does not cover: {missing}"


def test_specs_are_sendable() -> None:
    for spec in SPECS:
        low, high = SUPPORTED[spec.api_key]
        version = spec.version if spec.version is not None else high
        assert low <= version <= high, spec.id


def _call(client: RawClient, spec: Spec, version: int, env: Env) -> Any:
    body = request(spec.api_key, version, spec.body(env))
    if spec.raw_errors is None:
        return client.call(body)
    client.send(body)
    return _Codes(spec.raw_errors(client.read_frame()))


@dataclass
class _Codes:
    """Error codes read from a frame, for ``error_codes``."""

    error_code_set: set[int]


@pytest.mark.parametrize("spec", SPECS, ids=[s.id for s in SPECS])
def test_without_the_acl_refused_with_it_allowed(
    secured: tuple[BrokerProcess, Env], spec: Spec
) -> None:
    broker, env = secured
    version = spec.version if spec.version is not None else SUPPORTED[spec.api_key][1]
    admin, client = AdminClient(broker.port), RawClient(broker.port)
    try:
        _reset_client_acls(admin)
        without = _call(client, spec, version, env)
        if not AUTHORIZATION[spec.api_key].checks:
            # KafkaApis checks nothing for it (KIP-714's telemetry): answered without ACLs.
            assert not error_codes(without) & AUTHORIZATION_CODES, f"{spec.id}: {without}"
            return
        refusal = expected_refusal(spec)
        if refusal is None:
            assert spec.listed is not None, f"{spec.id}: only filtering checks, say what lists"
            assert not spec.listed(without), f"{spec.id} listed without the ACL: {without}"
        else:
            assert refusal in error_codes(without), f"{spec.id} without ACLs: {without}"
        needed = grants(spec)
        assert needed, f"{spec.id}: the table names no check for this request"
        created = admin.call(request(30, 3, {"creations": [_acl(CLIENT_HOST, *g) for g in needed]}))
        assert error_codes(created) == {0}, created
        allowed = _call(client, spec, version, env)
        codes = error_codes(allowed)
        assert not codes & AUTHORIZATION_CODES, f"{spec.id} with {needed}: {allowed}"
        if spec.listed is not None:
            assert spec.listed(allowed), f"{spec.id} not listed with the ACL: {allowed}"
    finally:
        admin.close()
        client.close()


def test_denials_are_audited(secured: tuple[BrokerProcess, Env]) -> None:
    broker, _ = secured
    admin, client = AdminClient(broker.port), RawClient(broker.port)
    try:
        _reset_client_acls(admin)
        client.call(request(9, 7, {"group_id": "audited", "topics": None}))
    finally:
        admin.close()
        client.close()
    expected = (
        "Principal = User:ANONYMOUS is Denied operation = Describe from host = 127.0.0.1 "
        "on resource = Group:LITERAL:audited"
    )
    assert expected in broker.log_text()
