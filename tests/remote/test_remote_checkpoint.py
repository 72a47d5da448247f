"""remote_checkpoint: the local witness of how far the remote tier reached, and what it
lost (pure functions)."""

from __future__ import annotations

import dataclasses

import pytest

from tests.remote.test_manifest import manifest, seg
from tierlog.local.checkpoint import CorruptCheckpointError
from tierlog.remote import remote_checkpoint as rc

EMPTY = rc.RemoteCheckpoint()


def test_uploads_move_it_forward() -> None:
    cp = rc.observe(EMPTY, manifest(seg(0, 99), seg(100, 199)))
    assert cp == rc.RemoteCheckpoint(0, 200, rc.NO_LOSS)
    cp = rc.observe(cp, manifest(seg(0, 99), seg(100, 199), seg(200, 299)))
    assert cp.remote_end == 300 and not cp.has_loss


def test_retention_removing_everything_is_not_a_loss() -> None:
    cp = rc.observe(EMPTY, manifest(seg(0, 99), seg(100, 199)))
    # Retention deleted both segments and moved the remote log start past them.
    cp = rc.observe(cp, manifest(log_start_offset=200))
    assert not cp.has_loss and cp.log_start == 200 and cp.remote_end == 200


def test_an_emptied_bucket_is_a_loss_until_the_data_is_back() -> None:
    full = manifest(seg(0, 99), seg(100, 199), log_start_offset=0)
    cp = rc.observe(EMPTY, full)
    emptied = manifest(version=0)
    lost = rc.observe(cp, emptied)
    assert lost.lost == (0, 200) and lost.remote_end == 200
    # New uploads above the loss do not make it go away...
    later = rc.observe(lost, manifest(seg(200, 299)))
    assert later.lost == (0, 200) and later.remote_end == 300
    # ...a restored copy does.
    restored = rc.observe(later, manifest(seg(0, 99), seg(100, 199), seg(200, 299)))
    assert not restored.has_loss


def test_segments_vanishing_from_the_end_are_a_loss() -> None:
    cp = rc.observe(EMPTY, manifest(seg(0, 99), seg(100, 199), seg(200, 299)))
    cp = rc.observe(cp, manifest(seg(0, 99)))  # an old backup of the bucket
    assert cp.lost == (100, 300)


def test_delete_records_past_the_loss_acknowledges_it() -> None:
    cp = rc.observe(rc.observe(EMPTY, manifest(seg(0, 99))), manifest(version=0))
    assert cp.lost == (0, 100)
    assert rc.acknowledge(cp, 50) == cp  # not past it: still lost
    assert not rc.acknowledge(cp, 100).has_loss


def test_the_file_round_trips_and_garbage_names_it() -> None:
    cp = rc.RemoteCheckpoint(10, 200, (10, 150))
    assert rc.decode(rc.encode(cp), "x") == cp
    assert rc.encode(cp).decode().splitlines() == ["0", "1", "10 200 10 150"]
    with pytest.raises(CorruptCheckpointError, match="where"):
        rc.decode(b"0\n1\n1 2 x 4\n", "where")
    with pytest.raises(CorruptCheckpointError, match="where"):
        rc.decode(b"garbage", "where")
    assert dataclasses.replace(cp, lost=rc.NO_LOSS).has_loss is False


def test_what_is_still_on_local_disk_is_not_lost() -> None:
    cp = rc.observe(EMPTY, manifest(seg(0, 99), seg(100, 199), seg(200, 299)))
    # The bucket is emptied; the local log still holds 150 onwards.
    assert rc.observe(cp, manifest(version=0), local_start=150).lost == (0, 150)
    # All of it still local: nothing is lost.
    assert not rc.observe(cp, manifest(version=0), local_start=0).has_loss
