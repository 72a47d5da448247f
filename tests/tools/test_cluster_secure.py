"""`tierlog cluster start --secure` as a user runs it (issue 22, "Everything around the broker
speaks security"): two brokers on SASL_SSL with SCRAM-SHA-512, replicating to each other over
it, the ACL authorizer on, ZooKeeper's znodes guarded; ``admin.properties`` works for
confluent-kafka (translated to librdkafka's keys), for tierlog's tools and for Kafka's own
``kafka-topics --command-config``; PLAINTEXT and a wrong password are refused; no password is
printed or written outside the 0600 files; a restart reuses the CA and the users. And the
same settings in one call: ``EmbeddedCluster(secure=True)``, ``EmbeddedBroker(secure=True)``.
"""

from __future__ import annotations

import os
import signal
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest
from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from kazoo.client import KazooClient
from kazoo.exceptions import NoAuthError

from tests.integration import kafka_tools
from tests.tools.cli import tierlog
from tests.tools.test_cluster import ClusterOutput, free_ports
from tierlog.broker.embedded import EmbeddedBroker, EmbeddedCluster
from tierlog.security.config_providers import is_provider_key, resolve
from tierlog.tools.client_config import librdkafka_properties
from tierlog.util.properties import load_properties

pytestmark = pytest.mark.timeout(90)


def start(data_dir: Path, port: int) -> tuple[subprocess.Popen[str], ClusterOutput]:
    proc = subprocess.Popen(
        [
            *(sys.executable, "-m", "tierlog.cli", "cluster", "start", "--secure"),
            *("--brokers", "2", "--data-dir", str(data_dir), "--port", str(port)),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )
    return proc, ClusterOutput(proc)


def stop(proc: subprocess.Popen[str], out: ClusterOutput) -> list[str]:
    proc.send_signal(signal.SIGINT)
    proc.wait(60)
    assert proc.returncode == 0, out.lines
    return out.to_the_end()


def admin_librdkafka(data_dir: Path) -> dict[str, str]:
    """admin.properties as a pipeline or notebook reads it: ${file:...} resolved, Kafka's
    Java keys said in librdkafka's words."""
    resolved = resolve(load_properties(data_dir / "admin.properties"))
    return librdkafka_properties({k: v for k, v in resolved.items() if not is_provider_key(k)})


def secrets_of(data_dir: Path) -> list[str]:
    found = []
    for name in ("admin-secret.properties", "brokers-secret.properties"):
        found += list(load_properties(data_dir / "security" / name).values())
    assert found and all(len(s) >= 24 for s in found)
    return found


def refused(config: dict[str, str]) -> str:
    """The errors of a client that must not get metadata (the failed call's, and what
    librdkafka reported on the way: an authentication failure is said there)."""
    errors: list[str] = []
    admin = AdminClient({**config, "error_cb": lambda e: errors.append(e.str())})
    with pytest.raises(KafkaException) as failed:
        admin.list_topics(timeout=6)
    admin.poll(0)
    return "\n".join([str(failed.value), *errors])


@pytest.fixture(scope="module")
def tools() -> kafka_tools.KafkaDist:
    try:
        return kafka_tools.fetch_tools()
    except kafka_tools.KafkaUnavailable as exc:
        pytest.fail(f"Kafka's tools are unavailable ({exc}): run `make kafka-tools`", False)


def test_a_secured_cluster_serves_the_admin_and_refuses_the_rest(
    tmp_path: Path, tools: kafka_tools.KafkaDist
) -> None:
    port = free_ports(2)
    data_dir = tmp_path / "cluster"
    proc, out = start(data_dir, port)
    try:
        out.wait_for("cluster up", 60)
        zookeeper = out.wait_for("zookeeper on").split()[2]
        config_path = data_dir / "admin.properties"
        assert str(config_path) in out.wait_for("connect as admin with")
        # The secrets are in 0600 files, nowhere else: not in admin.properties, not printed.
        for name in ("admin-secret.properties", "brokers-secret.properties", "ca-key.pem"):
            mode = stat.S_IMODE((data_dir / "security" / name).stat().st_mode)
            assert mode == 0o600, (name, oct(mode))
        for secret in secrets_of(data_dir):
            assert secret not in config_path.read_text()
            assert secret not in "\n".join(out.lines)

        # confluent-kafka with admin.properties: a topic replicated over SASL_SSL, produced
        # to with acks=all and read back.
        config = admin_librdkafka(data_dir)
        assert config["security.protocol"].upper() == "SASL_SSL" and "sasl.password" in config
        admin = AdminClient(config)
        admin.create_topics([NewTopic("secured", 2, 2)])["secured"].result(30)
        producer = Producer({**config, "acks": "all"})
        for n in range(20):
            producer.produce("secured", b"%d" % n, partition=n % 2)
        assert producer.flush(30) == 0
        consumer = Consumer({**config, "group.id": "admin-reader", "enable.auto.commit": False})
        try:
            consumer.assign([TopicPartition("secured", p, 0) for p in range(2)])
            got: list[int] = []
            deadline = time.monotonic() + 30
            while len(got) < 20 and time.monotonic() < deadline:
                message = consumer.poll(0.5)
                if message is not None and message.error() is None:
                    got.append(int(message.value()))
        finally:
            consumer.close()
        assert sorted(got) == list(range(20))
        # Both replicas in sync: the brokers log in to each other over SASL_SSL.
        partitions = admin.list_topics("secured", timeout=10).topics["secured"].partitions
        assert all(sorted(p.isrs) == [0, 1] for p in partitions.values()), partitions

        # Refused: PLAINTEXT on the SASL_SSL port, and the admin with a wrong password.
        bootstrap = config["bootstrap.servers"]
        refused({"bootstrap.servers": bootstrap})
        wrong = {**config, "sasl.password": "not-the-password"}
        assert "uthentication" in refused(wrong)

        # tierlog's tools and Kafka's own take the same file as --command-config.
        listed = tierlog("topics", "list", "--command-config", str(config_path))
        assert listed.returncode == 0 and "secured" in listed.stdout.split(), listed.stderr
        java = kafka_tools.run_tool(
            tools,
            kafka_tools.TOPICS,
            ["--bootstrap-server", bootstrap, "--command-config", str(config_path), "--list"],
        )
        assert java.returncode == 0 and "secured" in java.stdout.split(), java.output

        # ZooKeeper: a client without the brokers' identity cannot read the credentials.
        anonymous = KazooClient(hosts=zookeeper, timeout=10)
        anonymous.start(timeout=10)
        try:
            with pytest.raises(NoAuthError):
                anonymous.get("/config/users/admin")
        finally:
            anonymous.stop()
            anonymous.close()
    finally:
        if proc.poll() is None:
            lines = stop(proc, out)
            assert "stopped" in lines[-1]
    for n in (0, 1):
        log = (data_dir / f"broker-{n}.log").read_text()
        assert "Traceback" not in log
        assert not any(secret in log for secret in secrets_of(data_dir))


def test_a_restart_reuses_the_ca_and_the_users(tmp_path: Path) -> None:
    port = free_ports(2)
    data_dir = tmp_path / "cluster"
    proc, out = start(data_dir, port)
    try:
        assert "created users admin, broker" in out.wait_for("secured:", 60)
        out.wait_for("cluster up", 60)
    finally:
        stop(proc, out)
    security = data_dir / "security"
    kept = {p.name: p.read_bytes() for p in security.iterdir()}
    assert {"ca.pem", "ca-key.pem", "broker-0.pem", "broker-1.pem"} <= kept.keys()

    proc, out = start(data_dir, port)
    try:
        assert "users kept from the last start" in out.wait_for("secured:", 60)
        out.wait_for("cluster up", 60)
        assert {p.name: p.read_bytes() for p in security.iterdir()} == kept
        # The password of the first start still logs in.
        admin = AdminClient(admin_librdkafka(data_dir))
        assert admin.list_topics(timeout=20).brokers.keys() == {0, 1}
    finally:
        stop(proc, out)


def test_plaintext_and_secure_starts_are_not_mixed_on_one_data_dir(tmp_path: Path) -> None:
    secured = tmp_path / "secured"
    (secured / "security").mkdir(parents=True)
    plain = tierlog("cluster", "start", "--data-dir", str(secured))
    assert plain.returncode == 1
    assert (
        plain.stderr.strip()
        == f"tierlog: {secured} holds a cluster started with --secure: add --secure"
    )
    opened = tmp_path / "open"
    (opened / "broker-0").mkdir(parents=True)
    secure = tierlog("cluster", "start", "--secure", "--data-dir", str(opened))
    assert secure.returncode == 1
    assert "started without --secure" in secure.stderr and "Traceback" not in secure.stderr
    assert not (opened / "security").exists()


def test_embedded_cluster_secure_in_one_call(tmp_path: Path) -> None:
    with EmbeddedCluster(2, data_dir=tmp_path / "cluster", secure=True) as cluster:
        config = cluster.client_config()
        assert config["security.protocol"] == "SASL_SSL"
        admin = AdminClient(config)
        admin.create_topics([NewTopic("e", 1, 2)])["e"].result(30)
        deadline = time.monotonic() + 30
        while True:
            partition = admin.list_topics("e", timeout=10).topics["e"].partitions[0]
            if sorted(partition.isrs) == [0, 1] or time.monotonic() > deadline:
                break
            time.sleep(0.2)
        assert sorted(partition.isrs) == [0, 1]
        refused({"bootstrap.servers": cluster.bootstrap})
        # admin.properties names the embedded brokers' ephemeral ports.
        assert admin_librdkafka(tmp_path / "cluster")["bootstrap.servers"] == cluster.bootstrap


def test_embedded_broker_secure_single_node(tmp_path: Path) -> None:
    with EmbeddedBroker({"log.dirs": str(tmp_path / "data")}, secure=True) as broker:
        admin = AdminClient(broker.client_config())
        admin.create_topics([NewTopic("s", 1, 1)])["s"].result(30)
        assert "s" in admin.list_topics(timeout=10).topics
        assert "uthentication" in refused({**broker.client_config(), "sasl.password": "nope"})
    with pytest.raises(ValueError, match=r"log\.dirs"):
        EmbeddedBroker(secure=True)
