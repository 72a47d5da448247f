"""Client quotas: byte-rate limits on produce and fetch per user and client id (Kafka's
``ClientQuotaManager``, KIP-13 and KIP-55, throttling as KIP-219 does).

A quota is set on an entity: a client id, a user, or both, each named or ``<default>``
(``kafka-configs --alter --entity-type clients --entity-name app --add-config
producer_byte_rate=1048576``, which sends AlterClientQuotas). Entities are kept as
Kafka's ZooKeeper paths (``clients/app``, ``users/<default>/clients/app``), which is
also how the coordination layers store them. The user is the name of the request's
principal (``tierlog.broker.authorization``: ``ANONYMOUS`` on PLAINTEXT, the
authenticated user otherwise).

Which quota applies is Kafka's order, most specific first: user and client id, user and
default client, user, default user and client id, default user and default client,
default user, client id, default client. Bytes are counted per matched entity: a named
entity's quota is shared by every client it matches, a default one is per client (Kafka's
metric tags).

Enforcement: bytes are counted in ``quota.window.num`` windows of
``quota.window.size.seconds`` (Kafka's sampled ``Rate``: the rate is the bytes in the
live windows over their span, the span never counted as less than all windows but one).
A request that takes the rate over the quota gets ``throttle_time_ms`` = how long the
client must pause for the rate to come back to the quota, at most the whole sample span;
the answer is sent at once with it, and the broker reads nothing more from that
connection until it has passed (Kafka mutes the channel). Produce counts the request's
size, fetch (consumers only, not followers) the records sent.

The same machinery counts two more quotas (Kafka's ``ClientRequestQuotaManager`` and
``ControllerMutationQuotaManager``):

- ``request_percentage``: time spent handling a client's requests, as a percentage of one
  thread (100 = one second per second); every request's handling time is counted, and an
  answer past the quota carries the throttle time, the connection muted as above. Requests
  only brokers send (replica fetches, AlterPartition, WriteTxnMarkers) are exempt, as
  Kafka exempts ClusterAction.
- ``controller_mutation_rate`` (KIP-599): partitions created (CreateTopics,
  CreatePartitions) or deleted (DeleteTopics) per second. Strict (the versions that know
  THROTTLING_QUOTA_EXCEEDED, 89): a topic is refused with it while the rate is over the
  quota, else accepted and counted even if it takes the rate over (Kafka's bursts);
  older versions are always accepted and only throttled.

Pure state and arithmetic, used from the event loop only.
"""

from __future__ import annotations

import asyncio
import contextvars
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from urllib.parse import quote, unquote

from tierlog.util.clock import Clock, SystemClock

PRODUCER_BYTE_RATE = "producer_byte_rate"
CONSUMER_BYTE_RATE = "consumer_byte_rate"
REQUEST_PERCENTAGE = "request_percentage"
CONTROLLER_MUTATION_RATE = "controller_mutation_rate"
QUOTA_KEYS = (PRODUCER_BYTE_RATE, CONSUMER_BYTE_RATE, REQUEST_PERCENTAGE, CONTROLLER_MUTATION_RATE)
USER = "user"
CLIENT_ID = "client-id"
IP = "ip"
DEFAULT = "<default>"
ANONYMOUS = "ANONYMOUS"
_KIND_PATH = {USER: "users", CLIENT_ID: "clients"}

# Entity path -> quota key -> value.
Quotas = Mapping[str, Mapping[str, float]]


class QuotaError(ValueError):
    """An entity or a quota change Kafka would refuse (INVALID_REQUEST)."""


def _name(name: str | None) -> str:
    # Kafka's Sanitizer URL-encodes names in ZooKeeper paths; None is the default entity.
    return DEFAULT if name is None else quote(name, safe="")


def entity_path(components: Mapping[str, str | None]) -> str:
    """``{"user": None, "client-id": "app"}`` -> ``users/<default>/clients/app``.

    Raises:
        QuotaError: an unknown or unsupported entity type, or a combination Kafka refuses.
    """
    kinds = set(components)
    if IP in kinds:
        raise QuotaError("ip quotas (connection_creation_rate) are not supported")
    unknown = kinds - {USER, CLIENT_ID}
    if unknown or not kinds:
        raise QuotaError(f"invalid quota entity types {sorted(unknown) or '(none)'}")
    parts = []
    for kind in (USER, CLIENT_ID):
        if kind in components:
            parts.append(f"{_KIND_PATH[kind]}/{_name(components[kind])}")
    return "/".join(parts)


def entity_components(path: str) -> dict[str, str | None]:
    """The inverse of ``entity_path``."""
    words = path.split("/")
    out: dict[str, str | None] = {}
    kinds = {v: k for k, v in _KIND_PATH.items()}
    for plural, name in zip(words[::2], words[1::2], strict=True):
        out[kinds[plural]] = None if name == DEFAULT else unquote(name)
    return out


def check_value(key: str, value: float) -> None:
    """Raises QuotaError for an unknown key or a value Kafka refuses."""
    if key not in QUOTA_KEYS:
        raise QuotaError(f"unknown quota key {key!r}")
    if key in (REQUEST_PERCENTAGE, CONTROLLER_MUTATION_RATE):
        if not value > 0:
            raise QuotaError(f"{key} must be > 0, got {value}")
        return
    if value <= 0 or value != int(value) or value > 2**63 - 1:
        raise QuotaError(f"{key} must be a whole number of bytes per second > 0, got {value}")


def applicable(
    quotas: Quotas, user: str, client_id: str, key: str
) -> tuple[str, str, float] | None:
    """The quota on ``key`` for ``user``/``client_id``, as (user tag, client tag, bound):
    the tags say whose bytes are counted together (see the module docstring); None when
    no entity sets ``key``."""
    u, c = _name(user), _name(client_id)
    d = DEFAULT
    for path, tags in (
        (f"users/{u}/clients/{c}", (user, client_id)),
        (f"users/{u}/clients/{d}", (user, client_id)),
        (f"users/{u}", (user, "")),
        (f"users/{d}/clients/{c}", (user, client_id)),
        (f"users/{d}/clients/{d}", (user, client_id)),
        (f"users/{d}", (user, "")),
        (f"clients/{c}", ("", client_id)),
        (f"clients/{d}", ("", client_id)),
    ):
        values = quotas.get(path)
        if values is not None and key in values:
            return tags[0], tags[1], float(values[key])
    return None


@dataclass
class SampledRate:
    """Bytes per second over ``samples`` windows of ``window_ms`` (Kafka's ``Rate`` with
    ``SampledStat``)."""

    samples: int
    window_ms: int
    _windows: list[list[float]] = field(default_factory=list)  # [start_ms, bytes]

    def record(self, amount: float, now_ms: float) -> None:
        self._purge(now_ms)
        if not self._windows or now_ms >= self._windows[-1][0] + self.window_ms:
            self._windows.append([now_ms, 0.0])
        self._windows[-1][1] += amount

    def _purge(self, now_ms: float) -> None:
        horizon = now_ms - self.samples * self.window_ms
        while self._windows and self._windows[0][0] + self.window_ms <= horizon:
            self._windows.pop(0)
        del self._windows[: max(0, len(self._windows) - self.samples)]

    def window_size_ms(self, now_ms: float) -> float:
        """The span the rate is measured over (never less than ``samples - 1`` windows)."""
        self._purge(now_ms)
        elapsed = now_ms - self._windows[0][0] if self._windows else 0.0
        least = (self.samples - 1) * self.window_ms
        return max(elapsed, least)

    def rate(self, now_ms: float) -> float:
        span = self.window_size_ms(now_ms)
        return sum(b for _, b in self._windows) / (span / 1000) if span > 0 else 0.0


@dataclass
class QuotaStats:
    """For the metrics endpoint: throttled requests and the time they were told to wait."""

    throttled: dict[str, int] = field(
        default_factory=lambda: {"Produce": 0, "Fetch": 0, "Request": 0, "ControllerMutation": 0}
    )
    throttle_ms: dict[str, int] = field(
        default_factory=lambda: {"Produce": 0, "Fetch": 0, "Request": 0, "ControllerMutation": 0}
    )


class _ConnectionThrottle:
    """When the connection this request came on may be read again (the quota clock's
    monotonic milliseconds)."""

    __slots__ = ("until_ms",)

    def __init__(self) -> None:
        self.until_ms = 0


# One per connection: set in the connection task's context at its first request.
_CONNECTION: contextvars.ContextVar[_ConnectionThrottle] = contextvars.ContextVar(
    "tierlog_connection_throttle"
)


class ClientQuotaManager:
    """Counts produce and fetch bytes against the quotas in force and says how long a
    client must wait.

    Args:
        quotas: the quotas in force (the coordination metadata's), read at each request.
        samples, window_ms: ``quota.window.num`` and ``quota.window.size.seconds``.
        clock: monotonic time for the rates and the connections' throttles (tests pass a
            manual one).
    """

    def __init__(
        self,
        quotas: Callable[[], Quotas],
        *,
        samples: int = 11,
        window_ms: int = 1000,
        clock: Clock | None = None,
    ) -> None:
        self._quotas = quotas
        self.samples = samples
        self.window_ms = window_ms
        self._clock: Clock = clock or SystemClock()
        self._rates: dict[tuple[str, str, str], SampledRate] = {}
        self.stats = QuotaStats()

    def record(self, key: str, client_id: str | None, amount: float, user: str = ANONYMOUS) -> int:
        """Count ``amount`` against quota ``key`` of ``user``/``client_id``: bytes of a
        produce (``producer_byte_rate``) or fetch (``consumer_byte_rate``), percent-seconds
        of handling (``request_percentage``), partitions (``controller_mutation_rate``);
        returns the throttle time in ms (0 when within its quota or when none applies)."""
        found = self._rate(key, user, client_id)
        if found is None:
            return 0
        rate, bound = found
        now = self._clock.monotonic_ms()
        rate.record(amount, now)
        return self._throttle_ms(rate, bound, now)

    def _rate(self, key: str, user: str, client_id: str | None) -> tuple[SampledRate, float] | None:
        quotas = self._quotas()
        if not quotas:
            return None
        found = applicable(quotas, user, client_id or "", key)
        if found is None:
            return None
        user_tag, client_tag, bound = found
        rate = self._rates.get((key, user_tag, client_tag))
        if rate is None:
            rate = self._rates[(key, user_tag, client_tag)] = SampledRate(
                self.samples, self.window_ms
            )
        return rate, bound

    def record_request_time(self, seconds: float, client_id: str | None, user: str) -> int:
        """``request_percentage``: one request's handling time; the throttle time in ms."""
        return self.record(REQUEST_PERCENTAGE, client_id, seconds * 100, user)

    def admit_mutation(
        self, partitions: int, client_id: str | None, user: str, *, strict: bool
    ) -> tuple[bool, int]:
        """``controller_mutation_rate`` (KIP-599) for one topic's ``partitions``: whether
        it is accepted (a strict request is refused while the rate is over the quota;
        otherwise it is counted) and the throttle time in ms."""
        found = self._rate(CONTROLLER_MUTATION_RATE, user, client_id)
        if found is None:
            return True, 0
        rate, bound = found
        now = self._clock.monotonic_ms()
        if strict and rate.rate(now) > bound:
            return False, self._throttle_ms(rate, bound, now)
        rate.record(partitions, now)
        return True, self._throttle_ms(rate, bound, now)

    def _throttle_ms(self, rate: SampledRate, bound: float, now: float) -> int:
        observed = rate.rate(now)
        if observed <= bound:
            return 0
        span = rate.window_size_ms(now)
        # How long without more bytes until the rate is back at the bound (Kafka's
        # QuotaUtils.throttleTime), at most the whole sample span.
        throttle = (observed - bound) / bound * span
        return int(min(throttle, self.samples * self.window_ms))

    def throttle(self, api: str, throttle_ms: int) -> None:
        """Tell the connection this request came on to wait ``throttle_ms`` before its
        next request is read (call from the request's handler)."""
        if throttle_ms <= 0:
            return
        self.stats.throttled[api] = self.stats.throttled.get(api, 0) + 1
        self.stats.throttle_ms[api] = self.stats.throttle_ms.get(api, 0) + throttle_ms
        state = _CONNECTION.get(None)
        if state is None:
            state = _ConnectionThrottle()
            _CONNECTION.set(state)
        state.until_ms = max(state.until_ms, self._clock.monotonic_ms() + throttle_ms)

    def active(self) -> bool:
        """Whether any quota is in force (most brokers have none: nothing to count)."""
        return bool(self._quotas())

    def throttled_for_ms(self) -> float:
        """How long the current connection must still wait (0 when not throttled): checked
        without a coroutine, as every request asks."""
        state = _CONNECTION.get(None)
        if state is None or not state.until_ms:
            return 0
        return max(0, state.until_ms - self._clock.monotonic_ms())

    async def wait_if_throttled(self) -> None:
        """At the start of a request: wait out the connection's throttle (KIP-219's muted
        channel: the request is not handled before the throttle time has passed)."""
        rest_ms = self.throttled_for_ms()
        if rest_ms > 0:
            await asyncio.sleep(rest_ms / 1000)
