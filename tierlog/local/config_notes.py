"""How tierlog's topic keys relate to Kafka's, for the config reference
(docs/configuration.md); an empty note means Kafka's key with Kafka's meaning. Topic keys
change at run time through AlterConfigs, as in Kafka."""

from __future__ import annotations

from tierlog.util.configdef import KafkaNotes

TOPIC_NOTES: dict[str, KafkaNotes] = {
    "compression.lz4.level": KafkaNotes(
        kafka="Kafka's lz4-java takes 1-17; liblz4 compresses at most at 12, so 13-17 act as 12"
    ),
    "remote.storage.enable": KafkaNotes(
        kafka="also with cleanup.policy=compact, which Kafka refuses (KIP-1272; docs/compaction.md)"
    ),
    "segment.index.bytes": KafkaNotes(kafka="indexes are memory-mapped at this size, as Kafka's"),
}
