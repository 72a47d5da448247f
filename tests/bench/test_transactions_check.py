"""bench/transactions.py's exact-set check of a read_committed consumer: each committed
record once, no aborted one, nothing unknown."""

from __future__ import annotations

import transactions
from transactions import check_exact


def numbers(*ranges: range) -> list[bytes]:
    return [n.to_bytes(transactions.ID_BYTES, "big") for r in ranges for n in r]


COMMITTED = [[0, 100], [200, 300]]  # 100-199 were aborted
CLEAN = {"missing": 0, "duplicates": 0, "aborted": 0, "unknown": 0}


def test_exactly_the_committed_records_in_any_order_pass() -> None:
    got = numbers(range(200, 300), range(0, 100))
    assert check_exact(got, COMMITTED, 300) == CLEAN


def test_an_aborted_record_delivered_is_counted() -> None:
    got = numbers(range(0, 100), range(150, 152), range(200, 300))
    assert check_exact(got, COMMITTED, 300) == {**CLEAN, "aborted": 2}


def test_missing_and_duplicated_records_are_counted() -> None:
    got = numbers(range(0, 99), range(200, 300), range(5, 8))
    assert check_exact(got, COMMITTED, 300) == {**CLEAN, "missing": 1, "duplicates": 3}


def test_records_without_a_number_given_out_are_unknown() -> None:
    got = [*numbers(range(0, 100), range(200, 300), range(300, 302)), b"short", b""]
    assert check_exact(got, COMMITTED, 300) == {**CLEAN, "unknown": 4}


def test_a_numbered_value_keeps_its_tail() -> None:
    value = transactions.numbered_value(258, b"\xaa" * 20)
    assert value[:8] == (258).to_bytes(8, "big") and value[8:] == b"\xaa" * 12
