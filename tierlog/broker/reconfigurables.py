"""What a broker's parts do with new dynamic broker configs (KIP-226): one
``Reconfigurable`` per key group of ``dynamic_config``'s table, built from the parts the
broker passes in, and the cleaner's settings read from a config."""

from __future__ import annotations

from collections.abc import Callable

from tierlog.broker.config import BrokerConfig
from tierlog.broker.controller import Controller
from tierlog.broker.dynamic_config import (
    CLEANER_KEYS,
    CONNECTION_KEYS,
    CONTROLLER_KEYS,
    LOG_DEFAULT_KEYS,
    PRODUCER_STATE_KEYS,
    REMOTE_KEYS,
    REPLICATION_THROTTLE_KEYS,
    TRANSACTION_KEYS,
    Reconfigurable,
)
from tierlog.broker.network.server import ConnectionQuotas
from tierlog.broker.replication.log_dir_mover import LogDirMover
from tierlog.broker.replication.replica_manager import ReplicaManager
from tierlog.broker.replication.replication_quota import ReplicationQuotas
from tierlog.broker.txn.service import Transactions
from tierlog.compaction.cleaner import CleanerConfig, LogCleaner
from tierlog.remote.remote_log_manager import RemoteLogManager
from tierlog.util.throttle import Throttle


def cleaner_config(config: BrokerConfig) -> CleanerConfig:
    """The broker's ``log.cleaner.*`` keys as the cleaner's settings."""
    rate = config["log.cleaner.io.max.bytes.per.second"]
    return CleanerConfig(
        enable=config["log.cleaner.enable"],
        threads=config["log.cleaner.threads"],
        dedupe_buffer_size=config["log.cleaner.dedupe.buffer.size"],
        # Kafka's default, Double.MAX_VALUE, means no limit.
        io_max_bytes_per_second=0.0 if rate >= 1e300 else rate,
        backoff_ms=config["log.cleaner.backoff.ms"],
        load_factor=config["log.cleaner.io.buffer.load.factor"],
    )


def broker_reconfigurables(
    replicas: ReplicaManager,
    quotas: ConnectionQuotas,
    cleaner: Callable[[], LogCleaner | None],
    copy_throttle: Throttle | None,
    fetch_throttle: Throttle | None,
    replication_quotas: ReplicationQuotas,
    log_dir_mover: LogDirMover,
    transactions: Transactions,
    remote: RemoteLogManager | None,
    controller: Controller | None = None,
) -> list[Reconfigurable]:
    """Args:
    replicas: takes new ``log.*`` defaults for every hosted topic, and the producer
        state's expiry for every hosted partition.
    quotas: the connection limits every listener shares.
    cleaner: the log cleaner once started (None: ``log.cleaner.enable=false``).
    copy_throttle: paces uploads to the remote tier (None: no remote tier).
    fetch_throttle: bounds fetches' reads from the remote tier (None: no remote tier).
    replication_quotas: the leader and follower replication throttles.
    log_dir_mover: moves replicas between log.dirs at its own rate.
    transactions: the transaction service (KIP-890's partition verification).
    remote: the remote tier's reads (None: no remote tier).
    controller: the controller this broker may be (None: a single node, which has none).
    """

    def log_defaults(config: BrokerConfig) -> None:
        replicas.set_default_log_config(config.log_config)

    def cleaner_settings(config: BrokerConfig) -> None:
        running = cleaner()
        if running is not None:
            running.reconfigure(cleaner_config(config))

    def connections(config: BrokerConfig) -> None:
        quotas.set_connection_limits(
            config["max.connections"],
            config["max.connections.per.ip"],
            config["max.connection.creation.rate"],
        )

    def remote_rates(config: BrokerConfig) -> None:
        if copy_throttle is not None:
            rate = config["remote.log.manager.copy.max.bytes.per.second"]
            copy_throttle.set_rate(rate, burst_bytes=rate)
        if fetch_throttle is not None:
            rate = config["remote.log.manager.fetch.max.bytes.per.second"]
            fetch_throttle.set_rate(rate, burst_bytes=rate)
        if remote is not None:
            remote.set_fetch_timeout_ms(config["remote.fetch.max.wait.ms"])

    def replication_throttles(config: BrokerConfig) -> None:
        replication_quotas.leader.set_rate(config["leader.replication.throttled.rate"])
        replication_quotas.follower.set_rate(config["follower.replication.throttled.rate"])
        log_dir_mover.set_rate(config["replica.alter.log.dirs.io.max.bytes.per.second"])

    def producer_state(config: BrokerConfig) -> None:
        replicas.log_manager.set_producer_id_expiration_ms(config["producer.id.expiration.ms"])

    def transaction_settings(config: BrokerConfig) -> None:
        transactions.verification_enabled = config["transaction.partition.verification.enable"]

    def controller_settings(config: BrokerConfig) -> None:
        if controller is not None:
            controller.set_unclean_leader_election(config["unclean.leader.election.enable"])

    return [
        Reconfigurable("log defaults", frozenset(LOG_DEFAULT_KEYS), log_defaults),
        Reconfigurable("controller", frozenset(CONTROLLER_KEYS), controller_settings),
        Reconfigurable("log cleaner", frozenset(CLEANER_KEYS), cleaner_settings),
        Reconfigurable("connection quotas", frozenset(CONNECTION_KEYS), connections),
        Reconfigurable("remote copy and fetch rates", frozenset(REMOTE_KEYS), remote_rates),
        Reconfigurable("producer state", frozenset(PRODUCER_STATE_KEYS), producer_state),
        Reconfigurable("transactions", frozenset(TRANSACTION_KEYS), transaction_settings),
        Reconfigurable(
            "replication throttles", frozenset(REPLICATION_THROTTLE_KEYS), replication_throttles
        ),
    ]
