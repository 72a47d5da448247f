"""The ``tierlog`` data source's options, parsed and checked without Spark (sans-I/O).

Names follow Spark's Kafka source where they apply (``kafka.bootstrap.servers``,
``subscribe`` / ``subscribePattern`` / ``assign``, ``startingOffsets`` / ``endingOffsets``,
``startingTimestamp``, ``startingOffsetsByTimestamp``, ``endingTimestamp``,
``endingOffsetsByTimestamp``, ``startingOffsetsByTimestampStrategy``,
``maxOffsetsPerTrigger``, ``failOnDataLoss``, ``includeHeaders``, ``kafka.isolation.level``),
with the same values:
offsets JSON is ``{"topic": {"0": 23, "1": -2}}`` with -2 = earliest and -1 = latest.
``failOnDataLoss`` is about offsets below the log start (retention); a compacted topic's
offset gaps are not data loss, and ``maxOffsetsPerTrigger`` counts offsets, so over a gap a
micro-batch holds fewer rows (both as in Spark's Kafka source).
PySpark hands Python data sources their option names lower-cased, so lookups here are
case-insensitive.

``kafka.isolation.level`` (KIP-98) is ``read_uncommitted`` (the default, as in Kafka) or
``read_committed``: records of aborted transactions are dropped — by the leader's answer on
leader splits, which end at the last stable offset, and by each remote segment's uploaded
``.txnindex`` on remote splits (an abort whose marker is not remote yet is asked of the
leader). With ``tierlog.tiers=remote`` there is no leader: reads end at the remote tier's
own last stable offset, the first offset of a transaction still open at the end of the
last remote segment (from the producer snapshot uploaded with it, ``remote_lso``), so a
transaction shows, committed, only once its marker is remote. Transaction markers are never
rows, whatever the level.

tierlog's own options:

* ``remote.log.storage.url`` and ``remote.log.storage.options.*``: the broker's keys for the
  remote tier (copy them from server.properties). With them, closed remote segments are
  read straight from object storage; without them everything is fetched from the leader.
  ``remote.log.storage.options`` takes them as one JSON object instead, whose names keep
  their case and whose strings stay strings (``tierlog.remote.storage_options``).
* ``tierlog.tiers``: ``all`` (default) or ``remote`` — only committed remote segments,
  no broker needed (``kafka.bootstrap.servers`` optional): replays of long retention.
* ``tierlog.includeTier``: add a string column ``tier`` ("remote" or "local") saying where
  each row was read from.
* ``includeHeaders``: the ``headers`` column, off by default as in Spark's Kafka source.
  Python data sources get no column pruning, so a column is built (and converted by the
  JVM) even when the query never reads it: headers cost real time when unused.
* ``tierlog.leaderSplitOffsets``: the most offsets one Spark partition fetches from a
  leader (default 1,000,000); remote reads are one Spark partition per segment.

Security, as Spark's Kafka source takes it: ``kafka.security.protocol``, ``kafka.ssl.*``
and ``kafka.sasl.*`` are Kafka's client keys with the ``kafka.`` prefix (e.g.
``kafka.sasl.jaas.config``, ``kafka.ssl.truststore.location``), read by
``tierlog.security.client_config`` and used for every connection to the brokers, on the
driver (planning) and on the executors (leader reads, read_committed lookups). A key it
cannot honour is refused by name. They are secrets: ``SourceOptions`` never shows them.
The remote tier's direct reads use the object store's own credentials
(``remote.log.storage.options.*``), not these.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from tierlog.remote.storage_options import (
    REMOTE_OPTIONS_JSON,
    REMOTE_OPTIONS_PREFIX,
    remote_options,
)
from tierlog.security.client_config import ClientSecurity
from tierlog.util.configdef import ConfigError

EARLIEST = -2
LATEST = -1
ISOLATION_LEVELS = ("read_uncommitted", "read_committed")
DEFAULT_LEADER_SPLIT_OFFSETS = 1_000_000


@dataclass(frozen=True)
class OffsetBound:
    """Where a read starts or ends: ``earliest``/``latest`` for every partition, explicit
    offsets per partition, or a timestamp (all partitions or per partition).

    Exactly one of the fields is used: ``kind`` is "earliest", "latest", "offsets",
    "timestamp" or "timestamps".
    """

    kind: str
    offsets: Mapping[tuple[str, int], int] = field(default_factory=dict)
    timestamp: int = -1


@dataclass(frozen=True)
class SourceOptions:
    bootstrap_servers: str | None
    subscribe: tuple[str, ...] = ()
    subscribe_pattern: str | None = None
    assign: tuple[tuple[str, int], ...] = ()
    starting: OffsetBound = OffsetBound("earliest")
    ending: OffsetBound = OffsetBound("latest")
    timestamp_strategy: str = "error"
    max_offsets_per_trigger: int | None = None
    fail_on_data_loss: bool = True
    include_headers: bool = False
    include_tier: bool = False
    remote_only: bool = False
    remote_url: str | None = None
    storage_options: dict[str, Any] = field(default_factory=dict)
    leader_split_offsets: int = DEFAULT_LEADER_SPLIT_OFFSETS
    read_committed: bool = False
    # Kafka's client security keys (``kafka.`` stripped), secrets included: never shown.
    kafka_security: tuple[tuple[str, str], ...] = field(default=(), repr=False)

    def client_security(self) -> ClientSecurity | None:
        """The brokers' TLS and SASL settings (None: PLAINTEXT); a fresh one per call, as
        each executor opens its own connections (an SSL context does not pickle)."""
        if not self.kafka_security:
            return None
        return ClientSecurity.from_config(dict(self.kafka_security))

    def topic_matches(self, topic: str) -> bool:
        """Whether a discovered topic is subscribed (``subscribePattern``: full match)."""
        if self.subscribe_pattern is not None:
            return re.fullmatch(self.subscribe_pattern, topic) is not None
        return topic in self.subscribe


_KNOWN = {
    "kafka.bootstrap.servers",
    "subscribe",
    "subscribepattern",
    "assign",
    "startingoffsets",
    "endingoffsets",
    "startingtimestamp",
    "endingtimestamp",
    "startingoffsetsbytimestamp",
    "endingoffsetsbytimestamp",
    "startingoffsetsbytimestampstrategy",
    "maxoffsetspertrigger",
    "failondataloss",
    "includeheaders",
    "remote.log.storage.url",
    REMOTE_OPTIONS_JSON,
    "tierlog.tiers",
    "tierlog.includetier",
    "tierlog.leadersplitoffsets",
    # Accepted for compatibility with Spark's Kafka source; they tune its Kafka consumer
    # and have no meaning here.
    "minpartitions",
    "kafkaconsumer.polltimeoutms",
    "fetchoffset.numretries",
    "fetchoffset.retryintervalms",
    "groupidprefix",
}


def parse(raw: Mapping[str, str], *, streaming: bool = False) -> SourceOptions:
    """Options of one ``spark.read``/``readStream`` call.

    Raises:
        ConfigError: an unknown option, a bad value, or a missing/conflicting subscription;
            the message names the option.
    """
    opts = {str(k).lower(): str(v) for k, v in raw.items()}
    for key in opts:
        if key in _KNOWN or key.startswith((REMOTE_OPTIONS_PREFIX, "kafka.")):
            continue  # kafka.* are consumer settings in Spark's source; only servers matter
        raise ConfigError(key, "unknown option of the tierlog data source")
    remote_only = _choice(opts, "tierlog.tiers", ("all", "remote"), "all") == "remote"
    bootstrap = opts.get("kafka.bootstrap.servers") or None
    if bootstrap is None and not remote_only:
        raise ConfigError(
            "kafka.bootstrap.servers", "required (or tierlog.tiers=remote to read only storage)"
        )
    remote_url = opts.get("remote.log.storage.url") or None
    if remote_only and remote_url is None:
        raise ConfigError("remote.log.storage.url", "required with tierlog.tiers=remote")
    subscribe, pattern, assign = _subscription(opts)
    starting = _bound(opts, "starting", default="latest" if streaming else "earliest")
    if streaming and any(k.startswith("ending") for k in opts):
        ending_key = next(k for k in opts if k.startswith("ending"))
        raise ConfigError(ending_key, "not allowed in streaming queries")
    ending = OffsetBound("latest") if streaming else _bound(opts, "ending", default="latest")
    if ending.kind == "earliest":
        raise ConfigError("endingOffsets", "cannot be earliest")
    if ending.kind == "offsets" and any(v == EARLIEST for v in ending.offsets.values()):
        raise ConfigError("endingOffsets", "-2 (earliest) is not allowed as an ending offset")
    max_per_trigger = _int(opts, "maxoffsetspertrigger", None, minimum=1)
    isolation = _choice(opts, "kafka.isolation.level", ISOLATION_LEVELS, "read_uncommitted")
    return SourceOptions(
        bootstrap_servers=bootstrap,
        subscribe=subscribe,
        subscribe_pattern=pattern,
        assign=assign,
        starting=starting,
        ending=ending,
        timestamp_strategy=_choice(
            opts, "startingoffsetsbytimestampstrategy", ("error", "latest"), "error"
        ),
        max_offsets_per_trigger=max_per_trigger,
        fail_on_data_loss=_bool(opts, "failondataloss", True),
        include_headers=_bool(opts, "includeheaders", False),
        include_tier=_bool(opts, "tierlog.includetier", False),
        remote_only=remote_only,
        remote_url=remote_url,
        storage_options=remote_options(opts),
        leader_split_offsets=_int(
            opts, "tierlog.leadersplitoffsets", DEFAULT_LEADER_SPLIT_OFFSETS, minimum=1
        )
        or DEFAULT_LEADER_SPLIT_OFFSETS,
        read_committed=isolation == "read_committed",
        kafka_security=kafka_security(opts),
    )


SECURITY_PREFIXES = ("kafka.security.protocol", "kafka.ssl.", "kafka.sasl.")


def kafka_security(opts: Mapping[str, str]) -> tuple[tuple[str, str], ...]:
    """The ``kafka.security.protocol``, ``kafka.ssl.*`` and ``kafka.sasl.*`` options, prefix
    stripped, checked now (on the driver) so a mistake fails the query before any task.

    Raises:
        ConfigError: naming the option (``kafka.<key>``); never its value.
    """
    settings = {
        key[len("kafka.") :]: value
        for key, value in opts.items()
        if key.lower().startswith(SECURITY_PREFIXES)
    }
    if not settings:
        return ()
    try:
        ClientSecurity.from_config(settings)
    except ConfigError as exc:
        raise ConfigError(f"kafka.{exc.key}", exc.reason) from None
    return tuple(sorted(settings.items()))


def _subscription(
    opts: Mapping[str, str],
) -> tuple[tuple[str, ...], str | None, tuple[tuple[str, int], ...]]:
    given = [k for k in ("subscribe", "subscribepattern", "assign") if opts.get(k)]
    if len(given) != 1:
        raise ConfigError(
            "subscribe",
            "exactly one of subscribe, subscribePattern or assign is required"
            + (f" (got {', '.join(given)})" if given else ""),
        )
    key = given[0]
    if key == "subscribe":
        topics = tuple(t.strip() for t in opts[key].split(",") if t.strip())
        if not topics:
            raise ConfigError("subscribe", "no topic given")
        return topics, None, ()
    if key == "subscribepattern":
        try:
            re.compile(opts[key])
        except re.error as exc:
            raise ConfigError("subscribePattern", f"not a regular expression: {exc}") from None
        return (), opts[key], ()
    doc = _json(opts, "assign")
    pairs: list[tuple[str, int]] = []
    if not isinstance(doc, dict) or not doc:
        raise ConfigError("assign", 'expected JSON like {"topic": [0, 1]}')
    for topic, parts in doc.items():
        if not isinstance(parts, list) or not all(
            isinstance(p, int) and not isinstance(p, bool) and p >= 0 for p in parts
        ):
            raise ConfigError("assign", f"partitions of {topic!r} must be a list of ints >= 0")
        pairs.extend((str(topic), p) for p in parts)
    return (), None, tuple(sorted(set(pairs)))


def _bound(opts: Mapping[str, str], side: str, *, default: str) -> OffsetBound:
    offsets_key, ts_key, by_ts_key = (
        f"{side}offsets",
        f"{side}timestamp",
        f"{side}offsetsbytimestamp",
    )
    present = [k for k in (by_ts_key, ts_key, offsets_key) if opts.get(k)]
    # Spark's precedence: per-partition timestamps, then a global timestamp, then offsets.
    if not present:
        return OffsetBound(default)
    key = present[0]
    if key == ts_key:
        return OffsetBound("timestamp", timestamp=_int(opts, ts_key, None, minimum=0) or 0)
    if key == by_ts_key:
        return OffsetBound("timestamps", offsets=_per_partition(opts, by_ts_key, minimum=0))
    text = opts[offsets_key].strip()
    if text.lower() in ("earliest", "latest"):
        return OffsetBound(text.lower())
    return OffsetBound("offsets", offsets=_per_partition(opts, offsets_key, minimum=EARLIEST))


def _per_partition(
    opts: Mapping[str, str], key: str, *, minimum: int
) -> dict[tuple[str, int], int]:
    doc = _json(opts, key)
    shape = 'expected "earliest", "latest" or JSON like {"topic": {"0": 23}}'
    if not isinstance(doc, dict):
        raise ConfigError(key, shape)
    out: dict[tuple[str, int], int] = {}
    for topic, parts in doc.items():
        if not isinstance(parts, dict):
            raise ConfigError(key, shape)
        for partition, value in parts.items():
            if not str(partition).isdigit():
                raise ConfigError(key, f"partition {partition!r} of {topic!r} is not a number")
            if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
                raise ConfigError(
                    key, f"{topic}-{partition}: {value!r} is not an offset >= {minimum}"
                )
            out[str(topic), int(partition)] = value
    return out


def _json(opts: Mapping[str, str], key: str) -> Any:
    try:
        return json.loads(opts[key])
    except ValueError as exc:
        raise ConfigError(key, f"not valid JSON: {exc}") from None


def _int(opts: Mapping[str, str], key: str, default: int | None, *, minimum: int) -> int | None:
    text = opts.get(key)
    if text is None or text.strip() == "":
        return default
    try:
        value = int(text.strip())
    except ValueError:
        raise ConfigError(key, f"{text!r} is not an integer") from None
    if value < minimum:
        raise ConfigError(key, f"{value} is below {minimum}")
    return value


def _bool(opts: Mapping[str, str], key: str, default: bool) -> bool:
    text = opts.get(key)
    if text is None:
        return default
    if text.strip().lower() not in ("true", "false"):
        raise ConfigError(key, f"{text!r} is not true or false")
    return text.strip().lower() == "true"


def _choice(opts: Mapping[str, str], key: str, allowed: tuple[str, ...], default: str) -> str:
    value = opts.get(key, default).strip().lower()
    if value not in allowed:
        raise ConfigError(key, f"{value!r} is not one of {', '.join(allowed)}")
    return value
