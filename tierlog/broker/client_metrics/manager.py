"""One broker's side of client metrics (KIP-714): which client instances it knows, what each
must push and when, and the numbers they pushed last, for the Prometheus endpoint.

Rules are Kafka's ``ClientMetricsManager`` / ``ClientMetricsInstance``:

- GetTelemetrySubscriptions with the zero UUID gets a new client instance id. A request
  before the push interval has passed since the last one is THROTTLING_QUOTA_EXCEEDED,
  unless the subscriptions changed since, or the last push was refused
  UNKNOWN_SUBSCRIPTION_ID or UNSUPPORTED_COMPRESSION_TYPE (the client must learn the new
  ones at once).
- PushTelemetry is refused INVALID_REQUEST after the client said it was terminating,
  THROTTLING_QUOTA_EXCEEDED before its interval (the first push after a
  GetTelemetrySubscriptions is always accepted: clients jitter the interval by +-50%),
  UNKNOWN_SUBSCRIPTION_ID when the subscription changed, UNSUPPORTED_COMPRESSION_TYPE for a
  codec id Kafka does not know, TELEMETRY_TOO_LARGE past ``telemetry.max.bytes``, and
  INVALID_RECORD when the payload does not decompress or parse.
- An instance is forgotten max(60 s, 3 push intervals) after its last request; at most
  16,384 are kept (the least recently seen goes first).

Where Kafka hands the payload to a metrics-reporter plugin, tierlog keeps the numbers of
each instance's last push and ``series`` renders them for the Prometheus endpoint, labelled
with the client's id, instance id and software. The broker answers ``delta_temporality =
false``, so clients send counters as running totals: a scrape then shows the last total, and
a lost push loses nothing. (A client that sends deltas anyway has them added up.)

Single-threaded: the broker's event loop calls everything here. The clock is passed in.
"""

from __future__ import annotations

import logging
import re
import threading
import uuid
from collections import OrderedDict
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Final

from tierlog.broker.client_metrics.otlp import OtlpError, parse_metrics_data
from tierlog.broker.client_metrics.subscriptions import (
    ClientInfo,
    Subscription,
    Target,
    parse_subscription,
    target_for,
)
from tierlog.protocol.errors import ErrorCode
from tierlog.records.codecs import decompress
from tierlog.records.errors import RecordsError
from tierlog.util.clock import Clock
from tierlog.util.configdef import ConfigError

__all__ = ["ClientMetricsManager", "Series", "TelemetryError"]

log = logging.getLogger(__name__)

# Kafka's SUPPORTED_COMPRESSION_TYPES, in its order of preference: zstd, lz4, gzip, snappy.
ACCEPTED_COMPRESSION: Final = (4, 3, 1, 2)
_KNOWN_COMPRESSION: Final = frozenset({0, 1, 2, 3, 4})
MAX_INSTANCES: Final = 16_384
CACHE_EXPIRY_MS: Final = 60_000
# A pushed payload decompresses to at most this many times telemetry.max.bytes (metrics
# text compresses ~10x with zstd; this leaves room and bounds a decompression bomb).
MAX_EXPANSION: Final = 32
_LABEL: Final = re.compile(r"[^a-zA-Z0-9_]")
# Labels the broker sets itself; a pushed attribute of the same name is dropped.
OWN_LABELS: Final = (
    "client_id",
    "client_instance_id",
    "client_software_name",
    "client_software_version",
)


class TelemetryError(Exception):
    """A telemetry request refused with a Kafka error code."""

    def __init__(self, code: ErrorCode, message: str) -> None:
        super().__init__(message)
        self.code = code


@dataclass(frozen=True)
class Series:
    """One exported number: metric name (Prometheus-safe), labels, value, and whether it
    is a counter."""

    name: str
    labels: tuple[tuple[str, str], ...]
    value: float
    counter: bool


@dataclass
class _Instance:
    instance_id: uuid.UUID
    client: ClientInfo
    target: Target
    subscription_version: int
    last_get_ms: int = -1
    last_push_ms: int = -1
    asked_since_push: bool = False
    terminating: bool = False
    last_error: ErrorCode = ErrorCode.none
    seen_ms: int = 0
    # (name, labels) -> (value, counter)
    values: dict[tuple[str, tuple[tuple[str, str], ...]], tuple[float, bool]] = field(
        default_factory=dict
    )

    @property
    def expiry_ms(self) -> int:
        return max(CACHE_EXPIRY_MS, 3 * self.target.interval_ms)


def metric_name(name: str) -> str:
    """``org.apache.kafka.producer.record.send.rate`` -> ``org_apache_kafka_producer_record_
    send_rate`` (Prometheus names allow letters, digits, ``_`` and ``:``)."""
    cleaned = _LABEL.sub("_", name)
    return cleaned if cleaned and not cleaned[0].isdigit() else f"_{cleaned}"


class ClientMetricsManager:
    """Args:
    clock: the broker's clock (push intervals, expiry).
    telemetry_max_bytes: ``telemetry.max.bytes``: the largest (compressed) push accepted.
    max_instances: client instances kept at most.
    """

    def __init__(
        self, clock: Clock, telemetry_max_bytes: int, max_instances: int = MAX_INSTANCES
    ) -> None:
        self._clock = clock
        self.telemetry_max_bytes = telemetry_max_bytes
        self._max_instances = max_instances
        self._subscriptions: dict[str, Subscription] = {}
        self._version = 0
        self._instances: OrderedDict[uuid.UUID, _Instance] = OrderedDict()
        # The metrics endpoint's thread copies the instances while the event loop adds,
        # reorders and drops them: an OrderedDict changed during the copy raised
        # RuntimeError there, and the scrape failed with HTTP 500. Every change of
        # _instances and the copy hold this lock.
        self._instances_lock = threading.Lock()
        self.pushes = 0
        self.refused = 0

    # -- subscriptions ---------------------------------------------------------------------

    @property
    def subscription_names(self) -> list[str]:
        return sorted(self._subscriptions)

    def set_subscriptions(self, stored: Mapping[str, Mapping[str, str]]) -> None:
        """Every ``client-metrics`` resource as stored (name -> configs). A stored resource
        that does not parse (written by another tool) is logged and left out."""
        parsed: dict[str, Subscription] = {}
        for name, configs in stored.items():
            if not configs:
                continue
            try:
                parsed[name] = parse_subscription(name, configs)
            except ConfigError as exc:
                log.warning("client-metrics resource %r ignored: %s", name, exc)
        if parsed != self._subscriptions:
            self._subscriptions = parsed
            self._version += 1

    # -- requests --------------------------------------------------------------------------

    def get_subscriptions(
        self, instance_id: uuid.UUID, client: ClientInfo
    ) -> tuple[uuid.UUID, Target]:
        """GetTelemetrySubscriptions: the client's instance id (new for the zero UUID) and
        what it must push.

        Raises:
            TelemetryError: THROTTLING_QUOTA_EXCEEDED before the push interval.
        """
        now = self._clock.monotonic_ms()
        self._expire(now)
        if instance_id.int == 0:
            instance_id = self._new_id()
        instance = self._instance(instance_id, client, now)
        last = max(instance.last_get_ms, instance.last_push_ms)
        # A client told its subscription or codec is wrong must learn the right ones at
        # once: Kafka's intent (its condition, written with ``||``, is always true and
        # throttles such a client for a whole interval).
        relearn = instance.last_error in (
            ErrorCode.unknown_subscription_id,
            ErrorCode.unsupported_compression_type,
        )
        if last >= 0 and now - last < instance.target.interval_ms and not relearn:
            raise TelemetryError(
                ErrorCode.throttling_quota_exceeded,
                f"client {instance_id} asked again before its push interval",
            )
        instance.last_get_ms = now
        instance.asked_since_push = True
        instance.last_error = ErrorCode.none
        return instance_id, instance.target

    def push(
        self,
        instance_id: uuid.UUID,
        subscription_id: int,
        terminating: bool,
        compression_type: int,
        payload: bytes,
        client: ClientInfo,
    ) -> None:
        """PushTelemetry: checks the push, then keeps its numbers.

        Raises:
            TelemetryError: with the Kafka code of the refusal.
        """
        now = self._clock.monotonic_ms()
        self._expire(now)
        if instance_id.int == 0 or instance_id.int == 1:  # Kafka's reserved ids
            raise TelemetryError(ErrorCode.invalid_request, "invalid client instance id")
        instance = self._instance(instance_id, client, now)
        try:
            self._check_push(instance, subscription_id, terminating, compression_type, payload)
            if payload:
                self._keep(instance, compression_type, payload)
        except TelemetryError as exc:
            self.refused += 1
            instance.last_error = exc.code
            raise
        finally:
            instance.terminating = instance.terminating or terminating
        instance.last_error = ErrorCode.none
        self.pushes += 1

    def _check_push(
        self,
        instance: _Instance,
        subscription_id: int,
        terminating: bool,
        compression_type: int,
        payload: bytes,
    ) -> None:
        name = instance.instance_id
        if instance.terminating:
            raise TelemetryError(
                ErrorCode.invalid_request, f"client {name} already said it was terminating"
            )
        now = self._clock.monotonic_ms()
        # The first push after a GetTelemetrySubscriptions is accepted whenever it comes
        # (Kafka: lastGet > lastPush; a flag, so two requests in one millisecond count).
        accepted = (
            instance.asked_since_push
            or instance.last_push_ms < 0
            or now - instance.last_push_ms >= instance.target.interval_ms
        )
        if accepted:
            instance.last_push_ms = now
            instance.asked_since_push = False
        elif not terminating:
            raise TelemetryError(
                ErrorCode.throttling_quota_exceeded,
                f"client {name} pushed before its push interval",
            )
        if subscription_id != instance.target.subscription_id:
            raise TelemetryError(
                ErrorCode.unknown_subscription_id, f"unknown subscription id for client {name}"
            )
        if compression_type not in _KNOWN_COMPRESSION:
            raise TelemetryError(
                ErrorCode.unsupported_compression_type,
                f"unknown compression type {compression_type} from client {name}",
            )
        if len(payload) > self.telemetry_max_bytes:
            raise TelemetryError(
                ErrorCode.telemetry_too_large,
                f"push of {len(payload)} bytes from client {name} is larger than "
                f"telemetry.max.bytes ({self.telemetry_max_bytes})",
            )

    def _keep(self, instance: _Instance, compression_type: int, payload: bytes) -> None:
        try:
            raw = decompress(
                compression_type, payload, max_size=MAX_EXPANSION * self.telemetry_max_bytes
            )
            points = parse_metrics_data(raw)
        except (RecordsError, OtlpError) as exc:
            log.warning(
                "client %s (%s) pushed metrics that cannot be read: %s",
                instance.instance_id,
                instance.client.client_id,
                exc,
            )
            raise TelemetryError(ErrorCode.invalid_record, str(exc)) from None
        own = self._own_labels(instance)
        previous = instance.values
        values: dict[tuple[str, tuple[tuple[str, str], ...]], tuple[float, bool]] = {}
        for point in points:
            labels = dict(own)
            for key, text in point.attributes:
                label = _LABEL.sub("_", key)
                if label and label not in labels:
                    labels[label] = text
            series = (metric_name(point.name), tuple(sorted(labels.items())))
            counter = point.kind == "sum" and point.monotonic
            value = point.value
            if point.kind == "sum" and not point.cumulative:
                value += previous.get(series, (0.0, counter))[0]
            values[series] = (value, counter)
        instance.values = values

    # -- export ----------------------------------------------------------------------------

    def series(self) -> Iterator[Series]:
        """The numbers of every live instance's last push.

        Called by the metrics endpoint's thread: it copies the instances under
        ``_instances_lock``, then only reads (an instance's ``values`` is replaced whole by
        each push, never changed in place), and leaves expiry to the event loop, skipping
        instances past it.
        """
        now = self._clock.monotonic_ms()
        with self._instances_lock:
            instances = list(self._instances.values())
        for instance in instances:
            if now - instance.seen_ms > instance.expiry_ms:
                continue
            for (name, labels), (value, counter) in instance.values.items():
                yield Series(name, labels, value, counter)

    @property
    def instances(self) -> int:
        return len(self._instances)

    # -- instances -------------------------------------------------------------------------

    @staticmethod
    def _own_labels(instance: _Instance) -> dict[str, str]:
        client = instance.client
        return {
            "client_id": client.client_id or "",
            "client_instance_id": str(instance.instance_id),
            "client_software_name": client.software_name or "",
            "client_software_version": client.software_version or "",
        }

    def _new_id(self) -> uuid.UUID:
        while True:
            candidate = uuid.uuid4()
            if candidate not in self._instances and candidate.int > 1:
                return candidate

    def _instance(self, instance_id: uuid.UUID, client: ClientInfo, now: int) -> _Instance:
        instance = self._instances.get(instance_id)
        if instance is None or instance.subscription_version < self._version:
            target = target_for(self._subscriptions, instance_id, client)
            if instance is None:
                instance = _Instance(instance_id, client, target, self._version)
            else:
                # Subscriptions changed: a new instance state, as Kafka builds one, so the
                # client's next GetTelemetrySubscriptions is answered at once. The numbers
                # of its last push stay until the next one replaces them.
                instance = _Instance(
                    instance_id, client, target, self._version, values=instance.values
                )
            with self._instances_lock:
                self._instances[instance_id] = instance
                while len(self._instances) > self._max_instances:
                    self._instances.popitem(last=False)
        instance.seen_ms = now
        with self._instances_lock:
            self._instances.move_to_end(instance_id)
        return instance

    def _expire(self, now: int) -> None:
        # Each instance expires after its own interval, so all are looked at (at most
        # MAX_INSTANCES, only on telemetry requests and scrapes).
        with self._instances_lock:
            for instance_id, instance in list(self._instances.items()):
                if now - instance.seen_ms > instance.expiry_ms:
                    del self._instances[instance_id]
