"""Kafka's facts about each broker key, for the config reference (docs/configuration.md):
how Kafka updates it at run time, and how tierlog's key relates to Kafka's.

``update_mode`` is the "Dynamic Update Mode" column of Kafka's broker config docs
(read-only: a restart; per-broker / cluster-wide: ``kafka-configs --alter`` for one broker
or all). Which of them tierlog changes at run time is ``dynamic_config.DYNAMIC_KEYS``'s
(the reference's "Dynamic" column). A key tierlog has and Kafka does not is ``read-only`` here
and says so in its ``kafka`` note; an empty note means Kafka's key with Kafka's meaning.

Adding a key to ``BROKER_CONFIG`` means adding it here: ``tests/tools/
test_config_reference.py`` checks that every key has a mode.
"""

from __future__ import annotations

from tierlog.util.configdef import CLUSTER_WIDE, PER_BROKER, READ_ONLY, KafkaNotes

_OWN = "tierlog's own key (Kafka has none)"
# Kafka's dynamic log keys are each topic config's first broker synonym only
# (ServerTopicConfigSynonyms.TOPIC_CONFIG_SYNONYMS), so the others are read-only there.
_NOT_FIRST = "only its first synonym, {}, changes at run time, as in Kafka"


def _ro(kafka: str = "") -> KafkaNotes:
    return KafkaNotes(READ_ONLY, kafka)


def _cw(kafka: str = "") -> KafkaNotes:
    return KafkaNotes(CLUSTER_WIDE, kafka)


BROKER_NOTES: dict[str, KafkaNotes] = {
    "broker.id": _ro("default 0 (Kafka: -1, generated)"),
    "node.id": _ro("KRaft's name; read as broker.id here (ZooKeeper mode)"),
    "broker.rack": _ro(),
    "replica.selector.class": _ro(),
    "max.incremental.fetch.session.cache.slots": _ro(),
    "quota.window.num": _ro(),
    "quota.window.size.seconds": _ro(),
    "listeners": KafkaNotes(PER_BROKER, "default 127.0.0.1:9092 (Kafka: every interface)"),
    "advertised.listeners": KafkaNotes(PER_BROKER),
    "log.dirs": _ro(),
    "log.dir": _ro("default ./data (Kafka: /tmp/kafka-logs)"),
    "num.partitions": _ro(),
    "default.replication.factor": _ro(),
    "auto.create.topics.enable": _ro(),
    "delete.topic.enable": _ro(),
    "min.insync.replicas": _cw(),
    "log.segment.bytes": _cw(),
    "log.roll.ms": _cw(),
    "log.roll.hours": _ro(_NOT_FIRST.format("log.roll.ms")),
    "log.retention.ms": _cw(),
    "log.retention.minutes": _ro(_NOT_FIRST.format("log.retention.ms")),
    "log.retention.hours": _ro(_NOT_FIRST.format("log.retention.ms")),
    "log.retention.bytes": _cw(),
    "log.flush.interval.messages": _cw(),
    "log.flush.interval.ms": _cw(),
    "log.flush.scheduler.interval.ms": _ro(),
    "log.scrubber.bytes.per.second": _ro(
        f"{_OWN}: Kafka serves bytes no background check has read (docs/integrity.md)"
    ),
    "log.scrubber.pass.interval.ms": _ro(_OWN),
    "log.read.verify.enable": _ro(
        f"{_OWN}: Kafka serves bytes unchecked; tierlog checks each range once (docs/integrity.md)"
    ),
    "log.flush.offset.checkpoint.interval.ms": _ro(),
    "log.retention.check.interval.ms": _ro(),
    "log.index.interval.bytes": _cw(),
    "log.index.size.max.bytes": _cw(),
    "log.message.timestamp.type": _cw(),
    "log.cleanup.policy": _cw(),
    "log.segment.delete.delay.ms": _cw(),
    "log.cleaner.enable": _ro(),
    "log.cleaner.threads": _cw("worker processes, not threads (one event loop per broker)"),
    "log.cleaner.dedupe.buffer.size": _cw(),
    "log.cleaner.io.buffer.load.factor": _cw(),
    "log.cleaner.io.max.bytes.per.second": _cw(),
    "log.cleaner.backoff.ms": _cw(),
    "log.cleaner.min.cleanable.ratio": _cw(),
    "log.cleaner.delete.retention.ms": _cw(),
    "log.cleaner.min.compaction.lag.ms": _cw(),
    "log.cleaner.max.compaction.lag.ms": _cw(),
    "message.max.bytes": _cw(),
    "compression.type": _cw(),
    "compression.gzip.level": _cw(),
    "compression.lz4.level": _cw(),
    "compression.zstd.level": _cw(),
    "socket.request.max.bytes": _ro(),
    "max.connections": _cw(),
    "max.connection.creation.rate": _cw("at least 1 (Kafka also takes 0: no connections)"),
    "authorizer.class.name": _ro(
        "Kafka's AclAuthorizer and StandardAuthorizer names both open tierlog's ACL "
        "authorizer (docs/security.md)"
    ),
    "super.users": _ro(),
    "allow.everyone.if.no.acl.found": _ro(),
    "max.broker.partitions": _ro(
        f"{_OWN}: the name KIP-578 proposed, not shipped; Kafka 4 caps only one request "
        "at 10,000 partitions, as tierlog does too (docs/limits.md)"
    ),
    "max.partitions": _ro(f"{_OWN}: the name KIP-578 proposed, not shipped, for the whole cluster"),
    "max.connections.per.ip": _cw(),
    "connections.max.idle.ms": _ro(),
    "socket.request.receive.timeout.ms": _ro(
        f"{_OWN}: Kafka waits for a request's bytes without a bound"
    ),
    "queued.max.request.bytes": _ro(),
    "offsets.topic.num.partitions": _ro(),
    "offsets.topic.replication.factor": _ro("default 1 (Kafka: 3); tierlog cluster start sets 3"),
    "offsets.commit.timeout.ms": _ro(),
    "offsets.topic.segment.bytes": _ro(),
    "offsets.retention.check.interval.ms": _ro(),
    "offset.metadata.max.bytes": _ro(),
    "offsets.retention.minutes": _ro(),
    "group.initial.rebalance.delay.ms": _ro(),
    "group.min.session.timeout.ms": _ro(),
    "group.max.session.timeout.ms": _ro(),
    "group.max.size": _ro(),
    "group.coordinator.rebalance.protocols": _ro(
        "share and streams groups (KIP-932, KIP-1071) are not served: naming them is refused"
    ),
    "group.consumer.session.timeout.ms": _ro(),
    "group.consumer.min.session.timeout.ms": _ro(),
    "group.consumer.max.session.timeout.ms": _ro(),
    "group.consumer.heartbeat.interval.ms": _ro(),
    "group.consumer.min.heartbeat.interval.ms": _ro(),
    "group.consumer.max.heartbeat.interval.ms": _ro(),
    "group.consumer.max.size": _ro(),
    "group.consumer.assignors": _ro(
        "the built-in uniform and range (by name or Kafka's class name); no custom classes"
    ),
    "group.consumer.migration.policy": _ro(),
    "group.consumer.regex.refresh.interval.ms": _ro("an internal key in Kafka (not documented)"),
    "transactional.id.expiration.ms": _ro(),
    "transaction.state.log.num.partitions": _ro(),
    "transaction.state.log.replication.factor": _ro("default 1 (Kafka: 3)"),
    "transaction.state.log.min.isr": _ro("default 1 (Kafka: 2)"),
    "transaction.state.log.segment.bytes": _ro(),
    "transaction.state.log.load.buffer.size": _ro(),
    "transaction.partition.verification.enable": _cw(),
    "transaction.max.timeout.ms": _ro(),
    "transaction.abort.timed.out.transaction.cleanup.interval.ms": _ro(),
    "transaction.remove.expired.transaction.cleanup.interval.ms": _ro(),
    "producer.id.expiration.ms": _cw(),
    "remote.log.storage.system.enable": _ro("default true (Kafka: false); a topic still opts in"),
    "remote.log.storage.url": _ro(
        f"{_OWN}: Kafka loads a RemoteStorageManager class (remote.log.storage.manager."
        "class.name); tierlog opens any fsspec URL, options as remote.log.storage.options.*"
    ),
    "remote.log.manager.task.interval.ms": _ro(),
    "remote.log.manager.copy.max.bytes.per.second": _cw(),
    "remote.log.manager.fetch.max.bytes.per.second": _cw(),
    "remote.fetch.max.wait.ms": _cw(),
    "remote.log.reader.cache.bytes": _ro(
        f"{_OWN}: the on-disk chunk cache of remote reads (Kafka's plugins have their own)"
    ),
    "remote.log.reader.threads": _ro(
        "default 10, Kafka's; here the pool of the read-ahead's parallel ranged GETs "
        "(Kafka: the pool that serves remote fetches)"
    ),
    "remote.log.reader.read.ahead.chunks": _ro(
        f"{_OWN}: remote read-ahead per partition, in bytes: this many cache chunks of 4 "
        "MiB (at most half the cache; a segment smaller than a chunk counts for its size); "
        "nearest in Kafka: remote.log.reader.threads"
    ),
    "remote.log.reader.read.ahead.max.bytes": _ro(
        f"{_OWN}: the memory of all partitions' read-ahead GETs in flight; nearest in "
        "Kafka: remote.log.reader.threads with remote.fetch.max.wait.ms"
    ),
    "zookeeper.connect": _ro("empty: one node, coordination kept in the data dir"),
    "zookeeper.session.timeout.ms": _ro(),
    "zookeeper.set.acl": _ro(
        "Kafka's: all rights to the brokers' identity, read to the world except "
        "/config/users, /config/brokers and /delegation_token"
    ),
    "zookeeper.jaas.config": _ro(
        f"{_OWN}: Kafka reads its JAAS Client section from java.security.auth.login.config; "
        "the same entry here, authenticated with ZooKeeper's digest scheme"
    ),
    "zookeeper.ssl.client.enable": _ro(),
    "zookeeper.clientCnxnSocket": _ro(
        "Kafka's Java client needs the Netty socket for TLS; tierlog (kazoo) accepts that "
        "name or none"
    ),
    "zookeeper.ssl.keystore.location": _ro(),
    "zookeeper.ssl.keystore.password": _ro(),
    "zookeeper.ssl.keystore.type": _ro("PEM only (Kafka: JKS, PKCS12 or PEM)"),
    "zookeeper.ssl.truststore.location": _ro(),
    "zookeeper.ssl.truststore.password": _ro(),
    "zookeeper.ssl.truststore.type": _ro("PEM only (Kafka: JKS, PKCS12 or PEM)"),
    "zookeeper.ssl.endpoint.identification.algorithm": _ro(),
    "zookeeper.ssl.protocol": _ro("only TLSv1.2, the default: kazoo uses Python's TLS settings"),
    "zookeeper.ssl.enabled.protocols": _ro("only the default: kazoo uses Python's TLS settings"),
    "zookeeper.ssl.cipher.suites": _ro("only the default: kazoo uses Python's TLS settings"),
    "zookeeper.ssl.crl.enable": _ro("only false: kazoo checks no CRL"),
    "zookeeper.ssl.ocsp.enable": _ro("only false: kazoo checks no OCSP"),
    "replica.lag.time.max.ms": _ro(),
    "unclean.leader.election.enable": _cw(),
    "fetch.max.bytes": _ro(),
    "replica.fetch.wait.max.ms": _ro(),
    "replica.fetch.min.bytes": _ro(),
    "replica.fetch.max.bytes": _ro(),
    "replica.fetch.backoff.ms": _ro(),
    "auto.leader.rebalance.enable": _ro(),
    "leader.imbalance.per.broker.percentage": _ro(),
    "leader.imbalance.check.interval.seconds": _ro(),
    "metrics.http.port": _ro(
        f"{_OWN}: Kafka exports JMX; tierlog serves Prometheus text with Kafka's metric "
        "names (docs/operations.md)"
    ),
    "metrics.http.host": _ro(_OWN),
    "replica.high.watermark.checkpoint.interval.ms": _ro(),
    "telemetry.max.bytes": _ro(),
    "replica.alter.log.dirs.io.max.bytes.per.second": _cw(
        "a dynamic-only quota key in Kafka; here server.properties sets it too"
    ),
    "leader.replication.throttled.rate": _cw(
        "a dynamic-only quota key in Kafka (KIP-73); here server.properties sets it too"
    ),
    "follower.replication.throttled.rate": _cw(
        "a dynamic-only quota key in Kafka (KIP-73); here server.properties sets it too"
    ),
    "log.local.retention.ms": _cw(),
    "log.local.retention.bytes": _cw(),
    "producer.id.expiration.check.interval.ms": _ro(),
    "max.request.partition.size.limit": _ro(),
}
