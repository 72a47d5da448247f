"""zk_producer_ids against a real ZooKeeper: blocks claimed concurrently never overlap."""

from __future__ import annotations

import threading

import pytest

from tests.integration.zk_clients import ClientFactory
from tierlog.broker.coordination import zk_data
from tierlog.broker.coordination.zk_client import ZkClient

pytestmark = pytest.mark.timeout(20)


def test_producer_id_blocks_from_concurrent_clients_never_overlap(
    new_client: ClientFactory,
) -> None:
    clients = [new_client(), new_client()]
    starts: list[int] = []
    lock = threading.Lock()
    barrier = threading.Barrier(4)

    def allocate(client: ZkClient, broker_id: int) -> None:
        barrier.wait(5)
        for _ in range(15):
            first = client.producer_ids.allocate(broker_id, block_size=10)
            with lock:
                starts.append(first)

    threads = [
        threading.Thread(target=allocate, args=(clients[i % 2], i % 2 + 1)) for i in range(4)
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join(15)
    # 60 blocks of 10: exactly 0, 10, ..., 590, each handed out once.
    assert sorted(starts) == list(range(0, 600, 10))
    latest = zk_data.decode_producer_id_block(clients[0].kazoo.get(zk_data.PRODUCER_ID_BLOCK)[0])
    assert latest is not None and latest.block_end == 599
