"""Kafka 4.x broker keys tierlog refuses, each with its reason (issue 23 item 5: every Kafka
key is honoured or refused with a reason; none is accepted and ignored).

``BROKER_CONFIG`` (``tierlog.broker.config``) is what tierlog honours; this is the rest of
Kafka's broker keys, as data beside it: ``BROKER_CONFIG`` refuses a key named here with
"not supported: <reason>" instead of "unknown configuration key", and
``tierlog.tools.config_reference`` lists the refusals in docs/configuration.md. A rule
names one key, or a prefix (ending in ``.``) covering a family; the most specific rule
wins.
``KAFKA_BROKER_KEYS`` is every key of Kafka 4.4's ``KafkaConfig`` (its ``configDef()``) plus
the dynamic-only broker keys (``DynamicConfig.Broker``'s quota keys);
``tests/broker/test_config_refused.py`` holds that each one resolves to honoured or refused.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import Final

__all__ = ["BROKER_REFUSED", "KAFKA_BROKER_KEYS", "refusal"]

_JAVA_TLS = "a JSSE (Java TLS) setting: tierlog's TLS is OpenSSL through Python's ssl module"
_SASL_CLIENT = (
    "a SASL client (login) setting: brokers log in to each other with the username and "
    "password (or unsecured OAUTHBEARER claims) of their listener's JAAS entry, and no "
    "login callback or token endpoint"
)
_OAUTH_STRICT = (
    "tierlog checks aud and iss whenever sasl.oauthbearer.expected.audience/issuer are set"
)
_KRAFT = (
    "KRaft only: tierlog keeps Kafka's ZooKeeper-mode metadata (zookeeper.connect, or one "
    "node's own store)"
)
_THREADS = (
    "one asyncio event loop serves a broker; the worker threads and processes it uses "
    "(CRC checks, copies, the cleaner's log.cleaner.threads) are sized by tierlog"
)
_PURGATORY = "no purgatory to purge: a waiting request is a future, dropped as soon as it completes"
_PLUGIN = "a Java plugin class: tierlog is not a JVM and loads no Kafka plugins"
_KIP848 = (
    "the consumer group coordinator assigns on each heartbeat, on the event loop: there is "
    "no assignment interval to set and no assignor thread to offload to"
)
_SHARE = "share groups (KIP-932) are not implemented"
_STREAMS = "the Streams group protocol (KIP-1071) is not implemented"
_COORDINATOR_RUNTIME = (
    "tuning of Kafka 4's coordinator runtime; tierlog's group coordinator runs on the "
    "broker's event loop and writes at once"
)
_THROTTLES = (
    "the replication and remote-tier throttles hold their rate as a token bucket with at "
    "most one second of burst, not over sampled windows"
)
_METRICS = (
    "tierlog's metrics are counters and gauges served as Prometheus text "
    "(metrics.http.port), not sampled JMX sensors"
)
_APPEND_VALIDATION = "timestamp bounds on append: the append validation being rewritten (issue 21)"
_SOCKETS = "not settable: the OS's defaults (autotuned buffers, its backlog) apply"
_REMOTE_PLUGIN = (
    "tierlog's remote tier is one fsspec URL (remote.log.storage.url), with the manifest "
    "beside the segments, not Kafka's RemoteStorageManager/RemoteLogMetadataManager plugins"
)
_REMOTE_UNBUILT = "not implemented in tierlog's remote tier"

# key or prefix -> reason.
BROKER_REFUSED: Final[Mapping[str, str]] = MappingProxyType(
    {
        # Security (issue 22).
        "ssl.protocol": _JAVA_TLS,
        "ssl.provider": _JAVA_TLS,
        "ssl.keymanager.algorithm": _JAVA_TLS,
        "ssl.trustmanager.algorithm": _JAVA_TLS,
        "ssl.secure.random.implementation": _JAVA_TLS,
        "ssl.engine.factory.class": _PLUGIN,
        "security.providers": _PLUGIN,
        "sasl.kerberos.": "GSSAPI (Kerberos) is not supported: PLAIN, SCRAM and OAUTHBEARER are",
        "sasl.login.": _SASL_CLIENT,
        "sasl.client.callback.handler.class": _PLUGIN,
        "sasl.mechanism.controller.protocol": _KRAFT,
        "sasl.oauthbearer.assertion.": _SASL_CLIENT,
        "sasl.oauthbearer.client.credentials.": _SASL_CLIENT,
        "sasl.oauthbearer.scope": _SASL_CLIENT,
        "sasl.oauthbearer.token.endpoint.url": _SASL_CLIENT,
        "sasl.oauthbearer.jwks.endpoint.retry.backoff.max.ms": (
            "unknown key ids refetch at most once per "
            "sasl.oauthbearer.jwks.endpoint.retry.backoff.ms, with no growing backoff"
        ),
        "sasl.oauthbearer.jwt.validator.class": _PLUGIN,
        "sasl.oauthbearer.jwt.retriever.class": _PLUGIN,
        "sasl.oauthbearer.allow.unverified.audience": _OAUTH_STRICT,
        "sasl.oauthbearer.allow.unverified.issuer": _OAUTH_STRICT,
        "principal.builder.class": _PLUGIN,
        "early.start.listeners": _KRAFT,
        "delegation.token.": (
            "delegation tokens (KIP-48) are not built; they need SASL (issue 22) first"
        ),
        "config.providers": (
            "tierlog resolves ${file:path:key} and ${env:VAR} (KIP-297) itself: there are "
            "no provider classes to declare"
        ),
        # KRaft.
        "process.roles": _KRAFT,
        "controller.": _KRAFT,
        "metadata.": _KRAFT,
        "internal.metadata.": _KRAFT,
        "broker.heartbeat.interval.ms": _KRAFT,
        "broker.session.timeout.ms": f"{_KRAFT}: zookeeper.session.timeout.ms is the session",
        "initial.broker.registration.timeout.ms": _KRAFT,
        "server.max.startup.time.ms": _KRAFT,
        "unstable.api.versions.enable": f"{_KRAFT}: tierlog announces no unstable API versions",
        "unstable.feature.versions.enable": f"{_KRAFT}: tierlog has no feature levels",
        "unclean.leader.election.interval.ms": (
            f"{_KRAFT}: tierlog's controller elects unclean leaders when a partition goes "
            "offline, per unclean.leader.election.enable"
        ),
        "cordoned.log.dirs": "cordoning log dirs (KIP-1066) is not implemented",
        "log.dir.failure.timeout.ms": (
            "a failed log dir stops the broker (Kafka's ZooKeeper-mode behaviour); KRaft's "
            "JBOD fail-over timeout does not apply"
        ),
        "controlled.shutdown.enable": (
            "always on in a cluster: a stopping broker moves its leaderships away first"
        ),
        # Threads and purgatories.
        "num.io.threads": _THREADS,
        "num.network.threads": _THREADS,
        "num.recovery.threads.per.data.dir": _THREADS,
        "num.replica.fetchers": f"{_THREADS}; one fetcher task per leader broker",
        "num.replica.alter.log.dirs.threads": f"{_THREADS}; one log-dir move at a time",
        "background.threads": _THREADS,
        "queued.max.requests": (
            "each connection has one request in flight; queued.max.request.bytes bounds "
            "what they hold"
        ),
        "delete.records.purgatory.purge.interval.requests": _PURGATORY,
        "fetch.purgatory.purge.interval.requests": _PURGATORY,
        "producer.purgatory.purge.interval.requests": _PURGATORY,
        "share.fetch.purgatory.purge.interval.requests": _PURGATORY,
        # Plugins.
        "alter.config.policy.class.name": _PLUGIN,
        "create.topic.policy.class.name": _PLUGIN,
        "client.quota.callback.class": _PLUGIN,
        "metric.reporters": f"{_PLUGIN}; {_METRICS}",
        "kafka.metrics.": f"{_PLUGIN}; {_METRICS}",
        "metrics.": _METRICS,
        # Groups.
        "group.consumer.assignment.interval.ms": _KIP848,
        "group.consumer.min.assignment.interval.ms": _KIP848,
        "group.consumer.max.assignment.interval.ms": _KIP848,
        "group.consumer.assignor.offload.enable": _KIP848,
        # group.coordinator.rebalance.protocols is honoured; the runtime's tuning is not.
        "group.coordinator.append.linger.ms": _COORDINATOR_RUNTIME,
        "group.coordinator.background.threads": _COORDINATOR_RUNTIME,
        "group.coordinator.cached.buffer.max.bytes": _COORDINATOR_RUNTIME,
        "group.coordinator.threads": _COORDINATOR_RUNTIME,
        "group.share.": _SHARE,
        "share.coordinator.": _SHARE,
        "group.streams.": _STREAMS,
        "errors.deadletterqueue.": (
            "dead-letter queues of the Streams group protocol (KIP-1034) are not implemented"
        ),
        "offsets.load.buffer.size": (
            "__consumer_offsets is loaded batch by batch, without a fixed buffer"
        ),
        "offsets.topic.compression.codec": (
            "group offsets are written uncompressed (Kafka's default codec, none)"
        ),
        # Throttles and quota windows.
        "replication.quota.window.": _THROTTLES,
        "alter.log.dirs.replication.quota.window.": (
            "the log-dir move rate (replica.alter.log.dirs.io.max.bytes.per.second) is "
            "held over each copy round, not a sampled window"
        ),
        "remote.log.manager.copy.quota.window.": _THROTTLES,
        "remote.log.manager.fetch.quota.window.": _THROTTLES,
        # Append validation.
        "log.message.timestamp.after.max.ms": _APPEND_VALIDATION,
        "log.message.timestamp.before.max.ms": _APPEND_VALIDATION,
        "max.decompressed.message.bytes": (
            "decompression bounds come with the append validation being rewritten (issue 21)"
        ),
        # Log.
        "log.cleaner.io.buffer.size": (
            "the cleaner's worker processes read and write segments whole, with no I/O "
            "buffer to size"
        ),
        "log.flush.start.offset.checkpoint.interval.ms": (
            "log start offsets are checkpointed with the recovery points, every "
            "log.flush.offset.checkpoint.interval.ms"
        ),
        "log.initial.task.delay.ms": (
            "the background tasks start after their first interval, as tierlog schedules them"
        ),
        "log.preallocate": "segment files are not preallocated (Kafka's default, false)",
        "log.roll.jitter.": "segments roll without jitter",
        "log.remote.copy.lag.": _REMOTE_UNBUILT,
        # Remote tier.
        "remote.log.storage.manager.": _REMOTE_PLUGIN,
        "remote.log.metadata.manager.": _REMOTE_PLUGIN,
        "remote.log.metadata.custom.metadata.max.bytes": _REMOTE_PLUGIN,
        "remote.log.index.file.cache.": (
            "remote indexes are read through the remote chunk cache (remote.log.reader.cache.bytes)"
        ),
        "remote.log.manager.task.retry.": (
            "a failed remote-tier cycle is retried at the next remote.log.manager.task.interval.ms"
        ),
        "remote.log.manager.thread.pool.size": _THREADS,
        "remote.log.manager.copier.thread.pool.size": _THREADS,
        "remote.log.manager.expiration.thread.pool.size": _THREADS,
        "remote.log.manager.follower.thread.pool.size": _THREADS,
        "remote.log.reader.max.pending.tasks": _THREADS,
        "remote.list.offsets.request.timeout.ms": (
            "remote ListOffsets lookups are bounded by remote.fetch.max.wait.ms"
        ),
        "follower.fetch.last.tiered.offset.enable": _REMOTE_UNBUILT + " (KIP-1023)",
        # Replication and requests.
        "replica.fetch.response.max.bytes": (
            "a follower's fetch is bounded by replica.fetch.max.bytes per partition"
        ),
        "replica.socket.receive.buffer.bytes": _SOCKETS,
        "replica.socket.timeout.ms": (
            "inter-broker requests are bounded by replica.fetch.wait.max.ms plus a fixed grace"
        ),
        "request.timeout.ms": (
            "inter-broker requests have fixed bounds in tierlog (markers, AlterPartition)"
        ),
        "add.partitions.to.txn.retry.backoff.": (
            "KIP-890 verification answers a producer at once; it retries on its own"
        ),
        "transaction.two.phase.commit.enable": "two-phase commit (KIP-939) is not implemented",
        # Sockets and connections.
        "socket.receive.buffer.bytes": _SOCKETS,
        "socket.send.buffer.bytes": _SOCKETS,
        "socket.listen.backlog.size": _SOCKETS,
        "socket.connection.setup.timeout.": (
            "tierlog's brokers connect to each other with fixed timeouts"
        ),
        "max.connections.per.ip.overrides": "per-address overrides are not implemented",
    }
)


def refusal(key: str) -> str | None:
    """Why tierlog refuses Kafka's broker key ``key``; None if no rule names it."""
    found = BROKER_REFUSED.get(key)
    if found is not None:
        return found
    best = ""
    for rule in BROKER_REFUSED:
        if rule.endswith(".") and key.startswith(rule) and len(rule) > len(best):
            best = rule
    return BROKER_REFUSED[best] if best else None


# Kafka 4.4's broker keys: KafkaConfig.configDef() names (379), plus the dynamic broker
# quota keys that exist only as dynamic configs.
KAFKA_BROKER_KEYS: Final = frozenset(
    """
add.partitions.to.txn.retry.backoff.max.ms add.partitions.to.txn.retry.backoff.ms
advertised.listeners alter.config.policy.class.name alter.log.dirs.replication.quota.window.num
alter.log.dirs.replication.quota.window.size.seconds authorizer.class.name
auto.create.topics.enable auto.leader.rebalance.enable background.threads
broker.heartbeat.interval.ms broker.id broker.rack broker.session.timeout.ms
client.quota.callback.class compression.gzip.level compression.lz4.level compression.type
compression.zstd.level config.providers connection.failed.authentication.delay.ms
connections.max.idle.ms connections.max.reauth.ms controlled.shutdown.enable
controller.listener.names controller.performance.always.log.threshold.ms
controller.performance.sample.period.ms controller.quorum.append.linger.ms
controller.quorum.auto.join.enable controller.quorum.bootstrap.servers
controller.quorum.election.backoff.max.ms controller.quorum.election.timeout.ms
controller.quorum.fetch.max.bytes controller.quorum.fetch.snapshot.max.bytes
controller.quorum.fetch.timeout.ms controller.quorum.request.timeout.ms
controller.quorum.retry.backoff.ms controller.quorum.voters controller.quota.window.num
controller.quota.window.size.seconds controller.socket.timeout.ms cordoned.log.dirs
create.topic.policy.class.name default.replication.factor
delegation.token.expiry.check.interval.ms delegation.token.expiry.time.ms
delegation.token.max.lifetime.ms delegation.token.secret.key
delete.records.purgatory.purge.interval.requests delete.topic.enable early.start.listeners
errors.deadletterqueue.auto.create.topics.enable errors.deadletterqueue.topic.name.prefix
fetch.max.bytes fetch.purgatory.purge.interval.requests
follower.fetch.last.tiered.offset.enable follower.replication.throttled.rate
group.consumer.assignment.interval.ms group.consumer.assignor.offload.enable
group.consumer.assignors group.consumer.heartbeat.interval.ms
group.consumer.max.assignment.interval.ms group.consumer.max.heartbeat.interval.ms
group.consumer.max.session.timeout.ms group.consumer.max.size group.consumer.migration.policy
group.consumer.min.assignment.interval.ms group.consumer.min.heartbeat.interval.ms
group.consumer.min.session.timeout.ms group.consumer.regex.refresh.interval.ms
group.consumer.session.timeout.ms group.coordinator.append.linger.ms
group.coordinator.background.threads group.coordinator.cached.buffer.max.bytes
group.coordinator.rebalance.protocols group.coordinator.threads
group.initial.rebalance.delay.ms group.max.session.timeout.ms group.max.size
group.min.session.timeout.ms group.share.assignment.interval.ms
group.share.assignor.offload.enable group.share.assignors group.share.delivery.count.limit
group.share.dlq.manager.class.name group.share.heartbeat.interval.ms
group.share.initialize.retry.interval.ms group.share.max.assignment.interval.ms
group.share.max.delivery.count.limit group.share.max.heartbeat.interval.ms
group.share.max.partition.max.record.locks group.share.max.record.lock.duration.ms
group.share.max.session.timeout.ms group.share.max.share.sessions group.share.max.size
group.share.min.assignment.interval.ms group.share.min.delivery.count.limit
group.share.min.heartbeat.interval.ms group.share.min.partition.max.record.locks
group.share.min.record.lock.duration.ms group.share.min.session.timeout.ms
group.share.partition.max.record.locks group.share.persister.class.name
group.share.record.lock.duration.ms group.share.session.timeout.ms
group.streams.acceptable.recovery.lag group.streams.assignment.interval.ms
group.streams.assignor.offload.enable group.streams.assignors
group.streams.heartbeat.interval.ms group.streams.initial.rebalance.delay.ms
group.streams.max.assignment.interval.ms group.streams.max.heartbeat.interval.ms
group.streams.max.session.timeout.ms group.streams.max.size group.streams.max.standby.replicas
group.streams.max.warmup.replicas group.streams.min.assignment.interval.ms
group.streams.min.heartbeat.interval.ms group.streams.min.session.timeout.ms
group.streams.min.task.offset.interval.ms group.streams.num.standby.replicas
group.streams.num.warmup.replicas group.streams.rack.aware.assignment.tags
group.streams.session.timeout.ms group.streams.task.offset.interval.ms
group.streams.topology.description.plugin.class initial.broker.registration.timeout.ms
inter.broker.listener.name internal.metadata.delete.delay.millis
internal.metadata.log.segment.bytes internal.metadata.max.batch.size.in.bytes
kafka.metrics.polling.interval.secs kafka.metrics.reporters
leader.imbalance.check.interval.seconds leader.replication.throttled.rate
listener.security.protocol.map listeners log.cleaner.backoff.ms log.cleaner.dedupe.buffer.size
log.cleaner.delete.retention.ms log.cleaner.enable log.cleaner.io.buffer.load.factor
log.cleaner.io.buffer.size log.cleaner.io.max.bytes.per.second
log.cleaner.max.compaction.lag.ms log.cleaner.min.cleanable.ratio
log.cleaner.min.compaction.lag.ms log.cleaner.threads log.cleanup.policy log.dir
log.dir.failure.timeout.ms log.dirs log.flush.interval.messages log.flush.interval.ms
log.flush.offset.checkpoint.interval.ms log.flush.scheduler.interval.ms
log.flush.start.offset.checkpoint.interval.ms log.index.interval.bytes log.index.size.max.bytes
log.initial.task.delay.ms log.local.retention.bytes log.local.retention.ms
log.message.timestamp.after.max.ms log.message.timestamp.before.max.ms
log.message.timestamp.type log.preallocate log.remote.copy.lag.bytes log.remote.copy.lag.ms
log.retention.bytes log.retention.check.interval.ms log.retention.hours log.retention.minutes
log.retention.ms log.roll.hours log.roll.jitter.hours log.roll.jitter.ms log.roll.ms
log.segment.bytes log.segment.delete.delay.ms max.connection.creation.rate max.connections
max.connections.per.ip max.connections.per.ip.overrides max.decompressed.message.bytes
max.incremental.fetch.session.cache.slots max.request.partition.size.limit message.max.bytes
metadata.log.dir metadata.log.max.record.bytes.between.snapshots
metadata.log.max.snapshot.interval.ms metadata.log.segment.bytes metadata.log.segment.ms
metadata.max.idle.interval.ms metadata.max.retention.bytes metadata.max.retention.ms
metric.reporters metrics.num.samples metrics.recording.level metrics.sample.window.ms
min.insync.replicas node.id num.io.threads num.network.threads num.partitions
num.recovery.threads.per.data.dir num.replica.alter.log.dirs.threads num.replica.fetchers
offset.metadata.max.bytes offsets.commit.timeout.ms offsets.load.buffer.size
offsets.retention.check.interval.ms offsets.retention.minutes offsets.topic.compression.codec
offsets.topic.num.partitions offsets.topic.replication.factor offsets.topic.segment.bytes
principal.builder.class process.roles producer.id.expiration.check.interval.ms
producer.id.expiration.ms producer.purgatory.purge.interval.requests queued.max.request.bytes
queued.max.requests quota.window.num quota.window.size.seconds remote.fetch.max.wait.ms
remote.list.offsets.request.timeout.ms remote.log.index.file.cache.total.size.bytes
remote.log.index.file.cache.ttl.ms remote.log.manager.copier.thread.pool.size
remote.log.manager.copy.max.bytes.per.second remote.log.manager.copy.quota.window.num
remote.log.manager.copy.quota.window.size.seconds
remote.log.manager.expiration.thread.pool.size remote.log.manager.fetch.max.bytes.per.second
remote.log.manager.fetch.quota.window.num remote.log.manager.fetch.quota.window.size.seconds
remote.log.manager.follower.thread.pool.size remote.log.manager.task.interval.ms
remote.log.manager.task.retry.backoff.max.ms remote.log.manager.task.retry.backoff.ms
remote.log.manager.task.retry.jitter remote.log.manager.thread.pool.size
remote.log.metadata.custom.metadata.max.bytes remote.log.metadata.manager.class.name
remote.log.metadata.manager.class.path remote.log.metadata.manager.impl.prefix
remote.log.metadata.manager.listener.name remote.log.reader.max.pending.tasks
remote.log.reader.threads remote.log.storage.manager.class.name
remote.log.storage.manager.class.path remote.log.storage.manager.impl.prefix
remote.log.storage.system.enable replica.alter.log.dirs.io.max.bytes.per.second
replica.fetch.backoff.ms replica.fetch.max.bytes replica.fetch.min.bytes
replica.fetch.response.max.bytes replica.fetch.wait.max.ms
replica.high.watermark.checkpoint.interval.ms replica.lag.time.max.ms replica.selector.class
replica.socket.receive.buffer.bytes replica.socket.timeout.ms replication.quota.window.num
replication.quota.window.size.seconds request.timeout.ms sasl.client.callback.handler.class
sasl.enabled.mechanisms sasl.jaas.config sasl.kerberos.kinit.cmd
sasl.kerberos.min.time.before.relogin sasl.kerberos.principal.to.local.rules
sasl.kerberos.service.name sasl.kerberos.ticket.renew.jitter
sasl.kerberos.ticket.renew.window.factor sasl.login.callback.handler.class sasl.login.class
sasl.login.connect.timeout.ms sasl.login.read.timeout.ms sasl.login.refresh.buffer.seconds
sasl.login.refresh.min.period.seconds sasl.login.refresh.window.factor
sasl.login.refresh.window.jitter sasl.login.retry.backoff.max.ms sasl.login.retry.backoff.ms
sasl.mechanism.controller.protocol sasl.mechanism.inter.broker.protocol
sasl.oauthbearer.allow.unverified.audience sasl.oauthbearer.allow.unverified.issuer
sasl.oauthbearer.assertion.algorithm sasl.oauthbearer.assertion.claim.aud
sasl.oauthbearer.assertion.claim.exp.seconds sasl.oauthbearer.assertion.claim.iss
sasl.oauthbearer.assertion.claim.jti.include sasl.oauthbearer.assertion.claim.nbf.seconds
sasl.oauthbearer.assertion.claim.sub sasl.oauthbearer.assertion.file
sasl.oauthbearer.assertion.private.key.file sasl.oauthbearer.assertion.private.key.passphrase
sasl.oauthbearer.assertion.template.file sasl.oauthbearer.client.credentials.client.id
sasl.oauthbearer.client.credentials.client.secret sasl.oauthbearer.clock.skew.seconds
sasl.oauthbearer.expected.audience sasl.oauthbearer.expected.issuer
sasl.oauthbearer.jwks.endpoint.refresh.ms sasl.oauthbearer.jwks.endpoint.retry.backoff.max.ms
sasl.oauthbearer.jwks.endpoint.retry.backoff.ms sasl.oauthbearer.jwks.endpoint.url
sasl.oauthbearer.jwt.retriever.class sasl.oauthbearer.jwt.validator.class
sasl.oauthbearer.scope sasl.oauthbearer.scope.claim.name sasl.oauthbearer.sub.claim.name
sasl.oauthbearer.token.endpoint.url sasl.server.callback.handler.class
sasl.server.max.receive.size security.inter.broker.protocol security.providers
server.max.startup.time.ms share.coordinator.append.linger.ms
share.coordinator.cached.buffer.max.bytes share.coordinator.cold.partition.snapshot.interval.ms
share.coordinator.load.buffer.size share.coordinator.snapshot.update.records.per.snapshot
share.coordinator.state.topic.compression.codec share.coordinator.state.topic.min.isr
share.coordinator.state.topic.num.partitions share.coordinator.state.topic.prune.interval.ms
share.coordinator.state.topic.replication.factor share.coordinator.state.topic.segment.bytes
share.coordinator.threads share.coordinator.write.timeout.ms
share.fetch.purgatory.purge.interval.requests socket.connection.setup.timeout.max.ms
socket.connection.setup.timeout.ms socket.listen.backlog.size socket.receive.buffer.bytes
socket.request.max.bytes socket.send.buffer.bytes ssl.allow.dn.changes ssl.allow.san.changes
ssl.cipher.suites ssl.client.auth ssl.enabled.protocols ssl.endpoint.identification.algorithm
ssl.engine.factory.class ssl.key.password ssl.keymanager.algorithm
ssl.keystore.certificate.chain ssl.keystore.key ssl.keystore.location ssl.keystore.password
ssl.keystore.type ssl.principal.mapping.rules ssl.protocol ssl.provider
ssl.secure.random.implementation ssl.trustmanager.algorithm ssl.truststore.certificates
ssl.truststore.location ssl.truststore.password ssl.truststore.type telemetry.max.bytes
transaction.abort.timed.out.transaction.cleanup.interval.ms transaction.max.timeout.ms
transaction.partition.verification.enable
transaction.remove.expired.transaction.cleanup.interval.ms
transaction.state.log.load.buffer.size transaction.state.log.min.isr
transaction.state.log.num.partitions transaction.state.log.replication.factor
transaction.state.log.segment.bytes transaction.two.phase.commit.enable
transactional.id.expiration.ms unclean.leader.election.enable
unclean.leader.election.interval.ms unstable.api.versions.enable
unstable.feature.versions.enable
""".split()  # noqa: SIM905 - a list of names, easier to read as text
)
