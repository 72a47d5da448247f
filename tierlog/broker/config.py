"""Broker configuration: Kafka's ``server.properties`` key names, defaults and checks.

``log.*`` keys are broker-wide defaults for topic configs (``LogConfig``), mapped the way
Kafka maps them (``log.segment.bytes`` -> ``segment.bytes``, ...). An unknown key or a bad
value raises ``ConfigError`` naming the key.

Size: past the ~600-line guideline because ``BROKER_CONFIG`` is one table of every key
(~470 lines of Kafka's names, types, defaults and a line on each); the code is the rest.
Listener parsing lives in ``listeners``.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from tierlog.broker.config_notes import BROKER_NOTES
from tierlog.broker.config_refused import refusal
from tierlog.broker.group.consumer.config import (
    CONFIG_DEF as CONSUMER_GROUP_CONFIG,
)
from tierlog.broker.group.consumer.config import (
    REBALANCE_PROTOCOLS,
    ConsumerGroupConfig,
    rebalance_protocols_problem,
)
from tierlog.broker.listeners import ListenerPlan, parse_listener, parse_protocol_map, plan
from tierlog.broker.replication.replica_selector import SELECTORS
from tierlog.broker.security_config import (
    SECURITY_KEYS,
    SECURITY_NOTES,
    is_listener_key,
    security_settings,
)
from tierlog.local.compression_config import COMPRESSION_TYPES, level_keys
from tierlog.local.config import LogConfig, check_kafka_ranges
from tierlog.remote.registry import check_url
from tierlog.remote.storage_options import (
    REMOTE_OPTIONS_JSON,
    REMOTE_OPTIONS_PREFIX,
    remote_options,
)
from tierlog.security.config_providers import is_provider_key
from tierlog.security.config_providers import resolve as resolve_config_providers
from tierlog.security.registry import AUTHORIZERS
from tierlog.util.configdef import ConfigDef, ConfigError, ConfigKey, at_least, between, one_of
from tierlog.util.properties import load_properties

HOUR_MS = 60 * 60 * 1000
# group.max.size is the classic protocol's key, listed with it below.
CONSUMER_GROUP_KEYS = [
    key for name, key in CONSUMER_GROUP_CONFIG.keys.items() if name != "group.max.size"
]

BROKER_CONFIG = ConfigDef(
    [
        ConfigKey("broker.id", "int", 0, "this broker's id", at_least(0)),
        ConfigKey("node.id", "int", -1, "alias of broker.id (KRaft name)", at_least(-1)),
        ConfigKey(
            "broker.rack",
            "string",
            "",
            "this broker's rack (e.g. its host): replicas of a partition go to different racks",
        ),
        ConfigKey(
            "replica.selector.class",
            "string",
            "",
            "KIP-392 fetch from the closest replica: "
            "org.apache.kafka.common.replica.RackAwareReplicaSelector sends consumers with "
            "client.rack to a replica in their rack; empty: always the leader",
            one_of(*SELECTORS),
        ),
        ConfigKey(
            "max.incremental.fetch.session.cache.slots",
            "int",
            1000,
            "incremental fetch sessions (KIP-227) kept at most; 0 opens none",
            at_least(0),
        ),
        ConfigKey(
            "quota.window.num",
            "int",
            11,
            "samples kept for client quota rates (Kafka's default)",
            at_least(1),
        ),
        ConfigKey(
            "quota.window.size.seconds",
            "int",
            1,
            "length of one client quota sample",
            at_least(1),
        ),
        ConfigKey("listeners", "list", ["PLAINTEXT://127.0.0.1:9092"], "where to listen"),
        ConfigKey("advertised.listeners", "list", [], "what clients are told; default listeners"),
        ConfigKey("log.dirs", "list", [], "data directories; default log.dir"),
        ConfigKey("log.dir", "string", "./data", "data directory when log.dirs is unset"),
        ConfigKey("num.partitions", "int", 1, "partitions of an auto-created topic", at_least(1)),
        ConfigKey(
            "default.replication.factor", "int", 1, "replicas of an auto-created topic", at_least(1)
        ),
        ConfigKey("auto.create.topics.enable", "bool", True, "create topics on first use"),
        ConfigKey("delete.topic.enable", "bool", True, "allow DeleteTopics"),
        ConfigKey("min.insync.replicas", "int", 1, "acks=all needs this many in sync", at_least(1)),
        ConfigKey("log.segment.bytes", "int", 1 << 30, "-> segment.bytes", at_least(14)),
        ConfigKey("log.roll.ms", "long", None, "-> segment.ms"),
        ConfigKey(
            "log.roll.hours", "int", 168, "-> segment.ms when log.roll.ms unset", at_least(1)
        ),
        ConfigKey("log.retention.ms", "long", None, "-> retention.ms"),
        ConfigKey("log.retention.minutes", "int", None, "-> retention.ms"),
        ConfigKey("log.retention.hours", "int", 168, "-> retention.ms", at_least(-1)),
        ConfigKey("log.retention.bytes", "long", -1, "-> retention.bytes", at_least(-1)),
        ConfigKey(
            "log.flush.interval.messages", "long", 2**63 - 1, "-> flush.messages", at_least(1)
        ),
        ConfigKey("log.flush.interval.ms", "long", None, "-> flush.ms"),
        ConfigKey(
            "log.flush.scheduler.interval.ms",
            "long",
            1000,
            "how often flush.ms is checked",
            at_least(1),
        ),
        ConfigKey(
            "log.scrubber.bytes.per.second",
            "long",
            1024 * 1024,
            "background CRC-32C re-check of closed segments (tierlog/local/scrubber.py); "
            "0 disables; HDFS's block scanner default, 1 MiB/s",
            at_least(0),
        ),
        ConfigKey(
            "log.read.verify.enable",
            "bool",
            True,
            "CRC-32C of log bytes checked before they are first served (tierlog's own; Kafka "
            "serves them unchecked): damage answers KAFKA_STORAGE_ERROR, never changed bytes",
        ),
        ConfigKey(
            "log.scrubber.pass.interval.ms",
            "long",
            60_000,
            "least time from the start of one scrubber pass to the next",
            at_least(1),
        ),
        ConfigKey(
            "log.flush.offset.checkpoint.interval.ms",
            "int",
            60_000,
            "recovery-point checkpoint interval",
            at_least(1),
        ),
        ConfigKey(
            "log.retention.check.interval.ms",
            "long",
            300_000,
            "retention pass interval",
            at_least(1),
        ),
        ConfigKey("log.index.interval.bytes", "int", 4096, "-> index.interval.bytes", at_least(0)),
        ConfigKey(
            "log.index.size.max.bytes", "int", 10 << 20, "-> segment.index.bytes", at_least(8)
        ),
        ConfigKey(
            "log.message.timestamp.type",
            "string",
            "CreateTime",
            "-> message.timestamp.type",
            one_of("CreateTime", "LogAppendTime"),
        ),
        ConfigKey(
            "log.cleanup.policy",
            "list",
            ["delete"],
            "-> cleanup.policy",
            one_of("delete", "compact"),
        ),
        ConfigKey(
            "log.segment.delete.delay.ms", "long", 60_000, "-> file.delete.delay.ms", at_least(0)
        ),
        ConfigKey("log.cleaner.enable", "bool", True, "run the log cleaner (compacted topics)"),
        ConfigKey(
            "log.cleaner.threads",
            "int",
            1,
            "cleaner worker processes (tierlog/compaction/cleaner.py)",
            at_least(1),
        ),
        ConfigKey(
            "log.cleaner.dedupe.buffer.size",
            "long",
            128 << 20,
            "offset-map memory, split over the cleaner workers",
            at_least(1 << 10),
        ),
        ConfigKey(
            "log.cleaner.io.buffer.load.factor",
            "double",
            0.9,
            "how full an offset map may get",
            between(0, 0.95, low_open=True),
        ),
        ConfigKey(
            "log.cleaner.io.max.bytes.per.second",
            "double",
            1.7976931348623157e308,
            "cleaner I/O limit, split over the workers",
            at_least(1),
        ),
        ConfigKey(
            "log.cleaner.backoff.ms",
            "long",
            15_000,
            "sleep when no log needs cleaning",
            at_least(0),
        ),
        ConfigKey(
            "log.cleaner.min.cleanable.ratio",
            "double",
            0.5,
            "-> min.cleanable.dirty.ratio",
            between(0, 1),
        ),
        ConfigKey(
            "log.cleaner.delete.retention.ms",
            "long",
            86_400_000,
            "-> delete.retention.ms",
            at_least(0),
        ),
        ConfigKey(
            "log.cleaner.min.compaction.lag.ms",
            "long",
            0,
            "-> min.compaction.lag.ms",
            at_least(0),
        ),
        ConfigKey(
            "log.cleaner.max.compaction.lag.ms",
            "long",
            2**63 - 1,
            "-> max.compaction.lag.ms",
            at_least(1),
        ),
        ConfigKey("message.max.bytes", "int", 1048588, "-> max.message.bytes", at_least(0)),
        ConfigKey(
            "compression.type",
            "string",
            "producer",
            "-> compression.type",
            one_of(*COMPRESSION_TYPES),
        ),
        *level_keys(broker=True),
        ConfigKey(
            "socket.request.max.bytes", "int", 104857600, "largest request frame", at_least(1)
        ),
        ConfigKey(
            "max.connections",
            "int",
            2**31 - 1,
            "connections open at once; more are closed on accept",
            at_least(0),
        ),
        ConfigKey(
            "max.broker.partitions",
            "int",
            2**31 - 1,
            "partition replicas one broker may hold; creations past it are refused with "
            "POLICY_VIOLATION (KIP-578's name; the file descriptor limit caps it too)",
            at_least(1),
        ),
        ConfigKey(
            "max.partitions",
            "int",
            2**31 - 1,
            "partitions the whole cluster may hold; creations past it are refused with "
            "POLICY_VIOLATION (KIP-578's name)",
            at_least(1),
        ),
        ConfigKey(
            "max.connections.per.ip",
            "int",
            2**31 - 1,
            "connections open at once from one address; more are closed on accept",
            at_least(0),
        ),
        ConfigKey(
            "max.connection.creation.rate",
            "int",
            2**31 - 1,
            "new connections per second the broker takes on (KIP-612); past it a new "
            "connection waits before it is served",
            at_least(1),
        ),
        ConfigKey(
            "connections.max.idle.ms",
            "long",
            600_000,
            "close a connection idle (no request in flight or arriving) this long",
            at_least(1),
        ),
        ConfigKey(
            "socket.request.receive.timeout.ms",
            "int",
            30_000,
            "close a connection whose request has not fully arrived this long after its "
            "first byte (tierlog's own key; Kafka has no such bound)",
            at_least(1),
        ),
        ConfigKey(
            "queued.max.request.bytes",
            "long",
            -1,
            "bytes of requests held at once before no more are read; -1 = no bound",
            at_least(-1),
        ),
        ConfigKey(
            "offsets.topic.num.partitions",
            "int",
            50,
            "partitions of __consumer_offsets",
            at_least(1),
        ),
        ConfigKey(
            "offsets.topic.replication.factor",
            "int",
            1,
            "replicas of __consumer_offsets",
            at_least(1),
        ),
        ConfigKey(
            "offsets.commit.timeout.ms",
            "int",
            5000,
            "how long a group coordinator's write waits for the whole ISR of its "
            "__consumer_offsets partition before answering COORDINATOR_NOT_AVAILABLE",
            at_least(1),
        ),
        ConfigKey(
            "offsets.topic.segment.bytes",
            "int",
            100 << 20,
            "segments of __consumer_offsets",
            at_least(14),
        ),
        ConfigKey(
            "offsets.retention.check.interval.ms",
            "long",
            600_000,
            "how often expired committed offsets are removed",
            at_least(1),
        ),
        ConfigKey(
            "offset.metadata.max.bytes",
            "int",
            4096,
            "largest metadata string of a committed offset",
            at_least(0),
        ),
        ConfigKey(
            "offsets.retention.minutes", "int", 7 * 24 * 60, "committed offsets kept", at_least(1)
        ),
        ConfigKey(
            "group.initial.rebalance.delay.ms",
            "int",
            3000,
            "wait for more members before the first rebalance of an empty group",
            at_least(0),
        ),
        ConfigKey(
            "group.min.session.timeout.ms", "int", 6000, "smallest session timeout", at_least(0)
        ),
        ConfigKey(
            "group.max.session.timeout.ms", "int", 1_800_000, "largest session timeout", at_least(0)
        ),
        ConfigKey("group.max.size", "int", 2**31 - 1, "members per group", at_least(1)),
        ConfigKey(
            "group.coordinator.rebalance.protocols",
            "list",
            list(REBALANCE_PROTOCOLS),
            "group protocols served: classic (JoinGroup/SyncGroup) and consumer (KIP-848)",
            rebalance_protocols_problem,
        ),
        # KIP-848's consumer protocol: group.consumer.* (tierlog.broker.group.consumer.config)
        *CONSUMER_GROUP_KEYS,
        ConfigKey(
            "transactional.id.expiration.ms",
            "int",
            604_800_000,
            "a transactional id with no transaction for this long is forgotten",
            at_least(1),
        ),
        ConfigKey(
            "transaction.state.log.num.partitions",
            "int",
            50,
            "partitions of __transaction_state",
            at_least(1),
        ),
        ConfigKey(
            "transaction.state.log.replication.factor",
            "int",
            1,
            "replicas of __transaction_state",
            at_least(1),
        ),
        ConfigKey(
            "transaction.state.log.min.isr",
            "int",
            1,
            "min.insync.replicas of __transaction_state",
            at_least(1),
        ),
        ConfigKey(
            "transaction.state.log.segment.bytes",
            "int",
            100 << 20,
            "segments of __transaction_state",
            at_least(14),
        ),
        ConfigKey(
            "transaction.state.log.load.buffer.size",
            "int",
            5 << 20,
            "bytes read at a time when loading __transaction_state (at least one batch)",
            at_least(1),
        ),
        ConfigKey(
            "transaction.partition.verification.enable",
            "bool",
            True,
            "KIP-890 part 1: a transactional produce (or TxnOffsetCommit) is accepted only "
            "into a partition its coordinator lists in the transaction",
        ),
        ConfigKey(
            "transaction.max.timeout.ms",
            "int",
            900_000,
            "largest transaction.timeout.ms a producer may ask for",
            at_least(1),
        ),
        ConfigKey(
            "transaction.abort.timed.out.transaction.cleanup.interval.ms",
            "int",
            10_000,
            "how often transactions older than their timeout are aborted",
            at_least(1),
        ),
        ConfigKey(
            "transaction.remove.expired.transaction.cleanup.interval.ms",
            "int",
            3_600_000,
            "how often expired transactional ids are removed",
            at_least(1),
        ),
        ConfigKey(
            "producer.id.expiration.ms",
            "int",
            86_400_000,
            "idle idempotent producer state expires",
            at_least(1),
        ),
        ConfigKey(
            "remote.log.storage.system.enable",
            "bool",
            True,
            "offload closed segments of topics with remote.storage.enable (KIP-405)",
        ),
        ConfigKey(
            "remote.log.storage.url",
            "string",
            "",
            "fsspec URL of the remote tier (file://, s3://, ...); empty = <log dir>/remote",
        ),
        ConfigKey(
            "remote.log.manager.task.interval.ms",
            "long",
            30_000,
            "how often segments are offloaded and remote retention applied",
            at_least(1),
        ),
        ConfigKey(
            "remote.log.manager.copy.max.bytes.per.second",
            "long",
            2**63 - 1,
            "bytes per second uploaded to the remote tier (KIP-956); Long.MAX = no limit "
            "(-1, tierlog's earlier spelling of it, is still accepted)",
            at_least(-1),
        ),
        ConfigKey(
            "remote.log.manager.fetch.max.bytes.per.second",
            "long",
            2**63 - 1,
            "bytes per second fetches read from the remote tier (KIP-956); past it a fetch "
            "gets no remote bytes until the quota has credit again; Long.MAX = no limit",
            at_least(1),
        ),
        ConfigKey(
            "remote.fetch.max.wait.ms",
            "int",
            500,
            "bound on one read from the remote tier",
            at_least(1),
        ),
        ConfigKey(
            "remote.log.reader.cache.bytes",
            "long",
            256 << 20,
            "on-disk cache of remote byte ranges",
            at_least(4 << 20),
        ),
        ConfigKey(
            "remote.log.reader.threads",
            "int",
            10,
            "parallel ranged GETs of the remote read-ahead (Kafka's remote reader pool)",
            at_least(1),
        ),
        ConfigKey(
            "remote.log.reader.read.ahead.chunks",
            "int",
            4,
            "cache chunks fetched ahead of a partition's remote reads; 0 = off",
            at_least(0),
        ),
        ConfigKey(
            "remote.log.reader.read.ahead.max.bytes",
            "long",
            64 << 20,
            "memory of all remote read-ahead GETs in flight",
            at_least(1),
        ),
        ConfigKey(
            "zookeeper.connect",
            "string",
            "",
            "ZooKeeper ensemble; empty = single node with local coordination",
        ),
        ConfigKey("zookeeper.session.timeout.ms", "int", 18000, "ZooKeeper session", at_least(1)),
        ConfigKey(
            "zookeeper.set.acl",
            "bool",
            False,
            "create znodes writable only by the brokers' ZooKeeper identity, readable by "
            "all but under /config/users and /config/brokers (Kafka's ACLs)",
        ),
        ConfigKey(
            "zookeeper.jaas.config",
            "string",
            "",
            "tierlog: the brokers' ZooKeeper identity, Kafka's JAAS Client entry: "
            'org.apache.zookeeper.server.auth.DigestLoginModule required username="..." '
            'password="..."; (ZooKeeper digest authentication)',
        ),
        ConfigKey(
            "zookeeper.ssl.client.enable",
            "bool",
            False,
            "TLS to ZooKeeper's secureClientPort (KIP-515); the zookeeper.ssl.* keys below",
        ),
        ConfigKey(
            "zookeeper.clientCnxnSocket",
            "string",
            "",
            "with TLS, Kafka's Java client needs org.apache.zookeeper.ClientCnxnSocketNetty; "
            "tierlog accepts that or nothing",
        ),
        ConfigKey(
            "zookeeper.ssl.keystore.location",
            "string",
            "",
            "PEM file with the broker's key and certificate chain, its identity to ZooKeeper",
        ),
        ConfigKey(
            "zookeeper.ssl.keystore.password",
            "string",
            "",
            "the password of the keystore's encrypted key",
        ),
        ConfigKey("zookeeper.ssl.keystore.type", "string", "PEM", "PEM only"),
        ConfigKey(
            "zookeeper.ssl.truststore.location",
            "string",
            "",
            "PEM file with the CA certificates that signed ZooKeeper's",
        ),
        ConfigKey(
            "zookeeper.ssl.truststore.password", "string", "", "unused for PEM (as in Kafka)"
        ),
        ConfigKey("zookeeper.ssl.truststore.type", "string", "PEM", "PEM only"),
        ConfigKey(
            "zookeeper.ssl.endpoint.identification.algorithm",
            "string",
            "HTTPS",
            "HTTPS: check ZooKeeper's host name against its certificate; empty: do not",
        ),
        ConfigKey("zookeeper.ssl.protocol", "string", "TLSv1.2", "only the default (Python's TLS)"),
        ConfigKey(
            "zookeeper.ssl.enabled.protocols", "string", "", "only the default (Python's TLS)"
        ),
        ConfigKey("zookeeper.ssl.cipher.suites", "string", "", "only the default (Python's TLS)"),
        ConfigKey("zookeeper.ssl.crl.enable", "bool", False, "only false"),
        ConfigKey("zookeeper.ssl.ocsp.enable", "bool", False, "only false"),
        ConfigKey(
            "authorizer.class.name",
            "string",
            "",
            "the ACL authorizer: kafka.security.authorizer.AclAuthorizer, "
            "org.apache.kafka.metadata.authorizer.StandardAuthorizer or "
            "tierlog.security.AclAuthorizer; empty: no authorization",
            one_of("", *AUTHORIZERS),
        ),
        ConfigKey(
            "super.users",
            "string",
            "",
            "principals allowed everything, semicolon separated (User:admin;User:broker)",
        ),
        ConfigKey(
            "allow.everyone.if.no.acl.found",
            "bool",
            False,
            "a resource with no ACL at all is open to everyone",
        ),
        ConfigKey("replica.lag.time.max.ms", "long", 30000, "ISR lag bound", at_least(1)),
        ConfigKey("unclean.leader.election.enable", "bool", False, "elect out-of-sync replicas"),
        ConfigKey("fetch.max.bytes", "int", 55 << 20, "largest fetch response", at_least(0)),
        ConfigKey(
            "replica.fetch.wait.max.ms", "int", 500, "a follower's fetch long poll", at_least(0)
        ),
        ConfigKey("replica.fetch.min.bytes", "int", 1, "a follower's fetch min bytes", at_least(1)),
        ConfigKey(
            "replica.fetch.max.bytes",
            "int",
            1 << 20,
            "a follower's fetch bytes per partition",
            at_least(0),
        ),
        ConfigKey(
            "replica.fetch.backoff.ms",
            "int",
            1000,
            "a follower's wait after a fetch error",
            at_least(0),
        ),
        ConfigKey(
            "auto.leader.rebalance.enable",
            "bool",
            True,
            "give leaderships back to preferred replicas (cluster mode)",
        ),
        ConfigKey(
            "leader.imbalance.per.broker.percentage",
            "int",
            10,
            "share of a broker's preferred partitions it may not lead before a rebalance",
            at_least(0),
        ),
        ConfigKey(
            "leader.imbalance.check.interval.seconds",
            "long",
            300,
            "how often leader imbalance is checked",
            at_least(1),
        ),
        ConfigKey(
            "metrics.http.port",
            "int",
            -1,
            "Prometheus endpoint (/metrics) port; -1 = off, 0 = any free port",
            at_least(-1),
        ),
        ConfigKey("metrics.http.host", "string", "127.0.0.1", "address of the metrics endpoint"),
        ConfigKey(
            "replica.alter.log.dirs.io.max.bytes.per.second",
            "long",
            2**63 - 1,
            "bytes per second copied when replicas move between log.dirs "
            "(AlterReplicaLogDirs); Long.MAX = no limit",
            at_least(1),
        ),
        ConfigKey(
            "leader.replication.throttled.rate",
            "long",
            2**63 - 1,
            "bytes per second this broker, as leader, sends to out-of-sync followers of the "
            "replicas listed in leader.replication.throttled.replicas; Long.MAX = no limit",
            at_least(0),
        ),
        ConfigKey(
            "follower.replication.throttled.rate",
            "long",
            2**63 - 1,
            "bytes per second this broker, as an out-of-sync follower, fetches for the "
            "replicas listed in follower.replication.throttled.replicas; Long.MAX = no limit",
            at_least(0),
        ),
        ConfigKey(
            "telemetry.max.bytes",
            "int",
            1 << 20,
            "largest client-metrics push accepted (KIP-714); pushes are exported on the "
            "metrics endpoint",
            at_least(1),
        ),
        ConfigKey(
            "replica.high.watermark.checkpoint.interval.ms",
            "long",
            5000,
            "how often high watermarks are written to replication-offset-checkpoint",
            at_least(1),
        ),
        ConfigKey("log.local.retention.ms", "long", -2, "-> local.retention.ms", at_least(-2)),
        ConfigKey(
            "log.local.retention.bytes", "long", -2, "-> local.retention.bytes", at_least(-2)
        ),
        ConfigKey(
            "producer.id.expiration.check.interval.ms",
            "int",
            600_000,
            "how often idle idempotent producers (producer.id.expiration.ms) are forgotten",
            at_least(1),
        ),
        ConfigKey(
            "max.request.partition.size.limit",
            "int",
            2000,
            "most partitions one DescribeTopicPartitions answer holds",
            at_least(1),
        ),
        # Listeners, TLS and SASL (issue 22): security_config.py.
        *SECURITY_KEYS,
    ],
    BROKER_NOTES | SECURITY_NOTES,
    # Kafka's other broker keys, refused with a reason (config_refused.py).
    refused=refusal,
)

# Broker ``log.*`` key -> topic key it sets the default of (Kafka's LogConfig mapping).
_TOPIC_DEFAULTS = {
    "log.segment.bytes": "segment.bytes",
    "log.retention.bytes": "retention.bytes",
    "log.flush.interval.messages": "flush.messages",
    "log.index.interval.bytes": "index.interval.bytes",
    "log.index.size.max.bytes": "segment.index.bytes",
    "log.message.timestamp.type": "message.timestamp.type",
    "log.cleanup.policy": "cleanup.policy",
    "log.segment.delete.delay.ms": "file.delete.delay.ms",
    "log.cleaner.min.cleanable.ratio": "min.cleanable.dirty.ratio",
    "log.cleaner.delete.retention.ms": "delete.retention.ms",
    "log.cleaner.min.compaction.lag.ms": "min.compaction.lag.ms",
    "log.cleaner.max.compaction.lag.ms": "max.compaction.lag.ms",
    "message.max.bytes": "max.message.bytes",
    "compression.type": "compression.type",
    "compression.gzip.level": "compression.gzip.level",
    "compression.lz4.level": "compression.lz4.level",
    "compression.zstd.level": "compression.zstd.level",
    "min.insync.replicas": "min.insync.replicas",
    "unclean.leader.election.enable": "unclean.leader.election.enable",
    "log.local.retention.ms": "local.retention.ms",
    "log.local.retention.bytes": "local.retention.bytes",
}


def broker_keys_of(topic_key: str) -> list[str]:
    """The broker keys that set the default of ``topic_key`` (Kafka's synonyms, first the
    one that wins)."""
    broker_keys = [b for b, t in _TOPIC_DEFAULTS.items() if t == topic_key]
    broker_keys += {
        "segment.ms": ["log.roll.ms", "log.roll.hours"],
        "retention.ms": ["log.retention.ms", "log.retention.minutes", "log.retention.hours"],
        "flush.ms": ["log.flush.interval.ms"],
    }.get(topic_key, [])
    return broker_keys


def _not_a_directory(path: Path) -> str | None:
    """Why ``path`` cannot be (or become) a directory the broker writes in, or None. The
    nearest existing ancestor must be a directory: a file on the way (``/data/file/logs``)
    made start-up die with NotADirectoryError from mkdir. And it must be writable: a
    read-only file system (or one this user may not write) made it die with a traceback
    from the first file it wrote (issue 20, item 12)."""
    for candidate in (path, *path.parents):
        if candidate.exists():
            if not candidate.is_dir():
                if candidate == path:
                    return f"{path} is a file, not a directory"
                return f"{path} cannot be created: {candidate} is a file, not a directory"
            if os.access(candidate, os.W_OK | os.X_OK):
                return None
            verb = "is" if candidate == path else "cannot be created:"
            where = "" if candidate == path else f" {candidate} is"
            if os.statvfs(candidate).f_flag & os.ST_RDONLY:
                return f"{path} {verb}{where} on a read-only file system"
            return f"{path} {verb}{where} not writable by this user"
    return None


def _bad_remote_url(url: str) -> str | None:
    """Why no remote store can serve ``url``, or None: the store registry's check (a URL
    needs a scheme, ``file://``, ``s3://``...: without one, ``s3:/bucket`` silently became
    a local directory; a missing package is named with its install command)."""
    return check_url(url)


class BrokerConfig:
    """Parsed broker configuration; ``values`` holds every key by its Kafka name."""

    def __init__(self, props: Mapping[str, Any] | None = None) -> None:
        # ${file:path:key} and ${env:VAR} references (KIP-297 config providers) resolved
        # first, so that every key below sees its real value.
        self.raw = resolve_config_providers(dict(props or {}))
        # remote.log.storage.options.<key>=<value> go to fsspec as storage options (and
        # remote.log.storage.options={JSON}, the same as one object).
        self.remote_storage_options = remote_options(self.raw)
        self.values = BROKER_CONFIG.parse(
            {
                k: v
                for k, v in self.raw.items()
                if not k.startswith(REMOTE_OPTIONS_PREFIX)
                and k != REMOTE_OPTIONS_JSON
                and not is_provider_key(k)
                and not is_listener_key(k)
            }
        )
        check_kafka_ranges(BROKER_CONFIG, self.values)
        # Kafka's cross-checks of the group.consumer.* keys, at start-up as Kafka does.
        ConsumerGroupConfig.from_properties(self.values)
        v = self.values
        if v["node.id"] >= 0 and "broker.id" not in self.raw:
            v["broker.id"] = v["node.id"]
        # Syntax only; which one is bound and advertised is listeners.endpoints'.
        self.listeners = [parse_listener(text) for text in v["listeners"]]
        if not self.listeners:
            raise ConfigError("listeners", "at least one listener is required")
        self.advertised = [
            parse_listener(text, "advertised.listeners") for text in v["advertised.listeners"]
        ]
        self.protocol_map = parse_protocol_map(v["listener.security.protocol.map"])
        # The TLS and SASL keys as written, listener.name.<l>.* ones included, for the
        # listeners' TLS contexts and authenticators (security_config.py).
        self.security = security_settings(self.raw)
        self.log_dirs = [Path(d) for d in (v["log.dirs"] or [v["log.dir"]])]
        self.log_config = self._log_config()

    @classmethod
    def load(cls, path: Path | None, overrides: Mapping[str, str] | None = None) -> BrokerConfig:
        props: dict[str, Any] = load_properties(path) if path else {}
        props.update(overrides or {})
        return cls(props)

    def __getitem__(self, key: str) -> Any:
        return self.values[key]

    def listener_plan(self) -> ListenerPlan:
        """Every listener with its protocol and advertised address, and the inter-broker
        one (Kafka's cross-checks, ``listeners.plan``).

        Raises:
            ConfigError: naming the key at fault.
        """
        raw = self.raw
        return plan(
            self.listeners,
            self.advertised,
            self.protocol_map,
            self.values["inter.broker.listener.name"] or None,
            self.values["security.inter.broker.protocol"]
            if "security.inter.broker.protocol" in raw
            else None,
        )

    @property
    def broker_id(self) -> int:
        return int(self.values["broker.id"])

    @property
    def remote_storage_url(self) -> str:
        """The remote tier's URL: configured, or ``file://<first log dir>/remote``."""
        url = self.values["remote.log.storage.url"]
        return url or (self.log_dirs[0].resolve() / "remote").as_uri()

    def check_environment(self) -> None:
        """What parsing cannot see: that each log dir can be a directory and that the
        remote URL names a storage fsspec knows. Run before start-up, so a mistake ends in
        one line naming the key instead of a traceback from deep inside start-up.

        Raises:
            ConfigError: naming ``log.dirs`` (or ``log.dir``) or ``remote.log.storage.url``.
        """
        key = "log.dirs" if self.values["log.dirs"] else "log.dir"
        for log_dir in self.log_dirs:
            problem = _not_a_directory(log_dir)
            if problem:
                raise ConfigError(key, problem)
        url = self.values["remote.log.storage.url"]
        if url and self.values["remote.log.storage.system.enable"]:
            problem = _bad_remote_url(url)
            if problem:
                raise ConfigError("remote.log.storage.url", problem)

    @property
    def single_node(self) -> bool:
        return not self.values["zookeeper.connect"]

    def topic_default_source(self, topic_key: str) -> bool:
        """True when the broker's own config file sets the default of ``topic_key``."""
        return any(key in self.raw for key in broker_keys_of(topic_key))

    def _log_config(self) -> LogConfig:
        v = self.values
        topic: dict[str, Any] = {t: v[b] for b, t in _TOPIC_DEFAULTS.items()}
        topic["segment.ms"] = (
            v["log.roll.ms"] if v["log.roll.ms"] is not None else (v["log.roll.hours"] * HOUR_MS)
        )
        if v["log.retention.ms"] is not None:
            topic["retention.ms"] = v["log.retention.ms"]
        elif v["log.retention.minutes"] is not None:
            topic["retention.ms"] = v["log.retention.minutes"] * 60_000
        else:
            hours = v["log.retention.hours"]
            topic["retention.ms"] = -1 if hours < 0 else hours * HOUR_MS
        if v["log.flush.interval.ms"] is not None:
            topic["flush.ms"] = v["log.flush.interval.ms"]
        try:
            return LogConfig.from_props(topic)
        except ConfigError as exc:
            broker_key = next((b for b, t in _TOPIC_DEFAULTS.items() if t == exc.key), exc.key)
            raise ConfigError(broker_key, exc.reason) from None
