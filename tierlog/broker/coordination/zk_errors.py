"""The errors of cluster mode's ZooKeeper layer, importable without kazoo (the command line
turns ``BrokerIdInUseError`` into one line, whether or not the cluster extra is installed).

Each fencing rule has its error: the controller epoch's zkVersion (``ControllerMovedError``,
KAFKA-6082), a znode's zkVersion (``StaleZnodeError`` and its two kinds), and the broker
registration's owner session (``BrokerIdInUseError``).
"""

from __future__ import annotations

from tierlog.broker.coordination.api import CoordinationError


class BrokerIdInUseError(CoordinationError):
    """Another live session holds ``/brokers/ids/<id>`` (Kafka: NodeExistsException at
    registration, "a broker is already registered on the path")."""


class ControllerMovedError(CoordinationError):
    """The ``/controller_epoch`` check of a controller write failed: another controller has
    been elected since this lease was taken (Kafka's ControllerMovedException)."""


class StaleZnodeError(CoordinationError):
    """A write conditional on a znode's zkVersion lost to another write."""


class StalePartitionStateError(StaleZnodeError):
    """The partition state changed since it was read (or exists when it should not)."""


class StaleTopicAssignmentError(StaleZnodeError):
    """The topic's assignment znode changed since it was read."""
