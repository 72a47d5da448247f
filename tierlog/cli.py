"""The ``tierlog`` command: argument parsing only; each subcommand lives in its own module."""

from __future__ import annotations

import argparse
import logging
import sys
from pathlib import Path


def _dump_log(args: argparse.Namespace) -> int:
    from tierlog.tools.dump_log import dump

    problems = dump(
        [Path(p) for p in args.paths], sys.stdout, deep=args.deep, verify_index=args.verify_index
    )
    if problems:
        print(f"{problems} problem(s) found", file=sys.stderr)
    return 1 if problems else 0


def _demo(args: argparse.Namespace) -> int:
    from tierlog.tools.demo import run_demo

    run_demo(Path(args.data_dir), sys.stdout, events=args.events)
    return 0


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

    return run_broker(Path(args.config) if args.config else None, _parse_overrides(args.override))


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="tierlog", description=__doc__)
    parser.add_argument("-v", "--verbose", action="store_true", help="debug logging")
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

    dump = sub.add_parser("dump-log", help="print batches/records/index entries of segments")
    dump.add_argument("paths", nargs="+", help=".log/.index/.timeindex files or a partition dir")
    dump.add_argument("--deep", action="store_true", help="print every record")
    dump.add_argument(
        "--verify-index", action="store_true", help="check index entries against the log"
    )
    dump.set_defaults(func=_dump_log)

    demo = sub.add_parser("demo", help="write and read back a sample activity stream")
    demo.add_argument("--data-dir", default="./data/demo")
    demo.add_argument("--events", type=int, default=200_000)
    demo.set_defaults(func=_demo)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    logging.basicConfig(
        level=logging.DEBUG if args.verbose else logging.WARNING,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    try:
        result: int = args.func(args)
    except (FileNotFoundError, ValueError) as exc:
        print(f"tierlog: {exc}", file=sys.stderr)
        return 2
    return result


if __name__ == "__main__":
    sys.exit(main())
