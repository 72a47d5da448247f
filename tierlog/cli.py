"""The ``tierlog`` command: argument parsing only; each subcommand lives in its own module.

Size: ~840 lines, past the ~600 guideline, on purpose: this is the whole command tree
(every command's flags, help and the one-line call into ``tierlog.tools``/``tierlog.jobs``
that runs it), kept in one module so that ``tierlog --help`` and each command's options
read and change together; no command's work is done here.
"""

from __future__ import annotations

import argparse
import logging
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tierlog.tools import cluster_control
from tierlog.tools.client_config import ClientSettings, add_client_options, run_tool
from tierlog.tools.errors import run_cli
from tierlog.tools.remote_tools import add_location_options
from tierlog.util.cli_errors import EXIT_USAGE, CliError

VERBOSE_HELP = "debug logging, and a traceback with any error"

# What `tierlog --help` opens with: what tierlog is, for a user, and where to start.
DESCRIPTION = """\
tierlog is a Kafka-compatible commit log for notebook-driven data platforms. Its brokers
speak Kafka's protocol (any Kafka client works) and keep each partition's recent tail on
local disk while older segments move to object storage (a file:// directory, S3, HDFS).
PySpark pipelines, run as papermill notebooks, read both tiers into Delta tables.

Start with `tierlog demo` (or `make demo`): a broker, a tiered topic, and a notebook that
ingests it into Delta, end to end on one machine. Every command takes -h."""

EPILOG = """\
examples:
  tierlog broker start --config configs/server.properties
  tierlog topics create events --partitions 3 --bootstrap-server 127.0.0.1:9092
  tierlog notebook run ingest_to_delta -p topic events
  tierlog remote ls activity --remote-url data/demo/logs/remote"""

if TYPE_CHECKING:
    from datetime import datetime

    from tierlog.jobs.schedule_config import SchedulerConfig


def _dump_log(args: argparse.Namespace) -> int:
    from tierlog.tools.dump_log import dump
    from tierlog.tools.remote_tools import is_remote, resolve_location, run_remote_tool

    def run() -> int:
        options: dict[str, Any] = {}
        if any(is_remote(p) for p in args.paths):
            options = resolve_location(None, args.remote_option, args.config).storage_options
        problems = dump(
            [p if is_remote(p) else Path(p) for p in args.paths],
            sys.stdout,
            deep=args.deep,
            verify_index=args.verify_index,
            storage_options=options,
        )
        if problems:
            print(f"{problems} problem(s) found", file=sys.stderr)
        return 1 if problems else 0

    if not any(is_remote(p) for p in args.paths):
        return run()
    # Store failures (unreachable, unreadable) are one line and exit 1, like remote ls; a
    # missing object or a bad name stays what it is for a local file (main(): exit 2).
    return run_remote_tool(run, passthrough=(FileNotFoundError, ValueError))


def _remote_ls(args: argparse.Namespace) -> int:
    from tierlog.tools.remote_tools import remote_ls, resolve_location, run_remote_tool

    return run_remote_tool(
        lambda: remote_ls(
            resolve_location(args.remote_url, args.remote_option, args.config),
            args.topic,
            args.partition,
            sys.stdout,
            sys.stderr,
            as_json=args.json,
        )
    )


def _demo(args: argparse.Namespace) -> int:
    if args.broker_only:
        from tierlog.tools.demo import run_demo

        run_demo(Path(args.data_dir), sys.stdout, events=args.events or 200_000, force=args.force)
        return 0
    from tierlog.tools.platform_demo import run_platform_demo

    run_platform_demo(
        Path(args.data_dir),
        sys.stdout,
        events=args.events or 100_000,
        notebooks_dir=Path(args.notebooks_dir),
        runs_dir=Path(args.runs_dir),
        force=args.force,
    )
    return 0


def _demo_serve(args: argparse.Namespace) -> int:
    from tierlog.tools.demo_serve import serve_demo

    return serve_demo(Path(args.data_dir), args.port, sys.stdout)


def _notebook_run(args: argparse.Namespace) -> int:
    from tierlog.jobs import runner
    from tierlog.tools.demo import Phases

    parameters = {key: runner.parse_parameter(value) for key, value in args.parameter}
    parameters.update(dict(args.raw_parameter))
    # Progress goes to stderr: stdout stays the executed notebook's path, for scripts.
    phases = None if args.quiet else Phases(sys.stderr)
    run = runner.run_notebook(
        args.name,
        parameters,
        notebooks_dir=runner.notebooks_dir(args.notebooks_dir),
        runs_dir=runner.runs_dir(args.runs_dir),
        timeout_s=args.timeout_s,
        progress=phases.done if phases else None,
    )
    output = runner.display_path(run.output)
    if phases and run.ok:
        html = f"; HTML copy {runner.display_path(run.html)}" if run.html else ""
        phases.done(f"notebook {run.name} finished in {run.duration_s:.1f} s{html}")
    print(output)
    if not run.ok:
        html = f"HTML copy {runner.display_path(run.html)}, " if run.html else ""
        print(
            f"tierlog: notebook {run.name}: {run.error}; output kept at {output} ({html}kernel "
            f"log {output.with_suffix('.log')})",
            file=sys.stderr,
        )
        return 1
    return 0


def _lab(args: argparse.Namespace) -> int:
    from tierlog.jobs.runner import notebooks_dir, runs_dir
    from tierlog.tools.lab import run_lab

    return run_lab(
        notebooks_dir(args.notebooks_dir), args.port, sys.stdout, runs_dir(args.runs_dir)
    )


def _schedule_config(args: argparse.Namespace) -> tuple[SchedulerConfig, datetime]:
    """The loaded pipelines.toml and the time to check against (--now, else the clock)."""
    from datetime import UTC, datetime

    from tierlog.jobs import schedule, schedule_config

    config = schedule_config.load_config(Path(args.config))
    now = schedule.parse_now(args.now, config.timezone) if args.now else datetime.now(UTC)
    return config, now


def _schedule_run_due(args: argparse.Namespace) -> int:
    from tierlog.jobs import schedule

    config, now = _schedule_config(args)
    return schedule.run_due(config, now, sys.stdout, sys.stderr, trial=args.now is not None)


def _schedule_reset(args: argparse.Namespace) -> int:
    from tierlog.jobs import schedule, schedule_config

    config = schedule_config.load_config(Path(args.config))
    return schedule.reset(config, args.job, sys.stdout)


def _schedule_list(args: argparse.Namespace) -> int:
    from tierlog.jobs import schedule

    config, now = _schedule_config(args)
    return schedule.list_jobs(config, now, sys.stdout)


def _parse_overrides(items: list[str]) -> dict[str, str]:
    overrides = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise ValueError(f"--override expects key=value, got {item!r}")
        overrides[key.strip()] = value.strip()
    return overrides


def _broker_start(args: argparse.Namespace) -> int:
    from tierlog.broker.runner import run_broker

    # A taken port or data dir (LogDirInUseError) surfaces here and becomes one line in
    # main(), through tierlog.tools.errors.
    return run_broker(Path(args.config) if args.config else None, _parse_overrides(args.override))


def _cluster_start(args: argparse.Namespace) -> int:
    import signal
    import threading

    from tierlog.tools.cluster import start_cluster

    stop = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stop.set())
    return run_tool(
        lambda: start_cluster(
            args.brokers,
            sys.stdout,
            zookeeper=args.zookeeper,
            data_dir=Path(args.data_dir),
            port=args.port,
            racks=args.racks,
            until=stop,
            secure=args.secure,
        )
    )


def _cluster_status(settings: ClientSettings, args: argparse.Namespace) -> int:
    from tierlog.tools.cluster import status

    return status(settings, sys.stdout)


# Kafka client tools: confluent-kafka is imported only inside the tool modules' functions.
ClientAction = Callable[[ClientSettings, argparse.Namespace], int]


def _client(action: ClientAction) -> Callable[[argparse.Namespace], int]:
    """Wrap a tool action: build its client settings, report failures as one line, exit 1."""

    def run(args: argparse.Namespace) -> int:
        def checked() -> int:
            settings = ClientSettings.from_args(args)
            settings.check_reachable()  # a refused connection fails now, not in 30 s
            return action(settings, args)

        return run_tool(checked)

    return run


def _topics_create(settings: ClientSettings, args: argparse.Namespace) -> int:
    from tierlog.tools import topics
    from tierlog.tools.client_config import parse_key_values

    configs = parse_key_values(args.config, "--config")
    return topics.create(
        settings,
        args.name,
        sys.stdout,
        partitions=args.partitions,
        replication_factor=args.replication_factor,
        configs=configs,
    )


def _topics_list(settings: ClientSettings, args: argparse.Namespace) -> int:
    from tierlog.tools import topics

    return topics.list_topics(settings, sys.stdout, sys.stderr)


def _topics_describe(settings: ClientSettings, args: argparse.Namespace) -> int:
    from tierlog.tools import topics

    return topics.describe(settings, args.names, sys.stdout)


def _topics_alter(settings: ClientSettings, args: argparse.Namespace) -> int:
    from tierlog.tools import topics
    from tierlog.tools.client_config import parse_key_values

    return topics.alter(
        settings,
        args.name,
        sys.stdout,
        partitions=args.partitions,
        set_configs=parse_key_values(args.config, "--config"),
        delete_configs=args.delete_config,
    )


def _topics_delete(settings: ClientSettings, args: argparse.Namespace) -> int:
    from tierlog.tools import topics

    return topics.delete(settings, args.names, sys.stdout)


def _produce(settings: ClientSettings, args: argparse.Namespace) -> int:
    from tierlog.tools import console

    return console.produce(
        settings,
        args.topic,
        sys.stdin.buffer,
        sys.stderr,
        key_separator=args.key_separator,
        compression=args.compression,
        acks=args.acks,
        partition=args.partition,
    )


def _consume(settings: ClientSettings, args: argparse.Namespace) -> int:
    from tierlog.tools import console

    return console.consume(
        settings,
        args.topic,
        sys.stdout.buffer,
        sys.stderr,
        group=args.group,
        from_beginning=args.from_beginning,
        offset=args.offset,
        partition=args.partition,
        max_messages=args.max_messages,
        timeout_ms=args.timeout_ms,
        print_key=args.print_key,
        print_offset=args.print_offset,
    )


def _groups_list(settings: ClientSettings, args: argparse.Namespace) -> int:
    from tierlog.tools import groups

    return groups.list_groups(settings, sys.stdout)


def _groups_describe(settings: ClientSettings, args: argparse.Namespace) -> int:
    from tierlog.tools import groups

    return groups.describe(settings, args.group, sys.stdout)


def _groups_reset(settings: ClientSettings, args: argparse.Namespace) -> int:
    from tierlog.tools import groups

    mode: groups.ResetMode
    value: int | str | None = None
    if args.to_earliest:
        mode = "to-earliest"
    elif args.to_latest:
        mode = "to-latest"
    elif args.to_offset is not None:
        mode, value = "to-offset", args.to_offset
    elif args.shift_by is not None:
        mode, value = "shift-by", args.shift_by
    else:
        mode, value = "to-datetime", args.to_datetime
    return groups.reset_offsets(
        settings,
        args.group,
        sys.stdout,
        sys.stderr,
        topics=args.topic,
        mode=mode,
        value=value,
        all_topics=args.all_topics,
        execute=args.execute,
    )


def _groups_delete(settings: ClientSettings, args: argparse.Namespace) -> int:
    from tierlog.tools import groups

    return groups.delete(settings, args.groups, sys.stdout)


def _positive(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {value}")
    return value


def _non_negative(text: str) -> int:
    value = int(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"must not be negative, got {value}")
    return value


def _add_topics(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    topics = sub.add_parser("topics", help="create, list, describe, alter and delete topics")
    commands = topics.add_subparsers(dest="topics_command", required=True)
    create = commands.add_parser("create", help="create a topic")
    create.add_argument("name")
    create.add_argument("--partitions", type=_positive, help="default: the broker's")
    create.add_argument("--replication-factor", type=_positive, help="default: the broker's")
    create.add_argument(
        "--config", action="append", default=[], metavar="KEY=VALUE", help="(repeatable)"
    )
    create.set_defaults(func=_client(_topics_create))
    listing = commands.add_parser("list", help="list topic names")
    listing.set_defaults(func=_client(_topics_list))
    describe = commands.add_parser(
        "describe", help="partitions, leaders, replicas, ISR and non-default configs"
    )
    describe.add_argument("names", nargs="*", metavar="NAME", help="default: every topic")
    describe.set_defaults(func=_client(_topics_describe))
    alter = commands.add_parser("alter", help="add partitions, set or delete config overrides")
    alter.add_argument("name")
    alter.add_argument("--partitions", type=_positive, help="the new (larger) partition count")
    alter.add_argument(
        "--config", action="append", default=[], metavar="KEY=VALUE", help="(repeatable)"
    )
    alter.add_argument(
        "--delete-config", action="append", default=[], metavar="KEY", help="(repeatable)"
    )
    alter.set_defaults(func=_client(_topics_alter))
    delete = commands.add_parser("delete", help="delete topics")
    delete.add_argument("names", nargs="+", metavar="NAME")
    delete.set_defaults(func=_client(_topics_delete))
    for command in (create, listing, describe, alter, delete):
        add_client_options(command)


def _add_console(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    produce = sub.add_parser("produce", help="send stdin lines as messages")
    produce.add_argument("topic")
    produce.add_argument("--key-separator", metavar="SEP", help="lines are KEY<SEP>VALUE")
    produce.add_argument(
        "--compression",
        choices=["none", "gzip", "snappy", "lz4", "zstd"],
        help="default: compression.type of --command-config, else none",
    )
    produce.add_argument(
        "--acks", choices=["0", "1", "all"], help="default: all (idempotent); 0 and 1 are not"
    )
    produce.add_argument("--partition", type=_non_negative, help="default: the partitioner's")
    produce.set_defaults(func=_client(_produce))
    add_client_options(produce)

    consume = sub.add_parser("consume", help="print messages, one per line")
    consume.add_argument("topic")
    consume.add_argument("--group", help="subscribe as this group and commit what is printed")
    start = consume.add_mutually_exclusive_group()
    start.add_argument(
        "--from-beginning", action="store_true", help="start at the log start, not its end"
    )
    start.add_argument("--offset", help="start at this offset (or earliest/latest); no group")
    consume.add_argument("--partition", type=_non_negative, help="only this partition; no group")
    consume.add_argument("--max-messages", type=_positive, help="stop after this many")
    consume.add_argument(
        "--timeout-ms", type=_positive, help="stop after this long without a message"
    )
    consume.add_argument("--print-key", action="store_true", help="print KEY<TAB>VALUE")
    consume.add_argument(
        "--print-offset", action="store_true", help="prefix Partition:P<TAB>Offset:O<TAB>"
    )
    consume.set_defaults(func=_client(_consume))
    add_client_options(consume)


def _add_groups(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    groups = sub.add_parser("groups", help="list, describe, reset and delete consumer groups")
    commands = groups.add_subparsers(dest="groups_command", required=True)
    listing = commands.add_parser("list", help="list consumer group ids")
    listing.set_defaults(func=_client(_groups_list))
    describe = commands.add_parser("describe", help="members, committed offsets and lag")
    describe.add_argument("group")
    describe.set_defaults(func=_client(_groups_describe))
    reset = commands.add_parser(
        "reset-offsets", help="move an inactive group's committed offsets (dry run by default)"
    )
    reset.add_argument("group")
    reset.add_argument(
        "--topic", action="append", default=[], metavar="TOPIC[:P,P...]", help="(repeatable)"
    )
    reset.add_argument(
        "--all-topics", action="store_true", help="every topic the group has offsets for"
    )
    how = reset.add_mutually_exclusive_group(required=True)
    how.add_argument("--to-earliest", action="store_true")
    how.add_argument("--to-latest", action="store_true")
    how.add_argument("--to-offset", type=_non_negative, metavar="N")
    how.add_argument("--shift-by", type=int, metavar="N", help="from the committed offset")
    how.add_argument(
        "--to-datetime", metavar="ISO", help="e.g. 2024-05-01T12:00:00 (local) or ...Z"
    )
    reset.add_argument("--execute", action="store_true", help="commit (default: dry run)")
    reset.set_defaults(func=_client(_groups_reset))
    delete = commands.add_parser("delete", help="delete inactive groups and their offsets")
    delete.add_argument("groups", nargs="+", metavar="GROUP")
    delete.set_defaults(func=_client(_groups_delete))
    for command in (listing, describe, reset, delete):
        add_client_options(command)


def _positive_seconds(text: str) -> float:
    value = float(text)
    if not value > 0:
        raise argparse.ArgumentTypeError(f"must be a positive number of seconds, got {text}")
    return value


def _add_notebooks(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    notebook = sub.add_parser("notebook", help="run a notebook with papermill").add_subparsers(
        dest="notebook_command", required=True
    )
    run = notebook.add_parser(
        "run",
        help="execute a notebook; keep the executed copy as runs/NAME-<UTC time>.ipynb",
        description="Exit status: 0 ok, 1 a cell failed (the output is kept), 2 no such "
        "notebook. The kernel runs in the current directory, on tierlog's own Python.",
    )
    run.add_argument("name", help="NAME or NAME.ipynb in the notebooks dir, or a path")
    run.add_argument(
        "-p",
        "--parameter",
        nargs=2,
        action="append",
        default=[],
        metavar=("KEY", "VALUE"),
        help="inject a parameter; VALUE is typed as papermill's -p does: int, float, "
        "true/false, none, else a string (repeatable)",
    )
    run.add_argument(
        "-r",
        "--raw-parameter",
        nargs=2,
        action="append",
        default=[],
        metavar=("KEY", "VALUE"),
        help="inject a parameter as a string, untyped (repeatable)",
    )
    run.add_argument("--notebooks-dir", help="default: $TIERLOG_NOTEBOOKS_DIR, else ./notebooks")
    run.add_argument("--runs-dir", help="default: $TIERLOG_RUNS_DIR, else ./runs")
    run.add_argument(
        "--timeout-s",
        type=_positive_seconds,
        metavar="SECONDS",
        help="interrupt and fail the run when one cell runs longer (default: no limit)",
    )
    run.add_argument(
        "-q",
        "--quiet",
        action="store_true",
        help="no progress on stderr (by default a line, with the time elapsed, as each "
        "code cell starts)",
    )
    run.set_defaults(func=_notebook_run)

    schedule = sub.add_parser(
        "schedule", help="run the notebooks scheduled in pipelines.toml"
    ).add_subparsers(dest="schedule_command", required=True)
    due = schedule.add_parser(
        "run-due",
        help="run the jobs due since the last check, once, and exit (run it from cron "
        "every minute)",
        description="Exit status: 0 ok (jobs another scheduler holds are skipped), 1 a job "
        "failed, 2 a bad config.",
    )
    listing = schedule.add_parser("list", help="jobs, cron, next fire time and last result")
    reset = schedule.add_parser(
        "reset",
        help="forget the jobs' last check (the next run-due sees them for the first time)",
    )
    for command in (due, listing, reset):
        command.add_argument(
            "--config", default="configs/pipelines.toml", help="default: %(default)s"
        )
    for command in (due, listing):
        command.add_argument(
            "--now",
            metavar="ISO",
            help="pretend it is this time (trying a schedule, backfills): run-due runs "
            "what is due in the minute before it and leaves the stored last check alone; "
            "without an offset it is in the scheduler's timezone",
        )
    reset.add_argument(
        "--job", action="append", default=[], metavar="NAME", help="(repeatable; default: all)"
    )
    due.set_defaults(func=_schedule_run_due)
    listing.set_defaults(func=_schedule_list)
    reset.set_defaults(func=_schedule_reset)

    lab = sub.add_parser(
        "lab",
        help="JupyterLab on 127.0.0.1 with the notebooks and the 'tierlog' kernel",
        description="Register this venv's Python as the Jupyter kernel 'tierlog' (in the "
        "venv, not your home; the kernel starts in the current directory, so notebooks' "
        "relative paths mean what they mean for `tierlog notebook run`), start JupyterLab "
        "on 127.0.0.1 over the notebooks directory and print its URL with the access "
        "token. Runs in the foreground; Ctrl-C stops it.",
    )
    lab.add_argument("--notebooks-dir", help="default: $TIERLOG_NOTEBOOKS_DIR, else ./notebooks")
    lab.add_argument(
        "--runs-dir",
        help="the runs the lab shows beside the notebooks (default: $TIERLOG_RUNS_DIR, else "
        "./runs)",
    )
    lab.add_argument("--port", type=int, default=8888, help="default: %(default)s")
    lab.set_defaults(func=_lab)


def _users_target(args: argparse.Namespace) -> dict[str, Any]:
    return {
        "zookeeper": args.zookeeper,
        "data_dir": Path(args.data_dir) if args.data_dir else None,
        "zk_config": Path(args.zk_config_file) if args.zk_config_file else None,
    }


def _users_add(args: argparse.Namespace) -> int:
    from tierlog.tools import users

    password = users.read_password(args.password_file)
    return users.add_user(
        args.name,
        args.mechanism,
        password,
        sys.stdout,
        iterations=args.iterations,
        **_users_target(args),
    )


def _users_delete(args: argparse.Namespace) -> int:
    from tierlog.tools import users

    return users.delete_user(args.name, args.mechanism, sys.stdout, **_users_target(args))


def _users_list(args: argparse.Namespace) -> int:
    from tierlog.tools import users

    return users.list_users(sys.stdout, **_users_target(args))


def _add_users(sub: Any) -> None:
    users = sub.add_parser(
        "users",
        help="SCRAM credentials in ZooKeeper or a data dir, before any broker runs",
        description="Write SCRAM credentials where brokers read them (Kafka's "
        "/config/users/<user>, or a single node's metadata store), e.g. the first admin "
        "user before the first broker starts. Once brokers run, use AlterUserScramCredentials "
        "(kafka-configs --bootstrap-server ... --entity-type users).",
    ).add_subparsers(dest="users_command", required=True)
    for name, helptext, func in (
        ("add", "create or replace a user's credential", _users_add),
        ("delete", "remove a user's credential for one mechanism", _users_delete),
        ("list", "users, mechanisms and iterations (never keys)", _users_list),
    ):
        command = users.add_parser(name, help=helptext)
        if name != "list":
            command.add_argument("name", help="the user name (principal User:<name>)")
            command.add_argument(
                "--mechanism", required=True, help="SCRAM-SHA-256 or SCRAM-SHA-512"
            )
        if name == "add":
            command.add_argument(
                "--password-file",
                required=True,
                help="a file whose first line is the password ('-': stdin); never a "
                "command-line argument",
            )
            command.add_argument(
                "--iterations", type=int, default=4096, help="4096-16384 (default: %(default)s)"
            )
        where = command.add_mutually_exclusive_group(required=True)
        where.add_argument("--zookeeper", help="zookeeper.connect (host:port[/chroot])")
        where.add_argument("--data-dir", help="a single node's log dir (its broker stopped)")
        command.add_argument(
            "--zk-config-file",
            metavar="FILE",
            help="with --zookeeper: properties with zookeeper.jaas.config, "
            "zookeeper.set.acl and zookeeper.ssl.* (the brokers' server.properties serves)",
        )
        command.set_defaults(func=func)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="tierlog",
        description=DESCRIPTION,
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("-v", "--verbose", action="store_true", help=VERBOSE_HELP)
    sub = parser.add_subparsers(dest="command", required=True)

    broker = sub.add_parser("broker", help="run a broker").add_subparsers(
        dest="broker_command", required=True
    )
    start = broker.add_parser("start", help="start a broker in the foreground")
    start.add_argument("--config", help="server.properties file (Kafka key names)")
    start.add_argument(
        "--override",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="set a config key, overriding the file (repeatable)",
    )
    start.set_defaults(func=_broker_start)

    _add_users(sub)

    dump = sub.add_parser("dump-log", help="print batches/records/index entries of segments")
    dump.add_argument(
        "paths",
        nargs="+",
        help=".log/.index/.timeindex files, a partition dir, or a remote segment object's URL "
        "(file://..., s3://...)",
    )
    dump.add_argument("--deep", action="store_true", help="print every record")
    dump.add_argument(
        "--verify-index", action="store_true", help="check index entries against the log"
    )
    add_location_options(dump, url=False)
    dump.set_defaults(func=_dump_log)

    remote = sub.add_parser(
        "remote", help="inspect the remote tier in object storage (no broker)"
    ).add_subparsers(dest="remote_command", required=True)
    ls = remote.add_parser("ls", help="list a topic's remote segments from the partition manifests")
    ls.add_argument("topic")
    ls.add_argument(
        "partition", nargs="?", type=_non_negative, help="default: every partition found"
    )
    ls.add_argument("--json", action="store_true", help="the manifests as JSON, one per line")
    add_location_options(ls)
    ls.set_defaults(func=_remote_ls)

    demo = sub.add_parser(
        "demo",
        help="the data platform end to end: broker, remote tier, ingest notebook into Delta",
        description="Start a broker inside this process, produce a sample activity stream "
        "to a tiered topic until its older part lives only in the remote tier (a file:// "
        "directory), then run notebooks/ingest_to_delta.ipynb with papermill: Spark reads "
        "both tiers into a Delta table. Prints each phase with the time elapsed, then a "
        "summary. Takes a few minutes on a small machine, most of it Spark's start-up. The "
        "broker stops when the demo ends; the data stays in --data-dir.",
    )
    demo.add_argument(
        "--data-dir",
        default="./data/demo",
        metavar="DIR",
        help="where the broker's logs, the remote tier and the Delta tables go; emptied "
        "first, so a non-empty directory the demo did not create is refused unless "
        "--force, and one a running broker uses always is (default: %(default)s)",
    )
    demo.add_argument(
        "--force",
        action="store_true",
        help="empty --data-dir even if the demo did not create it",
    )
    demo.add_argument(
        "--events",
        type=_positive,
        metavar="N",
        help="how many events to produce (default: 100,000; 200,000 with --broker-only)",
    )
    demo.add_argument(
        "--notebooks-dir",
        default="notebooks",
        metavar="DIR",
        help="where ingest_to_delta.ipynb is (default: %(default)s)",
    )
    demo.add_argument(
        "--runs-dir",
        default="runs",
        metavar="DIR",
        help="where the executed notebook and its kernel log are kept (default: %(default)s)",
    )
    demo.add_argument(
        "--broker-only",
        action="store_true",
        help="only the broker part, in seconds: produce, offload, consume with a group "
        "(no Spark, no notebook)",
    )
    demo.set_defaults(func=_demo)
    _add_demo_serve(demo)

    cluster = sub.add_parser(
        "cluster", help="run a local development cluster, or show a cluster's health"
    ).add_subparsers(dest="cluster_command", required=True)
    cluster_start = cluster.add_parser(
        "start",
        help="N brokers on 127.0.0.1 (and a ZooKeeper unless --zookeeper); Ctrl-C stops all",
    )
    cluster_start.add_argument("--brokers", type=_positive, default=3, help="default: 3")
    cluster_start.add_argument(
        "--zookeeper", metavar="CONNECT", help="use this ensemble instead of a local one"
    )
    cluster_start.add_argument("--data-dir", default="./data/cluster", help="default: %(default)s")
    cluster_start.add_argument(
        "--port", type=_positive, default=9092, help="first broker's port (default: 9092)"
    )
    cluster_start.add_argument(
        "--racks",
        type=_non_negative,
        default=0,
        help="spread the brokers over this many broker.rack values (default: 0, none)",
    )
    cluster_start.add_argument(
        "--secure",
        action="store_true",
        help="SASL_SSL (SCRAM-SHA-512) between clients and brokers and between brokers, "
        "ACLs, ZooKeeper ACLs; a local CA, keystores, an admin user and "
        "<data-dir>/admin.properties made once and reused (docs/security.md)",
    )
    cluster_start.set_defaults(func=_cluster_start)
    cluster_status = cluster.add_parser(
        "status", help="brokers, controller, under-replicated and offline partitions"
    )
    add_client_options(cluster_status)
    cluster_status.set_defaults(func=_client(_cluster_status))
    cluster_control.add_commands(cluster)

    _add_topics(sub)
    _add_console(sub)
    _add_groups(sub)
    _add_notebooks(sub)
    _add_verbose(parser)
    _name_subcommands(parser)
    return parser


def _add_demo_serve(demo: argparse.ArgumentParser) -> None:
    """``tierlog demo serve``: the demo's data on a broker again, after the demo ended."""
    commands = demo.add_subparsers(dest="demo_command", metavar="{serve}")
    serve = commands.add_parser(
        "serve",
        help="serve a finished demo's data again: a broker in the foreground on 127.0.0.1:9092",
        description="Start a broker in the foreground on the data `tierlog demo` left in "
        "--data-dir: topic 'activity' and its remote tier (DIR/logs/remote) are there again "
        "for the console tools, Spark, the pipelines and the notebooks. Ctrl-C stops it.",
    )
    # SUPPRESS: `tierlog demo --data-dir DIR serve` keeps the DIR given before `serve`.
    serve.add_argument(
        "--data-dir",
        default=argparse.SUPPRESS,
        metavar="DIR",
        help="the demo's --data-dir (default: ./data/demo)",
    )
    serve.add_argument(
        "--port", type=_positive, default=9092, help="listen on 127.0.0.1:PORT (default: 9092)"
    )
    serve.set_defaults(func=_demo_serve)


def _name_subcommands(parser: argparse.ArgumentParser) -> None:
    """Give every subcommand group a metavar listing its choices, so ``tierlog broker``
    alone says ``the following arguments are required: {start}`` (argparse names the
    group by its ``dest``, ``broker_command``, an internal name, otherwise)."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            if action.metavar is None:
                action.metavar = "{" + ",".join(action.choices) + "}"
            for child in action.choices.values():
                _name_subcommands(child)


def _add_verbose(parser: argparse.ArgumentParser) -> None:
    """``-v`` after the subcommand too (``tierlog topics list -v``), as users type it.

    SUPPRESS as the default: a subcommand's own default would overwrite ``tierlog -v``'s.
    """
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for child in action.choices.values():
                _add_verbose(child)
            return
    parser.add_argument(
        "-v", "--verbose", action="store_true", default=argparse.SUPPRESS, help=VERBOSE_HELP
    )


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    logging.basicConfig(
        level=logging.DEBUG if args.verbose else logging.WARNING,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )

    def run() -> int:
        try:
            result: int = args.func(args)
        except (FileNotFoundError, ValueError) as exc:
            # A missing file or a bad value on the command line: a usage error.
            raise CliError(str(exc), EXIT_USAGE) from exc
        return result

    return run_cli(run, "tierlog", verbose=args.verbose)


if __name__ == "__main__":
    sys.exit(main())
