"""Every Kafka 4.4 topic key is honoured (TOPIC_CONFIG) or refused with a reason, in every
path that sets topic configs (issue 23 item 5)."""

from __future__ import annotations

import pytest

from tierlog.local.config import TOPIC_CONFIG, LogConfig
from tierlog.local.config_refused import KAFKA_TOPIC_KEYS, TOPIC_REFUSED, refusal
from tierlog.util.configdef import ConfigError


def test_every_kafka_topic_key_is_honoured_or_refused() -> None:
    assert (
        sorted(k for k in KAFKA_TOPIC_KEYS if k not in TOPIC_CONFIG.keys and not refusal(k)) == []
    )
    assert set(TOPIC_REFUSED) <= KAFKA_TOPIC_KEYS
    assert not set(TOPIC_REFUSED) & set(TOPIC_CONFIG.keys)
    assert set(TOPIC_CONFIG.keys) <= KAFKA_TOPIC_KEYS  # tierlog adds no topic key of its own


@pytest.mark.parametrize("key", sorted(TOPIC_REFUSED))
def test_a_refused_topic_key_names_its_reason(key: str) -> None:
    with pytest.raises(ConfigError) as refused:
        LogConfig.from_props({key: "1"})
    assert refused.value.key == key
    assert refused.value.reason.endswith(TOPIC_REFUSED[key])
