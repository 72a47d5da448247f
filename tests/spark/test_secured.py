"""The ``tierlog`` source and sink in Spark local mode against a broker whose only client
listener is SASL_SSL (SCRAM-SHA-256), configured as Spark's Kafka source is:
``kafka.security.protocol``, ``kafka.sasl.*`` and ``kafka.ssl.*`` (issue 22). The driver
plans over it and the executors fetch over it; the sink writes over it. A wrong password
fails the query with one error naming the mechanism, and no password is ever shown."""

from __future__ import annotations

import io
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from tests.broker.harness import BrokerProcess
from tierlog.security.local_ca import LocalCa
from tierlog.security.password import Password
from tierlog.tools.users import add_user

pytestmark = pytest.mark.timeout(300)

SCRAM_JAAS = "org.apache.kafka.common.security.scram.ScramLoginModule required;"
PASSWORD = "etl-pa55word"


@dataclass
class Secured:
    broker: BrokerProcess
    ca: Path

    def options(self, password: str = PASSWORD) -> dict[str, str]:
        return {
            "kafka.bootstrap.servers": f"127.0.0.1:{self.broker.ports['SASL_SSL']}",
            "kafka.security.protocol": "SASL_SSL",
            "kafka.sasl.mechanism": "SCRAM-SHA-256",
            "kafka.sasl.jaas.config": (
                "org.apache.kafka.common.security.scram.ScramLoginModule required "
                f'username="etl" password="{password}";'
            ),
            "kafka.ssl.truststore.type": "PEM",
            "kafka.ssl.truststore.location": str(self.ca),
        }


@pytest.fixture(scope="module")
def secured(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Secured]:
    tmp = tmp_path_factory.mktemp("spark-secured")
    ca = LocalCa.create()
    ca_path = ca.write_ca(tmp / "ca.pem")
    keystore = ca.issue("localhost").write_pem_keystore(tmp / "broker.pem")
    data = tmp / "data"
    data.mkdir()
    add_user("etl", "SCRAM-SHA-256", Password(PASSWORD), io.StringIO(), data_dir=data)
    broker = BrokerProcess(
        data,
        {
            # PLAINTEXT is the test's own back door (set-up and checks); Spark uses SASL_SSL.
            "listeners": "PLAINTEXT://127.0.0.1:0,SASL_SSL://127.0.0.1:0",
            "ssl.keystore.location": str(keystore),
            "listener.name.sasl_ssl.sasl.enabled.mechanisms": "SCRAM-SHA-256",
            "listener.name.sasl_ssl.scram-sha-256.sasl.jaas.config": SCRAM_JAAS,
            "auto.create.topics.enable": "false",
        },
    ).start()
    try:
        admin = AdminClient({"bootstrap.servers": broker.bootstrap})
        for future in admin.create_topics(
            [NewTopic("events", 2, 1), NewTopic("copies", 2, 1)]
        ).values():
            future.result(30)
        producer = Producer({"bootstrap.servers": broker.bootstrap})
        for n in range(100):
            producer.produce("events", f"v{n}".encode(), key=f"k{n}".encode(), partition=n % 2)
        assert producer.flush(30) == 0
        yield Secured(broker, ca_path)
    finally:
        broker.stop()


def test_the_source_reads_a_topic_over_sasl_ssl(spark: Any, secured: Secured) -> None:
    rows = (
        spark.read.format("tierlog")
        .options(**secured.options(), subscribe="events")
        .load()
        .selectExpr("CAST(value AS STRING) AS v")
        .collect()
    )
    assert sorted(r.v for r in rows) == sorted(f"v{n}" for n in range(100))


def test_the_sink_writes_a_dataframe_over_sasl_ssl(spark: Any, secured: Secured) -> None:
    df = spark.createDataFrame([(f"k{n}", f"w{n}") for n in range(40)], "key string, value string")
    df.write.format("tierlog").mode("append").options(**secured.options(), topic="copies").save()
    rows = (
        spark.read.format("tierlog")
        .options(**secured.options(), subscribe="copies")
        .load()
        .selectExpr("CAST(key AS STRING) AS k", "CAST(value AS STRING) AS v")
        .collect()
    )
    assert sorted((r.k, r.v) for r in rows) == sorted((f"k{n}", f"w{n}") for n in range(40))


def test_a_wrong_password_fails_with_the_mechanism_named_and_no_password_shown(
    spark: Any, secured: Secured
) -> None:
    wrong = "not-the-pa55word"
    with pytest.raises(Exception) as failed:  # Spark wraps the Python error
        spark.read.format("tierlog").options(
            **secured.options(wrong), subscribe="events"
        ).load().collect()
    message = str(failed.value)
    assert "SASL SCRAM-SHA-256 authentication" in message
    assert wrong not in message and PASSWORD not in message


def test_an_unsupported_security_option_is_named(spark: Any, secured: Secured) -> None:
    options = {**secured.options(), "kafka.sasl.kerberos.service.name": "kafka"}
    with pytest.raises(Exception) as failed:
        spark.read.format("tierlog").options(**options, subscribe="events").load().collect()
    message = str(failed.value)
    assert "kafka.sasl.kerberos.service.name" in message
    assert PASSWORD not in message


def test_a_pipeline_ingests_over_sasl_ssl_with_tierlog_client_config(
    spark: Any, secured: Secured, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Pipelines take the cluster's security from the file TIERLOG_CLIENT_CONFIG names;
    the password comes from the environment (${env:...}), in no option or parameter."""
    from pipelines import client_security
    from pipelines.ingest import ingest

    config = tmp_path / "client.properties"
    config.write_text(
        "security.protocol=SASL_SSL\n"
        "sasl.mechanism=SCRAM-SHA-256\n"
        "config.providers=env\n"
        "config.providers.env.class="
        "org.apache.kafka.common.config.provider.EnvVarConfigProvider\n"
        "sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required "
        'username="etl" password="${env:ETL_PASSWORD}";\n'
        "ssl.truststore.type=PEM\n"
        f"ssl.truststore.location={secured.ca}\n"
    )
    monkeypatch.setenv(client_security.ENV, str(config))
    monkeypatch.setenv("ETL_PASSWORD", PASSWORD)
    bootstrap = f"127.0.0.1:{secured.broker.ports['SASL_SSL']}"
    table = tmp_path / "bronze"
    result = ingest(spark, bootstrap_servers=bootstrap, topic="events", table_path=str(table))
    assert result.rows_written == 100
    rows = spark.read.format("delta").load(str(table)).selectExpr("CAST(value AS STRING) AS v")
    assert sorted(r.v for r in rows.collect()) == sorted(f"v{n}" for n in range(100))
    # librdkafka's clients of the pipelines (exactly_once, the remote-URL lookup) too.
    admin = AdminClient({"bootstrap.servers": bootstrap, **client_security.librdkafka()})
    assert "events" in admin.list_topics(timeout=30).topics
    # And without the file the SASL_SSL listener is not reachable in clear text.
    monkeypatch.setenv("ETL_PASSWORD", "wrong-password")
    with pytest.raises(Exception) as failed:
        ingest(spark, bootstrap_servers=bootstrap, topic="events", table_path=str(table))
    assert "SASL SCRAM-SHA-256 authentication" in str(failed.value)
    assert "wrong-password" not in str(failed.value) and PASSWORD not in str(failed.value)
