"""zk_cache_delta: the pure steps of the broker's ZooKeeper cache update, each on its own,
with reads given as ZnodeData by path (the real-ZooKeeper tests of the whole update are in
tests/integration/test_zk_cache.py)."""

from __future__ import annotations

import ast
import uuid
from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st

from tierlog.broker.coordination import zk_cache_delta, zk_data
from tierlog.broker.coordination.api import (
    BrokerRegistration,
    MetadataChange,
    PartitionState,
    TopicMetadata,
)
from tierlog.broker.coordination.zk_cache_delta import (
    Changes,
    ClusterSnapshot,
    ConfigChanges,
    TopicsDelta,
    config_changes,
    controller_id,
    first_reads,
    keep_newer_states,
    newer_notifications,
    next_snapshot,
    partition_state,
)
from tierlog.broker.coordination.zk_data import (
    ControllerInfo,
    LeaderAndIsr,
    TopicAssignment,
    ZnodeData,
)

OLD_ID = uuid.UUID(int=1)
NEW_ID = uuid.UUID(int=2)


def state(leader: int, epoch: int = 0, version: int = 0) -> PartitionState:
    return PartitionState(leader, epoch, [leader], controller_epoch=1, partition_epoch=version)


def topic(
    name: str,
    replicas: dict[int, list[int]],
    states: dict[int, PartitionState] | None = None,
    configs: dict[str, str] | None = None,
    topic_id: uuid.UUID = OLD_ID,
) -> TopicMetadata:
    return TopicMetadata(name, topic_id, replicas, configs or {}, states or {})


def state_node(leader: int, epoch: int, mzxid: int, version: int = 0) -> ZnodeData:
    data = zk_data.encode_partition_state(LeaderAndIsr(leader, epoch, (leader,), 1))
    return ZnodeData(data, version, mzxid, 1)


def topic_node(replicas: dict[int, list[int]], topic_id: uuid.UUID = OLD_ID) -> ZnodeData:
    return ZnodeData(zk_data.encode_topic(TopicAssignment(replicas, topic_id)), 0, 1, 1)


def sp(name: str, partition: int) -> str:
    return zk_data.partition_state_path(name, partition)


def cached() -> TopicsDelta:
    """orders: partitions 0 and 1 with states (zxids 10, 11), 2 without; events: 0."""
    topics = {
        "orders": topic("orders", {0: [1, 2], 1: [2, 1], 2: [1, 2]}, {0: state(1), 1: state(2)}),
        "events": topic("events", {0: [1]}, {0: state(1)}),
    }
    return TopicsDelta.of(topics, {("orders", 0): 10, ("orders", 1): 11, ("events", 0): 12})


def test_the_steps_are_sans_io() -> None:
    source = Path(zk_cache_delta.__file__).read_text()
    imported = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            imported |= {alias.name.split(".")[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module:
            imported.add(node.module.split(".")[0])
    assert not imported & {"kazoo", "asyncio", "socket", "threading"}


# -- 1. what fired ------------------------------------------------------------------------------


def test_changes_sort_the_fired_paths_by_kind() -> None:
    changes = Changes.of(
        [
            zk_data.BROKER_IDS,
            zk_data.CONTROLLER,
            zk_data.TOPICS,
            zk_data.CONFIG_CHANGES,
            zk_data.topic_path("orders"),
            sp("orders", 3),
            "/brokers/topics/orders/partitions",  # not read by the cache: ignored
            "/elsewhere",
        ]
    )
    assert (changes.brokers, changes.controller, changes.topic_list, changes.configs) == (
        True,
        True,
        True,
        True,
    )
    assert changes.topics == {"orders"} and changes.states == {("orders", 3)}
    assert Changes.of([sp("orders", 0)]) == Changes(states={("orders", 0)})


# -- 2. first reads -----------------------------------------------------------------------------


def test_state_changes_alone_read_the_cached_states_in_the_first_round() -> None:
    topics = cached().topics
    changes = Changes(states={("orders", 1), ("orders", 0), ("orders", 2), ("gone", 0)})
    plan = first_reads(changes, topics)
    # Cached states only, sorted: a state the cache has none of, or of a topic it does not
    # know, waits for the late round.
    assert plan.existing == [sp("orders", 0), sp("orders", 1)]
    assert plan.watched == [] and plan.children == []


def test_with_topic_changes_states_wait_for_the_late_round() -> None:
    topics = cached().topics
    changes = Changes(
        brokers=True, controller=True, configs=True, topics={"orders"}, states={("orders", 0)}
    )
    plan = first_reads(changes, topics)
    assert plan.existing == [zk_data.topic_path("orders")]
    assert plan.watched == [zk_data.CONTROLLER]
    assert plan.children == [zk_data.BROKER_IDS, zk_data.CONFIG_CHANGES]
    listing = first_reads(Changes(topic_list=True, states={("orders", 0)}), topics)
    assert listing.existing == [] and listing.children == [zk_data.TOPICS]


# -- 3. topics listed and assignments ---------------------------------------------------------


def test_the_listing_names_new_and_gone_topics() -> None:
    delta = cached()
    delta.apply_listing(["orders", "fresh"])
    assert delta.fresh == {"fresh"} and delta.gone == {"events"}
    assert delta.changed_topics == set()  # nothing applied before drop_gone / take_fresh


def test_assignments_deleted_recreated_unchanged_and_grown() -> None:
    delta = cached()
    delta.topics["same"] = topic("same", {0: [1]})
    data = {
        zk_data.topic_path("events"): None,  # deleted
        zk_data.topic_path("orders"): topic_node({0: [1, 2], 1: [2, 1], 2: [1, 2], 3: [2, 1]}),
        zk_data.topic_path("same"): topic_node({0: [1]}),
        zk_data.topic_path("new"): topic_node({0: [1]}),
    }
    gained = delta.apply_assignments(["events", "orders", "same", "new"], data)
    assert gained == {("orders", 3)}
    assert delta.gone == {"events"} and delta.fresh == {"new"}
    assert delta.changed_topics == {"orders"}
    assert delta.topics["orders"].replicas[3] == [2, 1]
    assert delta.topics["orders"].partition_states == {0: state(1), 1: state(2)}


def test_a_topic_created_again_under_a_new_id_is_read_whole() -> None:
    delta = cached()
    data = {zk_data.topic_path("orders"): topic_node({0: [1]}, NEW_ID)}
    assert delta.apply_assignments(["orders"], data) == set()
    assert delta.fresh == {"orders"} and delta.changed_topics == set()


def test_a_shrunk_assignment_drops_the_states_and_zxids_it_lost() -> None:
    delta = cached()
    data = {zk_data.topic_path("orders"): topic_node({0: [1, 2]})}
    delta.apply_assignments(["orders"], data)
    assert delta.topics["orders"].partition_states == {0: state(1)}
    assert ("orders", 1) not in delta.zxids and delta.zxids[("orders", 0)] == 10


# -- 4. states ----------------------------------------------------------------------------------


def test_late_reads_split_cached_and_new_states_and_skip_what_is_known() -> None:
    delta = cached()
    delta.fresh.add("events")
    delta.topics["doomed"] = topic("doomed", {0: [1]})
    delta.gone.add("doomed")
    states = {("orders", 2), ("orders", 1), ("orders", 0), ("orders", 9), ("events", 0)}
    states |= {("doomed", 0), ("unknown", 0)}
    data = {sp("orders", 0): state_node(1, 0, 10)}  # read in the first round already
    cached_paths, new_paths = delta.late_state_reads(states, data)
    # orders-9 is not assigned; events is read whole; doomed is going; unknown unknown.
    assert cached_paths == [sp("orders", 1)]
    assert new_paths == [sp("orders", 2)]


def test_a_state_replaces_the_cached_one_only_when_newer() -> None:
    delta = cached()
    data = {
        sp("orders", 0): state_node(2, 1, mzxid=20, version=1),  # newer: applied
        sp("orders", 1): state_node(1, 1, mzxid=11, version=1),  # the same write: kept
        sp("orders", 2): state_node(1, 0, mzxid=5),  # first state of 2: applied
        sp("events", 0): state_node(3, 3, mzxid=9),  # older than cached 12: never back
    }
    delta.apply_states([("orders", 0), ("orders", 1), ("orders", 2), ("events", 0)], data)
    orders = delta.topics["orders"].partition_states
    assert (orders[0].leader, orders[0].leader_epoch, orders[0].partition_epoch) == (2, 1, 1)
    assert orders[1] == state(2)
    assert orders[2].leader == 1
    assert delta.topics["events"].partition_states[0] == state(1)
    assert delta.changed_partitions == {("orders", 0), ("orders", 2)}
    assert delta.zxids == {
        ("orders", 0): 20,
        ("orders", 1): 11,
        ("orders", 2): 5,
        ("events", 0): 12,
    }


def test_a_missing_state_drops_a_cached_one_and_ignores_an_unread_or_uncached_one() -> None:
    delta = cached()
    before = delta.topics["orders"]
    delta.apply_states(
        [("orders", 1), ("orders", 2), ("orders", 0), ("orders", 7)],
        {sp("orders", 1): None, sp("orders", 2): None, sp("orders", 7): state_node(1, 0, 99)},
    )
    assert delta.topics["orders"].partition_states == {0: state(1)}
    assert delta.changed_partitions == {("orders", 1)}
    assert ("orders", 1) not in delta.zxids and ("orders", 7) not in delta.zxids
    assert before.partition_states == {0: state(1), 1: state(2)}  # the old object untouched


def test_states_of_fresh_or_gone_topics_are_left_to_their_whole_read() -> None:
    delta = cached()
    delta.fresh.add("orders")
    delta.gone.add("events")
    delta.apply_states(
        [("orders", 0), ("events", 0)],
        {sp("orders", 0): state_node(3, 5, 50), sp("events", 0): None},
    )
    assert delta.changed_partitions == set()
    assert delta.zxids[("orders", 0)] == 10 and delta.zxids[("events", 0)] == 12


@given(st.lists(st.integers(min_value=1, max_value=40), min_size=1, max_size=20))
def test_reads_in_any_order_leave_the_newest_write(mzxids: list[int]) -> None:
    """Whatever order reads of one state come back in, the cache holds the newest write
    seen (the largest mzxid), never an older one."""
    delta = TopicsDelta.of({"t": topic("t", {0: [1]})}, {})
    for mzxid in mzxids:
        delta.apply_states([("t", 0)], {sp("t", 0): state_node(1, mzxid, mzxid)})
    assert delta.zxids[("t", 0)] == max(mzxids)
    assert delta.topics["t"].partition_states[0].leader_epoch == max(mzxids)


# -- 5. configs ---------------------------------------------------------------------------------


def notification(entity: str, seq: int) -> tuple[str, ZnodeData]:
    child = f"{zk_data.CONFIG_CHANGE_PREFIX}{seq:010d}"
    path = zk_data.child_path(zk_data.CONFIG_CHANGES, child)
    return path, ZnodeData(zk_data.encode_config_change(entity), 0, seq, seq)


def test_newer_notifications_are_the_ones_after_the_last_applied_oldest_first() -> None:
    children = ["config_change_0000000012", "config_change_0000000003", "other", "config_change_x"]
    children.append("config_change_0000000007")
    assert newer_notifications(children, 3) == [
        (7, "config_change_0000000007"),
        (12, "config_change_0000000012"),
    ]
    assert newer_notifications(children, 12) == []


def test_notifications_name_known_topics_and_quotas() -> None:
    entries = [
        notification("topics/orders", 4),
        notification("topics/unknown", 5),
        notification("users/alice", 6),
    ]
    purged_child = f"{zk_data.CONFIG_CHANGE_PREFIX}{7:010d}"
    data = {path: node for path, node in entries}
    data[zk_data.child_path(zk_data.CONFIG_CHANGES, purged_child)] = None
    newer = [(4, entries[0][0].rsplit("/", 1)[1]), (5, entries[1][0].rsplit("/", 1)[1])]
    newer += [(6, entries[2][0].rsplit("/", 1)[1]), (7, purged_child)]
    found = config_changes(newer, data, ["orders", "events"], 3)
    assert found == ConfigChanges({"orders"}, True, 7)
    assert config_changes([], {}, ["orders"], 3) == ConfigChanges(set(), False, 3)
    clients = notification("clients/app", 8)
    assert config_changes([(8, clients[0].rsplit("/", 1)[1])], dict([clients]), [], 7).quotas


def test_an_undecodable_notification_names_everything() -> None:
    path, _ = notification("topics/orders", 9)
    newer = [(9, path.rsplit("/", 1)[1])]
    garbled = {path: ZnodeData(b"{not json", 0, 9, 9)}
    assert config_changes(newer, garbled, ["orders", "events"], 3) == ConfigChanges(
        {"orders", "events"}, True, 9, frozenset({"client-metrics", "brokers"})
    )


def test_a_client_metrics_notification_names_its_type() -> None:
    path, node = notification("client-metrics/all", 4)
    newer = [(4, path.rsplit("/", 1)[1])]
    assert config_changes(newer, {path: node}, ["orders"], 3) == ConfigChanges(
        set(), False, 4, frozenset({"client-metrics"})
    )


def test_configs_change_a_topic_only_when_they_differ() -> None:
    delta = cached()
    delta.topics["events"] = topic("events", {0: [1]}, configs={"retention.ms": "5"})
    delta.apply_configs({"orders": {}, "events": {"retention.ms": "6"}, "gone": {"a": "b"}})
    assert delta.changed_topics == {"events"}
    assert delta.topics["events"].configs == {"retention.ms": "6"}
    assert "gone" not in delta.topics


# -- 6. gone and fresh topics --------------------------------------------------------------------


def test_gone_topics_leave_with_their_zxids_unless_created_again() -> None:
    delta = cached()
    old = dict(delta.topics)
    delta.gone |= {"orders", "events", "never-cached"}
    delta.fresh.add("events")
    delta.drop_gone(old)
    assert delta.gone == {"orders", "never-cached"}
    assert "orders" not in delta.topics and "events" in delta.topics
    assert delta.changed_topics == {"orders"}
    assert delta.zxids == {("events", 0): 12}


def test_fresh_topics_replace_the_cached_ones_with_their_zxids() -> None:
    delta = cached()
    delta.fresh |= {"orders", "events", "new", "vanished"}
    read = {
        "orders": topic("orders", {0: [2]}, {0: state(2, 7)}, topic_id=NEW_ID),
        "new": topic("new", {0: [1]}),
    }
    # events and vanished were deleted again before the whole read: events leaves the
    # cache, vanished was never in it (no change to report).
    delta.take_fresh(read, {("orders", 0): 40})
    assert delta.topics["orders"].topic_id == NEW_ID and "events" not in delta.topics
    assert delta.topics["new"] == read["new"]
    assert delta.changed_topics == {"orders", "events", "new"}
    assert delta.zxids == {("orders", 0): 40}


# -- 7. the result ------------------------------------------------------------------------------


def test_nothing_changed_is_none_and_a_changed_topic_covers_its_partitions() -> None:
    delta = cached()
    old = ClusterSnapshot(topics=dict(delta.topics))
    assert next_snapshot(old, ClusterSnapshot(topics=delta.topics), delta) is None
    moved = ClusterSnapshot(
        brokers={1: BrokerRegistration(1, "h", 1)}, broker_epochs={1: 5}, topics=delta.topics
    )
    assert next_snapshot(old, moved, delta) == (moved, MetadataChange())

    delta.changed_partitions |= {("orders", 0), ("events", 0)}
    delta.changed_topics.add("orders")
    new = ClusterSnapshot(topics=delta.topics)
    assert next_snapshot(old, new, delta) == (
        new,
        MetadataChange(frozenset({"orders"}), frozenset({("events", 0)})),
    )
    for changed in (
        ClusterSnapshot(controller_id=3),
        ClusterSnapshot(client_quotas={"clients/a": {"producer_byte_rate": 1.0}}),
    ):
        assert next_snapshot(ClusterSnapshot(), changed, TopicsDelta.of({}, {})) is not None


def test_a_full_read_from_a_server_behind_keeps_the_newer_cached_states() -> None:
    before = cached()
    read = {
        "orders": topic("orders", {0: [1, 2], 1: [2, 1]}, {0: state(3, 9), 1: state(1, 9)}),
        "events": topic("events", {0: [1]}, {0: state(4, 9)}, topic_id=NEW_ID),
    }
    zxids = {("orders", 0): 5, ("orders", 1): 30, ("events", 0): 1}
    keep_newer_states(before.topics, before.zxids, read, zxids)
    assert read["orders"].partition_states == {0: state(1), 1: state(1, 9)}
    assert zxids == {("orders", 0): 10, ("orders", 1): 30, ("events", 0): 1}
    assert read["events"].partition_states == {0: state(4, 9)}  # another topic id: as read


def test_decoding_a_state_and_the_controller() -> None:
    decoded = partition_state("orders", 0, state_node(2, 4, mzxid=8, version=6))
    assert decoded == PartitionState(2, 4, [2], controller_epoch=1, partition_epoch=6)
    assert controller_id(None) == -1
    node = ZnodeData(zk_data.encode_controller(ControllerInfo(7, 0)), 0, 1, 1)
    assert controller_id(node) == 7
