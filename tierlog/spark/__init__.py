"""tierlog for Spark: the ``tierlog`` data source (batch and streaming) that reads the hot
and the cold tier together and writes DataFrames to topics (``sink``), and ``session()``
that sets Spark up with Delta.

    from tierlog.spark import session
    spark = session()
    df = (spark.read.format("tierlog")
          .option("kafka.bootstrap.servers", "127.0.0.1:9092")
          .option("subscribe", "activity")
          .option("remote.log.storage.url", "file:///data/remote")
          .load())

A session made elsewhere gets the source with ``register(spark)``. Importing this package
does not import pyspark; ``session()``, ``register()`` and ``TierlogDataSource`` do, on
first use.
"""

from __future__ import annotations

from typing import Any

from tierlog.spark.session import register, session

__all__ = ["TierlogDataSource", "register", "session"]


def __getattr__(name: str) -> Any:
    if name == "TierlogDataSource":
        from tierlog.spark.datasource import TierlogDataSource

        return TierlogDataSource
    raise AttributeError(name)
