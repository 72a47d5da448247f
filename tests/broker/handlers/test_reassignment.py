"""ElectLeaders (handlers/reassignment.py) answers once this broker's metadata shows the
elected leaders, as Kafka's DelayedElectLeader; partitions not shown in time answer
REQUEST_TIMED_OUT. The controller and the metadata are unit-test fakes: the metadata
changes when the test says so, which a real cluster does too fast to catch reliably."""

from __future__ import annotations

import asyncio
import uuid
from dataclasses import dataclass, field
from typing import Any

from kio.index import load_request_schema

from tierlog.broker.authorization import RequestAuthorizer
from tierlog.broker.coordination.api import PartitionState, TopicMetadata
from tierlog.broker.handlers.reassignment import handle_elect_leaders
from tierlog.protocol.codec import Request
from tierlog.protocol.kio_build import build


@dataclass
class Controller:
    is_active: bool = True

    def elect_leaders(self, election_type: int, wanted: Any) -> dict[tuple[str, int], int]:
        return {("t", 0): 0, ("t", 1): 84}  # elected; ELECTION_NOT_NEEDED


@dataclass
class Cluster:
    """Partition 0 led by 2 at epoch 3 until ``elect`` shows the election (1, epoch 4)."""

    topic: TopicMetadata = field(
        default_factory=lambda: TopicMetadata(
            "t",
            uuid.uuid4(),
            {0: [1, 2], 1: [1, 2]},
            partition_states={0: PartitionState(2, 3, [1, 2]), 1: PartitionState(1, 0, [1, 2])},
        )
    )
    changed: asyncio.Event = field(default_factory=asyncio.Event)

    def topics(self) -> dict[str, TopicMetadata]:
        return {"t": self.topic}

    def elect(self) -> None:
        states = dict(self.topic.partition_states)
        states[0] = PartitionState(1, 4, [1, 2])
        self.topic = TopicMetadata("t", self.topic.topic_id, self.topic.replicas, {}, states)
        self.changed.set()

    async def wait_for_topics(self, predicate: Any, timeout_s: float) -> bool:
        try:
            async with asyncio.timeout(timeout_s):
                while not predicate(self.topics()):
                    self.changed.clear()
                    await self.changed.wait()
        except TimeoutError:
            return False
        return True


@dataclass
class Services:
    cluster: Cluster
    controller: Controller = field(default_factory=Controller)
    authz: RequestAuthorizer = field(default_factory=RequestAuthorizer)  # no authorizer


def elect_request(timeout_ms: int) -> Request:
    body = build(
        load_request_schema(43, 2),
        {
            "election_type": 0,
            "topic_partitions": [{"topic": "t", "partitions": [0, 1]}],
            "timeout": timeout_ms,
        },
    )
    return Request(43, 2, 1, "test", None, body, 2, 0)  # type: ignore[arg-type]


def codes(answer: Any) -> dict[int, int]:
    return {
        int(p.partition_id): int(p.error_code)
        for t in answer.replica_election_results
        for p in t.partition_result
    }


def test_the_answer_waits_for_the_metadata_to_show_the_new_leader() -> None:
    async def scenario() -> tuple[Any, bool]:
        cluster = Cluster()
        seen_at_answer: list[bool] = []

        async def answer() -> Any:
            result = await handle_elect_leaders(Services(cluster), elect_request(10_000))  # type: ignore[arg-type]
            seen_at_answer.append(cluster.topic.partition_states[0].leader == 1)
            return result

        task = asyncio.create_task(answer())
        # Time for the controller's decision (on a thread) to come back first; an answer
        # sent then, before the metadata shows it, is what the check below catches.
        await asyncio.sleep(0.3)
        cluster.elect()
        return await task, seen_at_answer[0]

    answer, shown = asyncio.run(scenario())
    assert shown
    assert codes(answer) == {0: 0, 1: 84}


def test_an_election_never_shown_times_out() -> None:
    answer = asyncio.run(handle_elect_leaders(Services(Cluster()), elect_request(300)))  # type: ignore[arg-type]
    assert codes(answer) == {0: 7, 1: 84}  # REQUEST_TIMED_OUT for the one not shown
