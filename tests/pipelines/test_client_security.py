"""pipelines.client_security: the settings of TIERLOG_CLIENT_CONFIG (a Kafka client
properties file, ${env:...} references resolved) in the three shapes the pipelines' clients
take. Against a real SASL_SSL broker: tests/spark/test_secured.py."""

from __future__ import annotations

from pathlib import Path

import pytest

from pipelines import client_security
from tierlog.security.api import SecurityProtocol
from tierlog.util.configdef import ConfigError

JAAS = (
    "org.apache.kafka.common.security.plain.PlainLoginModule required "
    'username="etl" password="${env:ETL_PASSWORD}";'
)


def write_config(tmp_path: Path, ca: str = "/etc/ca.pem") -> Path:
    path = tmp_path / "client.properties"
    path.write_text(
        "security.protocol=SASL_SSL\n"
        "sasl.mechanism=PLAIN\n"
        "config.providers=env\n"
        "config.providers.env.class="
        "org.apache.kafka.common.config.provider.EnvVarConfigProvider\n"
        f"sasl.jaas.config={JAAS}\n"
        "ssl.truststore.type=PEM\n"
        f"ssl.truststore.location={ca}\n"
        "client.id=ignored\n"
    )
    return path


def test_unset_means_plaintext(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(client_security.ENV, raising=False)
    assert client_security.client_properties() == {}
    assert client_security.spark_options() == {}
    assert client_security.client_security() is None
    assert client_security.librdkafka() == {}


def test_the_file_gives_each_client_its_shape(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv(client_security.ENV, str(write_config(tmp_path)))
    monkeypatch.setenv("ETL_PASSWORD", "from-the-env-9")
    options = client_security.spark_options()
    assert options["kafka.security.protocol"] == "SASL_SSL"
    assert 'password="from-the-env-9"' in options["kafka.sasl.jaas.config"]
    assert "kafka.client.id" not in options  # only the security keys
    assert not any("config.providers" in key for key in options)
    security = client_security.client_security()
    assert security is not None and security.protocol is SecurityProtocol.SASL_SSL
    rdkafka = client_security.librdkafka()
    assert rdkafka["security.protocol"] == "sasl_ssl"
    assert rdkafka["sasl.username"] == "etl"
    assert rdkafka["sasl.password"] == "from-the-env-9"
    assert rdkafka["ssl.ca.location"] == "/etc/ca.pem"


def test_an_unreadable_file_names_the_variable(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv(client_security.ENV, str(tmp_path / "missing.properties"))
    with pytest.raises(ConfigError) as raised:
        client_security.client_properties()
    assert raised.value.key == client_security.ENV


def test_an_unresolved_reference_names_the_key(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv(client_security.ENV, str(write_config(tmp_path)))
    monkeypatch.delenv("ETL_PASSWORD", raising=False)
    with pytest.raises(ConfigError) as raised:
        client_security.client_properties()
    assert raised.value.key == "sasl.jaas.config"
