"""Metadata auto-creation does not block the broker (issue 10, item 14): 1,000 names in one
v1 Metadata request are created in seconds (49 s before, on the 2-core test box), other
clients are answered meanwhile, answers stay per topic with Kafka's name rules, and every
topic survives a restart and a kill -9 (the single-node metadata journal)."""

from __future__ import annotations

import socket
import struct
import threading
import time
from pathlib import Path
from typing import Any

from kio.index import load_request_schema

from tests.broker.harness import BrokerProcess
from tierlog.client.connection import BrokerConnection
from tierlog.protocol import decode_response, encode_request
from tierlog.protocol.kio_build import build

NAMES = [f"auto-{i:04d}" for i in range(1000)]


def metadata(port: int, names: list[str], version: int = 1, create: bool = True) -> Any:
    body: dict[str, Any] = {"topics": [{"name": n} for n in names]}
    if version >= 4:
        body["allow_auto_topic_creation"] = create
    connection = BrokerConnection("127.0.0.1", port, timeout=120)
    try:
        return connection.call(build(load_request_schema(3, version), body))
    finally:
        connection.close()


class Pinger(threading.Thread):
    """ApiVersions on its own connection every 20 ms; keeps the slowest answer."""

    def __init__(self, port: int) -> None:
        super().__init__(daemon=True)
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=120)
        self.request = build(load_request_schema(18, 0), {})
        self.stop = threading.Event()
        self.slowest = 0.0
        self.answered = 0

    def run(self) -> None:
        while not self.stop.is_set():
            begin = time.monotonic()
            self.sock.sendall(encode_request(self.request, 1, client_id="pinger"))
            size = struct.unpack(">i", self._read(4))[0]
            assert decode_response(self._read(size), 18, 0)[0] == 1
            self.slowest = max(self.slowest, time.monotonic() - begin)
            self.answered += 1
            time.sleep(0.02)

    def _read(self, n: int) -> bytes:
        data = b""
        while len(data) < n:
            chunk = self.sock.recv(n - len(data))
            assert chunk, "the broker closed the pinger's connection"
            data += chunk
        return data


def assert_all_created(answer: Any, names: list[str]) -> None:
    assert [t.name for t in answer.topics] == names
    for topic in answer.topics:
        assert int(topic.error_code) == 0, topic
        assert len(topic.partitions) == 1 and topic.partitions[0].leader_id == 0


def test_a_thousand_names_in_one_request_are_fast_and_block_no_one(tmp_path: Path) -> None:
    broker = BrokerProcess(tmp_path / "data").start()
    try:
        pinger = Pinger(broker.port)
        pinger.start()
        time.sleep(0.2)
        begin = time.monotonic()
        answer = metadata(broker.port, NAMES)
        took = time.monotonic() - begin
        pinger.stop.set()
        pinger.join(10)
        print(f"1,000 names: {took:.2f} s; slowest ApiVersions meanwhile {pinger.slowest:.3f} s")
        assert_all_created(answer, NAMES)
        assert took < 30, f"1,000 auto-created topics took {took:.1f} s"
        assert pinger.slowest < 5.0, f"another client waited {pinger.slowest:.1f} s"
        assert pinger.answered > 10
        # Asked again: nothing to create, answered at once.
        begin = time.monotonic()
        assert_all_created(metadata(broker.port, NAMES), NAMES)
        assert time.monotonic() - begin < 2
    finally:
        broker.stop()
    # A clean stop folds the journal into the snapshot; a restart has every topic.
    assert not (tmp_path / "data" / "tierlog-metadata.journal").exists()
    broker.start()
    try:
        assert_all_created(metadata(broker.port, NAMES, version=4, create=False), NAMES)
    finally:
        broker.stop()


def test_topics_created_survive_kill_9(tmp_path: Path) -> None:
    broker = BrokerProcess(tmp_path / "data").start()
    names = NAMES[:300]
    try:
        assert_all_created(metadata(broker.port, names), names)
    finally:
        broker.kill()
    assert (tmp_path / "data" / "tierlog-metadata.journal").stat().st_size > 0
    broker.start()
    try:
        assert_all_created(metadata(broker.port, names, version=4, create=False), names)
    finally:
        broker.stop()


def test_answers_are_per_topic_with_kafkas_name_rules(tmp_path: Path) -> None:
    broker = BrokerProcess(tmp_path / "data").start()
    try:
        assert_all_created(metadata(broker.port, ["exists"]), ["exists"])
        asked = ["exists", "fresh", "bad name!", "a" * 250, "..", "fresh", "ok.1_x-y"]
        answer = metadata(broker.port, asked)
        codes = {t.name: int(t.error_code) for t in answer.topics}
        assert [t.name for t in answer.topics] == asked  # one answer per name asked, in order
        assert codes == {
            "exists": 0,
            "fresh": 0,
            "bad name!": 17,  # INVALID_TOPIC_EXCEPTION
            "a" * 250: 17,
            "..": 17,
            "ok.1_x-y": 0,
        }
        # allow_auto_topic_creation=false (v4+): unknown, not created.
        answer = metadata(broker.port, ["not-made", "exists"], version=4, create=False)
        assert [int(t.error_code) for t in answer.topics] == [3, 0]
        assert int(metadata(broker.port, ["not-made"], 4, False).topics[0].error_code) == 3
    finally:
        broker.stop()
