"""Broker configuration mistakes end in one line naming the key (issue 10, item 15): values
past Kafka's 32/64-bit types, a log dir under a file, a remote URL fsspec cannot open."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tierlog.broker.config import BrokerConfig
from tierlog.local.config import LogConfig
from tierlog.util.configdef import ConfigError


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("message.max.bytes", "99999999999"),
        ("socket.request.max.bytes", "2147483648"),
        ("log.segment.bytes", "-2147483649"),
        ("log.retention.ms", str(2**63)),
    ],
)
def test_values_past_kafkas_types_are_refused(key: str, value: str) -> None:
    with pytest.raises(ConfigError) as exc:
        BrokerConfig({key: value})
    assert exc.value.key == key
    assert value in exc.value.reason


def test_the_largest_int_is_still_accepted() -> None:
    assert BrokerConfig({"message.max.bytes": str(2**31 - 1)})["message.max.bytes"] == 2**31 - 1


def test_topic_values_past_kafkas_types_are_refused() -> None:
    with pytest.raises(ConfigError) as exc:
        LogConfig.from_props({"max.message.bytes": "99999999999"})
    assert exc.value.key == "max.message.bytes"


def start_broker(tmp_path: Path, **overrides: str) -> subprocess.CompletedProcess[str]:
    props = {
        "listeners": "PLAINTEXT://127.0.0.1:0",
        "log.dirs": str(tmp_path / "data"),
        **overrides,
    }
    args = [sys.executable, "-m", "tierlog.cli", "broker", "start"]
    for key, value in props.items():
        args += ["--override", f"{key}={value}"]
    # A broker that starts despite the mistake would run until killed: bounded.
    return subprocess.run(args, capture_output=True, text=True, timeout=60)


def assert_one_line(result: subprocess.CompletedProcess[str], key: str) -> None:
    assert result.returncode == 2, result.stdout + result.stderr
    assert "Traceback" not in result.stderr
    lines = [line for line in result.stderr.splitlines() if line.startswith("tierlog:")]
    assert len(lines) == 1, result.stderr
    assert f"'{key}'" in lines[0]


def test_broker_start_refuses_an_int_overflow(tmp_path: Path) -> None:
    result = start_broker(tmp_path, **{"message.max.bytes": "99999999999"})
    assert_one_line(result, "message.max.bytes")


def test_broker_start_refuses_log_dirs_under_a_file(tmp_path: Path) -> None:
    a_file = tmp_path / "a-file"
    a_file.write_text("not a directory")
    result = start_broker(tmp_path, **{"log.dirs": str(a_file / "logs")})
    assert_one_line(result, "log.dirs")
    assert str(a_file) in result.stderr
    result = start_broker(tmp_path, **{"log.dirs": str(a_file)})
    assert_one_line(result, "log.dirs")


@pytest.fixture
def read_only_dir(tmp_path: Path) -> Iterator[Path]:
    """A real read-only file system (a tmpfs mounted ``ro``): the test runs as root, and
    root writes through a directory's mode bits. Not skipped when it cannot be mounted."""
    mount = tmp_path / "ro"
    mount.mkdir()
    result = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=1m,ro", "tmpfs", str(mount)],
        capture_output=True,
        text=True,
    )
    if result.returncode != 0:
        pytest.fail(f"cannot mount a tmpfs (needs root): {result.stderr.strip()}", pytrace=False)
    try:
        yield mount
    finally:
        subprocess.run(["umount", "-l", str(mount)], check=False)


def test_broker_start_on_read_only_log_dirs_says_so_in_one_line(read_only_dir: Path) -> None:
    """Issue 20, item 12: a read-only ``log.dirs`` ended start-up in a traceback."""
    for log_dirs in (read_only_dir, read_only_dir / "logs"):  # the dir, or its parent
        result = start_broker(read_only_dir.parent, **{"log.dirs": str(log_dirs)})
        assert_one_line(result, "log.dirs")
        assert "read-only" in result.stderr, result.stderr


@pytest.mark.parametrize("url", ["nosuch://bucket/prefix", "s3:/bucket-without-scheme"])
def test_broker_start_refuses_a_bad_remote_url(tmp_path: Path, url: str) -> None:
    result = start_broker(tmp_path, **{"remote.log.storage.url": url})
    assert_one_line(result, "remote.log.storage.url")
    assert url in result.stderr


def test_hdfs_without_libhdfs_is_one_clear_line(tmp_path: Path) -> None:
    """``hdfs://`` needs libhdfs (through pyarrow), which no package here provides: the
    broker says so in one line naming the key (``webhdfs://`` needs no native library;
    tests/integration/test_tiered_hdfs.py)."""
    result = start_broker(tmp_path, **{"remote.log.storage.url": "hdfs://127.0.0.1:1/tierlog"})
    assert_one_line(result, "remote.log.storage.url")
    assert "libhdfs" in result.stderr and "hdfs://127.0.0.1:1/tierlog" in result.stderr


def test_broker_start_refuses_storage_options_that_are_not_a_json_object(tmp_path: Path) -> None:
    result = start_broker(tmp_path, **{"remote.log.storage.options": "[1, 2]"})
    assert_one_line(result, "remote.log.storage.options")
    assert "JSON object" in result.stderr


def test_storage_options_as_json_reach_the_store_as_written() -> None:
    config = BrokerConfig(
        {
            "remote.log.storage.options": json.dumps(
                {"s3_additional_kwargs": {"ServerSideEncryption": "aws:kms"}}
            ),
            "remote.log.storage.options.key": "0123",
        }
    )
    assert config.remote_storage_options == {
        "s3_additional_kwargs": {"ServerSideEncryption": "aws:kms"},
        "key": "0123",
    }
