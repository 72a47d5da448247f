"""``tierlog topics``: create, list, describe, alter and delete topics through
confluent-kafka's AdminClient, printing what Kafka's ``kafka-topics.sh`` prints.

Works against any Kafka-protocol broker. ``describe`` shows each topic's non-default configs
(overrides and broker-level settings), as ``kafka-topics.sh --describe`` does, each
partition's replicas, ISR and offline replicas (``Offline:``, the replicas on brokers that are
not live, as ``tierlog cluster status`` prints them; Kafka's tool shows them only through
``--unavailable-partitions``), and for a
compacted topic on tierlog brokers each partition's cleaning (``Cleaner:``, from
``tierlog.tools.cleaner_report``; nothing more against Kafka); ``alter``
adds partitions (CreatePartitions) and changes configs incrementally
(IncrementalAlterConfigs, KIP-339), so keys it does not name keep their values.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any, TextIO

from tierlog.tools import cleaner_report
from tierlog.tools.client_config import ClientSettings, ToolError, client_security
from tierlog.tools.ids import kafka_id

if TYPE_CHECKING:
    from confluent_kafka.admin import AdminClient, ConfigEntry, TopicDescription


# Seconds to wait for one broker's cleaner state (connect, then the answer).
STATE_TIMEOUT = 5.0


def _missing(name: str) -> str:
    return f"Topic '{name}' does not exist"


def describe_topics(
    settings: ClientSettings, admin: AdminClient, names: list[str]
) -> tuple[dict[str, TopicDescription], list[str]]:
    """Descriptions of the topics that exist, and the names that do not."""
    from confluent_kafka import KafkaError, TopicCollection

    found: dict[str, TopicDescription] = {}
    missing: list[str] = []
    if not names:
        return found, missing
    futures = admin.describe_topics(TopicCollection(names), request_timeout=settings.timeout)
    for name, future in futures.items():
        result = settings.outcome(future, f"describe topic {name!r}")
        if not isinstance(result, KafkaError):
            found[name] = result
        elif result.code() == KafkaError.UNKNOWN_TOPIC_OR_PART:
            missing.append(name)
        else:
            raise settings.error(result, f"describe topic {name!r}", admin)
    return found, missing


def create(
    settings: ClientSettings,
    name: str,
    out: TextIO,
    *,
    partitions: int | None = None,
    replication_factor: int | None = None,
    configs: dict[str, str] | None = None,
) -> int:
    """Create one topic; partitions and replication factor default to the broker's
    ``num.partitions`` and ``default.replication.factor`` (KIP-464)."""
    from confluent_kafka.admin import NewTopic

    admin = settings.admin()
    topic = NewTopic(
        name,
        num_partitions=partitions or -1,
        replication_factor=replication_factor or -1,
        config=configs or {},
    )
    futures = admin.create_topics(
        [topic], operation_timeout=settings.timeout, request_timeout=settings.timeout
    )
    settings.wait(futures[name], f"create topic {name!r}", admin)
    print(f"Created topic {name}.", file=out)
    return 0


def list_topics(settings: ClientSettings, out: TextIO, err: TextIO | None = None) -> int:
    """Topic names, one a line on ``out`` (for scripts); on an empty cluster, a line on
    ``err`` saying so (``out`` stays empty, as ``kafka-topics --list`` leaves it)."""
    admin = settings.admin()
    names = sorted(settings.metadata(admin, "list topics").topics)
    for name in names:
        print(name, file=out)
    if not names and err is not None:
        print("no topics yet; create one with `tierlog topics create NAME`", file=err)
    return 0


def _topic_configs(
    settings: ClientSettings, admin: AdminClient, names: list[str]
) -> dict[str, dict[str, ConfigEntry]]:
    """Every config entry of each topic, as DescribeConfigs answers them."""
    from confluent_kafka.admin import ConfigResource, ResourceType

    if not names:
        return {}
    resources = [ConfigResource(ResourceType.TOPIC, name) for name in names]
    futures = admin.describe_configs(resources, request_timeout=settings.timeout)
    return {
        resource.name: settings.wait(future, f"describe configs of {resource.name!r}", admin)
        for resource, future in futures.items()
    }


def _non_default(entries: dict[str, ConfigEntry]) -> str:
    """``"k=v,k=v"`` of the configs that are not the built-in default."""
    return ",".join(
        f"{key}={'<sensitive>' if entry.is_sensitive else entry.value}"
        for key, entry in sorted(entries.items())
        if not entry.is_default
    )


def _is_compacted(entries: dict[str, ConfigEntry]) -> bool:
    policy = entries.get("cleanup.policy")
    return policy is not None and "compact" in str(policy.value or "").split(",")


def _cleaner_states(settings: ClientSettings, admin: AdminClient) -> cleaner_report.BrokerStates:
    """Each reachable tierlog broker's cleaner states (``tierlog.tools.cleaner_report``),
    asked with ``--command-config``'s TLS and SASL settings, as the tool's other clients."""
    security = client_security(settings.properties)
    brokers = settings.metadata(admin, "list brokers").brokers
    addresses = {int(i): (str(b.host), int(b.port)) for i, b in brokers.items()}
    # A broker out of reach costs describe at most this long: the state is extra.
    timeout = min(settings.timeout, STATE_TIMEOUT)
    return cleaner_report.broker_states(addresses, timeout, security)


def _ids(nodes: list[Any]) -> str:
    return ",".join(str(node.id) for node in nodes)


def _live_brokers(settings: ClientSettings, admin: AdminClient) -> set[int]:
    """The ids of the brokers the cluster has registered (DescribeCluster): a replica on any
    other broker is offline."""
    cluster: Any = settings.wait(admin.describe_cluster(), "describe the cluster", admin)
    return {int(node.id) for node in cluster.nodes}


def describe(
    settings: ClientSettings, names: list[str], out: TextIO, *, now_ms: int | None = None
) -> int:
    """Describe the named topics, or every topic when none is named; ``now_ms`` (default
    the clock) is what a last clean's age is counted from."""
    admin = settings.admin()
    if not names:
        names = sorted(settings.metadata(admin, "list topics").topics)
    found, missing = describe_topics(settings, admin, names)
    entries = _topic_configs(settings, admin, [n for n in names if n in found])
    configs = {name: _non_default(e) for name, e in entries.items()}
    compacted = {name for name, e in entries.items() if _is_compacted(e)}
    states = _cleaner_states(settings, admin) if compacted else {}
    live = _live_brokers(settings, admin) if found else set()
    now = int(time.time() * 1000) if now_ms is None else now_ms
    for name in names:
        if name not in found:
            continue
        topic = found[name]
        partitions = sorted(topic.partitions, key=lambda p: p.id)
        replication = len(partitions[0].replicas) if partitions else 0
        print(
            f"Topic: {name}\tTopicId: {kafka_id(topic.topic_id)}\t"
            f"PartitionCount: {len(partitions)}\t"
            f"ReplicationFactor: {replication}\tConfigs: {configs.get(name, '')}",
            file=out,
        )
        for p in partitions:
            leader = "none" if p.leader is None else p.leader.id
            line = (
                f"\tTopic: {name}\tPartition: {p.id}\tLeader: {leader}\t"
                f"Replicas: {_ids(p.replicas)}\tIsr: {_ids(p.isr)}\t"
                f"Offline: {_ids([r for r in p.replicas if r.id not in live])}"
            )
            if name in compacted and p.leader is not None and p.leader.id in states:
                broker = states[p.leader.id]
                if broker is None or (name, p.id) in broker:
                    state = None if broker is None else broker[(name, p.id)]
                    line += f"\tCleaner: {cleaner_report.summary(state, now, p.leader.id)}"
            print(line, file=out)
    if missing:
        out.flush()
        raise ToolError("; ".join(_missing(name) for name in missing))
    return 0


def alter(
    settings: ClientSettings,
    name: str,
    out: TextIO,
    *,
    partitions: int | None = None,
    set_configs: dict[str, str] | None = None,
    delete_configs: list[str] | None = None,
) -> int:
    """Grow the partition count and/or set and delete config overrides of one topic."""
    from confluent_kafka.admin import (
        AlterConfigOpType,
        ConfigEntry,
        ConfigResource,
        NewPartitions,
        ResourceType,
    )

    set_configs = set_configs or {}
    delete_configs = delete_configs or []
    if partitions is None and not set_configs and not delete_configs:
        raise ToolError("nothing to alter: give --partitions, --config or --delete-config")
    both = sorted(set(set_configs) & set(delete_configs))
    if both:
        raise ToolError(f"both set and deleted: {', '.join(both)}")
    admin = settings.admin()
    found, _ = describe_topics(settings, admin, [name])
    if name not in found:
        raise ToolError(_missing(name))
    done: list[str] = []
    if partitions is not None:
        current = len(found[name].partitions)
        if partitions <= current:
            raise ToolError(
                f"topic '{name}' has {current} partitions; --partitions can only increase it"
            )
        futures = admin.create_partitions(
            [NewPartitions(name, partitions)],
            operation_timeout=settings.timeout,
            request_timeout=settings.timeout,
        )
        settings.wait(futures[name], f"add partitions to {name!r}", admin)
        done.append(f"partitions {current} -> {partitions}")
    if set_configs or delete_configs:
        entries = [
            ConfigEntry(key, value, incremental_operation=AlterConfigOpType.SET)
            for key, value in set_configs.items()
        ] + [
            ConfigEntry(key, None, incremental_operation=AlterConfigOpType.DELETE)
            for key in delete_configs
        ]
        resource = ConfigResource(ResourceType.TOPIC, name, incremental_configs=entries)
        futures_by_resource = admin.incremental_alter_configs(
            [resource], request_timeout=settings.timeout
        )
        for future in futures_by_resource.values():
            settings.wait(future, f"alter configs of {name!r}", admin)
        done += [f"set {key}={value}" for key, value in set_configs.items()]
        done += [f"deleted {key}" for key in delete_configs]
    print(f"Altered topic {name}: {'; '.join(done)}.", file=out)
    return 0


def delete(settings: ClientSettings, names: list[str], out: TextIO) -> int:
    """Delete topics; each one's failure is reported, and any failure means exit code 1."""
    from confluent_kafka import KafkaError

    admin = settings.admin()
    futures = admin.delete_topics(
        names, operation_timeout=settings.timeout, request_timeout=settings.timeout
    )
    failures: list[str] = []
    for name, future in futures.items():
        result = settings.outcome(future, f"delete topic {name!r}")
        if isinstance(result, KafkaError):
            if result.code() == KafkaError.UNKNOWN_TOPIC_OR_PART:
                failures.append(_missing(name))
            else:
                failures.append(str(settings.error(result, f"delete topic {name!r}", admin)))
            continue
        print(f"Deleted topic {name}.", file=out)
    if failures:
        out.flush()
        raise ToolError("; ".join(failures))
    return 0
