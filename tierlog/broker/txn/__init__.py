"""Transactions (KIP-98, KIP-890 part 1): the coordinator of transactional ids on
``__transaction_state``, markers, and the produce-side check. ``Transactions`` is what the
broker builds and the handlers use."""

from tierlog.broker.txn.coordinator import TransactionCoordinator, TxnConfig
from tierlog.broker.txn.service import Transactions
from tierlog.broker.txn.state_topic import TXN_STATE_TOPIC

__all__ = ["TXN_STATE_TOPIC", "TransactionCoordinator", "Transactions", "TxnConfig"]
