"""The controller's counters (Kafka's ``ControllerStats``), for the metrics endpoint.

One object per broker, kept across controller terms as Kafka's meters live as long as the
broker: a broker that was controller goes on reporting what it did then. Written by the
controller's thread only; the metrics thread reads whole ints (safe under the GIL).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass
class ControllerStats:
    """``unclean_leader_elections``: leaders elected from outside the ISR (Kafka's
    ``UncleanLeaderElectionsPerSec``), automatic (``unclean.leader.election.enable``) or
    asked for (ElectLeaders UNCLEAN, KIP-460). Each may have lost acknowledged records."""

    unclean_leader_elections: int = 0
