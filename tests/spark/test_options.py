"""Source options: Spark's Kafka-source names and values, errors that name the option."""

from __future__ import annotations

import json

import pytest

from tierlog.spark.options import DEFAULT_LEADER_SPLIT_OFFSETS, OffsetBound, parse
from tierlog.util.configdef import ConfigError

BASE = {"kafka.bootstrap.servers": "127.0.0.1:9092", "subscribe": "a,b"}


def test_defaults_for_batch_and_streaming() -> None:
    batch = parse(BASE)
    assert batch.subscribe == ("a", "b")
    assert batch.starting == OffsetBound("earliest")
    assert batch.ending == OffsetBound("latest")
    assert not batch.include_headers and not batch.include_tier and batch.fail_on_data_loss
    assert batch.leader_split_offsets == DEFAULT_LEADER_SPLIT_OFFSETS
    stream = parse(BASE, streaming=True)
    assert stream.starting == OffsetBound("latest")  # Spark's streaming default


def test_names_are_case_insensitive_like_pyspark_hands_them_over() -> None:
    opts = parse({**BASE, "startingOffsets": "latest", "maxOffsetsPerTrigger": "10"})
    assert opts.starting == OffsetBound("latest")
    assert opts.max_offsets_per_trigger == 10


def test_offsets_json_with_earliest_and_latest_markers() -> None:
    opts = parse(
        {**BASE, "startingoffsets": '{"a": {"0": 5, "1": -2}}', "endingoffsets": '{"a": {"0": -1}}'}
    )
    assert opts.starting.kind == "offsets"
    assert dict(opts.starting.offsets) == {("a", 0): 5, ("a", 1): -2}
    assert dict(opts.ending.offsets) == {("a", 0): -1}


def test_timestamps_take_precedence_over_offsets_as_in_spark() -> None:
    opts = parse({**BASE, "startingtimestamp": "1700000000000", "startingoffsets": "latest"})
    assert opts.starting == OffsetBound("timestamp", timestamp=1_700_000_000_000)
    per = parse({**BASE, "startingoffsetsbytimestamp": '{"a": {"0": 17}}'})
    assert per.starting.kind == "timestamps" and dict(per.starting.offsets) == {("a", 0): 17}


def test_assign_and_pattern() -> None:
    assigned = parse({"kafka.bootstrap.servers": "h:1", "assign": '{"t": [1, 0]}'})
    assert assigned.assign == (("t", 0), ("t", 1))
    pattern = parse({"kafka.bootstrap.servers": "h:1", "subscribepattern": "act.*"})
    assert pattern.topic_matches("activity") and not pattern.topic_matches("xactivity")


def test_remote_options_nest_like_the_brokers() -> None:
    opts = parse(
        {
            **BASE,
            "remote.log.storage.url": "s3://bucket/tiers",
            "remote.log.storage.options.client_kwargs.endpoint_url": "http://127.0.0.1:5000",
            "remote.log.storage.options.anon": "false",
        }
    )
    assert opts.remote_url == "s3://bucket/tiers"
    assert opts.storage_options == {
        "client_kwargs": {"endpoint_url": "http://127.0.0.1:5000"},
        "anon": False,
    }


def test_remote_options_as_json_keep_their_case_through_pysparks_lower_casing() -> None:
    # PySpark lower-cases option names; the JSON value is handed over as written.
    raw = {
        **BASE,
        "remote.log.storage.options": json.dumps(
            {"s3_additional_kwargs": {"ServerSideEncryption": "AES256"}}
        ),
        "remote.log.storage.options.client_kwargs.endpoint_url": "http://127.0.0.1:5000",
    }
    opts = parse({k.lower(): v for k, v in raw.items()})
    assert opts.storage_options == {
        "s3_additional_kwargs": {"ServerSideEncryption": "AES256"},
        "client_kwargs": {"endpoint_url": "http://127.0.0.1:5000"},
    }


def test_remote_only_needs_no_broker_but_a_store() -> None:
    opts = parse(
        {"subscribe": "a", "tierlog.tiers": "remote", "remote.log.storage.url": "file:///r"}
    )
    assert opts.remote_only and opts.bootstrap_servers is None
    with pytest.raises(ConfigError, match=r"remote\.log\.storage\.url"):
        parse({"subscribe": "a", "tierlog.tiers": "remote"})


@pytest.mark.parametrize(
    ("options", "named"),
    [
        ({"subscribe": "a"}, "kafka.bootstrap.servers"),
        ({"kafka.bootstrap.servers": "h:1"}, "subscribe"),
        ({**BASE, "assign": '{"a": [0]}'}, "subscribe"),
        ({**BASE, "startingoffsets": "{not json"}, "startingoffsets"),
        ({**BASE, "startingoffsets": '{"a": {"x": 1}}'}, "startingoffsets"),
        ({**BASE, "startingoffsets": '{"a": {"0": -3}}'}, "startingoffsets"),
        ({**BASE, "endingoffsets": "earliest"}, "endingOffsets"),
        ({**BASE, "endingoffsets": '{"a": {"0": -2}}'}, "endingOffsets"),
        ({**BASE, "maxoffsetspertrigger": "0"}, "maxoffsetspertrigger"),
        ({**BASE, "maxoffsetspertrigger": "lots"}, "maxoffsetspertrigger"),
        ({**BASE, "includeheaders": "yes"}, "includeheaders"),
        ({**BASE, "tierlog.tiers": "cold"}, "tierlog.tiers"),
        ({**BASE, "kafka.isolation.level": "read_most"}, "kafka.isolation.level"),
        ({**BASE, "subscribepattern": "("}, "subscribe"),
        ({**BASE, "no.such.option": "1"}, "no.such.option"),
        ({"kafka.bootstrap.servers": "h:1", "assign": '{"a": ["0"]}'}, "assign"),
    ],
)
def test_bad_options_name_the_option(options: dict[str, str], named: str) -> None:
    with pytest.raises(ConfigError) as caught:
        parse(options)
    assert named.lower() in str(caught.value).lower()


def test_ending_options_are_refused_in_streaming() -> None:
    with pytest.raises(ConfigError, match="endingoffsets"):
        parse({**BASE, "endingoffsets": "latest"}, streaming=True)


def test_isolation_level_as_in_kafkas_consumer() -> None:
    assert not parse(BASE).read_committed  # read_uncommitted is Kafka's default
    assert parse({**BASE, "kafka.isolation.level": "read_committed"}).read_committed
    assert parse({**BASE, "kafka.Isolation.Level": "READ_COMMITTED"}).read_committed
    assert not parse({**BASE, "kafka.isolation.level": "read_uncommitted"}).read_committed
    with pytest.raises(ConfigError) as caught:
        parse({**BASE, "kafka.isolation.level": "committed"})
    message = str(caught.value)
    assert "kafka.isolation.level" in message and "read_committed" in message
    assert "\n" not in message


SECURE = {
    **BASE,
    "kafka.security.protocol": "SASL_SSL",
    "kafka.sasl.mechanism": "SCRAM-SHA-512",
    "kafka.sasl.jaas.config": (
        "org.apache.kafka.common.security.scram.ScramLoginModule required "
        'username="etl" password="etl-secret";'
    ),
    "kafka.ssl.truststore.location": "/etc/ca.pem",
    "kafka.group.id": "ignored",
}


def test_security_options_reach_the_client_with_the_prefix_stripped() -> None:
    opts = parse(SECURE)
    security = opts.client_security()
    assert security is not None and security.sasl is not None
    assert (security.sasl.mechanism, security.sasl.username) == ("SCRAM-SHA-512", "etl")
    assert security.tls is not None and security.tls.truststore_location == "/etc/ca.pem"
    assert parse(BASE).client_security() is None


def test_security_options_never_show_their_secrets() -> None:
    assert "etl-secret" not in repr(parse(SECURE))
    assert "etl-secret" not in repr(parse(SECURE).client_security())


@pytest.mark.parametrize(
    ("extra", "key"),
    [
        ({"kafka.sasl.kerberos.service.name": "kafka"}, "kafka.sasl.kerberos.service.name"),
        ({"kafka.sasl.mechanism": "GSSAPI"}, "kafka.sasl.mechanism"),
        ({"kafka.security.protocol": "TLS"}, "kafka.security.protocol"),
        ({"kafka.sasl.jaas.config": 'x required password="etl-secret"'}, "kafka.sasl.jaas.config"),
    ],
)
def test_a_bad_security_option_is_named_and_its_value_not_shown(
    extra: dict[str, str], key: str
) -> None:
    with pytest.raises(ConfigError) as refused:
        parse({**SECURE, **extra})
    assert refused.value.key == key
    assert "etl-secret" not in str(refused.value)
