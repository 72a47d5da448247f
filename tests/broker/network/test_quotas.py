"""tierlog.broker.network.quotas: entities, Kafka's order of precedence, the sampled rate and the
throttle time (client quotas)."""

from __future__ import annotations

import asyncio
import time

import pytest

from tierlog.broker.network.quotas import (
    CONSUMER_BYTE_RATE,
    PRODUCER_BYTE_RATE,
    ClientQuotaManager,
    QuotaError,
    SampledRate,
    applicable,
    check_value,
    entity_components,
    entity_path,
)
from tierlog.util.clock import ManualClock


def test_entities_are_kafkas_zookeeper_paths() -> None:
    assert entity_path({"client-id": "app"}) == "clients/app"
    assert entity_path({"client-id": None}) == "clients/<default>"
    assert entity_path({"client-id": "a b/c", "user": None}) == "users/<default>/clients/a%20b%2Fc"
    for components in (
        {"client-id": "app"},
        {"user": "alice", "client-id": None},
        {"user": None},
    ):
        assert entity_components(entity_path(components)) == components
    with pytest.raises(QuotaError, match="ip quotas"):
        entity_path({"ip": "127.0.0.1"})
    with pytest.raises(QuotaError, match="invalid quota entity types"):
        entity_path({"group": "g"})


def test_kafkas_quota_keys_are_accepted() -> None:
    check_value(PRODUCER_BYTE_RATE, 1024)
    check_value("request_percentage", 12.5)
    check_value("controller_mutation_rate", 0.5)
    for key, value, reason in (
        ("request_percentage", 0, "> 0"),
        ("nonsense", 1, "unknown quota key"),
        (CONSUMER_BYTE_RATE, 0, "> 0"),
        (CONSUMER_BYTE_RATE, 1.5, "whole number"),
    ):
        with pytest.raises(QuotaError, match=reason):
            check_value(key, value)


def test_the_most_specific_entity_wins_in_kafkas_order() -> None:
    key = PRODUCER_BYTE_RATE
    quotas: dict[str, dict[str, float]] = {"clients/<default>": {key: 8}}
    assert applicable(quotas, "ANONYMOUS", "app", key) == ("", "app", 8)
    quotas["clients/app"] = {key: 7}
    assert applicable(quotas, "ANONYMOUS", "app", key) == ("", "app", 7)
    quotas["users/<default>"] = {key: 6}
    assert applicable(quotas, "ANONYMOUS", "app", key) == ("ANONYMOUS", "", 6)
    quotas["users/<default>/clients/<default>"] = {key: 5}
    quotas["users/<default>/clients/app"] = {key: 4}
    assert applicable(quotas, "ANONYMOUS", "app", key)[2] == 4
    quotas["users/ANONYMOUS"] = {key: 3}
    assert applicable(quotas, "ANONYMOUS", "app", key) == ("ANONYMOUS", "", 3)
    quotas["users/ANONYMOUS/clients/app"] = {key: 1}
    assert applicable(quotas, "ANONYMOUS", "app", key) == ("ANONYMOUS", "app", 1)
    assert applicable(quotas, "ANONYMOUS", "app", CONSUMER_BYTE_RATE) is None


def test_the_rate_spans_at_least_all_windows_but_one() -> None:
    rate = SampledRate(samples=11, window_ms=1000)
    rate.record(10_000, now_ms=0)
    # 10 KB in the first instant counts over 10 s, as Kafka's Rate does.
    assert rate.rate(now_ms=0) == pytest.approx(1000)
    for t in range(1, 30):
        rate.record(1000, now_ms=t * 1000)
    # Old windows expire: 11 windows of 1 KB over 10-11 s.
    assert 900 < rate.rate(now_ms=29_000) < 1200


def test_a_client_over_its_quota_is_throttled_for_as_long_as_it_overshot() -> None:
    quotas = {"clients/slow": {PRODUCER_BYTE_RATE: 1000.0}}
    manager = ClientQuotaManager(lambda: quotas, samples=11, window_ms=1000, clock=ManualClock(0))
    assert manager.record(PRODUCER_BYTE_RATE, "fast", 10**9) == 0  # no quota
    assert manager.record(PRODUCER_BYTE_RATE, "slow", 10_000) == 0  # exactly 1000 B/s over 10 s
    # 10 KB more: 2000 B/s over the 10 s span, so 10 s of silence brings it back.
    assert manager.record(PRODUCER_BYTE_RATE, "slow", 10_000) == 10_000
    # Never more than the whole sample span.
    assert manager.record(PRODUCER_BYTE_RATE, "slow", 10**9) == 11_000
    assert manager.record(CONSUMER_BYTE_RATE, "slow", 10**9) == 0


def test_a_throttled_connection_waits_before_its_next_request() -> None:
    manager = ClientQuotaManager(lambda: {})

    async def one_connection() -> float:
        manager.throttle("Produce", 300)
        started = time.monotonic()
        await manager.wait_if_throttled()
        return time.monotonic() - started

    async def other_connection() -> float:
        started = time.monotonic()
        await manager.wait_if_throttled()
        return time.monotonic() - started

    async def both() -> tuple[float, float]:
        # Each task is one connection (its own context).
        a = asyncio.ensure_future(one_connection())
        b = asyncio.ensure_future(other_connection())
        return await a, await b

    waited, other = asyncio.run(both())
    assert 0.25 < waited < 2
    assert other < 0.1
    assert manager.stats.throttled["Produce"] == 1


def test_a_connection_throttle_runs_on_the_clock_given() -> None:
    clock = ManualClock(0)
    manager = ClientQuotaManager(lambda: {}, clock=clock)

    async def one_connection() -> None:
        manager.throttle("Produce", 60_000)
        clock.advance(60_000)  # the minute passes on the quota's clock
        # Answered at once: on time.monotonic() this would wait a real minute.
        await asyncio.wait_for(manager.wait_if_throttled(), 5)

    asyncio.run(one_connection())
    assert manager.stats.throttle_ms["Produce"] == 60_000


def test_a_users_quota_applies_to_that_principal_only() -> None:
    quotas = {
        "users/alice": {PRODUCER_BYTE_RATE: 1000.0},
        "users/alice/clients/etl": {PRODUCER_BYTE_RATE: 100_000.0},
    }
    manager = ClientQuotaManager(lambda: quotas, samples=11, window_ms=1000, clock=ManualClock(0))
    # ANONYMOUS (PLAINTEXT) and bob have no quota; alice has hers; alice's etl client its own.
    assert manager.record(PRODUCER_BYTE_RATE, "app", 10**9) == 0
    assert manager.record(PRODUCER_BYTE_RATE, "app", 10**9, user="bob") == 0
    assert manager.record(PRODUCER_BYTE_RATE, "etl", 200_000, user="alice") == 0
    assert manager.record(PRODUCER_BYTE_RATE, "app", 20_000, user="alice") == 10_000


def test_request_percentage_counts_handling_time() -> None:
    clock = ManualClock(0)
    quotas = {"users/<default>": {"request_percentage": 10.0}}
    manager = ClientQuotaManager(lambda: quotas, samples=11, window_ms=1000, clock=clock)
    # 10% of a thread over the 10 s span is 1 s of handling: within, then 1 s over.
    assert manager.record_request_time(1.0, "app", "ANONYMOUS") == 0
    assert manager.record_request_time(1.0, "app", "ANONYMOUS") == 10_000
    assert manager.record_request_time(1.0, "app", "other") == 0  # its own rate


def test_controller_mutations_strict_refuses_while_over_and_lenient_only_throttles() -> None:
    clock = ManualClock(0)
    quotas = {"users/ANONYMOUS": {"controller_mutation_rate": 1.0}}
    manager = ClientQuotaManager(lambda: quotas, samples=11, window_ms=1000, clock=clock)
    # KIP-599: a burst is accepted while the rate is within the quota, even past it...
    # 15 partitions over the 10 s span: 1.5 per second, 0.5 over, so 5 s to wait.
    assert manager.admit_mutation(15, "app", "ANONYMOUS", strict=True) == (True, 5_000)
    # ...then a strict request is refused until the rate is back under it,
    accepted, throttle = manager.admit_mutation(1, "app", "ANONYMOUS", strict=True)
    assert not accepted and throttle > 0
    # a lenient one (older versions) is accepted and only throttled,
    accepted, throttle = manager.admit_mutation(1, "app", "ANONYMOUS", strict=False)
    assert accepted and throttle > 0
    # and another user is not concerned.
    assert manager.admit_mutation(30, "app", "bob", strict=True) == (True, 0)
    clock.advance(60_000)
    assert manager.admit_mutation(1, "app", "ANONYMOUS", strict=True)[0]
