"""What every pipeline shares: its TOML config (loaded, checked, ``--set`` overrides), the
CLI around it, the Spark session, and reading a topic through the ``tierlog`` source.

A pipeline config is one TOML table whose keys are the pipeline function's keyword
arguments, plus an optional ``[spark]`` table (``master``, ``app_name``, ``[spark.conf]``).
``--set key=value`` overrides a key after the file is read; the value is read as a TOML
value when it is one (``--set max_offsets=500``, ``--set storage_options.anon=true``) and
as a string otherwise (``--set topic=clicks``). A key the pipeline does not know, a value of
the wrong type or out of range stops the CLI with exit status 2 and a message naming it.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
import tomllib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from pipelines import client_security
from tierlog.util.configdef import ConfigError

EXIT_CONFIG = 2  # argparse's status for a bad command line; a bad config is one too
EXIT_FAILED = 1
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


class _Required:
    def __repr__(self) -> str:
        return "REQUIRED"


REQUIRED: Any = _Required()


@dataclass(frozen=True)
class Key:
    """One config key of a pipeline.

    ``parse`` turns a value of one of ``kinds`` into what the pipeline takes, raising
    ``ValueError`` with the reason when the value is out of range.
    """

    name: str
    kinds: tuple[type, ...]
    default: Any = REQUIRED
    parse: Callable[[Any], Any] | None = None


SPARK_KEYS = {"master", "app_name", "conf"}


def load_config(
    keys: Sequence[Key], path: Path | None, overrides: Sequence[str] = ()
) -> dict[str, Any]:
    """A pipeline's config: the TOML file at ``path`` with ``overrides`` applied, checked
    against ``keys``, defaults filled in; ``"spark"`` holds the ``[spark]`` table.

    Raises:
        ConfigError: the file is missing or not TOML, or a key is unknown, missing, of the
            wrong type or out of range (the message names it).
    """
    raw: dict[str, Any] = {}
    if path is not None:
        try:
            raw = tomllib.loads(path.read_text())
        except FileNotFoundError:
            raise ConfigError("--config", f"no such file: {path}") from None
        except tomllib.TOMLDecodeError as exc:
            raise ConfigError("--config", f"{path} is not valid TOML: {exc}") from None
    for item in overrides:
        apply_override(raw, item)
    known = {k.name: k for k in keys}
    for name in raw:
        if name != "spark" and name not in known:
            raise ConfigError(name, f"unknown key (known: {', '.join(sorted(known))}, spark)")
    config: dict[str, Any] = {"spark": _spark_table(raw.get("spark", {}))}
    for key in keys:
        config[key.name] = _value(key, raw)
    return config


def apply_override(raw: dict[str, Any], item: str) -> None:
    """Apply one ``--set key=value`` to ``raw``.

    The key is a TOML key: dotted parts reach into tables, and a part that has dots of its
    own is quoted (``spark.conf."spark.driver.memory"=4g``). The value is a TOML value when
    it parses as one, else the text as a string; it replaces what the key held.

    Raises:
        ConfigError: no ``=``, or a key TOML cannot read, or a key part that is a value in
            ``raw`` used as a table.
    """
    name, sep, text = item.partition("=")
    name = name.strip()
    try:
        parts = _key_parts(name) if sep and name else None
    except tomllib.TOMLDecodeError:
        parts = None
    if parts is None:
        raise ConfigError(
            item, "--set takes key=value (a TOML key: dotted parts reach into tables)"
        )
    try:
        value = tomllib.loads(f"v = {text}")["v"]
    except tomllib.TOMLDecodeError:
        value = text  # not a TOML value: a bare string such as a topic name or a path
    target = raw
    for part in parts[:-1]:
        nested = target.setdefault(part, {})
        if not isinstance(nested, dict):
            raise ConfigError(name, f"{part} is a value, not a table")
        target = nested
    target[parts[-1]] = value


def _key_parts(name: str) -> list[str]:
    """The parts of a TOML key (``a."b.c"`` -> ``["a", "b.c"]``)."""
    doc: Any = tomllib.loads(f"{name} = 0")
    parts = []
    while isinstance(doc, dict):
        (part, doc), *_ = doc.items()
        parts.append(part)
    return parts


def _value(key: Key, raw: Mapping[str, Any]) -> Any:
    if key.name not in raw:
        if key.default is REQUIRED:
            raise ConfigError(key.name, "required")
        return key.default
    value = raw[key.name]
    # bool is an int in Python; a count given as `true` is a mistake, not 1.
    if not isinstance(value, key.kinds) or (isinstance(value, bool) and bool not in key.kinds):
        kinds = " or ".join(_KIND_NAMES.get(k, f"a {k.__name__}") for k in key.kinds)
        raise ConfigError(key.name, f"{value!r} is not {kinds}")
    if key.parse is None:
        return value
    try:
        return key.parse(value)
    except ValueError as exc:
        raise ConfigError(key.name, str(exc)) from None


_KIND_NAMES = {
    str: "a string",
    int: "an integer",
    bool: "a boolean",
    dict: "a table",
    datetime: "a date-time",
}


def _spark_table(table: Any) -> dict[str, Any]:
    if not isinstance(table, dict):
        raise ConfigError("spark", "must be a table ([spark])")
    for name in table:
        if name not in SPARK_KEYS:
            raise ConfigError(f"spark.{name}", f"unknown key (known: {', '.join(SPARK_KEYS)})")
    for name in ("master", "app_name"):
        if name in table and not isinstance(table[name], str):
            raise ConfigError(f"spark.{name}", f"{table[name]!r} is not a string")
    conf = table.get("conf", {})
    if not isinstance(conf, dict) or any(isinstance(v, dict | list) for v in conf.values()):
        raise ConfigError("spark.conf", "must be a table of Spark settings (key = value)")
    return {
        "master": table.get("master"),
        "app_name": table.get("app_name"),
        "conf": {k: str(v).lower() if isinstance(v, bool) else str(v) for k, v in conf.items()},
    }


# -- value parsers shared by the pipelines' keys ---------------------------------------------


def positive(value: int) -> int:
    """A count that must be at least 1."""
    if value < 1:
        raise ValueError(f"{value} is below 1")
    return value


def non_empty(value: str) -> str:
    if not value.strip():
        raise ValueError("must not be empty")
    return value.strip()


def offsets_spec(value: str | dict[str, Any]) -> str:
    """``"earliest"``, ``"latest"`` or per-partition offsets (a JSON string or a TOML table
    ``{topic = {"0" = 23}}``, -2 = earliest, -1 = latest), as the source's option text."""
    from tierlog.spark.options import parse

    text = value.strip() if isinstance(value, str) else json.dumps(value)
    if text.lower() in ("earliest", "latest"):
        return text.lower()
    if not text.startswith("{"):
        raise ValueError(
            f'{text!r} is not "earliest", "latest" or JSON like {{"topic": {{"0": 23}}}}'
        )
    try:
        parse({"subscribe": "x", "kafka.bootstrap.servers": "x", "startingOffsets": text})
    except ConfigError as exc:
        raise ValueError(exc.reason) from None
    return text


def timestamp_ms(value: int | datetime) -> int:
    """Milliseconds since the epoch, from an integer or a TOML date-time with an offset
    (``2024-05-01T12:00:00Z``)."""
    if isinstance(value, datetime):
        if value.tzinfo is None:
            raise ValueError(f"{value} has no UTC offset (write e.g. {value.isoformat()}Z)")
        return (value - _EPOCH) // timedelta(milliseconds=1)
    if value < 0:
        raise ValueError(f"{value} is below 0")
    return value


def storage_url(value: str) -> str:
    """A URL fsspec and the source take: URLs (``s3://``, ``file://``) are kept, a plain
    path becomes an absolute ``file://`` URL (configs say ``data/demo/logs/remote``)."""
    text = non_empty(value)
    if "://" in text:
        return text
    return Path(text).resolve().as_uri()


def table_location(value: str) -> str:
    """A Delta table's location: URLs are kept, a plain path is made absolute so the table
    is where the config says whichever directory Spark resolves relative paths against."""
    text = non_empty(value)
    if "://" in text:
        return text
    return str(Path(text).resolve())


# -- the Spark session and the topic ---------------------------------------------------------


def spark_session(settings: Mapping[str, Any] | None = None) -> Any:
    """``tierlog.spark.session`` with the ``[spark]`` table's settings (Delta configured,
    the ``tierlog`` source registered)."""
    from tierlog.spark import session

    settings = settings or {}
    return session(
        settings.get("app_name") or "tierlog-pipelines",
        master=settings.get("master"),
        conf=settings.get("conf") or {},
    )


def latest_version(spark: Any, table_path: str) -> int:
    """The table's latest version; -1 when there is no Delta table at ``table_path``."""
    from delta.tables import DeltaTable

    if not DeltaTable.isDeltaTable(spark, table_path):
        return -1
    return int(DeltaTable.forPath(spark, table_path).history(1).collect()[0]["version"])


@dataclass(frozen=True)
class TopicSource:
    """One topic as the ``tierlog`` source reads it.

    Args:
        topic: the topic.
        bootstrap_servers: the cluster; None only with ``remote_only``.
        remote_url: the broker's ``remote.log.storage.url`` (a plain path is a local
            directory); with it, closed segments are read straight from object storage.
        storage_options: fsspec options of the remote tier (nested as fsspec takes them).
        remote_only: read only committed remote segments (``tierlog.tiers=remote``).
        include_headers: add the ``headers`` column (the source leaves it out by default,
            as Spark's Kafka source does; a bronze table keeps the whole record).
    """

    topic: str
    bootstrap_servers: str | None = None
    remote_url: str | None = None
    storage_options: Mapping[str, Any] = field(default_factory=dict)
    remote_only: bool = False
    include_headers: bool = True

    def options(self) -> dict[str, str]:
        """The source's options; rows carry a ``tier`` column."""
        opts = {
            "subscribe": self.topic,
            "tierlog.includeTier": "true",
            "includeHeaders": str(self.include_headers).lower(),
        }
        if self.bootstrap_servers:
            opts["kafka.bootstrap.servers"] = self.bootstrap_servers
        if self.remote_url:
            opts["remote.log.storage.url"] = storage_url(self.remote_url)
        if self.remote_only:
            opts["tierlog.tiers"] = "remote"
        for name, value in _flatten(self.storage_options):
            opts[f"remote.log.storage.options.{name}"] = value
        if self.bootstrap_servers:
            opts.update(client_security.spark_options())  # TIERLOG_CLIENT_CONFIG's
        return opts

    def read(self, spark: Any, **bounds: str) -> Any:
        """A batch DataFrame; ``bounds`` are further source options such as
        ``startingOffsets`` or ``endingTimestamp``."""
        return spark.read.format("tierlog").options(**self.options(), **bounds).load()

    def read_stream(self, spark: Any, **options: str) -> Any:
        """A streaming DataFrame; ``options`` as for ``read``."""
        return spark.readStream.format("tierlog").options(**self.options(), **options).load()

    def offsets(self, starting: str = "earliest") -> tuple[dict[int, int], dict[int, int]]:
        """``(start, latest)`` offset of every partition now: ``starting`` resolved as the
        source resolves ``startingOffsets``, and the log end (remote-only: remote end).

        Raises:
            SourceError: the topic does not exist, or a starting offset was deleted.
        """
        from tierlog.spark.discovery import Discovery
        from tierlog.spark.options import parse

        opts = parse({**self.options(), "startingOffsets": starting})
        with Discovery(opts) as discovery:
            partitions = discovery.partitions()
            manifests = discovery.manifests(partitions)
            earliest, latest = discovery.earliest_latest(partitions, manifests)
            start = discovery.resolve(
                opts.starting, partitions, manifests, earliest, latest, starting=True
            )
        return {p: start[t, p] for t, p in partitions}, {p: latest[t, p] for t, p in partitions}


def broker_remote_url(bootstrap_servers: str, timeout_s: float = 10.0) -> str | None:
    """The remote tier of a tierlog broker, asked through DescribeConfigs: its
    ``remote.log.storage.url``, or when that is empty its default ``<first log dir>/remote``
    (a relative log dir is taken from this process's working directory).

    Returns:
        The URL, or None when the broker has no remote tier (or is not tierlog).
    """
    from confluent_kafka.admin import AdminClient, ConfigResource, ResourceType

    # log_level 4 (warnings and up): librdkafka's info lines at close are noise in a run's log.
    admin = AdminClient(
        {"bootstrap.servers": bootstrap_servers, "log_level": 4, **client_security.librdkafka()}
    )
    brokers = admin.list_topics(timeout=timeout_s).brokers
    resource = ConfigResource(ResourceType.BROKER, str(min(brokers)))
    entries = admin.describe_configs([resource])[resource].result(timeout_s)
    values = {name: entry.value for name, entry in entries.items()}
    if values.get("remote.log.storage.system.enable") != "true":
        return None
    if values.get("remote.log.storage.url"):
        return str(values["remote.log.storage.url"])
    log_dir = (values.get("log.dirs") or values.get("log.dir") or "").split(",")[0].strip()
    return storage_url(f"{log_dir}/remote") if log_dir else None


def _flatten(options: Mapping[str, Any], prefix: str = "") -> list[tuple[str, str]]:
    out: list[tuple[str, str]] = []
    for name, value in options.items():
        if isinstance(value, Mapping):
            out.extend(_flatten(value, f"{prefix}{name}."))
        else:
            out.append(
                (f"{prefix}{name}", str(value).lower() if isinstance(value, bool) else str(value))
            )
    return out


def offsets_json(topic: str, offsets: Mapping[int, int]) -> str:
    """Per-partition offsets in the source's option form ``{"topic": {"0": 23}}``."""
    return json.dumps({topic: {str(p): o for p, o in sorted(offsets.items())}})


# -- the CLI ---------------------------------------------------------------------------------


def main(
    name: str,
    keys: Sequence[Key],
    run: Callable[..., Any],
    argv: Sequence[str] | None = None,
    *,
    description: str = "",
) -> int:
    """``python -m pipelines.NAME --config FILE [--set key=value ...]``: load the config,
    start Spark, call ``run(spark, **config)`` and print its result as one JSON line.

    Returns:
        0 on success, 2 when the config (or a value the pipeline checks) is bad, 1 when the
        topic cannot be read as asked or no broker answers (one line each, as
        :mod:`tierlog.util.cli_errors` has it; other failures raise, with their traceback).
    """
    parser = argparse.ArgumentParser(prog=f"python -m pipelines.{name}", description=description)
    parser.add_argument("--config", type=Path, help=f"a TOML file such as configs/{name}.toml")
    parser.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="override a config key (dotted keys reach into tables); repeatable",
    )
    parser.add_argument("-v", "--verbose", action="store_true", help="a traceback with any error")
    args = parser.parse_args(argv)
    prog = parser.prog
    try:
        config = load_config(keys, args.config, args.set)
    except ConfigError as exc:
        print(f"{prog}: {exc}", file=sys.stderr)
        return EXIT_CONFIG
    from tierlog.util.cli_errors import run_cli

    # Expected failures (no broker, ...) are one line; see tierlog.util.cli_errors.
    return run_cli(lambda: _run(prog, run, config), prog, verbose=args.verbose)


def _run(prog: str, run: Callable[..., Any], config: dict[str, Any]) -> int:
    from tierlog.spark.discovery import SourceError
    from tierlog.util.cli_errors import require_listening

    # Before Spark's start-up, and before the source's 30 s of retries; the broker first,
    # as the one input every reading pipeline has.
    if config.get("bootstrap_servers"):
        require_listening(config["bootstrap_servers"], option="--set bootstrap_servers=HOST:PORT")
    if config.get("remote_url"):
        require_remote_dir(config["remote_url"])
    spark = spark_session(config.pop("spark"))
    try:
        result = run(spark, **config)
    except ConfigError as exc:
        print(f"{prog}: {exc}", file=sys.stderr)
        return EXIT_CONFIG
    except SourceError as exc:  # the topic is missing, offsets were deleted: say so plainly
        print(f"{prog}: {exc}", file=sys.stderr)
        return EXIT_FAILED
    finally:
        spark.stop()
    print(json.dumps(as_json(result), sort_keys=True))
    return 0


def require_remote_dir(remote_url: str) -> None:
    """Fail before Spark starts when a local remote tier does not exist. The shipped configs
    point at the demo's data, so the usual reason is that the demo has not run here.

    Raises:
        CliError: ``remote_url`` is a local path (or file:// URL) that does not exist.
    """
    from urllib.parse import unquote, urlparse

    from tierlog.util.cli_errors import CliError

    url = urlparse(storage_url(remote_url))
    if url.scheme != "file":
        return  # object storage: the source's own error says what is wrong
    directory = Path(unquote(url.path))
    if not directory.is_dir():
        raise CliError(
            f"no remote tier at {directory} (no such directory); the shipped configs read "
            "the demo's data: run `make demo` first, or --set remote_url=URL"
        )


def as_json(result: Any) -> Any:
    """A result dataclass as JSON-ready data."""
    if dataclasses.is_dataclass(result) and not isinstance(result, type):
        return dataclasses.asdict(result)
    return result
