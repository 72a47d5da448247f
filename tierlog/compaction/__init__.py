"""Compaction: the log cleaner (keep the last value per key; Kafka's design, "Log
compaction") and the changelog side (rebuilding state from a compacted topic).

The cleaner depends on ``tierlog.local`` and ``tierlog.records``, and its remote part on the
``tierlog.remote`` interfaces; the changelog modules read through ``tierlog.client`` and
``tierlog.remote`` as the Spark source does. Nothing here imports the broker, which wires
the cleaner to its logs and to the remote log manager.
"""
