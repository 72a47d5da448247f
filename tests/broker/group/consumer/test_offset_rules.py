"""Tests for offset commits and fetches with member epochs
(tierlog.broker.group.consumer.offset_rules, through ConsumerGroupProtocol)."""

from __future__ import annotations

import pytest

from tierlog.broker.group.consumer.errors import (
    GroupIdNotFoundError,
    IllegalGenerationError,
    NonEmptyGroupError,
    StaleMemberEpochError,
    UnknownMemberIdError,
    UnsupportedVersionError,
)
from tierlog.broker.group.consumer.offset_rules import validate_delete
from tierlog.protocol.errors import ErrorCode

from .helpers import GROUP, Harness


def joined() -> Harness:
    harness = Harness()
    harness.join("a")
    return harness


def test_a_member_commits_with_its_current_epoch() -> None:
    harness = joined()
    harness.protocol.validate_offset_commit(GROUP, "a", 1, transactional=False, api_version=9)


def test_an_old_epoch_is_stale() -> None:
    harness = joined()
    with pytest.raises(StaleMemberEpochError) as raised:
        harness.protocol.validate_offset_commit(GROUP, "a", 0, transactional=False, api_version=9)
    assert raised.value.code == ErrorCode.stale_member_epoch
    with pytest.raises(StaleMemberEpochError):
        harness.protocol.validate_offset_fetch(GROUP, "a", 2)


def test_consumer_members_need_offset_commit_version_9_unless_transactional() -> None:
    harness = joined()
    with pytest.raises(UnsupportedVersionError, match="version 9 or above") as raised:
        harness.protocol.validate_offset_commit(GROUP, "a", 1, transactional=False, api_version=8)
    assert raised.value.code == ErrorCode.unsupported_version
    harness.protocol.validate_offset_commit(GROUP, "a", 1, transactional=True, api_version=3)


def test_the_admin_client_commits_only_to_an_empty_group_but_always_fetches() -> None:
    harness = joined()
    harness.protocol.validate_offset_fetch(GROUP, None, -1)
    with pytest.raises(UnknownMemberIdError):
        harness.protocol.validate_offset_commit(GROUP, "", -1, transactional=False, api_version=9)
    harness.heartbeat(member_id="a", member_epoch=-1)
    harness.protocol.validate_offset_commit(GROUP, "", -1, transactional=False, api_version=9)


def test_unknown_members_and_groups() -> None:
    harness = joined()
    with pytest.raises(UnknownMemberIdError):
        harness.protocol.validate_offset_fetch(GROUP, "zz", 1)
    with pytest.raises(GroupIdNotFoundError):
        harness.protocol.validate_offset_commit("other", "a", 1, transactional=False, api_version=9)


def test_classic_protocol_members_get_illegal_generation() -> None:
    from tierlog.broker.group.consumer.member import ClassicMemberMetadata
    from tierlog.broker.group.consumer.offset_rules import validate_offset_commit

    harness = joined()
    group = harness.group.copy()
    group.members["a"] = group.members["a"].__class__(
        "a", classic_metadata=ClassicMemberMetadata(10_000, ()), member_epoch=3
    )
    validate_offset_commit(group, "a", 3, transactional=False, api_version=2)
    with pytest.raises(IllegalGenerationError) as raised:
        validate_offset_commit(group, "a", 2, transactional=False, api_version=2)
    assert raised.value.code == ErrorCode.illegal_generation


def test_only_an_empty_group_is_deleted() -> None:
    harness = joined()
    with pytest.raises(NonEmptyGroupError):
        validate_delete(harness.group)
    harness.heartbeat(member_id="a", member_epoch=-1)
    validate_delete(harness.group)
