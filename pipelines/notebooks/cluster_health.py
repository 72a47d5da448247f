"""The cells of ``notebooks/cluster_health.ipynb``: a running cluster at a glance
(``pipelines.cluster_health``), scheduled as a periodic health report."""

from __future__ import annotations

from pipelines.notebooks.cells import SUMMARY, code, md, parameters

CELLS = [
    md("""\
        # Cluster health

        The cluster as its brokers describe it: who is up and who is the controller, how
        partitions and their leaders are spread, what is under-replicated, how many bytes
        sit on the brokers' disks and in the remote tier (one point per run of this
        notebook), how far each consumer group lags, and what the log cleaner has left
        dirty. No Spark: the brokers' admin APIs and, where enabled
        (`metrics.http.port`), their Prometheus metrics.
        """),
    parameters("""\
        # What `make demo` leaves, served again by `tierlog demo serve`; for the dev cluster
        # (`tierlog cluster start`) give any of its brokers.
        bootstrap_servers = "127.0.0.1:9092"
        # Each run appends its bytes per tier here; the plot shows every run's.
        history_path = "data/cluster_health/history.csv"
        # broker id -> its /metrics URL; None: found through each broker's config
        # (metrics.http.host/port; a broker with -1, off, or 0, a random port, has none).
        metrics_urls = None
        storage_options = {}  # fsspec options of the remote tier (e.g. S3 credentials)
        timeout_s = 10.0
        """),
    code("""\
        %matplotlib inline
        from pathlib import Path

        from IPython.display import display

        from pipelines import cluster_health
        from tierlog.tools.cleaner_report import broker_states

        urls = {int(k): v for k, v in metrics_urls.items()} if metrics_urls else None
        snap = cluster_health.snapshot(
            bootstrap_servers,
            cleaner_states=broker_states,
            metrics_urls=urls,
            storage_options=storage_options,
            timeout_s=timeout_s,
        )
        history = cluster_health.record_history(snap, Path(history_path))
        print(
            f"{len(snap.brokers)} broker(s), controller {snap.controller}, "
            f"{len(snap.partitions)} partitions; {len(history)} run(s) in {history_path}"
        )
        """),
    md("## At a glance"),
    code("display(cluster_health.plot(snap, history))"),
    md("## Brokers"),
    code("cluster_health.brokers_table(snap)"),
    md("""\
        ## The brokers' metrics

        What each broker reports on its metrics endpoint (Kafka's metric names); empty when
        no broker has `metrics.http.port` set.
        """),
    code("cluster_health.metrics_table(snap)"),
    md("""\
        ## Under-replicated partitions

        Partitions whose ISR is shorter than their replica list (none is good news):
        """),
    code("cluster_health.under_replicated_table(snap)"),
    md("""\
        ## Log cleaner

        Compacted topics (`__consumer_offsets` among them), as their leaders' cleaners see
        them: a dirty ratio near 1 with nothing being cleaned, or any uncleanable partition,
        is worth a look.
        """),
    code("cluster_health.cleaner_table(snap)"),
    code("summary = cluster_health.summary(snap)"),
    code(SUMMARY),
]
