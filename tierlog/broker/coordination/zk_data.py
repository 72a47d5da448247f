"""Every znode path of cluster mode and its JSON, in one place (Kafka's ``kafka.zk.ZkData``).

Sans-I/O: no kazoo, no sockets, no asyncio. The ``zk_*`` concern modules (``zk_client``
lists them) do the talking; nothing else builds a path string or parses a znode. The
layout is Kafka's pre-KRaft one (DESIGN.md "Cluster"), so ``zkCli.sh`` and Kafka's own
tools read a tierlog cluster's state::

    /cluster/id                        {"version":"1","id":"<cluster id>"}
    /controller                        ephemeral: {"version":1,"brokerid":1,"timestamp":"<ms>"}
    /controller_epoch                  "<epoch>" (a bare integer)
    /brokers/ids/<id>                  ephemeral: broker registration v5
    /brokers/seqid                     empty (Kafka's broker id generator)
    /brokers/topics/<t>                replica assignment v3 and topic id
    /brokers/topics/<t>/partitions/<p>/state
                                       leader, leader_epoch, controller_epoch, isr
    /config/topics/<t>                 {"version":1,"config":{...}}
    /config/clients/<c>, /config/users/<u>[/clients/<c>]
                                       the same: client quotas
    /config/brokers/<id>, /config/brokers/<default>
                                       the same: dynamic broker configs (KIP-226)
    /config/changes/config_change_<seq>
                                       sequential: {"version":2,"entity_path":"topics/<t>"}
    /admin/delete_topics/<t>           empty: a deletion request
    /admin/reassign_partitions         {"version":1,"partitions":[{topic,partition,replicas}]}
    /admin/preferred_replica_election  {"version":1,"partitions":[{topic,partition}]}
    /isr_change_notification/isr_change_<seq>
                                       {"version":1,"partitions":[{topic,partition}]}
    /latest_producer_id_block          {"version":1,"broker":N,"block_start":"S","block_end":"E"}

Each ``decode_*`` raises ``ZkDataError`` (naming the znode's path) for anything that is not
the JSON Kafka writes; no other exception escapes a decoder. Encoders write compact JSON as
Kafka's ``Json.encodeAsBytes`` (Jackson) does. Sources are cited at each format.

Past ~600 lines on purpose: the point of this module is that every znode format is in one
file, as in Kafka; it is a flat sequence of small path/encode/decode groups, one per znode.
"""

from __future__ import annotations

import base64
import binascii
import json
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import quote, unquote

from tierlog.broker.coordination.api import (
    BROKERS_ENTITY,
    CLIENT_METRICS_ENTITY,
    CoordinationError,
)


class ZkDataError(CoordinationError):
    """A znode's content is not what Kafka writes there."""

    def __init__(self, path: str, reason: str) -> None:
        super().__init__(f"cannot decode znode {path}: {reason}")
        self.path = path
        self.reason = reason


@dataclass(frozen=True)
class ZnodeData:
    """A znode as read: its content and the parts of its stat that cluster code orders by:
    ``version`` (zkVersion, what conditional writes check) and ``mzxid`` (the zxid of its
    last write: it grows across a delete and re-create too, so it orders any two reads of
    one path); ``czxid`` is a registration's broker epoch (KIP-380)."""

    data: bytes
    version: int
    mzxid: int
    czxid: int


# -- paths ------------------------------------------------------------------------------------
# Kafka's ZkData.scala objects: ControllerZNode, ControllerEpochZNode, BrokerIdsZNode, ...

ADMIN = "/admin"
BROKERS = "/brokers"
BROKER_IDS = "/brokers/ids"
BROKER_SEQUENCE_ID = "/brokers/seqid"
TOPICS = "/brokers/topics"
CLUSTER = "/cluster"
CLUSTER_ID = "/cluster/id"
CONFIG = "/config"
CONFIG_CHANGES = "/config/changes"
CONFIG_CHANGE_PREFIX = "config_change_"
CONSUMERS = "/consumers"  # the old consumer's path; Kafka still creates it at start-up
CONTROLLER = "/controller"
CONTROLLER_EPOCH = "/controller_epoch"
DELETE_TOPICS = "/admin/delete_topics"
REASSIGN_PARTITIONS = "/admin/reassign_partitions"
PREFERRED_REPLICA_ELECTION = "/admin/preferred_replica_election"
ISR_CHANGE_NOTIFICATION = "/isr_change_notification"
ISR_CHANGE_PREFIX = "isr_change_"
LOG_DIR_EVENT_NOTIFICATION = "/log_dir_event_notification"
PRODUCER_ID_BLOCK = "/latest_producer_id_block"

# Kafka's ConfigType.ALL; each gets /config/<type>.
CONFIG_TYPES = ("topics", "clients", "users", "brokers", "ips")
TOPIC_CONFIG_TYPE = "topics"
CLIENTS_CONFIG_TYPE = "clients"
USERS_CONFIG_TYPE = "users"
# Client-metrics subscriptions (KIP-714): KRaft keeps them as ConfigRecords of resource type
# CLIENT_METRICS; here they are entities of their own type, beside the others, with the
# same change notifications (``client-metrics/<name>``). ``/config/client-metrics`` is made
# by the first write, so a Kafka ZooKeeper layout without it reads as "none".
CLIENT_METRICS_CONFIG_TYPE = CLIENT_METRICS_ENTITY
# Dynamic broker configs (KIP-226): ``/config/brokers/<id>`` per broker and
# ``/config/brokers/<default>`` for the cluster, announced as ``brokers/<id>`` and
# ``brokers/<default>`` (Kafka's AdminZkClient.changeBrokerConfig).
BROKERS_CONFIG_TYPE = BROKERS_ENTITY
# Entity types the brokers' caches keep whole (name -> configs) and re-read when a change
# notification names one of them.
CACHED_ENTITY_TYPES = (CLIENT_METRICS_CONFIG_TYPE, BROKERS_CONFIG_TYPE)

# Kafka's ZkData.PersistentZkPaths: created (empty) at start-up when missing, so later code
# can create children without creating parents.
PERSISTENT_PATHS: tuple[str, ...] = (
    CONSUMERS,
    BROKER_IDS,
    TOPICS,
    CONFIG_CHANGES,
    DELETE_TOPICS,
    BROKER_SEQUENCE_ID,
    ISR_CHANGE_NOTIFICATION,
    PRODUCER_ID_BLOCK,
    LOG_DIR_EVENT_NOTIFICATION,
    *(f"{CONFIG}/{t}" for t in CONFIG_TYPES),
)


def _segment(kind: str, name: str) -> str:
    """A name that becomes one path segment: it must not climb or split the tree. (Kafka's
    topic rules are stricter and checked where names come in; this guards the layout.)"""
    if not name or name in (".", "..") or "/" in name or "\x00" in name:
        raise ValueError(f"illegal {kind} name for a znode: {name!r}")
    return name


def broker_path(broker_id: int) -> str:
    return f"{BROKER_IDS}/{int(broker_id)}"


def topic_path(topic: str) -> str:
    return f"{TOPICS}/{_segment('topic', topic)}"


def topic_partitions_path(topic: str) -> str:
    return f"{topic_path(topic)}/partitions"


def topic_partition_path(topic: str, partition: int) -> str:
    return f"{topic_partitions_path(topic)}/{int(partition)}"


def partition_state_path(topic: str, partition: int) -> str:
    return f"{topic_partition_path(topic, partition)}/state"


def config_entity_path(entity_type: str, name: str) -> str:
    return f"{CONFIG}/{_segment('config type', entity_type)}/{_segment('entity', name)}"


def topic_config_path(topic: str) -> str:
    return config_entity_path(TOPIC_CONFIG_TYPE, topic)


def config_type_path(entity_type: str) -> str:
    """``/config/<type>``: its children are the entities of that type."""
    return f"{CONFIG}/{_segment('config type', entity_type)}"


def user_clients_path(user: str) -> str:
    """``/config/users/<u>/clients``: the user's per-client-id quota entities."""
    return f"{config_entity_path(USERS_CONFIG_TYPE, user)}/clients"


def config_znode_path(entity_path: str) -> str:
    """The znode of an entity named by its path under ``/config``, as change notifications
    and client quotas name it (``topics/<t>``, ``users/<u>/clients/<c>``)."""
    return f"{CONFIG}/{entity_path}"


def config_change_prefix_path() -> str:
    """The path to create SEQUENTIAL: ZooKeeper appends the 10-digit sequence number."""
    return f"{CONFIG_CHANGES}/{CONFIG_CHANGE_PREFIX}"


def isr_change_prefix_path() -> str:
    return f"{ISR_CHANGE_NOTIFICATION}/{ISR_CHANGE_PREFIX}"


def delete_topic_path(topic: str) -> str:
    return f"{DELETE_TOPICS}/{_segment('topic', topic)}"


def child_path(parent: str, child: str) -> str:
    """A child listed by ``get_children`` of ``parent`` (one of the paths above)."""
    return f"{parent}/{_segment('child', child)}"


# -- parsing paths back (a watch names the znode that changed) --------------------------------


def parse_topic_path(path: str) -> str | None:
    """The topic of ``/brokers/topics/<t>``; None for any other path."""
    prefix = f"{TOPICS}/"
    if not path.startswith(prefix):
        return None
    name = path[len(prefix) :]
    return name if name and "/" not in name else None


def parse_partition_state_path(path: str) -> tuple[str, int] | None:
    """(topic, partition) of ``/brokers/topics/<t>/partitions/<p>/state``; None for any
    other path."""
    prefix = f"{TOPICS}/"
    if not path.startswith(prefix) or not path.endswith("/state"):
        return None
    parts = path[len(prefix) : -len("/state")].split("/")
    if len(parts) != 3 or parts[1] != "partitions" or not parts[0]:
        return None
    partition = _decimal(parts[2])
    if partition is None or partition < 0 or parts[2] != str(partition):
        return None
    return parts[0], partition


def config_change_sequence(child: str) -> int | None:
    """The sequence number of a ``config_change_<seq>`` child of ``/config/changes`` (ZooKeeper
    appends 10 digits); None for any other name."""
    if not child.startswith(CONFIG_CHANGE_PREFIX):
        return None
    number = _decimal(child[len(CONFIG_CHANGE_PREFIX) :])
    return number if number is not None and number >= 0 else None


# -- JSON helpers ----------------------------------------------------------------------------


def _dump(obj: Mapping[str, Any]) -> bytes:
    # Jackson's compact form, as Kafka's Json.encodeAsBytes writes it.
    return json.dumps(obj, separators=(",", ":")).encode()


def _load(path: str, data: bytes | None) -> dict[str, Any]:
    if not data:
        raise ZkDataError(path, "empty znode")
    try:
        obj = json.loads(data.decode())
    except (UnicodeDecodeError, ValueError) as e:
        raise ZkDataError(path, f"not JSON ({e})") from None
    if not isinstance(obj, dict):
        raise ZkDataError(path, f"expected a JSON object, got {type(obj).__name__}")
    return obj


def _get(path: str, obj: Mapping[str, Any], key: str) -> Any:
    if key not in obj:
        raise ZkDataError(path, f"missing {key!r}")
    return obj[key]


def _int(path: str, obj: Mapping[str, Any], key: str) -> int:
    value = _get(path, obj, key)
    if isinstance(value, bool) or not isinstance(value, int):
        raise ZkDataError(path, f"{key!r} is not an integer: {value!r}")
    return value


def _str(path: str, obj: Mapping[str, Any], key: str) -> str:
    value = _get(path, obj, key)
    if not isinstance(value, str):
        raise ZkDataError(path, f"{key!r} is not a string: {value!r}")
    return value


def _long_string(path: str, obj: Mapping[str, Any], key: str) -> int:
    """Kafka writes some longs as JSON strings (timestamps, producer id blocks)."""
    text = _str(path, obj, key)
    value = _decimal(text)
    if value is None:
        raise ZkDataError(path, f"{key!r} is not a decimal string: {text!r}")
    return value


def _int_list(path: str, value: Any, what: str) -> list[int]:
    if not isinstance(value, list) or any(
        isinstance(v, bool) or not isinstance(v, int) for v in value
    ):
        raise ZkDataError(path, f"{what} is not a list of integers: {value!r}")
    return list(value)


def _object(path: str, value: Any, what: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise ZkDataError(path, f"{what} is not a JSON object: {value!r}")
    return value


def _optional_object(path: str, obj: Mapping[str, Any], key: str) -> dict[str, Any]:
    """``obj[key]`` if it is a JSON object, {} if absent or null (Kafka reads both so)."""
    value = obj.get(key)
    return {} if value is None else _object(path, value, repr(key))


def _decimal(text: str) -> int | None:
    """An ASCII decimal integer (int() alone would also take "1_0", " 1" or other scripts'
    digits), or None."""
    digits = text[1:] if text.startswith("-") else text
    return int(text) if digits.isascii() and digits.isdigit() else None


def _partition_key(path: str, key: str) -> int:
    partition = _decimal(key)
    if partition is None or partition < 0:
        raise ZkDataError(path, f"partition key is not a number: {key!r}")
    return partition


def _version(path: str, obj: Mapping[str, Any], supported: range) -> int:
    version = _int(path, obj, "version")
    if version not in supported:
        raise ZkDataError(path, f"unsupported version {version}")
    return version


# -- topic ids: Kafka's Uuid string form -----------------------------------------------------


def topic_id_to_str(topic_id: uuid.UUID) -> str:
    """Kafka's ``Uuid.toString``: URL-safe base64 of the 16 bytes, no padding (22 chars)."""
    return base64.urlsafe_b64encode(topic_id.bytes).decode().rstrip("=")


def topic_id_from_str(text: str) -> uuid.UUID:
    """Kafka's ``Uuid.fromString``. Raises ValueError."""
    if len(text) != 22:
        raise ValueError(f"not a Kafka Uuid (22 base64 characters): {text!r}")
    try:
        raw = base64.urlsafe_b64decode(text + "==")
    except (binascii.Error, ValueError) as e:
        raise ValueError(f"not a Kafka Uuid: {text!r}") from e
    return uuid.UUID(bytes=raw)


# -- /brokers/ids/<id> -----------------------------------------------------------------------
# Kafka's BrokerIdZNode.encode/decode, JSON version 5 (Kafka >= 2.7, KIP-584 added
# "features"). The top-level host/port repeat the first PLAINTEXT endpoint for old clients
# (host null, port -1 when there is none); "rack" is written only when set.

BROKER_REGISTRATION_VERSION = 5


@dataclass(frozen=True)
class EndPoint:
    """One advertised listener: ``"<listener>://<host>:<port>"`` in ``endpoints``."""

    host: str
    port: int
    listener: str = "PLAINTEXT"
    security_protocol: str = "PLAINTEXT"

    def connection_string(self) -> str:
        # Kafka's EndPoint.connectionString brackets IPv6 literals.
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{self.listener}://{host}:{self.port}"


@dataclass(frozen=True)
class BrokerInfo:
    broker_id: int
    endpoints: tuple[EndPoint, ...]
    rack: str | None = None
    jmx_port: int = -1
    timestamp_ms: int = 0  # stamped by zk_brokers.BrokerRegistry.register
    features: Mapping[str, Any] = field(default_factory=dict)

    @classmethod
    def plaintext(cls, broker_id: int, host: str, port: int, rack: str | None = None) -> BrokerInfo:
        return cls(broker_id, (EndPoint(host, port),), rack)

    def _plaintext_endpoint(self) -> EndPoint | None:
        return next((e for e in self.endpoints if e.security_protocol == "PLAINTEXT"), None)

    @property
    def host(self) -> str | None:
        endpoint = self._plaintext_endpoint()
        return endpoint.host if endpoint else None

    @property
    def port(self) -> int:
        endpoint = self._plaintext_endpoint()
        return endpoint.port if endpoint else -1


def encode_broker(info: BrokerInfo) -> bytes:
    obj: dict[str, Any] = {
        "version": BROKER_REGISTRATION_VERSION,
        "host": info.host,
        "port": info.port,
        "endpoints": [e.connection_string() for e in info.endpoints],
        "listener_security_protocol_map": {e.listener: e.security_protocol for e in info.endpoints},
        "jmx_port": info.jmx_port,
        "timestamp": str(info.timestamp_ms),
        "features": dict(info.features),
    }
    if info.rack is not None:
        obj["rack"] = info.rack
    return _dump(obj)


def _parse_endpoint(path: str, text: Any, protocols: Mapping[str, str]) -> EndPoint:
    # Kafka's EndPoint.createEndPoint: "<listener>://<host>:<port>", host maybe [IPv6].
    if not isinstance(text, str) or "://" not in text:
        raise ZkDataError(path, f"bad endpoint {text!r}")
    listener, _, rest = text.partition("://")
    host, sep, port_text = rest.rpartition(":")
    port = _decimal(port_text)
    if not sep or port is None:
        raise ZkDataError(path, f"bad endpoint {text!r}")
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    # Without a map (versions < 4) the listener name is the security protocol.
    protocol = protocols.get(listener, listener)
    if not isinstance(protocol, str):
        raise ZkDataError(path, f"bad security protocol for {listener!r}: {protocol!r}")
    return EndPoint(host, port, listener, protocol)


def decode_broker(broker_id: int, data: bytes | None) -> BrokerInfo:
    """Versions 1-5 (v1 has only host/port; v2+ endpoints; v3+ rack; v4+ the protocol map;
    v5 features), as Kafka's ``BrokerIdZNode.decode`` reads them."""
    path = broker_path(broker_id)
    obj = _load(path, data)
    version = _version(path, obj, range(1, BROKER_REGISTRATION_VERSION + 1))
    if version == 1:
        plain = EndPoint(_str(path, obj, "host"), _int(path, obj, "port"))
        endpoints: tuple[EndPoint, ...] = (plain,)
    else:
        protocols = _optional_object(path, obj, "listener_security_protocol_map")
        raw = _get(path, obj, "endpoints")
        if not isinstance(raw, list):
            raise ZkDataError(path, f"'endpoints' is not a list: {raw!r}")
        endpoints = tuple(_parse_endpoint(path, e, protocols) for e in raw)
    rack = obj.get("rack")
    if rack is not None and not isinstance(rack, str):
        raise ZkDataError(path, f"'rack' is not a string: {rack!r}")
    timestamp = _long_string(path, obj, "timestamp") if "timestamp" in obj else 0
    features = _optional_object(path, obj, "features")
    return BrokerInfo(broker_id, endpoints, rack, _int(path, obj, "jmx_port"), timestamp, features)


# -- /controller and /controller_epoch -------------------------------------------------------
# Kafka's ControllerZNode: {"version":1,"brokerid":N,"timestamp":"<ms>"} (timestamp as a
# string); ControllerEpochZNode: the epoch as a bare decimal string, not JSON.


@dataclass(frozen=True)
class ControllerInfo:
    broker_id: int
    timestamp_ms: int


def encode_controller(info: ControllerInfo) -> bytes:
    return _dump({"version": 1, "brokerid": info.broker_id, "timestamp": str(info.timestamp_ms)})


def decode_controller(data: bytes | None) -> ControllerInfo:
    obj = _load(CONTROLLER, data)
    timestamp = _long_string(CONTROLLER, obj, "timestamp") if "timestamp" in obj else 0
    return ControllerInfo(_int(CONTROLLER, obj, "brokerid"), timestamp)


def encode_controller_epoch(epoch: int) -> bytes:
    return str(int(epoch)).encode()


def decode_controller_epoch(data: bytes | None) -> int:
    text = (data or b"").decode(errors="replace")
    epoch = _decimal(text)
    if epoch is None:
        raise ZkDataError(CONTROLLER_EPOCH, f"not an integer: {text!r}")
    return epoch


# -- /brokers/topics/<t> ---------------------------------------------------------------------
# Kafka's TopicZNode.encode: {"version":3,"partitions":{"0":[1,2]},"adding_replicas":{},
# "removing_replicas":{},"topic_id":"<Uuid>"}. Kafka 2.8 wrote version 2 with the same keys
# (topic_id arrived with KIP-516); Kafka 3.x writes 3. adding/removing list only partitions
# under reassignment (KIP-455). Versions 1-3 are read; 1 has "partitions" only.

TOPIC_ASSIGNMENT_VERSION = 3


@dataclass(frozen=True)
class TopicAssignment:
    partitions: Mapping[int, list[int]]  # partition -> replicas, preferred leader first
    topic_id: uuid.UUID | None = None
    adding_replicas: Mapping[int, list[int]] = field(default_factory=dict)
    removing_replicas: Mapping[int, list[int]] = field(default_factory=dict)


def _replica_map(value: Mapping[int, list[int]]) -> dict[str, list[int]]:
    return {str(p): list(r) for p, r in sorted(value.items()) if r}


def encode_topic(assignment: TopicAssignment) -> bytes:
    obj: dict[str, Any] = {
        "version": TOPIC_ASSIGNMENT_VERSION,
        "partitions": {str(p): list(r) for p, r in sorted(assignment.partitions.items())},
        "adding_replicas": _replica_map(assignment.adding_replicas),
        "removing_replicas": _replica_map(assignment.removing_replicas),
    }
    if assignment.topic_id is not None:
        obj["topic_id"] = topic_id_to_str(assignment.topic_id)
    return _dump(obj)


def _decode_replica_map(path: str, obj: Mapping[str, Any], key: str) -> dict[int, list[int]]:
    raw = _optional_object(path, obj, key)
    return {_partition_key(path, p): _int_list(path, r, f"{key}[{p}]") for p, r in raw.items()}


def decode_topic(topic: str, data: bytes | None) -> TopicAssignment:
    path = topic_path(topic)
    obj = _load(path, data)
    _version(path, obj, range(1, TOPIC_ASSIGNMENT_VERSION + 1))
    topic_id = None
    if obj.get("topic_id") is not None:
        try:
            topic_id = topic_id_from_str(_str(path, obj, "topic_id"))
        except ValueError as e:
            raise ZkDataError(path, str(e)) from None
    return TopicAssignment(
        partitions=_decode_replica_map(path, obj, "partitions"),
        topic_id=topic_id,
        adding_replicas=_decode_replica_map(path, obj, "adding_replicas"),
        removing_replicas=_decode_replica_map(path, obj, "removing_replicas"),
    )


# -- /brokers/topics/<t>/partitions/<p>/state ------------------------------------------------
# Kafka's TopicPartitionStateZNode: {"version":1,"leader":L,"leader_epoch":E,
# "controller_epoch":C,"isr":[...]}, plus "leader_recovery_state" only when it is not 0
# (RECOVERED; KIP-704). The znode's zkVersion is kept beside it, not in it (zk_partition_states).

NO_LEADER = -1  # Kafka's LeaderAndIsr.NoLeader


@dataclass(frozen=True)
class LeaderAndIsr:
    """Kafka's LeaderIsrAndControllerEpoch: who leads, in which leader epoch, the ISR, and
    the epoch of the controller that wrote it."""

    leader: int
    leader_epoch: int
    isr: tuple[int, ...]
    controller_epoch: int
    leader_recovery_state: int = 0


def encode_partition_state(state: LeaderAndIsr) -> bytes:
    obj: dict[str, Any] = {
        "version": 1,
        "leader": state.leader,
        "leader_epoch": state.leader_epoch,
        "controller_epoch": state.controller_epoch,
        "isr": list(state.isr),
    }
    if state.leader_recovery_state != 0:
        obj["leader_recovery_state"] = state.leader_recovery_state
    return _dump(obj)


def decode_partition_state(topic: str, partition: int, data: bytes | None) -> LeaderAndIsr:
    path = partition_state_path(topic, partition)
    obj = _load(path, data)
    recovery = _int(path, obj, "leader_recovery_state") if "leader_recovery_state" in obj else 0
    return LeaderAndIsr(
        leader=_int(path, obj, "leader"),
        leader_epoch=_int(path, obj, "leader_epoch"),
        isr=tuple(_int_list(path, _get(path, obj, "isr"), "'isr'")),
        controller_epoch=_int(path, obj, "controller_epoch"),
        leader_recovery_state=recovery,
    )


# -- /config/<type>/<name> and /config/changes -----------------------------------------------
# Kafka's ConfigEntityZNode: {"version":1,"config":{"k":"v"}} (values are strings, as in a
# java.util.Properties). ConfigEntityChangeNotificationSequenceZNode: version 2, naming the
# entity by its path under /config, e.g. "topics/orders" (version 1 named type and name).


def encode_config(configs: Mapping[str, str]) -> bytes:
    return _dump({"version": 1, "config": {k: str(v) for k, v in sorted(configs.items())}})


def decode_config(entity_type: str, name: str, data: bytes | None) -> dict[str, str]:
    """An empty znode is an entity without overrides (Kafka reads null data as {})."""
    return decode_config_at(config_entity_path(entity_type, name), data)


def decode_config_at(path: str, data: bytes | None) -> dict[str, str]:
    """``decode_config`` of the znode at ``path`` (client quota entities are nested)."""
    if not data:
        return {}
    obj = _load(path, data)
    config = _optional_object(path, obj, "config")
    bad = [k for k, v in config.items() if not isinstance(v, str)]
    if bad:
        raise ZkDataError(path, f"config values are not strings: {bad}")
    return dict(config)


def sanitize(name: str) -> str:
    """A user or client id as one path segment, as Kafka's ``Sanitizer.sanitize`` writes it:
    URL-encoded (Java's ``URLEncoder``, with ``*`` as ``%2A`` and a space as ``%20``)."""
    return quote(name, safe="-._*").replace("*", "%2A").replace("~", "%7E")


def desanitize(segment: str) -> str:
    return unquote(segment)


def config_change_entity_path(entity_type: str, name: str) -> str:
    return f"{_segment('config type', entity_type)}/{_segment('entity', name)}"


def user_client_entity_path(user: str, client: str) -> str:
    """``users/<u>/clients/<c>``: a quota entity for one client id of one user."""
    return (
        f"{config_change_entity_path(USERS_CONFIG_TYPE, user)}/clients/{_segment('entity', client)}"
    )


def encode_config_change(entity_path: str) -> bytes:
    return _dump({"version": 2, "entity_path": entity_path})


def decode_config_change(path: str, data: bytes | None) -> str:
    """The entity path ("topics/<t>") of a change notification read at ``path``."""
    obj = _load(path, data)
    _version(path, obj, range(2, 3))
    return _str(path, obj, "entity_path")


# -- /admin ------------------------------------------------------------------------------------
# Kafka's DeleteTopicsTopicZNode carries no data. ReassignPartitionsZNode (the pre-KIP-455
# tool's path): {"version":1,"partitions":[{"topic":t,"partition":p,"replicas":[...]}]}.
# PreferredReplicaElectionZNode and IsrChangeNotificationSequenceZNode:
# {"version":1,"partitions":[{"topic":t,"partition":p}]}.


def encode_reassignment(reassignment: Mapping[tuple[str, int], list[int]]) -> bytes:
    partitions = [
        {"topic": t, "partition": p, "replicas": list(r)}
        for (t, p), r in sorted(reassignment.items())
    ]
    return _dump({"version": 1, "partitions": partitions})


def _partition_entries(path: str, data: bytes | None) -> list[dict[str, Any]]:
    obj = _load(path, data)
    _version(path, obj, range(1, 2))
    entries = _get(path, obj, "partitions")
    if not isinstance(entries, list):
        raise ZkDataError(path, f"'partitions' is not a list: {entries!r}")
    return [_object(path, e, "a partition entry") for e in entries]


def decode_reassignment(data: bytes | None) -> dict[tuple[str, int], list[int]]:
    path = REASSIGN_PARTITIONS
    return {
        (_str(path, e, "topic"), _int(path, e, "partition")): _int_list(
            path, _get(path, e, "replicas"), "'replicas'"
        )
        for e in _partition_entries(path, data)
    }


def encode_partition_set(partitions: set[tuple[str, int]]) -> bytes:
    """Preferred replica election and ISR change notifications."""
    entries = [{"topic": t, "partition": p} for t, p in sorted(partitions)]
    return _dump({"version": 1, "partitions": entries})


def decode_partition_set(path: str, data: bytes | None) -> set[tuple[str, int]]:
    return {
        (_str(path, e, "topic"), _int(path, e, "partition")) for e in _partition_entries(path, data)
    }


# -- /latest_producer_id_block ---------------------------------------------------------------
# Kafka's ProducerIdBlockZNode (kafka.zk, formerly ProducerIdManager.generatePidBlockJson):
# {"version":1,"broker":N,"block_start":"S","block_end":"E"}; start and end are decimal
# STRINGS and both inclusive. The first block starts at 0; each next one right after the
# last end (ZkProducerIdManager.getNewProducerIdBlock).

PRODUCER_ID_BLOCK_SIZE = 1000  # Kafka's ProducerIdsBlock.PRODUCER_ID_BLOCK_SIZE
MAX_PRODUCER_ID = 2**63 - 1


@dataclass(frozen=True)
class ProducerIdBlock:
    broker_id: int
    block_start: int
    block_end: int  # inclusive

    @property
    def size(self) -> int:
        return self.block_end - self.block_start + 1


def next_producer_id_block(
    previous: ProducerIdBlock | None, broker_id: int, size: int
) -> ProducerIdBlock:
    """Raises ValueError if the size is not positive or the id space is exhausted."""
    if size <= 0:
        raise ValueError(f"block size must be positive: {size}")
    start = 0 if previous is None else previous.block_end + 1
    if start + size - 1 > MAX_PRODUCER_ID:
        raise ValueError("producer ids exhausted")
    return ProducerIdBlock(broker_id, start, start + size - 1)


def encode_producer_id_block(block: ProducerIdBlock) -> bytes:
    return _dump(
        {
            "version": 1,
            "broker": block.broker_id,
            "block_start": str(block.block_start),
            "block_end": str(block.block_end),
        }
    )


def decode_producer_id_block(data: bytes | None) -> ProducerIdBlock | None:
    """None for the empty znode that start-up creates (no block handed out yet)."""
    if not data:
        return None
    path = PRODUCER_ID_BLOCK
    obj = _load(path, data)
    block = ProducerIdBlock(
        _int(path, obj, "broker"),
        _long_string(path, obj, "block_start"),
        _long_string(path, obj, "block_end"),
    )
    if block.block_start < 0 or block.block_end < block.block_start:
        raise ZkDataError(path, f"bad block {block.block_start}..{block.block_end}")
    return block


# -- /cluster/id -----------------------------------------------------------------------------
# Kafka's ClusterIdZNode.toJson: {"version":"1","id":"..."} (the version is a string here).


def encode_cluster_id(cluster_id: str) -> bytes:
    return _dump({"version": "1", "id": cluster_id})


def decode_cluster_id(data: bytes | None) -> str:
    return _str(CLUSTER_ID, _load(CLUSTER_ID, data), "id")
