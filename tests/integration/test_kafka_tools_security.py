"""Kafka's own ``kafka-acls`` and ``kafka-configs`` (SCRAM users) against tierlog brokers: a
single node (ACLs in its metadata store) and a two-broker cluster on a real ZooKeeper (ACLs
in Kafka's znodes, every broker's cache following the change notifications), plus a Kafka
3.x cluster's ACL znodes written by hand before the brokers start and while they run.

The tools are the Java classes of ``org.apache.kafka:kafka-tools`` (``make kafka-tools``).
Connections are PLAINTEXT, so the tools are ``User:ANONYMOUS``, a super user here: what is
tested is where the ACLs and credentials go and that the tools read them back; the checks
themselves are the matrix's (``tests/broker/test_authorization_matrix.py``).
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.broker.harness import BrokerProcess
from tests.integration import kafka_tools
from tests.integration.cluster_harness import ProcessCluster
from tests.integration.kafka_tools import KafkaDist, ToolRun
from tests.integration.zk_clients import raw_client

pytestmark = pytest.mark.timeout(
    180 if kafka_tools.cached_tools() else kafka_tools.kafka_ref.MVN_TIMEOUT + 180
)

ACLS = "org.apache.kafka.tools.AclCommand"
SECURED = {
    "authorizer.class.name": "kafka.security.authorizer.AclAuthorizer",
    "super.users": "User:ANONYMOUS",
}


def run(tools: KafkaDist, main_class: str, bootstrap: str, *args: str, ok: bool = True) -> ToolRun:
    done = kafka_tools.run_tool(tools, main_class, ["--bootstrap-server", bootstrap, *args])
    if ok:
        assert done.returncode == 0, done.output
    return done


def wait_until(check: Callable[[], bool], what: str, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.2)


def add_acls(tools: KafkaDist, bootstrap: str) -> None:
    run(
        tools,
        ACLS,
        bootstrap,
        "--add",
        "--allow-principal",
        "User:alice",
        "--operation",
        "Read",
        "--topic",
        "orders",
        "--group",
        "billing",
    )
    run(
        tools,
        ACLS,
        bootstrap,
        "--add",
        "--deny-principal",
        "User:bob",
        "--deny-host",
        "10.0.0.9",
        "--operation",
        "Write",
        "--topic",
        "etl-",
        "--resource-pattern-type",
        "prefixed",
    )


def test_kafka_acls_on_a_single_node(tools: KafkaDist, tmp_path: Path) -> None:
    broker = BrokerProcess(tmp_path / "data", SECURED).start()
    try:
        add_acls(tools, broker.bootstrap)
        listed = run(tools, ACLS, broker.bootstrap, "--list").stdout
        assert "name=orders, patternType=LITERAL" in listed, listed
        assert "principal=User:alice, host=*, operation=READ, permissionType=ALLOW" in listed
        assert "name=billing, patternType=LITERAL" in listed, listed
        assert "name=etl-, patternType=PREFIXED" in listed, listed
        assert "principal=User:bob, host=10.0.0.9, operation=WRITE, permissionType=DENY" in listed
        # MATCH: every pattern that applies to the topic etl-daily (the prefixed one).
        matching = run(
            tools,
            ACLS,
            broker.bootstrap,
            "--list",
            "--topic",
            "etl-daily",
            "--resource-pattern-type",
            "match",
        ).stdout
        assert "name=etl-, patternType=PREFIXED" in matching and "orders" not in matching
        broker.stop()
        broker.start()  # kept in the metadata store: a restart reads them back
        again = run(tools, ACLS, broker.bootstrap, "--list", "--topic", "orders").stdout
        assert "User:alice" in again, again
        run(
            tools,
            ACLS,
            broker.bootstrap,
            "--remove",
            "--force",
            "--allow-principal",
            "User:alice",
            "--operation",
            "Read",
            "--topic",
            "orders",
        )
        gone = run(tools, ACLS, broker.bootstrap, "--list", "--topic", "orders").stdout
        assert "User:alice" not in gone, gone
        assert "User:bob" in run(tools, ACLS, broker.bootstrap, "--list").stdout
    finally:
        broker.stop()


@pytest.fixture
def cluster2(tmp_path: Path, zk_connect: str) -> Iterator[ProcessCluster]:
    c = ProcessCluster(tmp_path, zk_connect, 2, SECURED)
    try:
        yield c
    finally:
        c.kill()


def _kafka_json(*acls: dict[str, str]) -> bytes:
    return json.dumps({"version": 1, "acls": list(acls)}).encode()


def test_kafka_acls_on_zookeeper_every_broker_follows(
    tools: KafkaDist, cluster2: ProcessCluster, zk_connect: str
) -> None:
    zk = raw_client(zk_connect)
    try:
        # A Kafka 3.x cluster's ACLs, there before any tierlog broker starts.
        zk.create(
            "/kafka-acl/Topic/legacy",
            _kafka_json(
                {
                    "principal": "User:carol",
                    "permissionType": "Allow",
                    "operation": "Describe",
                    "host": "*",
                }
            ),
            makepath=True,
        )
        cluster2.start()
        first, second = (b.bootstrap for b in cluster2.brokers)
        assert "User:carol" in run(tools, ACLS, second, "--list", "--topic", "legacy").stdout
        add_acls(tools, first)
        # Kafka's znodes and JSON, and the notifications naming what changed.
        data, _ = zk.get("/kafka-acl/Topic/orders")
        assert json.loads(data) == {
            "version": 1,
            "acls": [
                {
                    "principal": "User:alice",
                    "permissionType": "Allow",
                    "operation": "Read",
                    "host": "*",
                }
            ],
        }
        prefixed, _ = zk.get("/kafka-acl-extended/prefixed/Topic/etl-")
        assert json.loads(prefixed)["acls"][0]["permissionType"] == "Deny"
        literal_changes = [
            zk.get(f"/kafka-acl-changes/{c}")[0] for c in zk.get_children("/kafka-acl-changes")
        ]
        assert b"Topic:orders" in literal_changes or b"TOPIC:orders" in literal_changes
        extended = [
            json.loads(zk.get(f"/kafka-acl-extended-changes/{c}")[0])
            for c in zk.get_children("/kafka-acl-extended-changes")
        ]
        assert {"name": "etl-", "patternType": "PREFIXED"}.items() <= extended[-1].items()
        # The other broker's cache followed the notifications.
        wait_until(
            lambda: "User:alice" in run(tools, ACLS, second, "--list", "--topic", "orders").stdout,
            "the second broker to see the ACL created through the first",
        )
        # A change written by hand as Kafka 3.x's kafka-acls --authorizer-properties did:
        # the znode, then a notification naming it.
        zk.set(
            "/kafka-acl/Topic/legacy",
            _kafka_json(
                {
                    "principal": "User:dave",
                    "permissionType": "Allow",
                    "operation": "Read",
                    "host": "*",
                }
            ),
        )
        zk.create("/kafka-acl-changes/acl_changes_", b"Topic:legacy", sequence=True)
        for bootstrap in (first, second):
            wait_until(
                lambda b=bootstrap: (
                    "User:dave" in run(tools, ACLS, b, "--list", "--topic", "legacy").stdout
                ),
                f"{bootstrap} to follow a notification written by hand",
            )
        run(tools, ACLS, second, "--remove", "--force", "--topic", "orders")
        wait_until(lambda: not zk.exists("/kafka-acl/Topic/orders"), "the empty znode deleted")
        wait_until(
            lambda: (
                "User:alice" not in run(tools, ACLS, first, "--list", "--topic", "orders").stdout
            ),
            "the first broker to see the removal",
        )
    finally:
        zk.stop()
        zk.close()


def _check_scram(text: str, password: str, iterations: int) -> None:
    """Kafka's stored form of a SCRAM-SHA-256 credential of ``password`` (RFC 5802)."""
    fields = dict(part.split("=", 1) for part in text.split(","))
    assert int(fields["iterations"]) == iterations
    salt = base64.b64decode(fields["salt"])
    salted = hashlib.pbkdf2_hmac("sha256", password.encode(), salt, iterations)
    client_key = hmac.new(salted, b"Client Key", "sha256").digest()
    assert base64.b64decode(fields["stored_key"]) == hashlib.sha256(client_key).digest()
    assert (
        base64.b64decode(fields["server_key"]) == hmac.new(salted, b"Server Key", "sha256").digest()
    )


def _configs(tools: KafkaDist, bootstrap: str, *args: str, ok: bool = True) -> ToolRun:
    return run(tools, kafka_tools.CONFIGS, bootstrap, *args, ok=ok)


def test_kafka_configs_scram_users_on_zookeeper(
    tools: KafkaDist, cluster2: ProcessCluster, zk_connect: str
) -> None:
    cluster2.start()
    bootstrap = cluster2.brokers[0].bootstrap
    password = "alice-s3cret-pw"
    _configs(
        tools,
        bootstrap,
        "--alter",
        "--entity-type",
        "users",
        "--entity-name",
        "alice",
        "--add-config",
        f"SCRAM-SHA-256=[iterations=8192,password={password}]",
    )
    described = _configs(
        tools, bootstrap, "--describe", "--entity-type", "users", "--entity-name", "alice"
    ).stdout
    assert "SCRAM-SHA-256=iterations=8192" in described, described
    zk = raw_client(zk_connect)
    try:
        data, _ = zk.get("/config/users/alice")
        stored = json.loads(data)
        assert stored["version"] == 1
        _check_scram(stored["config"]["SCRAM-SHA-256"], password, 8192)
        changes = [
            json.loads(zk.get(f"/config/changes/{c}")[0])
            for c in zk.get_children("/config/changes")
        ]
        assert {"version": 2, "entity_path": "users/alice"} in changes
    finally:
        zk.stop()
        zk.close()
    # A quota on the same user keeps the credential (one znode holds both).
    _configs(
        tools,
        bootstrap,
        "--alter",
        "--entity-type",
        "users",
        "--entity-name",
        "alice",
        "--add-config",
        "producer_byte_rate=1048576",
    )
    again = _configs(
        tools, bootstrap, "--describe", "--entity-type", "users", "--entity-name", "alice"
    ).stdout
    assert "SCRAM-SHA-256=iterations=8192" in again, again
    _configs(
        tools,
        bootstrap,
        "--alter",
        "--entity-type",
        "users",
        "--entity-name",
        "alice",
        "--delete-config",
        "SCRAM-SHA-256",
    )
    gone = _configs(
        tools, bootstrap, "--describe", "--entity-type", "users", "--entity-name", "alice"
    ).stdout
    assert "SCRAM-SHA-256" not in gone, gone
    for broker in cluster2.brokers:
        assert password not in broker.log_text()


def test_kafka_configs_scram_users_on_a_single_node(tools: KafkaDist, tmp_path: Path) -> None:
    broker = BrokerProcess(tmp_path / "data", SECURED).start()
    password = "bob-pw-0123456789"
    try:
        _configs(
            tools,
            broker.bootstrap,
            "--alter",
            "--entity-type",
            "users",
            "--entity-name",
            "bob",
            "--add-config",
            f"SCRAM-SHA-512=[password={password}]",
        )
        broker.stop()
        broker.start()
        described = _configs(
            tools, broker.bootstrap, "--describe", "--entity-type", "users", "--entity-name", "bob"
        ).stdout
        assert "SCRAM-SHA-512=iterations=4096" in described, described
        too_few = _configs(
            tools,
            broker.bootstrap,
            "--alter",
            "--entity-type",
            "users",
            "--entity-name",
            "bob",
            "--add-config",
            "SCRAM-SHA-256=[iterations=1000,password=x]",
            ok=False,
        )
        assert too_few.returncode != 0 and "iterations" in too_few.output.lower(), too_few.output
    finally:
        broker.stop()
    metadata = (tmp_path / "data" / "tierlog-metadata.json").read_text()
    assert "SCRAM-SHA-512" in metadata and password not in metadata
    assert password not in broker.log_text()
