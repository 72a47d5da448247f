"""KIP-890 part 1: a transactional produce is accepted only into a partition that its
transaction coordinator lists in the producer's ongoing transaction.

Without the check a produce delayed past its transaction's end (a retry, a slow network)
would open a new transaction on the partition that no coordinator knows of, so no marker
ever closes it: the partition's last stable offset stops, and read_committed consumers with
it (the "hanging transaction" Jepsen found). The leader checks only the first transactional
batch of a producer on a partition per transaction: once the producer has an open
transaction in the log, later batches belong to it.

A check takes time (a request to the coordinator), and the transaction may end meanwhile:
``VerificationGuards`` holds a token per (partition, producer) while the check is out, a
marker for that producer on that partition removes it, and the append goes ahead only if
its token is still there (Kafka's ``VerificationGuard``). A token stays until the marker:
the producer's later batches in the transaction need no new check.
"""

from __future__ import annotations


class VerificationGuards:
    """Outstanding verifications, by (topic, partition, producer id)."""

    def __init__(self) -> None:
        self._tokens: dict[tuple[str, int, int], object] = {}

    def begin(self, topic: str, index: int, producer_id: int) -> object:
        """The token of a check about to go out; concurrent produces of the same producer
        on the partition share one (a client may have several batches in flight)."""
        return self._tokens.setdefault((topic, index, producer_id), object())

    def holds(self, topic: str, index: int, producer_id: int, token: object) -> bool:
        return self._tokens.get((topic, index, producer_id)) is token

    def clear(self, topic: str, index: int, producer_id: int) -> None:
        self._tokens.pop((topic, index, producer_id), None)
