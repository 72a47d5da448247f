"""The log with idempotent producers: retries are answered, not written twice, and the
state survives clean and unclean restarts."""

from __future__ import annotations

import pytest

from tests.local.conftest import LogFactory, crash, make_batch
from tierlog.local.producer_state import InvalidProducerEpochError, OutOfOrderSequenceError
from tierlog.records.errors import InvalidRecordError

PID = 4000


def idem(seq: int, n: int = 2, epoch: int = 0, pid: int = PID) -> bytes:
    return make_batch(n, producer_id=pid, producer_epoch=epoch, base_sequence=seq)


def test_retry_gets_the_original_offsets_and_writes_nothing(make_log: LogFactory) -> None:
    lg = make_log()
    first = lg.append(idem(0))
    lg.append(idem(2))
    size = lg.size
    retry = lg.append(idem(0))
    assert retry.duplicate
    assert (retry.first_offset, retry.last_offset) == (first.first_offset, first.last_offset)
    assert lg.size == size and lg.log_end_offset == 4


def test_gap_and_old_epoch_are_rejected_and_leave_the_log_unchanged(
    make_log: LogFactory,
) -> None:
    lg = make_log()
    lg.append(idem(0, epoch=1))
    with pytest.raises(OutOfOrderSequenceError):
        lg.append(idem(5, epoch=1))
    with pytest.raises(InvalidProducerEpochError):
        lg.append(idem(2, epoch=0))
    assert lg.log_end_offset == 2


def test_two_idempotent_batches_in_one_append_are_refused(make_log: LogFactory) -> None:
    lg = make_log()
    with pytest.raises(InvalidRecordError):
        lg.append(idem(0) + idem(2))
    assert lg.log_end_offset == 0


@pytest.mark.parametrize("clean", [True, False])
def test_state_survives_restart(make_log: LogFactory, clean: bool) -> None:
    lg = make_log(segment_bytes=400)  # several rolls, so snapshots are per segment
    for seq in range(0, 20, 2):
        lg.append(idem(seq))
    assert len(lg.segments) > 2
    if clean:
        lg.close()
    else:
        crash(lg)
    again = make_log(segment_bytes=400, had_clean_shutdown=clean)
    retry = again.append(idem(18))
    assert retry.duplicate and retry.first_offset == 18
    with pytest.raises(OutOfOrderSequenceError):
        again.append(idem(30))
    assert again.append(idem(20)).first_offset == 20


def test_truncation_rewinds_producer_state(make_log: LogFactory) -> None:
    lg = make_log()
    for seq in range(0, 10, 2):
        lg.append(idem(seq))
    lg.truncate_to(6)  # a follower dropping what diverged: sequences 6.. are gone
    assert lg.append(idem(6)).first_offset == 6  # accepted again, not a duplicate
