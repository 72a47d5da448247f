"""The cells of ``notebooks/explore_events.ipynb``: a topic across the hot and the cold
tier (``pipelines.explore``)."""

from __future__ import annotations

from pipelines.notebooks.cells import STOP_SPARK, SUMMARY, code, md, parameters

CELLS = [
    md("""\
        # Explore a topic across the hot and the cold tier

        Which topics the cluster has, where each partition's offsets live (object storage
        or the broker's disk), what the messages look like, and how many events arrived
        per minute — read through the `tierlog` Spark source from both tiers at once,
        with the point where each partition's reads switch tiers marked.
        """),
    parameters("""\
        # What `make demo` leaves, served again by `tierlog demo serve`.
        bootstrap_servers = "127.0.0.1:9092"
        topic = "activity"
        # The broker's remote.log.storage.url (a plain path is a local directory).
        # None: ask the broker; "": no remote tier, read everything through the broker.
        remote_url = None
        storage_options = {}  # fsspec options of the remote tier (e.g. S3 credentials)
        bin_seconds = 60  # width of a bar in the event-rate plot
        sample_count = 5  # messages shown per partition, oldest and newest
        spark_master = None  # None: $SPARK_MASTER, else local[*]
        """),
    code("""\
        %matplotlib inline
        import dataclasses

        from IPython.display import display

        from pipelines import explore
        from pipelines.common import TopicSource, broker_remote_url, spark_session

        if remote_url is None:
            remote_url = broker_remote_url(bootstrap_servers)
        remote_url = remote_url or None
        spark = spark_session({"app_name": "explore_events", "master": spark_master})
        source = TopicSource(
            topic, bootstrap_servers, remote_url, storage_options, include_headers=False
        )
        print(f"remote tier: {remote_url or 'none: everything is read through the broker'}")
        """),
    md("## Topics"),
    code("explore.topics(bootstrap_servers)"),
    md("""\
        ## Offsets per tier

        `log_start` is the first offset of the whole log; the remote tier (object storage)
        holds `[remote_start, remote_end)` per its manifest; the broker's disk holds
        `[local_start, latest)`. Where the two overlap, a reader takes the remote copy.
        """),
    code("""\
        tiers = explore.tier_offsets(bootstrap_servers, topic, remote_url, storage_options)
        explore.tier_table(tiers)
        """),
    md("## Sample messages\n\nThe oldest of each partition (usually the remote tier):"),
    code("explore.sample_messages(spark, source, sample_count, newest=False)"),
    md("and the newest (the broker's local tier):"),
    code("explore.sample_messages(spark, source, sample_count, newest=True)"),
    md("""\
        ## Event rate over time

        Every record of the topic, counted per bin of its timestamp and per tier it was
        read from; dashed lines mark each partition's first record read from the broker.
        """),
    code("""\
        rate = explore.event_rate(spark, source, bin_seconds)
        display(explore.plot_event_rate(rate))
        rate.per_minute.describe()
        """),
    code("""\
        totals = rate.totals()
        summary = {
            "topic": topic,
            "partitions": len(tiers),
            "messages": sum(t.latest - t.log_start for t in tiers),
            "offsets": [dataclasses.asdict(t) for t in tiers],
            "events_read": sum(totals.values()),
            "from_remote": totals.get("remote", 0),
            "from_local": totals.get("local", 0),
            "bin_seconds": bin_seconds,
            "bins": len(rate.bins),
            "tier_boundaries": {str(p): ts.isoformat() for p, ts in rate.boundaries.items()},
            "remote_url": remote_url,
        }
        """),
    code(STOP_SPARK),
    code(SUMMARY),
]
