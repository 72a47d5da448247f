"""The console tools over SASL_SSL with a --command-config written for Kafka's own tools
(Java keys: sasl.jaas.config, ssl.truststore.*), as an operator's admin.properties is."""

from __future__ import annotations

import io
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.broker.harness import BrokerProcess
from tests.tools.cli import tierlog
from tierlog.security.local_ca import LocalCa
from tierlog.security.password import Password
from tierlog.tools.users import add_user

pytestmark = pytest.mark.timeout(180)

SCRAM_JAAS = "org.apache.kafka.common.security.scram.ScramLoginModule required;"


@pytest.fixture(scope="module")
def secured(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[BrokerProcess, Path]]:
    tmp = tmp_path_factory.mktemp("tools-secured")
    ca = LocalCa.create()
    ca_path = ca.write_ca(tmp / "ca.pem")
    keystore = ca.issue("localhost").write_pem_keystore(tmp / "broker.pem")
    data = tmp / "data"
    data.mkdir()
    add_user("alice", "SCRAM-SHA-256", Password("alice-secret"), io.StringIO(), data_dir=data)
    broker = BrokerProcess(
        data,
        {
            "listeners": "PLAINTEXT://127.0.0.1:0,SASL_SSL://127.0.0.1:0",
            "ssl.keystore.location": str(keystore),
            "ssl.truststore.location": str(ca_path),
            "listener.name.sasl_ssl.sasl.enabled.mechanisms": "SCRAM-SHA-256",
            "listener.name.sasl_ssl.scram-sha-256.sasl.jaas.config": SCRAM_JAAS,
            "connection.failed.authentication.delay.ms": "100",
        },
    ).start()
    try:
        yield broker, ca_path
    finally:
        broker.stop()


def command_config(tmp_path: Path, broker: BrokerProcess, ca: Path, password: str) -> Path:
    path = tmp_path / "admin.properties"
    path.write_text(
        f"bootstrap.servers=127.0.0.1:{broker.ports['SASL_SSL']}\n"
        "security.protocol=SASL_SSL\n"
        "sasl.mechanism=SCRAM-SHA-256\n"
        "sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required "
        f'username="alice" password="{password}";\n'
        "ssl.truststore.type=PEM\n"
        f"ssl.truststore.location={ca}\n"
    )
    return path


def test_the_tools_work_over_sasl_ssl_with_kafkas_client_keys(
    secured: tuple[BrokerProcess, Path], tmp_path: Path
) -> None:
    broker, ca = secured
    config = str(command_config(tmp_path, broker, ca, "alice-secret"))
    created = tierlog("topics", "create", "secured", "--command-config", config)
    assert created.returncode == 0, created.stderr
    produced = tierlog("produce", "secured", "--command-config", config, stdin="a\nb\n")
    assert produced.returncode == 0, produced.stderr
    consumed = tierlog(
        "consume", "secured", "--from-beginning", "--max-messages", "2",
        "--command-config", config, "--timeout-ms", "20000",
    )  # fmt: skip
    assert consumed.returncode == 0, consumed.stderr
    assert consumed.stdout.split() == ["a", "b"]
    listed = tierlog("topics", "list", "--command-config", config)
    assert "secured" in listed.stdout.split(), listed.stderr


def test_a_wrong_password_is_one_line_and_never_shown(
    secured: tuple[BrokerProcess, Path], tmp_path: Path
) -> None:
    broker, ca = secured
    config = str(command_config(tmp_path, broker, ca, "not-the-password"))
    result = tierlog("topics", "list", "--command-config", config, "--request-timeout-ms", "8000")
    assert result.returncode == 1, (result.stdout, result.stderr)
    assert "Traceback" not in result.stderr
    assert "not-the-password" not in result.stderr + result.stdout
    assert "uthentication" in result.stderr, result.stderr


def test_a_bad_security_key_names_the_key(tmp_path: Path) -> None:
    path = tmp_path / "bad.properties"
    path.write_text(
        "security.protocol=SASL_SSL\nsasl.mechanism=GSSAPI\n"
        "sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required "
        'username="u" password="p";\n'
    )
    result = tierlog("topics", "list", "--command-config", str(path))
    assert result.returncode == 1
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("tierlog: --command-config: "), lines
    assert "sasl.mechanism" in lines[0] and '"p"' not in lines[0]
