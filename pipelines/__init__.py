"""Data pipelines on tierlog topics: each module is a function plus a CLI entry
(``python -m pipelines.NAME --config configs/NAME.toml [--set key=value ...]``) that lands
data in Delta tables.

* ``common``: config loading and checking, ``--set`` overrides, the CLI, the Spark session,
  reading a topic through the ``tierlog`` source.
* ``ingest``: topic -> bronze table, incremental and exactly once.
* ``ingest_stream``: the same with Structured Streaming (``Trigger.AvailableNow``).
* ``replay``: rebuild a table for an offset or time range straight from object storage.
* ``aggregate``: page views per minute per page, bronze -> silver.
* ``changelog_merge``: a compacted topic -> one row per live key, by MERGE.
* ``exactly_once``: consume-transform-produce between two topics in Kafka transactions,
  then the sink into Delta read_committed; kills and re-runs never duplicate or lose a row.
* ``explore``: what the ``explore_events`` notebook shows (offsets per tier, samples, the
  event rate by tier with the tier boundary marked); no CLI.
"""
