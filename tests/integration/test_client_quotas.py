"""Client quotas in a cluster, on real broker processes and a real ZooKeeper: a quota set
through one broker (AlterClientQuotas) is stored where Kafka's ZooKeeper mode keeps it
(``/config/clients/<id>``, announced under ``/config/changes``), every broker describes
it, and a producer is throttled by a broker that was not asked."""

from __future__ import annotations

import json
import re
import time
import urllib.request
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import NewTopic
from kazoo.client import KazooClient

from tests.integration.cluster_harness import ProcessCluster
from tests.raw_client import RawClient, request
from tierlog.protocol import ApiKey

pytestmark = pytest.mark.timeout(120)


def call(port: int, api: ApiKey, data: dict[str, Any]) -> Any:
    client = RawClient(port)
    try:
        return client.call(request(api, 1, data))
    finally:
        client.close()


def described(port: int) -> dict[str, dict[str, float]]:
    answer = call(
        port,
        ApiKey.DESCRIBE_CLIENT_QUOTAS,
        {
            "components": [{"entity_type": "client-id", "match_type": 2, "match": None}],
            "strict": False,
        },
    )
    assert answer.error_code == 0, answer
    return {
        ",".join(f"{e.entity_type}={e.entity_name}" for e in entry.entity): {
            v.key: v.value for v in entry.values
        }
        for entry in answer.entries
    }


def test_a_quota_set_on_one_broker_holds_on_every_broker(tmp_path: Path, zk_connect: str) -> None:
    cluster = ProcessCluster(
        tmp_path,
        zk_connect,
        2,
        {"quota.window.num": "2", "quota.window.size.seconds": "1", "metrics.http.port": "0"},
    ).start()
    try:
        entity = [{"entity_type": "client-id", "entity_name": "slow"}]
        answer = call(
            cluster.brokers[0].port,
            ApiKey.ALTER_CLIENT_QUOTAS,
            {
                "entries": [
                    {
                        "entity": entity,
                        "ops": [{"key": "producer_byte_rate", "value": 500000.0, "remove": False}],
                    },
                    {
                        "entity": [{"entity_type": "ip", "entity_name": "127.0.0.1"}],
                        "ops": [{"key": "connection_creation_rate", "value": 1.0, "remove": False}],
                    },
                ],
                "validate_only": False,
            },
        )
        assert [e.error_code for e in answer.entries] == [0, 42]  # ip quotas: INVALID_REQUEST

        chroot = zk_connect.split("/", 1)[1]
        zk = KazooClient(hosts=zk_connect.split("/", 1)[0])
        zk.start(timeout=10)
        try:
            data, _ = zk.get(f"/{chroot}/config/clients/slow")
            assert json.loads(data) == {"version": 1, "config": {"producer_byte_rate": "500000"}}
            changes = zk.get_children(f"/{chroot}/config/changes")
            notes = [json.loads(zk.get(f"/{chroot}/config/changes/{c}")[0]) for c in changes]
            assert {"version": 2, "entity_path": "clients/slow"} in notes
        finally:
            zk.stop()

        cluster.wait_until(
            lambda: (
                described(cluster.brokers[1].port)
                == {"client-id=slow": {"producer_byte_rate": 500000.0}}
            ),
            "broker 1 to see the quota",
        )
        admin = cluster.admin()
        new = NewTopic("quota", num_partitions=1, replica_assignment=[[1]])
        admin.create_topics([new])["quota"].result(30)
        cluster.wait_for_full_isr("quota", 1, 1)

        def seconds(client_id: str) -> float:
            producer = Producer({"bootstrap.servers": cluster.bootstrap, "client.id": client_id})
            started = time.monotonic()
            for _ in range(300):
                producer.produce("quota", value=b"x" * 10_000)
                producer.poll(0)
            assert producer.flush(60) == 0
            return time.monotonic() - started

        fast, slow = seconds("fast"), seconds("slow")
        assert slow > 3.0 and slow > 4 * fast, (slow, fast)
        text = cluster.brokers[1].log_text()
        port = int(re.findall(r"metrics on http://[^:]+:(\d+)/", text)[-1])
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as page:
            metrics = page.read().decode()
        found = re.search(
            r'^tierlog_quota_throttled_requests_total{request="Produce"} (\S+)$', metrics, re.M
        )
        assert found and float(found.group(1)) > 0, metrics[-2000:]
    finally:
        cluster.stop()
