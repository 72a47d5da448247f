"""One broker's client-metrics instances: Kafka's request rules (throttling, stale
subscriptions, terminating, sizes, codecs) and what the metrics endpoint exports."""

from __future__ import annotations

import threading
import time
import uuid

import pytest

from tests.broker.client_metrics.otlp_encoder import counter, gauge, metrics_data, point
from tierlog.broker.client_metrics.manager import ClientMetricsManager, Series, TelemetryError
from tierlog.broker.client_metrics.subscriptions import ClientInfo
from tierlog.protocol.errors import ErrorCode
from tierlog.records.codecs import compress
from tierlog.util.clock import ManualClock

CLIENT = ClientInfo("perf-1", "apache-kafka-java", "4.4.0", "127.0.0.1", 50123)
ZERO = uuid.UUID(int=0)
PAYLOAD = metrics_data(
    gauge("org.apache.kafka.producer.record.queue.time.max", point(12.5, {"node.id": "3"})),
    counter("org.apache.kafka.producer.record.send.total", point(2000)),
)


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock()


@pytest.fixture
def manager(clock: ManualClock) -> ClientMetricsManager:
    m = ClientMetricsManager(clock, telemetry_max_bytes=4096)
    m.set_subscriptions({"all": {"metrics": "*", "interval.ms": "1000"}})
    return m


def code(exc: pytest.ExceptionInfo[TelemetryError]) -> ErrorCode:
    return exc.value.code


def exported(manager: ClientMetricsManager) -> dict[str, Series]:
    return {s.name: s for s in manager.series()}


def test_a_new_client_gets_an_id_and_its_subscription(manager: ClientMetricsManager) -> None:
    instance, target = manager.get_subscriptions(ZERO, CLIENT)
    assert instance != ZERO
    assert target.metrics == {"*"} and target.interval_ms == 1000
    again, _ = manager.get_subscriptions(uuid.uuid4(), CLIENT)
    assert again != instance  # another instance id asked for its own


def test_push_is_kept_with_the_clients_labels(manager: ClientMetricsManager) -> None:
    instance, target = manager.get_subscriptions(ZERO, CLIENT)
    manager.push(instance, target.subscription_id, False, 4, compress(4, PAYLOAD), CLIENT)
    series = exported(manager)
    queue = series["org_apache_kafka_producer_record_queue_time_max"]
    assert queue.value == 12.5 and not queue.counter
    labels = dict(queue.labels)
    assert labels["client_id"] == "perf-1"
    assert labels["client_instance_id"] == str(instance)
    assert labels["client_software_name"] == "apache-kafka-java"
    assert labels["node_id"] == "3"  # the client's attribute, made a label
    sent = series["org_apache_kafka_producer_record_send_total"]
    assert sent.counter and sent.value == 2000


@pytest.mark.parametrize("codec", [0, 1, 2, 3, 4])
def test_every_accepted_codec_reads(manager: ClientMetricsManager, codec: int) -> None:
    instance, target = manager.get_subscriptions(ZERO, CLIENT)
    manager.push(instance, target.subscription_id, False, codec, compress(codec, PAYLOAD), CLIENT)
    assert len(exported(manager)) == 2


def test_asking_or_pushing_before_the_interval_is_throttled(
    manager: ClientMetricsManager, clock: ManualClock
) -> None:
    instance, target = manager.get_subscriptions(ZERO, CLIENT)
    with pytest.raises(TelemetryError) as early:
        manager.get_subscriptions(instance, CLIENT)
    assert code(early) == ErrorCode.throttling_quota_exceeded
    # The first push after a subscription request is always accepted (clients jitter).
    manager.push(instance, target.subscription_id, False, 0, PAYLOAD, CLIENT)
    clock.advance(500)
    with pytest.raises(TelemetryError) as again:
        manager.push(instance, target.subscription_id, False, 0, PAYLOAD, CLIENT)
    assert code(again) == ErrorCode.throttling_quota_exceeded
    clock.advance(500)
    manager.push(instance, target.subscription_id, False, 0, PAYLOAD, CLIENT)
    assert manager.pushes == 2 and manager.refused == 1


def test_a_changed_subscription_is_learnt_at_once(
    manager: ClientMetricsManager, clock: ManualClock
) -> None:
    instance, old = manager.get_subscriptions(ZERO, CLIENT)
    manager.set_subscriptions({"all": {"metrics": "org.apache.kafka.", "interval.ms": "2000"}})
    with pytest.raises(TelemetryError) as stale:
        manager.push(instance, old.subscription_id, False, 0, PAYLOAD, CLIENT)
    assert code(stale) == ErrorCode.unknown_subscription_id
    # No waiting for the interval: the client must learn the new subscription now.
    _, new = manager.get_subscriptions(instance, CLIENT)
    assert new.subscription_id != old.subscription_id
    assert new.metrics == {"org.apache.kafka."} and new.interval_ms == 2000
    manager.push(instance, new.subscription_id, False, 0, PAYLOAD, CLIENT)


def test_nothing_after_terminating(manager: ClientMetricsManager, clock: ManualClock) -> None:
    instance, target = manager.get_subscriptions(ZERO, CLIENT)
    manager.push(instance, target.subscription_id, True, 0, PAYLOAD, CLIENT)
    clock.advance(5000)
    with pytest.raises(TelemetryError) as after:
        manager.push(instance, target.subscription_id, False, 0, PAYLOAD, CLIENT)
    assert code(after) == ErrorCode.invalid_request


@pytest.mark.parametrize(
    ("compression", "payload", "expected"),
    [
        (7, PAYLOAD, ErrorCode.unsupported_compression_type),
        (0, PAYLOAD + bytes(5000), ErrorCode.telemetry_too_large),
        (0, b"\x0a\xff", ErrorCode.invalid_record),
        (4, b"not zstd at all", ErrorCode.invalid_record),
    ],
)
def test_bad_pushes_get_kafkas_codes(
    manager: ClientMetricsManager, compression: int, payload: bytes, expected: ErrorCode
) -> None:
    instance, target = manager.get_subscriptions(ZERO, CLIENT)
    with pytest.raises(TelemetryError) as refused:
        manager.push(instance, target.subscription_id, False, compression, payload, CLIENT)
    assert code(refused) == expected
    assert list(manager.series()) == []


def test_reserved_instance_ids_are_refused(manager: ClientMetricsManager) -> None:
    with pytest.raises(TelemetryError) as refused:
        manager.push(ZERO, 0, False, 0, PAYLOAD, CLIENT)
    assert code(refused) == ErrorCode.invalid_request


def test_deltas_add_up(manager: ClientMetricsManager, clock: ManualClock) -> None:
    instance, target = manager.get_subscriptions(ZERO, CLIENT)
    delta = metrics_data(counter("requests", point(5), cumulative=False))
    manager.push(instance, target.subscription_id, False, 0, delta, CLIENT)
    clock.advance(1000)
    manager.push(instance, target.subscription_id, False, 0, delta, CLIENT)
    assert exported(manager)["requests"].value == 10


def test_instances_expire_after_three_intervals_or_a_minute(
    manager: ClientMetricsManager, clock: ManualClock
) -> None:
    instance, target = manager.get_subscriptions(ZERO, CLIENT)
    manager.push(instance, target.subscription_id, False, 0, PAYLOAD, CLIENT)
    clock.advance(59_000)
    assert manager.instances == 1 and len(exported(manager)) == 2
    clock.advance(2_000)
    assert exported(manager) == {}  # the scrape skips it at once
    manager.get_subscriptions(ZERO, CLIENT)  # the next request forgets it
    assert manager.instances == 1


def test_unreadable_stored_subscriptions_are_left_out(manager: ClientMetricsManager) -> None:
    manager.set_subscriptions({"bad": {"interval.ms": "1"}, "ok": {"metrics": "a."}})
    assert manager.subscription_names == ["ok"]


def test_a_scrape_while_clients_come_and_go_never_fails(manager: ClientMetricsManager) -> None:
    """The metrics endpoint reads from its own thread while the event loop adds and drops
    instances: a CI run's scrape failed with "OrderedDict mutated during iteration" (HTTP
    500). Bounded: about a second of both at once."""
    for _ in range(500):
        manager.get_subscriptions(ZERO, CLIENT)
    failures: list[BaseException] = []
    done = threading.Event()

    def scrape() -> None:
        while not done.is_set():
            try:
                list(manager.series())
            except Exception as exc:  # what the endpoint would answer HTTP 500 for
                failures.append(exc)
                return

    scraper = threading.Thread(target=scrape, daemon=True)
    scraper.start()
    deadline = time.monotonic() + 1.0
    while time.monotonic() < deadline and not failures:
        manager.get_subscriptions(ZERO, CLIENT)  # a new instance, the oldest dropped when full
    done.set()
    scraper.join(10)
    assert not failures, failures[0]
