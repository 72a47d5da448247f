"""The errors of the consumer group protocol (KIP-848), each carrying its Kafka error code.

A request the coordinator refuses raises one of these; the handler answers with
``error.code`` and ``str(error)`` as the error message, exactly as Kafka's
``ApiError.fromThrowable`` does. No map from exception to code is needed anywhere else:
the code travels with the exception, at the bottom of the stack.

``ReplayError`` is different: it means a record read back from ``__consumer_offsets``
contradicts the state built so far (a partition owned twice, a member deleted while it
still holds partitions). It is a bug or a damaged log, never a client's error.
"""

from __future__ import annotations

from tierlog.protocol.errors import ErrorCode


class ConsumerGroupError(Exception):
    """A refused request; ``code`` is the Kafka error code to answer with."""

    code: ErrorCode = ErrorCode.unknown_server_error


class InvalidRequestError(ConsumerGroupError):
    """INVALID_REQUEST (42): a field is missing, empty or out of range."""

    code = ErrorCode.invalid_request


class UnsupportedAssignorError(ConsumerGroupError):
    """UNSUPPORTED_ASSIGNOR (112): ``ServerAssignor`` names no configured assignor."""

    code = ErrorCode.unsupported_assignor


class FencedMemberEpochError(ConsumerGroupError):
    """FENCED_MEMBER_EPOCH (110): the member's epoch is not one the coordinator accepts; the
    member must give up its partitions and rejoin with epoch 0."""

    code = ErrorCode.fenced_member_epoch


class StaleMemberEpochError(ConsumerGroupError):
    """STALE_MEMBER_EPOCH (113): an offset commit or fetch carries an old member epoch."""

    code = ErrorCode.stale_member_epoch


class UnreleasedInstanceIdError(ConsumerGroupError):
    """UNRELEASED_INSTANCE_ID (111): a static member joins with an instance id another
    member still holds (that member has not left with epoch -2)."""

    code = ErrorCode.unreleased_instance_id


class FencedInstanceIdError(ConsumerGroupError):
    """FENCED_INSTANCE_ID (82): the instance id now belongs to another member id."""

    code = ErrorCode.fenced_instance_id


class UnknownMemberIdError(ConsumerGroupError):
    """UNKNOWN_MEMBER_ID (25): no such member (or static instance) in the group."""

    code = ErrorCode.unknown_member_id


class GroupIdNotFoundError(ConsumerGroupError):
    """GROUP_ID_NOT_FOUND (69): no consumer group of that id, or a classic group that may
    not be converted."""

    code = ErrorCode.group_id_not_found


class GroupMaxSizeReachedError(ConsumerGroupError):
    """GROUP_MAX_SIZE_REACHED (81): ``group.consumer.max.size`` members already."""

    code = ErrorCode.group_max_size_reached


class InvalidRegularExpressionError(ConsumerGroupError):
    """INVALID_REGULAR_EXPRESSION (128): ``SubscribedTopicRegex`` does not compile."""

    code = ErrorCode.invalid_regular_expression


class UnsupportedVersionError(ConsumerGroupError):
    """UNSUPPORTED_VERSION (35): a consumer-protocol member commits offsets with an
    OffsetCommit version older than 9 (it cannot carry the member epoch)."""

    code = ErrorCode.unsupported_version


class IllegalGenerationError(ConsumerGroupError):
    """ILLEGAL_GENERATION (22): a classic-protocol member of a consumer group commits with
    a generation other than its member epoch."""

    code = ErrorCode.illegal_generation


class NonEmptyGroupError(ConsumerGroupError):
    """NON_EMPTY_GROUP (68): the group still has members (DeleteGroups)."""

    code = ErrorCode.non_empty_group


class InconsistentGroupProtocolError(ConsumerGroupError):
    """INCONSISTENT_GROUP_PROTOCOL (23): a classic member's JoinGroup or SyncGroup names a
    protocol type or protocol the consumer group's classic members do not share."""

    code = ErrorCode.inconsistent_group_protocol


class RebalanceInProgressError(ConsumerGroupError):
    """REBALANCE_IN_PROGRESS (27): a classic member must send JoinGroup again to catch up
    with the group epoch."""

    code = ErrorCode.rebalance_in_progress


class AssignorError(ConsumerGroupError):
    """UNKNOWN_SERVER_ERROR (-1): the assignor could not compute a target assignment.
    Kafka answers the heartbeat that triggered the computation this way."""

    code = ErrorCode.unknown_server_error


class ReplayError(ValueError):
    """A record contradicts the state replayed so far (a bug or a damaged log)."""
