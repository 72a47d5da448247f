"""The table of every Kafka 4.x API (api_catalog) agrees with what the broker decodes
(versions.SUPPORTED) and with the handlers."""

from __future__ import annotations

from tierlog.broker.handlers.routes import HANDLERS
from tierlog.protocol.api_catalog import CATALOG, KAFKA_APIS, ApiStatus
from tierlog.protocol.versions import SUPPORTED, ApiKey
from tierlog.security.authz_table import SECURITY_APIS


def test_every_kafka_key_is_listed_once_in_order() -> None:
    keys = [api.key for api in KAFKA_APIS]
    assert keys == list(range(len(keys)))
    assert keys[-1] >= 94  # Kafka 4.4's last key (UnregisterController)


def test_implemented_means_decoded_and_handled() -> None:
    implemented = {api.key for api in KAFKA_APIS if api.status is ApiStatus.IMPLEMENTED}
    assert implemented == set(SUPPORTED)
    assert implemented == set(HANDLERS)


def test_every_api_not_answered_says_why() -> None:
    for api in KAFKA_APIS:
        if api.status is ApiStatus.IMPLEMENTED:
            assert not api.reason, api.name
        else:
            assert len(api.reason) > 20, f"{api.name} is {api.status.value} without a reason"


def test_no_security_api_waits_any_more() -> None:
    # The ACL, SCRAM credential and SASL APIs are all served (SASL's on the listeners).
    waiting = {api.key for api in KAFKA_APIS if api.status is ApiStatus.SECURITY}
    assert waiting == set() and set(SUPPORTED) >= SECURITY_APIS


def test_names_are_kafkas() -> None:
    # ApiKey's enum names are Kafka's (PRODUCE, DESCRIBE_CLUSTER...), so the catalog's
    # CamelCase names must match them for every implemented key.
    for key in ApiKey:
        camel = "".join(part.title() for part in key.name.split("_"))
        assert CATALOG[int(key)].name == camel


def test_our_versions_lie_inside_kafkas() -> None:
    for key, (low, high) in SUPPORTED.items():
        kafka = CATALOG[key].kafka_versions
        assert kafka is not None
        assert kafka[0] <= low <= high <= kafka[1], CATALOG[key].name
