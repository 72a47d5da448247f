"""Cluster mode's controller (Kafka's ZooKeeper-era ``KafkaController``): one broker at a
time elects leaders, edits ISRs and creates/deletes topics' partition states in ZooKeeper.

Modules, one concern each:

- ``election``: leader election and ISR rules, the partition state table (pure);
- ``alter_partition``: the checks and error codes of AlterPartition (pure);
- ``context``: the active controller's in-memory view of the cluster;
- ``state_machine``: writes the decisions to ZooKeeper, conditionally, re-deciding on races;
- ``events``: the event queue and the controller's single thread;
- ``stats``: the controller's counters (Kafka's ControllerStats), for the metrics;
- ``controller``: election, fail-over, watches, resignation and the public API.
"""

from tierlog.broker.controller.alter_partition import AlterPartitionResult
from tierlog.broker.controller.context import TopicPartition
from tierlog.broker.controller.controller import Controller
from tierlog.broker.controller.election import PartitionLifecycle

__all__ = ["AlterPartitionResult", "Controller", "PartitionLifecycle", "TopicPartition"]
