"""``tierlog cluster start|status``: a local development cluster, and what a cluster looks like
(brokers, controller, under-replicated and offline partitions) through any Kafka client.

``start`` runs N broker processes on 127.0.0.1 (ports ``--port``, ``--port``+1, ...), each
with ``broker.rack`` naming this host's slot so that a host with many cores can run several
brokers (one Python event loop each, about a core) while replicas still spread; without
``--zookeeper`` it also runs a ZooKeeper from Debian's package. A broker that dies is
restarted with backoff while the others keep running (``cluster_supervisor``), and
``tierlog cluster stop-broker|start-broker`` take one down on purpose (``cluster_control``).
Ctrl-C (or SIGTERM) stops the brokers cleanly (each moves its leaderships away first), then
ZooKeeper. Started again on the data dir of a cluster that was killed, the brokers first
wait for ZooKeeper to expire the killed ones' registrations (it says so).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

from tierlog.tools.client_config import ClientSettings, ToolError
from tierlog.tools.cluster_supervisor import ClusterSupervisor

if TYPE_CHECKING:
    from tierlog.security.dev_security import DevSecurity

# Well above a broker's wait for a killed run's registration of its id (24 s: the default
# zookeeper.session.timeout.ms plus a margin, zk_brokers.stale_registration_bound_s).
START_TIMEOUT_S = 60.0
STOP_TIMEOUT_S = 60.0
NOTICE_TIMEOUT_MS = 5_000


def replication_settings(brokers: int) -> dict[str, str]:
    """Replication factors and minimum ISRs a cluster of ``brokers`` can meet.

    Three replicas and a minimum ISR of two (configs/cluster/) need three brokers: with
    fewer, ``__consumer_offsets`` cannot be created (groups stay COORDINATOR_NOT_AVAILABLE),
    auto-created topics are refused INVALID_REPLICATION_FACTOR, and a one-replica topic
    refuses acks=all with NOT_ENOUGH_REPLICAS. So the factor is ``min(3, brokers)``, as
    ``EmbeddedCluster`` uses, and the minimum ISR one less than it (one broker may be down)
    but at least 1.
    """
    rf = min(3, brokers)
    min_isr = max(1, rf - 1)
    return {
        "default.replication.factor": str(rf),
        "offsets.topic.replication.factor": str(rf),
        "transaction.state.log.replication.factor": str(rf),
        "transaction.state.log.min.isr": str(min_isr),
        "min.insync.replicas": str(min_isr),
    }


def broker_overrides(
    broker_id: int,
    port: int,
    data_dir: Path,
    zookeeper: str,
    rack: str | None,
    brokers: int = 3,
    security: DevSecurity | None = None,
) -> dict[str, str]:
    """One development broker's settings in a cluster of ``brokers`` (configs/cluster/ has
    the same for three, commented); ``security``'s keys replace the PLAINTEXT listener."""
    overrides = {
        "broker.id": str(broker_id),
        "listeners": f"PLAINTEXT://127.0.0.1:{port}",
        "log.dirs": str(data_dir / f"broker-{broker_id}"),
        "zookeeper.connect": zookeeper,
        # One remote root for every broker: a new leader goes on from the manifests.
        "remote.log.storage.url": (data_dir.resolve() / "remote").as_uri(),
        **replication_settings(brokers),
    }
    if rack:
        overrides["broker.rack"] = rack
    if security is not None:
        overrides.update(security.broker_settings(broker_id, port))
    return overrides


def stale_registrations_notice(zookeeper: str, ids: range, out: TextIO) -> None:
    """Say so when broker ids of ``ids`` are registered in ZooKeeper before any broker of
    this cluster started. ZooKeeper keeps a killed broker's registration until its session
    expires, and a ZooKeeper restarted on its data dir brings the old sessions back for a
    session timeout. Each broker waits that out itself (``zk_brokers``); a ZooKeeper that
    cannot be read is left for the brokers to report."""
    from tierlog.broker.coordination.zk_brokers import stale_registration_bound_s
    from tierlog.broker.coordination.zk_client import ZkClient
    from tierlog.broker.coordination.zk_session import DEFAULT_SESSION_TIMEOUT_MS

    try:
        with ZkClient(zookeeper, connection_timeout_ms=NOTICE_TIMEOUT_MS) as zk:
            stale = sorted(b for b in zk.brokers.live() if b in ids)
    except Exception:
        return
    if stale:
        wait_s = stale_registration_bound_s(DEFAULT_SESSION_TIMEOUT_MS / 1000)
        print(
            f"ZooKeeper still holds the registrations of brokers {_ids(stale)} (a previous"
            f" run on this data dir that was killed?): the brokers wait up to {wait_s:.0f} s"
            " for those sessions to expire, and stop if the ids are another running"
            " cluster's",
            file=out,
            flush=True,
        )


def start_cluster(
    brokers: int,
    out: TextIO,
    *,
    zookeeper: str | None = None,
    data_dir: Path = Path("./data/cluster"),
    port: int = 9092,
    racks: int = 0,
    until: threading.Event | None = None,
    secure: bool = False,
) -> int:
    """Run the cluster until ``until`` is set (the CLI sets it on SIGINT/SIGTERM).

    Args:
        racks: give the brokers ``broker.rack`` rack-0..rack-(racks-1) round robin (0: none).
        secure: SASL_SSL, ACLs and ZooKeeper ACLs (``security.dev_security``), its files
            made in ``data_dir`` on the first start and reused after.
    """
    from tierlog.broker.coordination.zk_server import ZK_SERVER_SH, ZooKeeperServer

    data_dir.mkdir(parents=True, exist_ok=True)
    security = prepare_security(data_dir, brokers) if secure else None
    if security is None:
        refuse_plaintext_on_secured(data_dir)
    server = None
    started_at = time.monotonic()
    if zookeeper is None:
        if not ZK_SERVER_SH.exists():
            raise ToolError(
                f"ZooKeeper is not installed ({ZK_SERVER_SH} is missing): run `make zookeeper` "
                "(Debian's zookeeper package), or give a running one with --zookeeper HOST:PORT"
            )
        server = ZooKeeperServer(data_dir / "zookeeper", tick_time_ms=500)
        try:
            server.start()
        except RuntimeError:
            raise ToolError(
                f"ZooKeeper did not start on port {server.port} (its log: {server.log_path}); "
                "is another ZooKeeper on that port? Stop it, or give it with --zookeeper "
                "HOST:PORT"
            ) from None
        zookeeper = server.connect
        print(f"zookeeper on {zookeeper} (data in {server.dir})", file=out, flush=True)
    settings = {
        n: (
            port + n,
            broker_overrides(
                n,
                port + n,
                data_dir,
                zookeeper,
                f"rack-{n % racks}" if racks else None,
                brokers,
                security,
            ),
        )
        for n in range(brokers)
    }
    bootstrap = ",".join(f"127.0.0.1:{port + n}" for n in range(brokers))
    supervisor = ClusterSupervisor(settings, data_dir, out)
    try:
        stale_registrations_notice(zookeeper, range(brokers), out)
        if security is not None:
            seed_security(security, zookeeper, bootstrap, out)
        failed = supervisor.start_all(START_TIMEOUT_S)
        if failed:
            broker_id, why = next(iter(failed.items()))
            raise ToolError(f"broker {broker_id} {why}; see {data_dir / f'broker-{broker_id}.log'}")
        for n in range(brokers):
            print(
                f"broker {n} on 127.0.0.1:{port + n} (log {data_dir / f'broker-{n}.log'})",
                file=out,
                flush=True,
            )
        print(
            f"cluster up in {time.monotonic() - started_at:.1f}s: --bootstrap-server {bootstrap}"
            " (Ctrl-C stops it; a broker that dies is restarted; `tierlog cluster stop-broker "
            "ID` takes one down)",
            file=out,
            flush=True,
        )
        stop = until or threading.Event()
        # Sleep, then look: never stop.wait(). The CLI sets ``until`` from its SIGINT/SIGTERM
        # handler, which runs in this thread between bytecodes; arriving while wait() held
        # the Event's lock, its set() waited on that lock forever (a Ctrl-C that never
        # stopped the cluster, seen once in a loaded test run).
        while True:
            time.sleep(0.5)
            if stop.is_set():
                break
            supervisor.poll()
        return 0
    finally:
        print("stopping the cluster...", file=out, flush=True)
        supervisor.stop_all()
        if server is not None:
            server.stop()
        print("stopped", file=out, flush=True)


SECURITY_DIR = "security"


def prepare_security(data_dir: Path, brokers: int) -> DevSecurity:
    """The secured cluster's files (``security.dev_security``): made on the first start,
    reused after; a data dir whose cluster ran without ``--secure`` is refused, since its
    znodes were made open to all (as Kafka, nothing changes the ACLs of existing znodes).

    Raises:
        ToolError: the data dir holds a cluster started without ``--secure``, or the files
            cannot be made or read.
    """
    from tierlog.security.dev_security import DevSecurity

    directory = data_dir / SECURITY_DIR
    if not directory.exists() and any(data_dir.glob("broker-*/")):
        raise ToolError(
            f"{data_dir} holds a cluster started without --secure (its ZooKeeper znodes are "
            "open to all); give --secure a new --data-dir"
        )
    try:
        return DevSecurity.ensure(directory, range(brokers))
    except (OSError, ValueError) as exc:
        raise ToolError(
            f"cannot prepare the cluster's security files in {directory}: {exc}"
        ) from None


def refuse_plaintext_on_secured(data_dir: Path) -> None:
    """A data dir made by ``--secure`` is started with ``--secure`` again: its znodes
    admit only the brokers' ZooKeeper identity, and its clients expect SASL_SSL.

    Raises:
        ToolError: saying so.
    """
    if (data_dir / SECURITY_DIR).exists():
        raise ToolError(f"{data_dir} holds a cluster started with --secure: add --secure")


def seed_security(security: DevSecurity, zookeeper: str, bootstrap: str, out: TextIO) -> None:
    """Write the admin and broker SCRAM users into ZooKeeper (those missing) and
    ``admin.properties``, and say how to connect; never a password.

    Raises:
        ToolError: ZooKeeper refused or could not be reached.
    """
    from kazoo.exceptions import KazooException, NoAuthError

    from tierlog.broker.coordination.seed_users import seed_users_zookeeper
    from tierlog.broker.coordination.zk_auth import ZkIdentity
    from tierlog.security.dev_security import ADMIN_USER, BROKER_USER, MECHANISM

    username, password = security.zookeeper_identity()
    try:
        added = seed_users_zookeeper(
            zookeeper, ZkIdentity(username, password), True, security.credentials()
        )
    except NoAuthError:
        raise ToolError(
            f"ZooKeeper at {zookeeper} refused the brokers' identity on /config/users (its "
            "znodes were made by another cluster); use another --zookeeper or chroot"
        ) from None
    except (KazooException, TimeoutError) as exc:
        raise ToolError(
            f"cannot write the cluster's users into ZooKeeper at {zookeeper}: {exc}"
        ) from None
    config = security.write_client_properties(bootstrap)
    made = f"created users {', '.join(added)}" if added else "users kept from the last start"
    print(
        f"secured: SASL_SSL with {MECHANISM} ({made}), ACLs on (super users {ADMIN_USER}, "
        f"{BROKER_USER}), ZooKeeper znodes guarded (zookeeper.set.acl)",
        file=out,
        flush=True,
    )
    print(
        f"connect as {ADMIN_USER} with {config} (--command-config, or "
        f"TIERLOG_CLIENT_CONFIG); its password is in {security.admin_secret_file} (0600)",
        file=out,
        flush=True,
    )


def status(settings: ClientSettings, out: TextIO) -> int:
    """Brokers, the controller, and partitions under-replicated (ISR smaller than the
    replicas) or offline (no leader), like ``kafka-topics --describe
    --under-replicated-partitions`` / ``--unavailable-partitions``. Exit code 1 when any
    partition is offline."""
    from confluent_kafka import TopicCollection

    admin = settings.admin()
    cluster: Any = settings.wait(admin.describe_cluster(), "describe the cluster", admin)
    controller = cluster.controller.id if cluster.controller is not None else "none"
    live = sorted(n.id for n in cluster.nodes)
    print(f"Cluster: {cluster.cluster_id}\tController: {controller}", file=out)
    for node in sorted(cluster.nodes, key=lambda n: n.id):
        rack = f"\tRack: {node.rack}" if node.rack else ""
        print(f"Broker: {node.id}\t{node.host}:{node.port}{rack}", file=out)
    names = sorted(settings.metadata(admin, "list topics").topics)
    futures = admin.describe_topics(TopicCollection(names)) if names else {}
    under, offline = [], []
    for name in names:
        topic: Any = settings.wait(futures[name], f"describe topic {name!r}", admin)
        for p in sorted(topic.partitions, key=lambda p: p.id):
            replicas = [r.id for r in p.replicas]
            isr = [r.id for r in p.isr]
            line = (
                f"\tTopic: {name}\tPartition: {p.id}\t"
                f"Leader: {p.leader.id if p.leader is not None else 'none'}\t"
                f"Replicas: {_ids(replicas)}\tIsr: {_ids(isr)}\t"
                f"Offline: {_ids([r for r in replicas if r not in live])}"
            )
            if p.leader is None:
                offline.append(line)
            elif len(isr) < len(replicas):
                under.append(line)
    print(f"Under-replicated partitions: {len(under)}", file=out)
    for line in under:
        print(line, file=out)
    print(f"Offline partitions: {len(offline)}", file=out)
    for line in offline:
        print(line, file=out)
    return 1 if offline else 0


def _ids(ids: Sequence[int]) -> str:
    return ",".join(str(i) for i in ids)
