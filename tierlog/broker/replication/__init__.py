"""Replication: the partitions this broker hosts and how their replicas stay in line.

Modules, one concern each (Kafka's ``cluster/`` and ``server/`` names in brackets):

- ``partition``: one hosted partition's replication state above its log, and the requests
  waiting on it (``Partition``);
- ``replica_manager``: the partitions this broker hosts, kept in line with the coordination
  metadata (``ReplicaManager``), composed of ``metadata_applier`` (metadata changes applied
  in slices), ``topic_admin`` (create, delete, grow topics, alter their configs),
  ``high_watermarks`` (the ``replication-offset-checkpoint``), ``replica_assignment``
  (where new replicas go) and ``topic_error`` (refusals with their Kafka error codes);
- ``replica_progress``: what a leader knows of one follower (``Replica``);
- ``replica_fetcher``: the fetchers of the partitions this broker follows
  (``ReplicaFetcherManager``);
- ``replica_selector``: which replica a consumer fetches from (KIP-392);
- ``segment_repair``: damaged segment ranges repaired from an in-sync replica;
- ``log_dir_mover``: a replica moved between ``log.dirs`` while it serves (KIP-113);
- ``partition_limits``: how many partitions a request, a broker and the cluster may hold.

This package imports nothing of the network side (``tierlog.broker.network``) nor the
handlers, which sit above it.
"""
