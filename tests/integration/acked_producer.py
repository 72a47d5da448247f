"""A producer thread for failure tests: an increasing sequence, acks=all and idempotent,
sent until stopped, remembering what was acknowledged (Kafka's replication system test's
producer; tests/integration/test_replication.py)."""

from __future__ import annotations

import threading
import time

from confluent_kafka import KafkaError, Producer

TOPIC = "replication-test"
PARTITIONS = 3


class BackgroundProducer:
    """Sends value n to partition n % ``partitions`` of ``topic`` until stopped; remembers
    each partition's acknowledged values in order. ``acknowledged`` is a hook called for
    each acknowledgement (on the thread that polls). Whatever ends the sending thread
    early is raised by ``wait_for_more`` and on exit, not lost with the thread."""

    def __init__(
        self, bootstrap: str, topic: str = TOPIC, partitions: int = PARTITIONS, **config: object
    ) -> None:
        self.topic = topic
        self.partitions = partitions
        self.acked: dict[int, list[int]] = {p: [] for p in range(partitions)}
        self.errors: list[KafkaError] = []
        self.failure: BaseException | None = None
        self._stop = threading.Event()
        self._producer = Producer(
            {
                "bootstrap.servers": bootstrap,
                "acks": "all",
                "enable.idempotence": True,
                "message.timeout.ms": 60_000,
                "linger.ms": 2,
                **config,
            }
        )
        self._thread = threading.Thread(target=self._run, daemon=True)

    def acknowledged(self, partition: int, value: int) -> None:
        """Called once ``value`` is acknowledged (a hook for subclasses)."""

    def _on_delivery(self, err: KafkaError | None, msg: object) -> None:
        if err is not None:
            self.errors.append(err)
        else:
            partition, value = msg.partition(), int(msg.value())  # type: ignore[attr-defined]
            self.acked[partition].append(value)
            self.acknowledged(partition, value)

    def _run(self) -> None:
        try:
            n = 0
            while not self._stop.is_set():
                try:
                    self._producer.produce(
                        self.topic,
                        b"%d" % n,
                        partition=n % self.partitions,
                        on_delivery=self._on_delivery,
                    )
                except BufferError:
                    # librdkafka's queue is full (a failover holds every record in
                    # flight): let deliveries drain, then send the same value again.
                    self._producer.poll(0.1)
                    continue
                n += 1
                self._producer.poll(0.002)
        except BaseException as exc:  # raised in the test's thread by _check
            self.failure = exc

    def _check(self) -> None:
        if self.failure is not None:
            raise AssertionError(f"the producer thread failed: {self.failure!r}") from (
                self.failure
            )

    def __enter__(self) -> BackgroundProducer:
        self._thread.start()
        return self

    def count(self) -> int:
        return sum(len(v) for v in self.acked.values())

    def wait_for_more(self, extra: int, timeout: float = 60) -> None:
        """Wait until ``extra`` more records are acknowledged (the cluster serves writes)."""
        target = self.count() + extra
        deadline = time.monotonic() + timeout
        while self.count() < target:
            self._check()
            assert time.monotonic() < deadline, f"stuck at {self.count()} acknowledged records"
            time.sleep(0.02)

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(10)
        self._check()
        assert self._producer.flush(90) == 0
