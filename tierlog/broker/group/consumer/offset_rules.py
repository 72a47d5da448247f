"""Which offset commits and fetches a consumer group accepts (KIP-848's member epochs).

Kafka's ``ConsumerGroup.validateOffsetCommit`` / ``validateOffsetFetch`` /
``validateDeleteGroup``:

* A commit with a negative member epoch (the admin client, or a consumer that assigns its
  own partitions) is accepted only while the group has no members.
* Otherwise the member must exist (UNKNOWN_MEMBER_ID) and the epoch must be its current
  member epoch: STALE_MEMBER_EPOCH for a consumer-protocol member, ILLEGAL_GENERATION for
  a classic-protocol one (whose generation is its member epoch).
* A consumer-protocol member must commit with OffsetCommit version 9 or later (the first
  that carries the member epoch); transactional commits (TxnOffsetCommit) are exempt.
* A fetch without member id and with a negative epoch (the admin client) is always
  accepted; a member's fetch is checked like a commit.
* A group is deleted (DeleteGroups) only when it is empty (NON_EMPTY_GROUP).
"""

from __future__ import annotations

from tierlog.broker.group.consumer.errors import (
    IllegalGenerationError,
    NonEmptyGroupError,
    StaleMemberEpochError,
    UnknownMemberIdError,
    UnsupportedVersionError,
)
from tierlog.broker.group.consumer.group import ConsumerGroup
from tierlog.broker.group.consumer.member import ConsumerGroupMember

# OffsetCommit v9 carries the member epoch of KIP-848 members.
MEMBER_EPOCH_COMMIT_VERSION = 9


def _check_epoch(member: ConsumerGroupMember, received: int) -> None:
    if received == member.member_epoch:
        return
    if member.uses_classic_protocol:
        raise IllegalGenerationError(
            f"The received generation id {received} does not match the expected member "
            f"epoch {member.member_epoch}."
        )
    raise StaleMemberEpochError(
        f"The received member epoch {received} does not match the expected member epoch "
        f"{member.member_epoch}."
    )


def _member(group: ConsumerGroup, member_id: str | None) -> ConsumerGroupMember:
    member = group.members.get(member_id or "")
    if member is None:
        raise UnknownMemberIdError(f"Member {member_id} is not a member of group {group.group_id}.")
    return member


def validate_offset_commit(
    group: ConsumerGroup,
    member_id: str,
    member_epoch: int,
    *,
    transactional: bool,
    api_version: int,
) -> None:
    """Raises the error to answer a commit with, or nothing if it may go ahead."""
    if member_epoch < 0 and group.is_empty:
        return
    member = _member(group, member_id)
    if (
        not transactional
        and not member.uses_classic_protocol
        and api_version < MEMBER_EPOCH_COMMIT_VERSION
    ):
        raise UnsupportedVersionError(
            "OffsetCommit version 9 or above must be used by members using the modern "
            "group protocol"
        )
    _check_epoch(member, member_epoch)


def validate_offset_fetch(group: ConsumerGroup, member_id: str | None, member_epoch: int) -> None:
    """Raises the error to answer a fetch with, or nothing if it may go ahead."""
    if member_id is None and member_epoch < 0:
        return
    _check_epoch(_member(group, member_id), member_epoch)


def validate_delete(group: ConsumerGroup) -> None:
    if not group.is_empty:
        raise NonEmptyGroupError(f"The group {group.group_id} is not empty.")
