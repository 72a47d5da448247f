"""A local ZooKeeper for development clusters and tests: Debian's ``zookeeper`` package run
in the foreground (``tierlog cluster start`` without ``--zookeeper``, ``EmbeddedCluster``,
the integration tests).

``ZooKeeperServer`` writes a ``zoo.cfg`` into its own temporary directory, runs
``zkServer.sh start-foreground`` as a child process in a new process group (never
daemonised), listens on 127.0.0.1 and a free port, and waits (bounded) until it is ready:
the four-letter ``ruok`` answered ``imok``, then a client session opened and closed.
``ruok`` is answered as soon as the port is open, before the server has loaded its data;
the first session is the first transaction it logs. Each session attempt is short and
retried until the start deadline: one long attempt that times out ends the wait with it.

The server does not fsync its transaction log (``forceSync=no``). A killed ZooKeeper, the
crash the tests inflict, loses nothing by that: its writes are in the operating system's
page cache. Only a crash of the machine could, and this is a development server. Under a
loaded test run a server that answered ``ruok`` did not answer its first session within
60 s, and every test of that worker failed; its log said nothing (no logger binding), and
an fsync of the log behind other processes' dirty data on ext4 is the likely wait.

With ``tls`` (a PEM keystore and truststore) the server also serves TLS on
``secure_port`` (its ``secureClientPort``, through its Netty connection factory, asking
every client for a certificate signed by the truststore's CA); ``connect_tls`` names it.
Debian's ``zkServer.sh`` leaves Netty's codec jar off the class path, so a TLS server is
started with ``java`` directly, with it added. The plain port stays open for the
readiness checks.

The server's output goes to ``zookeeper.log`` in that directory and is printed when
start-up fails. ``stop()`` / ``kill()`` end the whole process
group; the server is also killed at interpreter exit, so a crashed test run leaves no JVM.
It lives beside the coordination code because ``EmbeddedCluster`` (``tierlog.broker.
embedded``) starts one, and the broker imports nothing from the CLI's ``tools``.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from pathlib import Path

ZK_SERVER_SH = Path("/usr/share/zookeeper/bin/zkServer.sh")
# What zkServer.sh runs, and (for TLS) Netty's codec, which its class path lacks.
ZK_MAIN = "org.apache.zookeeper.server.quorum.QuorumPeerMain"
ZK_CLASS_PATH = ("/etc/zookeeper/conf", "/usr/share/java/zookeeper.jar")
NETTY_CODEC_JAR = "/usr/share/java/netty-codec.jar"
INSTALL_HINT = "`make test` installs it, or: apt-get install zookeeper"

# ZooKeeper's minimum session timeout is 2 ticks; 200 ms ticks let brokers use short
# sessions (fast failover in development and tests).
TICK_TIME_MS = 200
MAX_SESSION_TIMEOUT_MS = 60_000
START_TIMEOUT_S = 120.0
# One session attempt: kazoo gives up connecting after one attempt that timed out.
SESSION_ATTEMPT_S = 10.0
STOP_TIMEOUT_S = 10.0


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def ruok(port: int, timeout: float = 1.0) -> bool:
    """True when the server on ``port`` answers the ``ruok`` four-letter word with imok."""
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=timeout) as sock:
            sock.sendall(b"ruok")
            return sock.recv(16) == b"imok"
    except OSError:
        return False


class ZooKeeperServer:
    """One standalone ZooKeeper server on 127.0.0.1. Not thread-safe: drive it from the
    test's thread.

    Args:
        tls: (keystore, truststore) PEM files: serve TLS on ``secure_port`` too, with
            client certificates required (module docstring).
    """

    def __init__(
        self,
        base_dir: Path | None = None,
        *,
        port: int = 0,
        tick_time_ms: int = TICK_TIME_MS,
        tls: tuple[Path, Path] | None = None,
    ) -> None:
        if not ZK_SERVER_SH.exists():
            raise FileNotFoundError(f"ZooKeeper is not installed ({ZK_SERVER_SH}): {INSTALL_HINT}")
        self._own_dir = base_dir is None
        # Absolute: the server runs in this directory, and its config names its paths.
        self.dir = Path(base_dir or tempfile.mkdtemp(prefix="tierlog-zk-")).resolve()
        self.port = port or free_port()
        self.tls = tls
        self.secure_port = free_port() if tls is not None else None
        self.tick_time_ms = tick_time_ms
        self.log_path = self.dir / "zookeeper.log"
        self._proc: subprocess.Popen[bytes] | None = None
        self._write_config()
        atexit.register(self._kill_quietly)

    @property
    def connect(self) -> str:
        """``host:port`` for a client (add ``/chroot`` as needed)."""
        return f"127.0.0.1:{self.port}"

    @property
    def connect_tls(self) -> str:
        """``host:port`` of the TLS port (the server must have been made with ``tls``)."""
        if self.secure_port is None:
            raise ValueError("this ZooKeeper serves no TLS")
        return f"127.0.0.1:{self.secure_port}"

    @property
    def running(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    def _write_config(self) -> None:
        (self.dir / "data").mkdir(parents=True, exist_ok=True)
        (self.dir / "zoo.cfg").write_text(
            f"tickTime={self.tick_time_ms}\n"
            f"dataDir={self.dir / 'data'}\n"
            f"clientPort={self.port}\n"
            "clientPortAddress=127.0.0.1\n"
            # The AdminServer would open port 8080 (cluster-facts.md).
            "admin.enableServer=false\n"
            "4lw.commands.whitelist=ruok\n"
            # A killed server loses nothing without it (module docstring); with it, a
            # loaded disk stalled the first session past a minute.
            "forceSync=no\n"
            f"maxSessionTimeout={MAX_SESSION_TIMEOUT_MS}\n" + self._tls_config()
        )

    def _tls_config(self) -> str:
        if self.tls is None:
            return ""
        keystore, truststore = self.tls
        return (
            f"secureClientPort={self.secure_port}\n"
            "secureClientPortAddress=127.0.0.1\n"
            "serverCnxnFactory=org.apache.zookeeper.server.NettyServerCnxnFactory\n"
            f"ssl.keyStore.location={keystore}\n"
            "ssl.keyStore.type=PEM\n"
            f"ssl.trustStore.location={truststore}\n"
            "ssl.trustStore.type=PEM\n"
            "ssl.clientAuth=need\n"
        )

    def _command(self) -> list[str]:
        config = str(self.dir / "zoo.cfg")
        if self.tls is None:
            return [str(ZK_SERVER_SH), "start-foreground", config]
        class_path = ":".join((*ZK_CLASS_PATH, NETTY_CODEC_JAR))
        return ["java", "-cp", class_path, ZK_MAIN, config]

    def start(self) -> ZooKeeperServer:
        """Start and wait until it answers ``ruok`` and opens a session. Raises RuntimeError
        with the log."""
        if self.running:
            return self
        env = {**os.environ, "ZOOCFGDIR": str(self.dir), "ZOO_LOG_DIR": str(self.dir)}
        with open(self.log_path, "ab") as out:
            self._proc = subprocess.Popen(
                self._command(),
                cwd=self.dir,
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,  # its own process group: killed as one
            )
        deadline = time.monotonic() + START_TIMEOUT_S
        while time.monotonic() < deadline:
            attempt_s = min(SESSION_ATTEMPT_S, deadline - time.monotonic())
            if ruok(self.port) and self._opens_a_session(attempt_s):
                return self
            if self._proc.poll() is not None:
                break
            time.sleep(0.1)
        self.kill()
        log = self.log_path.read_text(errors="replace")
        print(f"--- ZooKeeper log ({self.log_path}) ---\n{log}")
        raise RuntimeError(f"ZooKeeper did not start on port {self.port}; log:\n{log[-4000:]}")

    def _opens_a_session(self, timeout_s: float) -> bool:
        from kazoo.client import KazooClient
        from kazoo.handlers.threading import KazooTimeoutError

        client = KazooClient(hosts=self.connect, timeout=max(timeout_s, 1.0))
        try:
            client.start(timeout=max(timeout_s, 1.0))
            return True
        except KazooTimeoutError:
            return False
        finally:
            client.stop()
            client.close()

    def _signal(self, sig: int, timeout: float) -> None:
        proc = self._proc
        if proc is None:
            return
        if proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, sig)
        try:
            proc.wait(timeout)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout)
        self._proc = None

    def stop(self) -> None:
        """SIGTERM to the process group, SIGKILL if it is still there after 10 s."""
        self._signal(signal.SIGTERM, STOP_TIMEOUT_S)

    def kill(self) -> None:
        """SIGKILL: a crash of the process; what it wrote is in the page cache."""
        self._signal(signal.SIGKILL, STOP_TIMEOUT_S)

    def restart(self) -> ZooKeeperServer:
        """Stop and start again on the same port and data dir (sessions younger than their
        timeout survive, as with a real server restart)."""
        self.stop()
        return self.start()

    def close(self) -> None:
        """Kill the server and remove its directory (if this object made it)."""
        self.kill()
        atexit.unregister(self._kill_quietly)
        if self._own_dir:
            shutil.rmtree(self.dir, ignore_errors=True)

    def _kill_quietly(self) -> None:
        with contextlib.suppress(OSError):
            self.kill()

    def __enter__(self) -> ZooKeeperServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()
