"""ReplicaManager's record operations against a real broker: internal topics refuse
clients' writes, as Kafka's ReplicaManager does."""

from __future__ import annotations

from confluent_kafka import Consumer, KafkaException, Producer

from tests.broker.harness import BrokerProcess
from tests.raw_client import RawClient, request
from tierlog.protocol import ApiKey, ErrorCode
from tierlog.records.builder import Record, build_batch

OFFSETS = "__consumer_offsets"


def test_produce_to_consumer_offsets_is_refused(broker: BrokerProcess) -> None:
    # A group commit creates __consumer_offsets (and the broker's own writes go through).
    consumer = Consumer(
        {"bootstrap.servers": broker.bootstrap, "group.id": "g", "enable.auto.commit": False}
    )
    try:
        consumer.commit(offsets=[], asynchronous=False)
    except KafkaException:
        pass  # "no offsets to commit" is fine: the coordinator lookup created the topic
    finally:
        consumer.close()

    client = RawClient(broker.port)
    try:
        answer = client.call(
            request(
                ApiKey.PRODUCE,
                9,
                {
                    "transactional_id": None,
                    "acks": -1,
                    "timeout": 5000,
                    "topic_data": [
                        {
                            "name": OFFSETS,
                            "partition_data": [
                                {"index": 0, "records": build_batch([Record(b"k", b"v")])}
                            ],
                        }
                    ],
                },
            )
        )
    finally:
        client.close()
    (topic,) = answer.responses
    assert topic.name == OFFSETS
    assert int(topic.partition_responses[0].error_code) == ErrorCode.invalid_topic_exception

    # A real client gets the same answer, not a retry loop.
    errors: list[str] = []
    producer = Producer({"bootstrap.servers": broker.bootstrap, "message.timeout.ms": 10_000})
    producer.produce(OFFSETS, b"v", partition=0, on_delivery=lambda e, _m: errors.append(str(e)))
    producer.flush(15)
    assert len(errors) == 1 and "val=17" in errors[0]  # INVALID_TOPIC_EXCEPTION
