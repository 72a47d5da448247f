"""Producer id blocks: ``/latest_producer_id_block``, from which every broker claims ranges
of producer ids for idempotent and transactional producers (KIP-98; Kafka's
``ZkProducerIdManager``).
"""

from __future__ import annotations

import contextlib

from tierlog.broker.coordination import zk_data
from tierlog.broker.coordination.api import CoordinationError
from tierlog.broker.coordination.zk_session import MAX_ATTEMPTS, ZkSession

try:
    from kazoo.exceptions import BadVersionError, NodeExistsError
except ImportError as e:  # pragma: no cover - zk_session says how to install it
    raise ImportError(f"cluster mode needs kazoo ({e}): pip install 'tierlog[cluster]'") from e


class ProducerIdBlocks:
    """Args:
    session: a started session.
    """

    def __init__(self, session: ZkSession) -> None:
        self._session = session

    def allocate(self, broker_id: int, block_size: int = zk_data.PRODUCER_ID_BLOCK_SIZE) -> int:
        """Claim the next ``block_size`` producer ids; returns the first. A read-modify-write
        of ``/latest_producer_id_block`` conditional on its zkVersion, retried when another
        broker won the race, so no two brokers ever get overlapping blocks (Kafka's
        ``ZkProducerIdManager.getNewProducerIdBlock``).
        """
        kazoo = self._session.kazoo
        for _ in range(MAX_ATTEMPTS):
            found = self._session.get(zk_data.PRODUCER_ID_BLOCK)
            if found is None:
                with contextlib.suppress(NodeExistsError):
                    kazoo.create(zk_data.PRODUCER_ID_BLOCK)
                continue
            previous = zk_data.decode_producer_id_block(found.data)
            block = zk_data.next_producer_id_block(previous, broker_id, block_size)
            try:
                kazoo.set(
                    zk_data.PRODUCER_ID_BLOCK,
                    zk_data.encode_producer_id_block(block),
                    version=found.version,
                )
            except BadVersionError:
                continue
            return block.block_start
        raise CoordinationError("could not allocate a producer id block: kept conflicting")
