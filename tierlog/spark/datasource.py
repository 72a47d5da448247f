"""The PySpark data source ``tierlog``: batch (``spark.read``) and streaming
(``spark.readStream``) reads of topics across the hot and the cold tier, and writes of
DataFrames to topics (``df.write``, ``df.writeStream``: ``sink``).

Driver side, ``partitions()`` plans (``discovery`` + ``planning``); executor side, ``read()``
runs ``split_readers`` and yields Arrow batches. Readers are pickled to the executors, so
they hold only options and plain data; clients and stores are made where they are used.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from typing import Any, ClassVar

import pyarrow as pa
from pyspark.sql.datasource import (
    DataSource,
    DataSourceReader,
    DataSourceStreamReader,
    DataSourceStreamWriter,
    DataSourceWriter,
    Filter,
    InputPartition,
)
from pyspark.sql.streaming.datasource import (
    ReadAllAvailable,
    ReadLimit,
    ReadMaxRows,
    SupportsTriggerAvailableNow,
)
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    IntegerType,
    LongType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

from tierlog.remote.registry import open_store
from tierlog.spark.discovery import Discovery, SourceError
from tierlog.spark.options import SourceOptions, parse
from tierlog.spark.planning import OffsetRange, RemoteSplit, Split, limit_ranges, plan
from tierlog.spark.pushdown import PrunedBounds, bounds_of, narrow
from tierlog.spark.sink import (
    SinkError,
    TierlogBatchWriter,
    TierlogStreamWriter,
    check_schema,
    parse_sink,
)
from tierlog.spark.split_readers import finish, read_leader, read_remote

NAME = "tierlog"


def spark_schema(options: SourceOptions) -> StructType:
    """Spark's Kafka-source schema (``headers`` with includeHeaders=true; ``tier`` with
    tierlog.includeTier=true)."""
    fields = [
        StructField("key", BinaryType()),
        StructField("value", BinaryType()),
        StructField("topic", StringType()),
        StructField("partition", IntegerType()),
        StructField("offset", LongType()),
        StructField("timestamp", TimestampType()),
        StructField("timestampType", IntegerType()),
    ]
    if options.include_headers:
        header = StructType([StructField("key", StringType()), StructField("value", BinaryType())])
        fields.append(StructField("headers", ArrayType(header)))
    if options.include_tier:
        fields.append(StructField("tier", StringType()))
    return StructType(fields)


class SplitPartition(InputPartition):
    """One split, as Spark ships it to an executor."""

    def __init__(self, split: Split) -> None:
        super().__init__(split)
        self.split = split


class TierlogDataSource(DataSource):
    """``spark.read.format("tierlog")`` / ``spark.readStream.format("tierlog")``, options in
    ``tierlog.spark.options``; ``df.write.format("tierlog")`` /
    ``df.writeStream.format("tierlog")``, options and columns in ``tierlog.spark.sink``.

    Without filter pushdown: Spark refuses a reader that takes filters in a session where
    ``spark.sql.python.filterPushdown.enabled`` is false (its default), so this one, for
    any session, takes none; ``TierlogDataSourceWithFilterPushdown`` does.
    ``tierlog.spark.register`` picks the one that fits the session."""

    filter_pushdown: ClassVar[bool] = False

    @classmethod
    def name(cls) -> str:
        return NAME

    def schema(self) -> StructType:
        return spark_schema(parse(dict(self.options)))

    def reader(self, schema: StructType) -> DataSourceReader:
        options = parse(dict(self.options))
        if self.filter_pushdown:
            return TierlogPushdownReader(options)
        return TierlogBatchReader(options)

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        return TierlogStreamReader(parse(dict(self.options), streaming=True))

    def writer(self, schema: StructType, overwrite: bool) -> DataSourceWriter:
        if overwrite:
            raise SinkError(
                "mode overwrite: a topic's records cannot be replaced; write with mode "
                "append (delete and create the topic to start it again)"
            )
        options = parse_sink(dict(self.options))
        check_schema(schema, options)
        return TierlogBatchWriter(options)

    def streamWriter(self, schema: StructType, overwrite: bool) -> DataSourceStreamWriter:
        # Every output mode appends each micro-batch's rows, as Spark's Kafka sink does.
        options = parse_sink(dict(self.options))
        check_schema(schema, options)
        return TierlogStreamWriter(options)


class TierlogDataSourceWithFilterPushdown(TierlogDataSource):
    """``TierlogDataSource`` whose batch reads take Spark's filters on ``partition``,
    ``offset`` and ``timestamp`` (``tierlog.spark.pushdown``), for sessions with
    ``spark.sql.python.filterPushdown.enabled=true`` (``session()`` sets it)."""

    filter_pushdown = True


def _read_split(options: SourceOptions, split: Split) -> Iterator[pa.RecordBatch]:
    if isinstance(split, RemoteSplit):
        assert options.remote_url is not None
        store = open_store(options.remote_url, options.storage_options)
        batches = read_remote(
            split,
            store,
            read_committed=options.read_committed,
            bootstrap=None if options.remote_only else options.bootstrap_servers,
            security=options.client_security(),
        )
    else:
        assert options.bootstrap_servers is not None
        batches = read_leader(
            split,
            options.bootstrap_servers,
            fail_on_data_loss=options.fail_on_data_loss,
            read_committed=options.read_committed,
            security=options.client_security(),
        )
    tier = split.tier if options.include_tier else None
    for batch in batches:
        yield finish(batch, include_headers=options.include_headers, tier=tier)


def _partitions(splits: list[Split]) -> list[InputPartition]:
    # Spark wants at least one partition; an empty read is one partition with no split.
    return [SplitPartition(s) for s in splits] or [InputPartition(None)]


class TierlogBatchReader(DataSourceReader):
    def __init__(self, options: SourceOptions) -> None:
        self.options = options
        self.bounds = PrunedBounds()  # what pushed filters allow (all, without pushdown)

    def partitions(self) -> Sequence[InputPartition]:
        with Discovery(self.options) as discovery:
            ranges, manifests = discovery.ranges(self.options.starting, self.options.ending)
            if self.bounds.prunes:
                ranges = narrow(
                    ranges, self.bounds, lambda s: discovery.offsets_for_times(s, manifests)
                )
        return _partitions(
            plan(
                ranges,
                manifests,
                self.options.leader_split_offsets,
                read_committed=self.options.read_committed,
            )
        )

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        split = getattr(partition, "split", None)
        if split is not None:
            yield from _read_split(self.options, split)


class TierlogPushdownReader(TierlogBatchReader):
    """A batch reader that plans only the ranges the query's filters can match."""

    def pushFilters(self, filters: list[Filter]) -> Iterable[Filter]:
        self.bounds = bounds_of(filters)
        # Every filter goes back to Spark, which still checks each row: the bounds only
        # leave out whole ranges that no row of them could pass.
        return filters


Offsets = dict[str, dict[str, int]]


def _to_json(offsets: dict[tuple[str, int], int]) -> Offsets:
    """Spark's Kafka-source offset form: ``{"topic": {"0": 23}}``."""
    out: Offsets = {}
    for (topic, partition), offset in sorted(offsets.items()):
        out.setdefault(topic, {})[str(partition)] = offset
    return out


def _from_json(doc: dict[str, Any]) -> dict[tuple[str, int], int]:
    return {(t, int(p)): int(o) for t, parts in doc.items() for p, o in parts.items()}


class TierlogStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """Micro-batches over offsets; ``maxOffsetsPerTrigger`` bounds each one.

    Under ``Trigger.AvailableNow`` the log ends at the query's start are the target: the
    run reads up to them in as many bounded micro-batches as it takes and then stops, as
    Spark's Kafka source does; records produced meanwhile wait for the next run.
    """

    def __init__(self, options: SourceOptions) -> None:
        self.options = options
        self._target: dict[tuple[str, int], int] | None = None

    def prepareForTriggerAvailableNow(self) -> None:
        with Discovery(self.options) as discovery:
            partitions = discovery.partitions()
            manifests = discovery.manifests(partitions)
            _, self._target = discovery.earliest_latest(partitions, manifests)

    def initialOffset(self) -> Offsets:
        with Discovery(self.options) as discovery:
            partitions = discovery.partitions()
            manifests = discovery.manifests(partitions)
            earliest, latest = discovery.earliest_latest(partitions, manifests)
            start = discovery.resolve(
                self.options.starting, partitions, manifests, earliest, latest, starting=True
            )
        return _to_json(start)

    def getDefaultReadLimit(self) -> ReadLimit:
        if self.options.max_offsets_per_trigger is None:
            return ReadAllAvailable()
        return ReadMaxRows(self.options.max_offsets_per_trigger)

    def latestOffset(self, start: dict[str, Any], limit: ReadLimit) -> Offsets:
        begin = _from_json(start)
        with Discovery(self.options) as discovery:
            partitions = discovery.partitions()
            manifests = discovery.manifests(partitions)
            earliest, latest = discovery.earliest_latest(partitions, manifests)
        if self._target is not None:
            target = self._target
            partitions = [tp for tp in partitions if tp in target]
            latest = {tp: min(latest[tp], target[tp]) for tp in partitions}
        ranges = []
        for tp in partitions:
            # A partition that appeared since the last batch is read from its start.
            since = begin.get(tp, earliest[tp])
            ranges.append(OffsetRange(tp[0], tp[1], since, max(since, latest[tp])))
        if isinstance(limit, ReadMaxRows):
            ranges = limit_ranges(ranges, int(limit.max_rows))
        end = {**begin, **{(r.topic, r.partition): r.end for r in ranges}}
        return _to_json(end)

    def partitions(self, start: dict[str, Any], end: dict[str, Any]) -> Sequence[InputPartition]:
        begin, stop = _from_json(start), _from_json(end)
        with Discovery(self.options) as discovery:
            manifests = discovery.manifests(list(stop))
            earliest, _ = discovery.earliest_latest(list(stop), manifests)
            ranges = []
            for tp, until in sorted(stop.items()):
                since = begin.get(tp, earliest[tp])
                if since < earliest[tp]:
                    if self.options.fail_on_data_loss:
                        raise SourceError(
                            f"{tp[0]}-{tp[1]}: offsets {since}..{earliest[tp] - 1} were deleted "
                            "(retention) before this micro-batch read them; "
                            "failOnDataLoss=false skips them"
                        )
                    since = earliest[tp]
                ranges.append(OffsetRange(tp[0], tp[1], since, max(since, until)))
        return _partitions(
            plan(
                ranges,
                manifests,
                self.options.leader_split_offsets,
                read_committed=self.options.read_committed,
            )
        )

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        split = getattr(partition, "split", None)
        if split is not None:
            yield from _read_split(self.options, split)

    def commit(self, end: dict[str, Any]) -> None:
        """Nothing to do: offsets live in Spark's checkpoint, not in a consumer group."""
