"""ClusterSupervisor.start_all and stop_all with fake broker processes: a broker that exits
before it starts is reported at once with its log's last line, not after the whole timeout;
brokers that do not stop are waited for until one deadline, not one timeout each."""

from __future__ import annotations

import threading
from collections.abc import Mapping
from pathlib import Path
from types import SimpleNamespace

from tierlog.tools.cluster_supervisor import STOP_TIMEOUT_S, ClusterSupervisor, last_line


class InstantEvent(threading.Event):
    """An Event whose wait does not block: the fake clock, not real time, moves the test."""

    def wait(self, timeout: float | None = None) -> bool:
        return self.is_set()


class FakeBroker:
    """Stands for ``BrokerProcess``: ``started`` is set, or ``exit_code`` turns non-None,
    when the fake clock passes the given time."""

    def __init__(self, clock: list[float], starts_at: float | None, exits_at: float | None):
        self.clock = clock
        self.starts_at = starts_at
        self.exits_at = exits_at
        self.started = InstantEvent()
        self.proc = SimpleNamespace(pid=4242)

    def exit_code(self) -> int | None:
        if self.exits_at is not None and self.clock[0] >= self.exits_at:
            return 1
        if self.starts_at is not None and self.clock[0] >= self.starts_at:
            self.started.set()
        return None

    def stop(self) -> None:
        self.exits_at = self.clock[0]

    def wait(self, timeout: float) -> int:
        return 0


def supervisor(
    tmp_path: Path, plans: dict[int, tuple[float | None, float | None]], out: list[str]
) -> tuple[ClusterSupervisor, list[float]]:
    now = [0.0]

    def clock() -> float:
        now[0] += 0.5  # each look at the clock is half a second later
        return now[0]

    def spawn(broker_id: int, overrides: Mapping[str, str], log_path: Path) -> FakeBroker:
        return FakeBroker(now, *plans[broker_id])

    stream = SimpleNamespace(write=out.append, flush=lambda: None)
    brokers = {n: (9092 + n, {}) for n in plans}
    return ClusterSupervisor(brokers, tmp_path, stream, clock=clock, spawn=spawn), now  # type: ignore[arg-type]


def test_all_brokers_start(tmp_path: Path) -> None:
    sup, _ = supervisor(tmp_path, {0: (2.0, None), 1: (5.0, None)}, [])
    assert sup.start_all(60) == {}
    assert [s.state for s in sup.slots.values()] == ["running", "running"]


def test_a_broker_that_exits_is_reported_at_once_with_its_last_log_line(tmp_path: Path) -> None:
    (tmp_path / "broker-1.log").write_text(
        "INFO starting\ntierlog: cannot listen on 127.0.0.1:9093: the address is already in use\n\n"
    )
    sup, now = supervisor(tmp_path, {0: (1.0, None), 1: (None, 3.0)}, [])
    failed = sup.start_all(60)
    assert now[0] < 10, "it waited for the timeout instead of noticing the exit"
    assert set(failed) == {1}, failed
    assert failed[1] == (
        "exited before it started (exit status 1): tierlog: cannot listen on "
        "127.0.0.1:9093: the address is already in use"
    )


def test_a_broker_that_never_starts_fails_at_the_timeout(tmp_path: Path) -> None:
    sup, now = supervisor(tmp_path, {0: (1.0, None), 1: (None, None)}, [])
    failed = sup.start_all(20)
    assert failed == {1: "was not up within 20 s"}
    assert 20 <= now[0] < 25


def test_last_line_of_a_missing_or_empty_log(tmp_path: Path) -> None:
    assert last_line(tmp_path / "none.log") == ""
    (tmp_path / "empty.log").write_text("\n\n")
    assert last_line(tmp_path / "empty.log") == ""
    big = tmp_path / "big.log"
    big.write_text("x" * 10_000 + "\nthe end\n")
    assert last_line(big) == "the end"


class StuckBroker(FakeBroker):
    """Ignores SIGTERM: each wait uses up its whole timeout on the fake clock."""

    def __init__(self, clock: list[float]) -> None:
        super().__init__(clock, 0.0, None)
        self.waited: list[float] = []

    def stop(self) -> None:
        pass

    def wait(self, timeout: float) -> int:
        self.waited.append(timeout)
        self.clock[0] += timeout
        return -9


def test_a_stop_waits_for_every_broker_until_one_deadline(tmp_path: Path) -> None:
    sup, now = supervisor(tmp_path, {0: (1.0, None), 1: (1.0, None), 2: (1.0, None)}, [])
    stuck = {n: StuckBroker(now) for n in sup.slots}
    for n, slot in sup.slots.items():
        slot.process = stuck[n]  # type: ignore[assignment]
    began = now[0]
    sup.stop_all()
    # The first wait takes the whole timeout; the others find the deadline passed.
    assert stuck[0].waited[0] > STOP_TIMEOUT_S - 5
    assert all(s.waited == [0.0] for s in (stuck[1], stuck[2]))
    assert now[0] - began < STOP_TIMEOUT_S + 5
    assert {slot.state for slot in sup.slots.values()} == {"stopped"}
