"""Tests for the group API handlers' transaction parts: TxnOffsetCommit v0-v4 (with the
KIP-890 verification of the offsets partition) and OffsetFetch require_stable, called
directly with kio requests on a real coordinator."""

from __future__ import annotations

import importlib
from types import SimpleNamespace
from typing import Any

from tests.broker.group.helpers import FakeLog, make_coordinator, run, stable_group
from tierlog.broker.authorization import RequestAuthorizer
from tierlog.broker.group.placement import OFFSETS_TOPIC
from tierlog.broker.handlers.groups import handle_offset_fetch, handle_txn_offset_commit
from tierlog.broker.txn.verification import VerificationGuards
from tierlog.protocol import Request
from tierlog.protocol.errors import ErrorCode as E
from tierlog.protocol.kio_build import build
from tierlog.protocol.versions import ApiKey

PID = 4000


def _request(api: str, key: int, version: int, data: dict[str, Any]) -> Request:
    module = importlib.import_module(f"kio.schema.{api}.v{version}.request")
    name = "".join(part.title() for part in api.split("_")) + "Request"
    body = build(getattr(module, name), data)
    return Request(key, version, 1, "client", None, body, version, 0)  # type: ignore[arg-type]


def txn_commit_request(version: int, offsets: dict[int, int], **fields: Any) -> Request:
    data = {
        "transactional_id": "tx",
        "group_id": "g",
        "producer_id": PID,
        "producer_epoch": 0,
        "topics": [
            {
                "name": "t",
                "partitions": [
                    {
                        "partition_index": p,
                        "committed_offset": o,
                        "committed_leader_epoch": 5,
                        "committed_metadata": "md",
                    }
                    for p, o in offsets.items()
                ],
            }
        ],
        **fields,
    }
    return _request("txn_offset_commit", ApiKey.TXN_OFFSET_COMMIT, version, data)


def fetch_request(version: int, partitions: list[int], require_stable: bool) -> Request:
    topics = [{"name": "t", "partition_indexes": partitions}]
    if version >= 8:
        data: dict[str, Any] = {"groups": [{"group_id": "g", "topics": topics}]}
    else:
        data = {"group_id": "g", "topics": topics}
    if version >= 7:
        data["require_stable"] = require_stable
    return _request("offset_fetch", ApiKey.OFFSET_FETCH, version, data)


def _errors(response: Any) -> dict[int, int]:
    (topic,) = response.topics
    assert topic.name == "t"
    return {p.partition_index: p.error_code for p in topic.partitions}


def _fetched(response: Any) -> dict[int, tuple[int, int, int]]:
    topics = response.groups[0].topics if hasattr(response, "groups") else response.topics
    return {
        p.partition_index: (p.committed_offset, p.committed_leader_epoch, p.error_code)
        for t in topics
        for p in t.partitions
    }


def test_txn_offset_commit_every_version_then_require_stable() -> None:
    async def go() -> None:
        log = FakeLog()
        c = make_coordinator(log)
        services = SimpleNamespace(groups=c, transactions=None, authz=RequestAuthorizer())
        for version in range(5):
            response = await handle_txn_offset_commit(
                services,  # type: ignore[arg-type]
                txn_commit_request(version, {0: 10 + version, 1: 20}),
            )
            assert _errors(response) == {0: E.none, 1: E.none}, version
        # The leader epoch exists from v2: the v4 commit (the last one) kept it.
        group = c.group("g")
        assert group is not None
        pending = group.pending_txn_offsets.get(PID)
        assert pending[("t", 0)].value.offset == 14
        assert pending[("t", 0)].value.leader_epoch == 5

        for version in (7, 8, 9):
            response = await handle_offset_fetch(
                services,  # type: ignore[arg-type]
                fetch_request(version, [0, 5], require_stable=True),
            )
            assert _fetched(response) == {
                0: (-1, -1, E.unstable_offset_commit),
                5: (-1, -1, E.none),
            }, version
        for version in (6, 7, 8):
            response = await handle_offset_fetch(
                services,  # type: ignore[arg-type]
                fetch_request(version, [0], require_stable=False),
            )
            assert _fetched(response) == {0: (-1, -1, E.none)}, version

        partition = c.partition_for("g")
        log.marker(partition, PID, commit=True)
        c.complete_txn(partition, PID, True)
        response = await handle_offset_fetch(
            services,  # type: ignore[arg-type]
            fetch_request(7, [0, 1], require_stable=True),
        )
        assert _fetched(response) == {0: (14, 5, E.none), 1: (20, 5, E.none)}
        await c.close()

    run(go())


def test_txn_offset_commit_v3_member_fields_are_checked() -> None:
    async def go() -> None:
        c = make_coordinator()
        services = SimpleNamespace(groups=c, transactions=None, authz=RequestAuthorizer())
        leader, _ = await stable_group(c, 2)
        stale = txn_commit_request(
            3, {0: 1}, member_id=leader.member_id, generation_id=leader.generation_id + 1
        )
        response = await handle_txn_offset_commit(services, stale)  # type: ignore[arg-type]
        assert _errors(response) == {0: E.illegal_generation}
        current = txn_commit_request(
            3, {0: 1}, member_id=leader.member_id, generation_id=leader.generation_id
        )
        response = await handle_txn_offset_commit(services, current)  # type: ignore[arg-type]
        assert _errors(response) == {0: E.none}
        await c.close()

    run(go())


class FakeTransactions:
    """``services.transactions`` as the handler uses it: ``verify_produce`` answers
    ``code`` (and, with ``marker_meanwhile``, a marker clears the guard before the
    answer arrives); ``guards`` is the real guard table."""

    def __init__(
        self, code: int = 0, marker_meanwhile: bool = False, verification_enabled: bool = True
    ) -> None:
        self.verification_enabled = verification_enabled
        self.guards = VerificationGuards()
        self.code = code
        self.marker_meanwhile = marker_meanwhile
        self.asked: list[tuple[str, Any]] = []

    async def verify_produce(
        self, transactional_id: str, wanted: dict[tuple[str, int], tuple[int, int]]
    ) -> dict[tuple[str, int], tuple[int, object | None]]:
        self.asked.append((transactional_id, dict(wanted)))
        out: dict[tuple[str, int], tuple[int, object | None]] = {}
        for (topic, index), (pid, _) in wanted.items():
            token = self.guards.begin(topic, index, pid)
            if self.code:
                self.guards.clear(topic, index, pid)
            if self.marker_meanwhile:
                self.guards.clear(topic, index, pid)
            out[(topic, index)] = (self.code, None if self.code else token)
        return out


def services_with(c: Any, transactions: FakeTransactions, entry: Any = None) -> Any:
    state = SimpleNamespace(last_entry=lambda pid: entry)
    hosted = SimpleNamespace(is_leader=True, local=SimpleNamespace(producer_state=state))
    replicas = SimpleNamespace(partition=lambda topic, index: hosted)
    return SimpleNamespace(
        groups=c, transactions=transactions, replicas=replicas, authz=RequestAuthorizer()
    )


def test_txn_offset_commit_is_verified_with_the_transaction_coordinator() -> None:
    async def go() -> None:
        log = FakeLog()
        c = make_coordinator(log)
        partition = c.partition_for("g")
        cases = [
            (FakeTransactions(E.invalid_txn_state), E.invalid_txn_state),
            (FakeTransactions(E.invalid_producer_epoch), E.invalid_producer_epoch),
            # The coordinator could not be asked: the client retries (it would not on
            # NOT_ENOUGH_REPLICAS).
            (FakeTransactions(E.not_enough_replicas), E.coordinator_load_in_progress),
            # A marker ended the transaction while the check was out.
            (FakeTransactions(marker_meanwhile=True), E.invalid_txn_state),
        ]
        for transactions, expected in cases:
            services = services_with(c, transactions)
            response = await handle_txn_offset_commit(services, txn_commit_request(3, {0: 1}))
            assert _errors(response) == {0: expected}, expected
            assert transactions.asked == [("tx", {(OFFSETS_TOPIC, partition): (PID, 0)})]
        assert not log.batches[partition]  # nothing written

        ok = FakeTransactions()
        response = await handle_txn_offset_commit(
            services_with(c, ok), txn_commit_request(3, {0: 1})
        )
        assert _errors(response) == {0: E.none} and len(log.batches[partition]) == 1

        # The producer's transaction is already open in the offsets log: no new check.
        open_txn = SimpleNamespace(producer_epoch=0, current_txn_first_offset=0)
        again = FakeTransactions(E.invalid_txn_state)
        response = await handle_txn_offset_commit(
            services_with(c, again, open_txn), txn_commit_request(3, {0: 2})
        )
        assert _errors(response) == {0: E.none} and again.asked == []

        # transaction.partition.verification.enable=false: no check at all (Kafka).
        off = FakeTransactions(E.invalid_txn_state, verification_enabled=False)
        response = await handle_txn_offset_commit(
            services_with(c, off), txn_commit_request(3, {0: 3})
        )
        assert _errors(response) == {0: E.none} and off.asked == []
        await c.close()

    run(go())
