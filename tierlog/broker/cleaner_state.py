"""The read-only broker config ``tierlog.log.cleaner.state``: the log cleaner's state of the
compacted partitions this broker leads, for ``tierlog topics describe``.

Kafka has no API for a log's dirty ratio or last clean (its cleaner reports them only as
metrics and log lines), so tierlog answers them through DescribeConfigs on the broker's
own resource, and only to a client that names the key: a describe of every config leaves
it out, so Kafka's ``kafka-configs --describe`` prints what it prints against Kafka, and a
Kafka broker asked for the key answers nothing, which tools read as "no state".

The value is compact JSON: ``null`` when the cleaner is off (``log.cleaner.enable=false``),
else ``{"<topic>-<partition>": state}`` with ``LogCleaner.describe()``'s state per log::

    {"users-0": {"dirty_ratio": 0.42, "first_dirty_offset": 120, "cleaning": false,
                 "uncleanable": null, "remote_storage": false,
                 "last_clean": {"time_ms": ..., "records_read": 20000,
                                "records_kept": 5000, ...} | null}}
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping

KEY = "tierlog.log.cleaner.state"

TopicPartition = tuple[str, int]
CleanerStates = Mapping[TopicPartition, Mapping[str, object]]


def encode(states: CleanerStates | None, leads: Callable[[str, int], bool]) -> str:
    """The key's value: ``states`` (None: no cleaner) of the partitions ``leads`` accepts."""
    if states is None:
        return "null"
    led = {f"{t}-{p}": dict(state) for (t, p), state in sorted(states.items()) if leads(t, p)}
    return json.dumps(led, separators=(",", ":"), sort_keys=True)


def decode(value: str | None) -> dict[TopicPartition, dict[str, object]] | None:
    """The states in a value ``encode`` wrote (None: the cleaner is off).

    Raises:
        ValueError: not such a value.
    """
    doc = json.loads(value or "")
    if doc is None:
        return None
    if not isinstance(doc, dict):
        raise ValueError(f"{KEY}: a JSON object or null, not {type(doc).__name__}")
    out: dict[TopicPartition, dict[str, object]] = {}
    for name, state in doc.items():
        topic, _, partition = name.rpartition("-")
        if not topic or not partition.isdigit() or not isinstance(state, dict):
            raise ValueError(f"{KEY}: {name!r} is not <topic>-<partition> with a state")
        out[(topic, int(partition))] = state
    return out
