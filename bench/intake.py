"""The receive path (issue 9), old against new, rounds alternating, side by side in one run:

  server  N x 1 MiB Produce frames over loopback into a ``KafkaServer``: the old path
          (StreamReader + ``FrameDecoder``, the server module as of ``--old-rev``, loaded
          from git) against the current one (``FrameStream`` + ``FrameReceiver``).
  client  N x 1 MiB answers read by ``AsyncConnection`` (what the replica fetcher uses),
          old module against new, each frame taken with its ``_next_frame``.

The server runs in this process with a dispatch that only looks at each request's records
(acks=0: no answer), so what is measured is intake: socket to decoded request. A client
process sends the same pre-encoded frame N times, then an ApiVersions request as a barrier
and waits for its answer. Figures: MiB/s from the first Produce dispatched to the barrier,
and this process's CPU time per MiB over the same span (the client is another process).
The client case has a sender process push the frames as fast as they are read; figures:
MiB/s and CPU per MiB of the reading process.

Run (from the repository root)::

    .venv/bin/python bench/intake.py                   # ~30 s
    .venv/bin/python bench/intake.py --quick           # 100 frames, 3 rounds
    .venv/bin/python bench/intake.py --frames 500 --rounds 5

Human-readable lines go to stderr, with the median of each path's rounds, their spread and
the ratio of the medians (``bench/reporting.py``); the LAST line on stdout is one JSON
object of figures.
"""

from __future__ import annotations

import argparse
import asyncio
import importlib.util
import socket
import statistics
import struct
import subprocess
import sys
import time
from pathlib import Path
from types import ModuleType
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from kio.index import load_request_schema  # noqa: E402
from reporting import LOWER, Report  # noqa: E402

from tierlog.protocol import ApiKey, Request, encode_request  # noqa: E402
from tierlog.protocol.kio_build import build  # noqa: E402
from tierlog.records.builder import Record, build_batch  # noqa: E402

MIB = 1 << 20
OLD_REV = "5aff83f"  # the last commit before FrameStream


def load_old(rev: str, path: str) -> ModuleType:
    """``path`` as of ``rev``, as a module of its own (its imports resolve to today's
    tierlog, which still has everything it uses)."""
    source = subprocess.run(
        ["git", "show", f"{rev}:{path}"],
        cwd=ROOT,
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    name = "bench_intake_old_" + Path(path).stem
    spec = importlib.util.spec_from_loader(name, loader=None)
    assert spec is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # dataclasses look their module up
    exec(compile(source, f"{rev}:{path}", "exec"), module.__dict__)
    return module


def produce_frame() -> bytes:
    batch = build_batch([Record(b"k", bytes(MIB - 100))])
    body = build(
        load_request_schema(ApiKey.PRODUCE, 9),
        {
            "transactional_id": None,
            "acks": 0,
            "timeout": 5000,
            "topic_data": [{"name": "intake", "partition_data": [{"index": 0, "records": batch}]}],
        },
    )
    return encode_request(body, 1, client_id="intake")


def client(port: int, frames: int) -> None:
    """The sending side (run as its own process)."""
    data = produce_frame()
    barrier = encode_request(build(load_request_schema(ApiKey.API_VERSIONS, 0), {}), 2)
    with socket.create_connection(("127.0.0.1", port)) as sock:
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        for _ in range(frames):
            sock.sendall(data)
        sock.sendall(barrier)
        answer = b""
        while len(answer) < 8:
            chunk = sock.recv(8 - len(answer))
            if not chunk:
                raise ConnectionError("closed before the barrier's answer")
            answer += chunk


def sender(frames: int) -> None:
    """Pushes ``frames`` 1 MiB frames to whoever connects first (run as its own process;
    prints the port it listens on)."""
    data = struct.pack(">i", MIB) + bytes(MIB)
    with socket.create_server(("127.0.0.1", 0)) as listener:
        print(listener.getsockname()[1], flush=True)
        sock, _ = listener.accept()
        with sock:
            for _ in range(frames):
                sock.sendall(data)


async def client_round(connection_module: Any, frames: int) -> dict[str, float]:
    proc = await asyncio.create_subprocess_exec(
        sys.executable, __file__, "--sender", str(frames), stdout=asyncio.subprocess.PIPE
    )
    assert proc.stdout is not None
    port = int(await proc.stdout.readline())
    conn = await connection_module.AsyncConnection.open("127.0.0.1", port)
    await conn._next_frame()  # the first frame starts the clock
    t0, c0 = time.perf_counter(), time.process_time()
    for _ in range(frames - 1):
        frame = await conn._next_frame()
        assert len(frame) == MIB
    t1, c1 = time.perf_counter(), time.process_time()
    await conn.close()
    assert await proc.wait() == 0
    mib = frames - 1
    return {"mib_s": mib / (t1 - t0), "cpu_us_per_mib": (c1 - c0) / mib * 1e6}


async def one_round(server_module: Any, frames: int) -> dict[str, float]:
    marks: dict[str, float] = {}
    done = asyncio.Event()
    seen = [0]

    async def dispatch(request: Request) -> Any:
        if request.api_key == ApiKey.PRODUCE:
            if not seen[0]:
                marks["t0"], marks["c0"] = time.perf_counter(), time.process_time()
            body: Any = request.body
            seen[0] += len(body.topic_data[0].partition_data[0].records)
            return None
        marks["t1"], marks["c1"] = time.perf_counter(), time.process_time()
        done.set()
        return struct.pack(">ii", 4, request.correlation_id)  # framed by hand

    server = server_module.KafkaServer(dispatch, "127.0.0.1", 0, 100 * MIB)
    port = await server.start()
    await server.serve()
    proc = await asyncio.create_subprocess_exec(
        sys.executable, __file__, "--client", str(port), str(frames)
    )
    await asyncio.wait_for(done.wait(), 300)
    assert await proc.wait() == 0
    await server.stop()
    mib = (frames - 1) * seen[0] / frames / MIB  # the first frame starts the clock
    return {
        "mib_s": mib / (marks["t1"] - marks["t0"]),
        "cpu_us_per_mib": (marks["c1"] - marks["c0"]) / mib * 1e6,
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="100 frames, 3 rounds")
    parser.add_argument("--frames", type=int, help="1 MiB frames per round (300; quick 100)")
    parser.add_argument("--rounds", type=int, help="rounds per path, alternating (5; quick 3)")
    parser.add_argument("--old-rev", default=OLD_REV, help="git revision of the old path")
    parser.add_argument("--client", nargs=2, type=int, help=argparse.SUPPRESS)
    parser.add_argument("--sender", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.client:
        client(*args.client)
        return 0
    if args.sender:
        sender(args.sender)
        return 0
    args.frames = args.frames or (100 if args.quick else 300)
    args.rounds = args.rounds or (3 if args.quick else 5)
    report = Report("intake", quick=args.quick, out=sys.stderr)
    from tierlog.broker.network import server as new_server
    from tierlog.client import async_connection as new_connection

    cases = {
        "server": (
            one_round,
            load_old(args.old_rev, "tierlog/broker/server.py"),
            new_server,
        ),
        "client": (
            client_round,
            load_old(args.old_rev, "tierlog/client/async_connection.py"),
            new_connection,
        ),
    }
    summary: dict[str, Any] = report.data
    summary.update(frames=args.frames, rounds=args.rounds, old_rev=args.old_rev)
    for case, (run, old, new) in cases.items():
        results: dict[str, list[dict[str, float]]] = {"old": [], "new": []}
        for round_no in range(args.rounds):
            for name, module in (("old", old), ("new", new)):
                result = asyncio.run(run(module, args.frames))
                results[name].append(result)
                print(
                    f"{case} round {round_no + 1} {name}: {result['mib_s']:.0f} MiB/s, "
                    f"{result['cpu_us_per_mib']:.0f} us CPU per MiB",
                    file=sys.stderr,
                )
        figures: dict[str, Any] = {}
        for name, rows in results.items():
            figures[name] = {
                "mib_s_median": round(statistics.median(r["mib_s"] for r in rows), 1),
                "cpu_us_per_mib_median": round(
                    statistics.median(r["cpu_us_per_mib"] for r in rows), 1
                ),
            }
        new_f, old_f = figures["new"], figures["old"]
        figures["ratio_new_old_mib_s"] = round(new_f["mib_s_median"] / old_f["mib_s_median"], 2)
        figures["ratio_new_old_cpu"] = round(
            new_f["cpu_us_per_mib_median"] / old_f["cpu_us_per_mib_median"], 2
        )
        summary[case] = figures
        mib_s = {name: [r["mib_s"] for r in results[name]] for name in ("new", "old")}
        report.side_by_side(f"{case} intake", mib_s, unit="MiB/s")
        cpu = {name: [r["cpu_us_per_mib"] for r in results[name]] for name in ("new", "old")}
        report.side_by_side(f"{case} intake CPU", cpu, unit="us per MiB", better=LOWER)
    return report.finish()


if __name__ == "__main__":
    sys.exit(main())
