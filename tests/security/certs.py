"""Test certificates: one CA per test session and helpers that write keystores.

A thin layer over ``tierlog.security.local_ca`` (which ``tierlog cluster start --secure``
will use too), so tests and the product make certificates the same way.
"""

from __future__ import annotations

from pathlib import Path

from tierlog.security.local_ca import Issued, LocalCa

__all__ = ["Issued", "LocalCa", "broker_files"]


def broker_files(ca: LocalCa, directory: Path, password: str | None = None) -> dict[str, str]:
    """A broker certificate as a PEM keystore file plus the CA as a truststore file; returns
    the ``ssl.*`` settings pointing at them."""
    broker = ca.issue("localhost", organizational_unit="brokers")
    keystore = broker.write_pem_keystore(directory / "broker.keystore.pem", password)
    truststore = ca.write_ca(directory / "ca.pem")
    settings = {
        "ssl.keystore.type": "PEM",
        "ssl.keystore.location": str(keystore),
        "ssl.truststore.type": "PEM",
        "ssl.truststore.location": str(truststore),
    }
    if password:
        settings["ssl.key.password"] = password
    return settings
