"""``tierlog remote ls`` and ``tierlog dump-log`` on remote segment URLs, run as a user runs
them: manifests written by ``FsspecRemoteStore`` from a real ``Log`` (file:// and S3 through
moto's server), and once from a real tiered broker."""

from __future__ import annotations

import dataclasses
import json
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.broker.harness import BrokerProcess
from tests.remote.conftest import S3Bucket, free_port, s3_bucket, s3_server  # noqa: F401
from tests.tools.cli import tierlog
from tierlog.local.config import LogConfig
from tierlog.local.log import Log
from tierlog.records.builder import Record, build_batch
from tierlog.records.header import Compression
from tierlog.remote.api import RemoteSegment, SegmentState
from tierlog.remote.fsspec_storage import FsspecRemoteStore
from tierlog.remote.manifest import Manifest, object_names, with_segment
from tierlog.remote.manifest_json import decode
from tierlog.tools.remote_tools import iso_ms
from tierlog.util.clock import ManualClock

T0 = 1_700_000_000_000
TOPIC = "history"
TOPIC_ID = uuid.UUID("6f1c9f5e-0d1b-4c35-9a3f-1d2e3f405162")
# How Kafka's tools print TOPIC_ID: URL-safe base64 of its 16 bytes, no padding.
KAFKA_TOPIC_ID = "bxyfXg0bTDWaPx0uP0BRYg"


def write_log(directory: Path, batches: int = 60) -> Log:
    """A real Log of several closed 3 KB segments (sparse indexes, some gzip batches)."""
    config = LogConfig.from_props({"segment.bytes": 3000, "index.interval.bytes": 256})
    log = Log(directory, config, clock=ManualClock(T0))
    for n in range(batches):
        records = [
            Record(b"k%d" % i, b"value-%d-%d-" % (n, i) + b"x" * 60, timestamp=T0 + n * 100 + i)
            for i in range(1 + n % 4)
        ]
        compression = Compression.GZIP if n % 5 == 0 else Compression.NONE
        log.append(build_batch(records, compression=compression), leader_epoch=0)
    assert len(log.segments) >= 3
    return log


def offload(log: Log, store: FsspecRemoteStore, partition: int) -> Manifest:
    """Upload every closed segment of ``log`` and commit each, as the broker does."""
    manifest = store.read_manifest(TOPIC, partition)
    for seg in log.segments[:-1]:
        remote = RemoteSegment(
            topic=TOPIC,
            partition=partition,
            topic_id=TOPIC_ID,
            base_offset=seg.base_offset,
            end_offset=seg.next_offset - 1,
            segment_id=str(uuid.uuid4()),
            size_bytes=seg.size,
            max_timestamp=seg.max_timestamp,
            first_batch_timestamp=(
                -1 if seg.first_batch_timestamp is None else seg.first_batch_timestamp
            ),
            leader_epochs=((0, seg.base_offset),),
            state=SegmentState.COPY_STARTED,
            created_ms=T0,
        )
        remote = store.copy_segment(remote, seg.path, seg.offset_index.path, seg.time_index.path)
        done = dataclasses.replace(remote, state=SegmentState.COPY_FINISHED)
        manifest = store.commit(
            TOPIC,
            partition,
            dataclasses.replace(with_segment(manifest, done), leader_epoch=0),
            manifest.version,
        )
    return manifest


Tiered = tuple[str, dict[int, Log], dict[int, Manifest]]


@pytest.fixture
def tiered(tmp_path: Path) -> Iterator[Tiered]:
    """Two partitions offloaded to file://<tmp>/remote: (URL, logs, manifests)."""
    url = (tmp_path / "remote").as_uri()
    store = FsspecRemoteStore(url)
    logs: dict[int, Log] = {}
    manifests: dict[int, Manifest] = {}
    for partition, batches in ((0, 60), (1, 40)):
        logs[partition] = write_log(tmp_path / "data" / f"{TOPIC}-{partition}", batches)
        manifests[partition] = offload(logs[partition], store, partition)
    yield url, logs, manifests
    for log in logs.values():
        log.close()


def ok(*args: str) -> str:
    result = tierlog(*args)
    assert result.returncode == 0, (args, result.stdout, result.stderr)
    return result.stdout


def fails(*args: str) -> str:
    """stderr of a call that must fail with exit 1 and one line, no traceback."""
    result = tierlog(*args)
    assert result.returncode == 1, (result.returncode, result.stdout, result.stderr)
    assert result.stderr.startswith("tierlog: "), result.stderr
    assert result.stderr.count("\n") == 1 and "Traceback" not in result.stderr, result.stderr
    return result.stderr


def after_first_header(text: str) -> list[str]:
    lines = text.splitlines()
    assert lines[0].startswith("Dumping ")
    return lines[1:]


# -- remote ls ----------------------------------------------------------------------------


def test_ls_lists_every_segment_and_the_totals(tiered: Tiered) -> None:
    url, _, manifests = tiered
    out = ok("remote", "ls", TOPIC, "--remote-url", url)
    for partition, manifest in manifests.items():
        assert f"{TOPIC}-{partition}  {url}/{TOPIC}-{partition}\n" in out
        assert (
            f"remote log start offset: 0  manifest version: {manifest.version}  "
            f"leader epoch: 0  topic id: {KAFKA_TOPIC_ID}"
        ) in out
        for seg in manifest.segments:
            line = next(line for line in out.splitlines() if seg.segment_id in line)
            fields = line.split()
            assert fields[:5] == [
                str(seg.base_offset),
                str(seg.end_offset),
                str(seg.size_bytes),
                "COPY_FINISHED",
                iso_ms(seg.max_timestamp),
            ]
            stem = object_names(seg)["log"].removesuffix(".log")
            assert fields[6] == f"{stem}.{{log,index,timeindex}}"
        n = len(manifest.segments)
        size = sum(s.size_bytes for s in manifest.segments)
        last = manifest.segments[-1].end_offset
        assert (
            f"  {n} segment(s) ({n} COPY_FINISHED), {size} bytes committed, offsets 0..{last}\n"
        ) in out
    segments = sum(len(m.segments) for m in manifests.values())
    size = sum(s.size_bytes for m in manifests.values() for s in m.segments)
    assert out.endswith(f"total: 2 partition(s), {segments} segment(s), {size} bytes committed\n")
    assert iso_ms(T0) == "2023-11-14T22:13:20.000Z"

    one = ok("remote", "ls", TOPIC, "1", "--remote-url", url)
    assert f"{TOPIC}-1  " in one and f"{TOPIC}-0  " not in one and "total:" not in one


def test_json_round_trips(tiered: Tiered) -> None:
    url, _, manifests = tiered
    lines = ok("remote", "ls", TOPIC, "--remote-url", url, "--json").splitlines()
    assert [decode(line.encode(), "stdout") for line in lines] == [manifests[0], manifests[1]]
    assert json.loads(lines[0])["segments"][0]["state"] == "COPY_FINISHED"
    single = ok("remote", "ls", TOPIC, "0", "--remote-url", url, "--json")
    assert decode(single.encode(), "stdout") == manifests[0]


def test_config_file_names_the_store(tiered: Tiered, tmp_path: Path) -> None:
    _, _, manifests = tiered
    config = tmp_path / "server.properties"
    # No remote.log.storage.url: the broker's default, file://<first log dir>/remote.
    config.write_text(f"log.dirs={tmp_path}\nremote.log.storage.options.auto_mkdir=false\n")
    out = ok("remote", "ls", TOPIC, "0", "--config", str(config), "--json")
    assert decode(out.encode(), "stdout") == manifests[0]


def test_unknown_topic_partition_or_root_exits_1(tiered: Tiered, tmp_path: Path) -> None:
    url, _, _ = tiered
    assert "no remote partition of topic 'nosuch'" in fails(
        "remote", "ls", "nosuch", "--remote-url", url
    )
    assert "no remote data for partition 7 of topic 'history'" in fails(
        "remote", "ls", TOPIC, "7", "--remote-url", url
    )
    missing = (tmp_path / "elsewhere").as_uri()
    assert f"{missing}: no such remote directory" in fails(
        "remote", "ls", TOPIC, "--remote-url", missing
    )
    assert "illegal topic name" in fails("remote", "ls", "a/b", "--remote-url", url)
    assert "--remote-option expects key=value" in fails(
        "remote", "ls", TOPIC, "--remote-url", url, "--remote-option", "nonsense"
    )


def test_corrupt_manifest_is_named_and_the_rest_still_listed(
    tiered: Tiered, tmp_path: Path
) -> None:
    url, _, manifests = tiered
    # The manifest proper: the version object the pointer names (a damaged pointer alone
    # is read past, to the newest version).
    version = manifests[1].version
    path = tmp_path / "remote" / f"{TOPIC}-1" / f"manifest-{version:020d}.json"
    path.write_text('{"format": "tierlog-remote-manifest", "format_version": 1, "segm')
    stderr = fails("remote", "ls", TOPIC, "1", "--remote-url", url)
    assert stderr.startswith(f"tierlog: {path.as_uri()}: corrupt remote manifest: ")
    result = tierlog("remote", "ls", TOPIC, "--remote-url", url)
    assert result.returncode == 1
    assert result.stderr.startswith(f"tierlog: {path.as_uri()}: corrupt remote manifest")
    assert f"{TOPIC}-0  " in result.stdout and manifests[0].segments[-1].segment_id in (
        result.stdout
    )


# -- dump-log on remote URLs --------------------------------------------------------------


def test_dump_log_of_a_remote_segment_equals_the_local_dump(tiered: Tiered) -> None:
    url, logs, manifests = tiered
    local = logs[0].segments[1]
    seg = manifests[0].segments[1]
    assert seg.base_offset == local.base_offset
    names = object_names(seg)
    remote = f"{url}/{TOPIC}-0/{names['log']}"
    got = ok("dump-log", "--deep", remote)
    want = ok("dump-log", "--deep", str(local.path))
    assert got.splitlines()[0] == f"Dumping {remote}"
    assert after_first_header(got) == after_first_header(want)
    assert got.count("baseOffset:") == want.count("baseOffset:") > 1

    # --verify-index fetches the indexes beside the object; an index URL on its own too.
    checked = ok("dump-log", "--verify-index", remote)
    assert f"Dumping {url}/{TOPIC}-0/{names['index']}" in checked
    assert f"Dumping {url}/{TOPIC}-0/{names['timeindex']}" in checked
    assert "MISMATCH" not in checked and checked.count("offset: ") > 2
    index = ok("dump-log", f"{url}/{TOPIC}-0/{names['index']}")
    local_index = ok("dump-log", str(local.offset_index.path))
    assert after_first_header(index) == after_first_header(local_index)


def test_dump_log_of_a_missing_object_fails_like_a_missing_file(tiered: Tiered) -> None:
    url, _, _ = tiered
    missing = f"{url}/{TOPIC}-0/00000000000000000000-{uuid.uuid4()}.log"
    result = tierlog("dump-log", missing)
    assert result.returncode == 2 and result.stderr == f"tierlog: {missing}: no such object\n"
    result = tierlog("dump-log", f"{url}/{TOPIC}-0")
    assert result.returncode == 2 and "not a .log, .index or .timeindex object" in result.stderr


# -- S3 (moto) ----------------------------------------------------------------------------


def s3_cli_options(endpoint_url: str) -> list[str]:
    options = {
        "endpoint_url": endpoint_url,
        "key": "testing",
        "secret": "testing",
        "client_kwargs.region_name": "us-east-1",
        "config_kwargs.connect_timeout": "1",
        "config_kwargs.retries.max_attempts": "1",
    }
    return [arg for k, v in options.items() for arg in ("--remote-option", f"{k}={v}")]


def test_s3_ls_and_dump_log(s3_bucket: S3Bucket, tmp_path: Path) -> None:  # noqa: F811
    store = FsspecRemoteStore(s3_bucket.url, s3_bucket.options())
    log = write_log(tmp_path / "data" / f"{TOPIC}-2", 30)
    try:
        manifest = offload(log, store, 2)
        options = s3_cli_options(s3_bucket.endpoint_url)
        out = ok("remote", "ls", TOPIC, "--remote-url", s3_bucket.url, *options)
        assert f"{TOPIC}-2  {s3_bucket.url}/{TOPIC}-2\n" in out
        assert all(seg.segment_id in out for seg in manifest.segments)
        got = ok("remote", "ls", TOPIC, "2", "--remote-url", s3_bucket.url, "--json", *options)
        assert decode(got.encode(), "stdout") == manifest

        seg = manifest.segments[0]
        remote = f"{s3_bucket.url}/{TOPIC}-2/{object_names(seg)['log']}"
        dumped = ok("dump-log", "--deep", "--verify-index", remote, *options)
        local = ok("dump-log", "--deep", "--verify-index", str(log.segments[0].path))
        assert dumped.splitlines()[0] == f"Dumping {remote}"
        body = [line for line in after_first_header(dumped) if not line.startswith("Dumping")]
        want = [line for line in after_first_header(local) if not line.startswith("Dumping")]
        assert body == want and "MISMATCH" not in dumped
    finally:
        log.close()


def test_unreachable_store_exits_1_in_one_line() -> None:
    endpoint = f"http://127.0.0.1:{free_port()}"  # nothing listens there
    started = time.monotonic()
    stderr = fails("remote", "ls", TOPIC, "--remote-url", "s3://b/p", *s3_cli_options(endpoint))
    assert "s3://b/p" in stderr
    assert time.monotonic() - started < 20


# -- a manifest written by a real tiered broker ---------------------------------------------


# The tiered broker of tests/broker/test_tiered.py: small segments, fast background tasks.
FAST = {
    "log.segment.bytes": "16384",
    "remote.log.manager.task.interval.ms": "200",
    "log.retention.check.interval.ms": "200",
    "log.segment.delete.delay.ms": "0",
}


def fill_tiered_topic(bootstrap: str, topic: str, count: int = 2000) -> None:
    from confluent_kafka import Producer
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    # retention.ms=-1: the records are stamped in 2023, past the default 7 days.
    configs = {
        "remote.storage.enable": "true",
        "local.retention.bytes": "40000",
        "retention.ms": "-1",
    }
    admin.create_topics([NewTopic(topic, 1, 1, config=configs)])[topic].result(timeout=10)
    errors: list[object] = []
    # Small batches: a batch must fit in a 16 KiB segment.
    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            "linger.ms": 2,
            "batch.num.messages": 20,
            "on_delivery": lambda err, _msg: err is None or errors.append(err),
        }
    )
    for i in range(count):
        producer.produce(topic, value=b"%06d" % i + b"-" * 100, timestamp=T0 + i * 1000)
    assert producer.flush(30) == 0 and not errors, errors[:3]


def test_ls_and_dump_log_on_a_tiered_broker(tmp_path: Path) -> None:
    broker = BrokerProcess(tmp_path / "data", FAST).start()
    try:
        fill_tiered_topic(broker.bootstrap, TOPIC)
        url = (broker.data_dir / "remote").as_uri()
        store = FsspecRemoteStore(url)
        deadline = time.monotonic() + 30
        while len(store.read_manifest(TOPIC, 0).segments) < 3:
            assert time.monotonic() < deadline, "nothing offloaded in 30 s"
            time.sleep(0.2)

        lines = ok("remote", "ls", TOPIC, "--remote-url", url, "--json").splitlines()
        manifest = decode(lines[0].encode(), "stdout")
        assert len(manifest.segments) >= 3 and manifest.leader_epoch >= 0
        text = ok("remote", "ls", TOPIC, "0", "--remote-url", url)
        assert f"leader epoch: {manifest.leader_epoch}" in text
        first = manifest.segments[0]
        assert first.base_offset == 0 and iso_ms(first.max_timestamp) in text
        remote = f"{url}/{TOPIC}-0/{object_names(first)['log']}"
        dumped = ok("dump-log", "--deep", "--verify-index", remote)
        offsets = [int(line.split()[2]) for line in dumped.splitlines() if line.startswith("| ")]
        assert offsets == list(range(first.end_offset + 1)) and "MISMATCH" not in dumped
    finally:
        broker.stop()
