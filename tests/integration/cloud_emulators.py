"""The object stores' own emulators, for the remote tier on GCS and Azure Blob (issue 24):
Azurite (Microsoft's Azure Storage emulator, an npm package) and fake-gcs-server (a Go
module), installed once into ``.tools/`` by ``make test`` (``python -m
tests.integration.cloud_emulators fetch``), each started on a free loopback port by a test.

Azure Blob is reached through adlfs with Azurite's well-known development account; GCS
through gcsfs with anonymous credentials at the emulator's ``endpoint_url``. gcsfs's
experimental bucket-type lookup (a gRPC call a GCS emulator does not answer, 60 s per
bucket) is turned off with ``GCSFS_EXPERIMENTAL_ZB_HNS_SUPPORT=false``, as
docs/tiered-storage.md tells users of an emulator; tests/conftest.py sets it.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
TOOLS = ROOT / ".tools"  # git-ignored
AZURITE_VERSION = "3.37.0"
FAKE_GCS_MODULE = "github.com/fsouza/fake-gcs-server"
FAKE_GCS_VERSION = "v1.56.1"
AZURITE = TOOLS / "azurite" / "node_modules" / ".bin" / "azurite-blob"
FAKE_GCS = TOOLS / "bin" / "fake-gcs-server"

# Azurite's development account: public, documented by Microsoft, accepted by no real service.
AZURITE_ACCOUNT = "devstoreaccount1"
AZURITE_KEY = (
    "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw=="
)


class EmulatorMissing(RuntimeError):
    """An emulator is not installed: ``make test`` (or this module's ``fetch``) installs it."""


@dataclass
class CloudStore:
    """A running emulator: where the remote tier goes and the fsspec options that reach it."""

    name: str
    protocol: str
    container: str  # the bucket (GCS) or container (Azure) the tests write under
    options: dict[str, str]
    process: subprocess.Popen[bytes] = field(repr=False)

    def url(self, prefix: str) -> str:
        return f"{self.protocol}://{self.container}/{prefix}"

    def broker_settings(self, prefix: str) -> dict[str, str]:
        """server.properties keys putting a broker's remote tier under ``prefix``."""
        settings = {"remote.log.storage.url": self.url(prefix)}
        for key, value in self.options.items():
            settings[f"remote.log.storage.options.{key}"] = value
        return settings


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _wait_for_port(port: int, process: subprocess.Popen[bytes], log: Path, what: str) -> None:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(
                f"{what} exited with {process.returncode}: {log.read_text()[-2000:]}"
            )
        with socket.socket() as sock:
            sock.settimeout(0.5)
            if sock.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.1)
    raise RuntimeError(f"{what} did not listen on 127.0.0.1:{port} within 60 s")


def _start(argv: list[str], port: int, log: Path, what: str) -> subprocess.Popen[bytes]:
    with log.open("wb") as out:
        process = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT)
    try:
        _wait_for_port(port, process, log, what)
    except BaseException:
        process.kill()
        process.wait(10)
        raise
    return process


def _stop(process: subprocess.Popen[bytes]) -> None:
    process.terminate()
    try:
        process.wait(5)
    except subprocess.TimeoutExpired:  # Azurite may linger on SIGTERM; its data is scratch
        process.kill()
        process.wait(10)


@contextmanager
def azurite(workdir: Path) -> Iterator[CloudStore]:
    """Azurite's blob service on a free loopback port, with one new container."""
    if not AZURITE.exists():
        raise EmulatorMissing(f"{AZURITE} is missing: make test installs Azurite")
    port = _free_port()
    workdir.mkdir(parents=True, exist_ok=True)
    argv = [str(AZURITE), "--blobHost", "127.0.0.1", "--blobPort", str(port)]
    argv += ["--location", str(workdir), "--silent", "--skipApiVersionCheck", "--loose"]
    process = _start(argv, port, workdir / "azurite.log", "Azurite")
    connection = (
        f"DefaultEndpointsProtocol=http;AccountName={AZURITE_ACCOUNT};AccountKey={AZURITE_KEY};"
        f"BlobEndpoint=http://127.0.0.1:{port}/{AZURITE_ACCOUNT};"
    )
    store = CloudStore(
        "azure", "abfs", f"c{uuid.uuid4().hex[:10]}", {"connection_string": connection}, process
    )
    try:
        filesystem(store).mkdir(store.container)
        yield store
    finally:
        _stop(process)


@contextmanager
def fake_gcs(workdir: Path) -> Iterator[CloudStore]:
    """fake-gcs-server on a free loopback port (objects on disk), with one new bucket."""
    if not FAKE_GCS.exists():
        raise EmulatorMissing(f"{FAKE_GCS} is missing: make test builds fake-gcs-server")
    port = _free_port()
    root = workdir / "objects"
    root.mkdir(parents=True, exist_ok=True)
    argv = [str(FAKE_GCS), "-scheme", "http", "-host", "127.0.0.1", "-port", str(port)]
    argv += ["-public-host", f"127.0.0.1:{port}", "-backend", "filesystem"]
    argv += ["-filesystem-root", str(root), "-log-level", "warn"]
    process = _start(argv, port, workdir / "fake-gcs.log", "fake-gcs-server")
    options = {"endpoint_url": f"http://127.0.0.1:{port}", "token": "anon", "project": "tierlog"}
    store = CloudStore("gcs", "gs", f"b{uuid.uuid4().hex[:10]}", options, process)
    try:
        filesystem(store).mkdir(store.container)
        yield store
    finally:
        _stop(process)


EMULATORS = {"azure": azurite, "gcs": fake_gcs}


def filesystem(store: CloudStore) -> Any:
    """A fresh fsspec filesystem on the emulator (not fsspec's cached instance)."""
    import fsspec

    return fsspec.filesystem(store.protocol, skip_instance_cache=True, **store.options)


def fetch() -> None:
    """Install both emulators into ``.tools/`` unless present (npm; the go command)."""
    TOOLS.mkdir(exist_ok=True)
    if not AZURITE.exists():
        began = time.monotonic()
        npm = [shutil.which("npm") or "npm", "install", "--silent", "--no-audit", "--no-fund"]
        npm += ["--prefix", str(TOOLS / "azurite"), f"azurite@{AZURITE_VERSION}"]
        subprocess.run(npm, check=True, timeout=900)
        print(f"Azurite {AZURITE_VERSION}: installed in {time.monotonic() - began:.0f} s")
    if not FAKE_GCS.exists():
        began = time.monotonic()
        env = {
            **os.environ,
            "GOPATH": str(TOOLS / "go"),
            "GOBIN": str(TOOLS / "bin"),
            "GOFLAGS": "-modcacherw",  # so `make clean` can remove the module cache
        }
        go = shutil.which("go") or "/usr/local/go/bin/go"
        module = f"{FAKE_GCS_MODULE}@{FAKE_GCS_VERSION}"
        subprocess.run([go, "install", module], check=True, timeout=1800, env=env)
        print(f"fake-gcs-server {FAKE_GCS_VERSION}: built in {time.monotonic() - began:.0f} s")


if __name__ == "__main__":
    if sys.argv[1:] != ["fetch"]:
        sys.exit("usage: python -m tests.integration.cloud_emulators fetch")
    fetch()
