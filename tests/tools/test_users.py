"""``tierlog users``: SCRAM credentials written before any broker runs, into a single node's
data dir (then read by its broker: DescribeUserScramCredentials) and into ZooKeeper in
Kafka's layout (``/config/users/<user>`` and a change notification); the password is read
from a file, stored only in Kafka's salted form (checked by RFC 5802 here) and never
printed; mistakes get one line."""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import re
from pathlib import Path

from kazoo.client import KazooClient

from tests.broker.harness import BrokerProcess
from tests.cli import one_line_failure
from tests.integration.conftest import zk_connect, zookeeper_server  # noqa: F401
from tests.raw_client import RawClient, request
from tests.tools.cli import tierlog
from tierlog.protocol import ApiKey

PASSWORD = "first-admin-pw-42"
STORED = re.compile(r"salt=[^,\"]+,stored_key=[^,\"]+,server_key=[^,\"]+,iterations=\d+")


def check_scram(text: str, password: str, digest: str, iterations: int) -> None:
    """``text`` is Kafka's stored form of a SCRAM credential of ``password``."""
    fields = dict(part.split("=", 1) for part in text.split(","))
    assert int(fields["iterations"]) == iterations
    salted = hashlib.pbkdf2_hmac(
        digest, password.encode(), base64.b64decode(fields["salt"]), iterations
    )
    client_key = hmac.new(salted, b"Client Key", digest).digest()
    assert base64.b64decode(fields["stored_key"]) == hashlib.new(digest, client_key).digest()
    assert base64.b64decode(fields["server_key"]) == (
        hmac.new(salted, b"Server Key", digest).digest()
    )


def password_file(tmp_path: Path) -> str:
    path = tmp_path / "admin.password"
    path.write_text(PASSWORD + "\n")
    return str(path)


def test_users_in_a_data_dir_are_read_by_its_broker(tmp_path: Path) -> None:
    data = tmp_path / "data"
    data.mkdir()
    added = tierlog(
        "users",
        "add",
        "admin",
        "--mechanism",
        "SCRAM-SHA-256",
        "--password-file",
        password_file(tmp_path),
        "--data-dir",
        str(data),
    )
    assert added.returncode == 0, added.stderr
    assert PASSWORD not in added.stdout + added.stderr
    piped = tierlog(
        "users",
        "add",
        "etl",
        "--mechanism",
        "scram-sha-512",
        "--iterations",
        "8192",
        "--password-file",
        "-",
        "--data-dir",
        str(data),
        stdin="etl-pw\n",
    )
    assert piped.returncode == 0, piped.stderr
    listed = tierlog("users", "list", "--data-dir", str(data))
    assert listed.stdout.splitlines() == [
        "admin\tSCRAM-SHA-256\titerations=4096",
        "etl\tSCRAM-SHA-512\titerations=8192",
    ], listed
    stored = "\n".join(p.read_text() for p in data.rglob("*") if p.is_file())
    assert PASSWORD not in stored
    check_scram(STORED.findall(stored)[0], PASSWORD, "sha256", 4096)

    broker = BrokerProcess(data).start()
    try:
        client = RawClient(broker.port)
        try:
            answer = client.call(
                request(
                    ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS,
                    0,
                    {"users": [{"name": "admin"}, {"name": "etl"}]},
                )
            )
        finally:
            client.close()
    finally:
        broker.stop()
    assert [
        (r.user, r.error_code, [(int(c.mechanism), c.iterations) for c in r.credential_infos])
        for r in answer.results
    ] == [("admin", 0, [(1, 4096)]), ("etl", 0, [(2, 8192)])], answer  # 1: SHA-256, 2: SHA-512
    assert PASSWORD not in broker.log_text()

    deleted = tierlog(
        "users", "delete", "etl", "--mechanism", "SCRAM-SHA-512", "--data-dir", str(data)
    )
    assert deleted.returncode == 0, deleted.stderr
    assert tierlog("users", "list", "--data-dir", str(data)).stdout.startswith("admin\t")
    again = tierlog(
        "users", "delete", "etl", "--mechanism", "SCRAM-SHA-512", "--data-dir", str(data)
    )
    assert "has no SCRAM-SHA-512 credential" in one_line_failure(again)


def test_users_in_zookeeper_in_kafkas_layout(tmp_path: Path, zk_connect: str) -> None:  # noqa: F811
    added = tierlog(
        "users",
        "add",
        "alice@example.com",
        "--mechanism",
        "SCRAM-SHA-256",
        "--password-file",
        password_file(tmp_path),
        "--zookeeper",
        zk_connect,
    )
    assert added.returncode == 0, added.stderr
    hosts, chroot = zk_connect.split("/", 1)
    zk = KazooClient(hosts=hosts)
    zk.start(timeout=10)
    try:
        # Kafka url-encodes the user in the znode name.
        data, _ = zk.get(f"/{chroot}/config/users/alice%40example.com")
        stored = json.loads(data)
        assert stored["version"] == 1 and list(stored["config"]) == ["SCRAM-SHA-256"]
        check_scram(stored["config"]["SCRAM-SHA-256"], PASSWORD, "sha256", 4096)
        notes = [
            json.loads(zk.get(f"/{chroot}/config/changes/{c}")[0])
            for c in zk.get_children(f"/{chroot}/config/changes")
        ]
        assert {"version": 2, "entity_path": "users/alice%40example.com"} in notes
    finally:
        zk.stop()
    listed = tierlog("users", "list", "--zookeeper", zk_connect)
    assert listed.stdout == "alice@example.com\tSCRAM-SHA-256\titerations=4096\n", listed


def test_users_mistakes_get_one_line(tmp_path: Path) -> None:
    data = str(tmp_path)
    missing = tierlog(
        "users",
        "add",
        "a",
        "--mechanism",
        "SCRAM-SHA-256",
        "--password-file",
        str(tmp_path / "nope"),
        "--data-dir",
        data,
    )
    assert "cannot read the password file" in one_line_failure(missing)
    unknown = tierlog(
        "users",
        "add",
        "a",
        "--mechanism",
        "SCRAM-MD5",
        "--password-file",
        password_file(tmp_path),
        "--data-dir",
        data,
    )
    assert "unknown SCRAM mechanism" in one_line_failure(unknown)
    few = tierlog(
        "users",
        "add",
        "a",
        "--mechanism",
        "SCRAM-SHA-256",
        "--iterations",
        "10",
        "--password-file",
        password_file(tmp_path),
        "--data-dir",
        data,
    )
    assert "Iterations 10 outside [4096, 16384]" in one_line_failure(few)
    empty = tierlog(
        "users",
        "add",
        "a",
        "--mechanism",
        "SCRAM-SHA-256",
        "--password-file",
        "-",
        "--data-dir",
        data,
        stdin="\n",
    )
    assert "password file is empty" in one_line_failure(empty)
