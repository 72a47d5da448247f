"""``TopicError``: a topic or partition operation refused, with the Kafka error code to
answer; and the codes the replica manager and the replica assignment answer, by their
protocol names."""

from __future__ import annotations

from tierlog.protocol.errors import ErrorCode


class TopicError(Exception):
    """A topic operation refused; ``code`` is the Kafka error code to answer with."""

    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code = code


UNKNOWN_TOPIC_OR_PARTITION = ErrorCode.unknown_topic_or_partition
NOT_LEADER_OR_FOLLOWER = ErrorCode.not_leader_or_follower
INVALID_TOPIC_EXCEPTION = ErrorCode.invalid_topic_exception
TOPIC_ALREADY_EXISTS = ErrorCode.topic_already_exists
INVALID_PARTITIONS = ErrorCode.invalid_partitions
INVALID_REPLICATION_FACTOR = ErrorCode.invalid_replication_factor
INVALID_REPLICA_ASSIGNMENT = ErrorCode.invalid_replica_assignment
INVALID_CONFIG = ErrorCode.invalid_config
