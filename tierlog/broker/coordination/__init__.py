"""Cluster coordination: the interface (``api``) and its implementations (``local`` for a
single node, persisted in the data dir; ZooKeeper via kazoo comes with the cluster work)."""
