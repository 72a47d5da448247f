"""The compression keys, as topic and broker configs share them: ``compression.type``'s
values and the KIP-390 levels ``compression.<codec>.level``, with Kafka 4.x's ranges and
defaults (``codecs.LEVELS``), and how a topic's values become the codec its batches are
stored in (``target_compression``).

Kafka names the keys alike at both levels: the broker's ``compression.type`` and
``compression.<codec>.level`` are the defaults of the topic keys of the same names.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from tierlog.records.codecs import LEVELS
from tierlog.records.header import Compression
from tierlog.records.recompress import TargetCompression
from tierlog.util.configdef import ConfigKey

# Kafka's BrokerCompressionType names; "producer" keeps the producer's codec.
COMPRESSION_TYPES = ("uncompressed", "gzip", "snappy", "lz4", "zstd", "producer")
_CODECS = {
    "uncompressed": Compression.NONE,
    "gzip": Compression.GZIP,
    "snappy": Compression.SNAPPY,
    "lz4": Compression.LZ4,
    "zstd": Compression.ZSTD,
}
# The codecs with levels (KIP-390); snappy has none.
LEVELLED = ("gzip", "lz4", "zstd")


@dataclass(frozen=True)
class LevelCheck:
    """A level in the codec's range, or its ``default`` (gzip's -1 lies outside 1-9)."""

    codec: str

    def __call__(self, value: Any) -> str | None:
        low, high, default = LEVELS[_CODECS[self.codec]]
        if low <= value <= high or value == default:
            return None
        return f"{self.codec} levels are {self.describe()}, got {value}"

    def describe(self) -> str:
        low, high, default = LEVELS[_CODECS[self.codec]]
        inside = low <= default <= high
        return f"[{low}, {high}]" + ("" if inside else f" or {default}")


def level_keys(*, broker: bool = False) -> list[ConfigKey]:
    """``compression.<codec>.level`` for each levelled codec, with Kafka's defaults; the
    broker's keys are documented as the topic keys' defaults."""
    return [
        ConfigKey(
            f"compression.{codec}.level",
            "int",
            LEVELS[_CODECS[codec]].default,
            f"-> compression.{codec}.level"
            if broker
            else f"level of {codec} when it is compression.type (KIP-390)",
            LevelCheck(codec),
        )
        for codec in LEVELLED
    ]


def target_compression(
    compression_type: str, levels: Mapping[str, int]
) -> TargetCompression | None:
    """What batches are stored in: None for ``producer``, else the codec and its level
    from ``levels`` (codec name -> level; a codec without levels takes none)."""
    if compression_type == "producer":
        return None
    return TargetCompression(_CODECS[compression_type], levels.get(compression_type))
