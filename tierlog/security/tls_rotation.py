"""A TLS listener's certificates while it runs: the context in use, and Kafka's checks
before a new keystore or truststore replaces it (``SslFactory.validateReconfiguration``,
KIP-226; the DN and SAN rules as KIP-978 left them).

A candidate is loaded whole (the key fits its certificate, every file reads and parses,
and no file changed while it was read), then checked against the context in use:

- the leaf certificate keeps its subject DN, unless ``ssl.allow.dn.changes=true``;
- its subject alternative names include every old one (adding is fine, dropping is not),
  unless ``ssl.allow.san.changes=true``. Kafka compares each entry of the keystore; a
  tierlog keystore holds one key and its chain, so the leaves are compared;
- a listener that started without a truststore cannot gain one (Kafka refuses it too);
- on the inter-broker listener, a test handshake each way between the old and the new
  settings (Kafka's ``SslEngineValidator``): a broker still on the old certificate and CA
  can talk to one on the new, so replication survives a rolling rotation.

Only then does the new context replace the old one, in one assignment: new connections
get it; connections already made keep theirs (OpenSSL copies the certificate into each
connection), as in Kafka. A candidate that fails leaves the old context in use.
"""

from __future__ import annotations

import hashlib
import ssl
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Final

from cryptography import x509

from tierlog.security.errors import SecurityConfigError
from tierlog.security.tls import ServerTls, TlsSettings, client_context, load_server_tls

__all__ = ["RECONFIGURABLE_SSL_KEYS", "Candidate", "ListenerTls", "fingerprint"]

# Kafka's SslConfigs.RECONFIGURABLE_CONFIGS (with KIP-651's PEM keys): what a dynamic
# update may change on a running listener. The rest (client auth, protocols, suites) is
# fixed at start, as Kafka fixes it for an existing listener.
RECONFIGURABLE_SSL_KEYS: Final = (
    "ssl.keystore.type",
    "ssl.keystore.location",
    "ssl.keystore.password",
    "ssl.key.password",
    "ssl.keystore.key",
    "ssl.keystore.certificate.chain",
    "ssl.truststore.type",
    "ssl.truststore.location",
    "ssl.truststore.password",
    "ssl.truststore.certificates",
)
# Enough rounds for TLS 1.2 and 1.3 with client certificates (each needs under 4).
_HANDSHAKE_ROUNDS: Final = 10


def fingerprint(paths: tuple[Path, ...]) -> tuple[str | None, ...]:
    """Each file's SHA-256 (None: unreadable). Content, not mtime: a file rewritten within
    one mtime tick, or swapped by a symlink (Kubernetes secrets), is still noticed."""
    prints: list[str | None] = []
    for path in paths:
        try:
            prints.append(hashlib.sha256(path.read_bytes()).hexdigest())
        except OSError:
            prints.append(None)
    return tuple(prints)


@dataclass(frozen=True)
class Candidate:
    """Settings loaded and checked, ready to be installed; ``files`` is the fingerprint
    of the key files as they were read."""

    settings: TlsSettings
    tls: ServerTls
    files: tuple[str | None, ...]
    # The same files as client contexts (inter-broker listener only): ``client`` for the
    # test handshake (host names not checked: brokers have many), ``outgoing`` for this
    # broker's own connections to the others (checked per the settings).
    client: ssl.SSLContext | None = None
    outgoing: ssl.SSLContext | None = None


def _load(settings: TlsSettings, *, as_client: bool) -> Candidate:
    """Raises SecurityConfigError: a file that does not load, or that changed while it
    was read (a writer still at work: the next attempt takes it whole)."""
    paths = settings.key_files()
    before = fingerprint(paths)
    tls = load_server_tls(settings)
    client = outgoing = None
    if as_client:
        client = client_context(replace(settings, endpoint_identification_algorithm=""))
        outgoing = client_context(settings)
    after = fingerprint(paths)
    if before != after:
        changed = next(str(p) for p, a, b in zip(paths, after, before, strict=True) if a != b)
        raise SecurityConfigError(
            "ssl.keystore.location"
            if changed == settings.keystore_location
            else "ssl.truststore.location",
            f"{changed} changed while it was read; it is read again at the next attempt",
        )
    return Candidate(settings, tls, after, client, outgoing)


def _subject_alt_names(certificate: x509.Certificate) -> frozenset[x509.GeneralName]:
    try:
        extension = certificate.extensions.get_extension_for_class(x509.SubjectAlternativeName)
    except x509.ExtensionNotFound:
        return frozenset()
    return frozenset(extension.value)


def _same_dn(old: x509.Name, new: x509.Name) -> bool:
    # Kafka accepts either the same X500Principal or the same RFC 2253 name, ignoring case.
    return old == new or old.rfc4514_string().lower() == new.rfc4514_string().lower()


def _check_identity(old: ServerTls, new: ServerTls, settings: TlsSettings) -> None:
    key = (
        "ssl.keystore.location" if settings.keystore_location else "ssl.keystore.certificate.chain"
    )
    if not old.chain or not new.chain:
        return
    old_leaf, new_leaf = old.chain[0], new.chain[0]
    if not settings.allow_dn_changes and not _same_dn(old_leaf.subject, new_leaf.subject):
        raise SecurityConfigError(
            key,
            "Keystore DistinguishedName does not match: existing "
            f"DN={old_leaf.subject.rfc4514_string()}, new DN={new_leaf.subject.rfc4514_string()}"
            " (set ssl.allow.dn.changes=true to allow it)",
        )
    old_names, new_names = _subject_alt_names(old_leaf), _subject_alt_names(new_leaf)
    if not settings.allow_san_changes and not old_names <= new_names:
        dropped = sorted(str(getattr(n, "value", n)) for n in old_names - new_names)
        raise SecurityConfigError(
            key,
            f"Keystore SubjectAltNames do not match: the new certificate drops {', '.join(dropped)}"
            " (set ssl.allow.san.changes=true to allow it)",
        )


def _handshake(server: ssl.SSLContext, client: ssl.SSLContext) -> None:
    """A TLS handshake in memory between ``server`` and ``client``.

    Raises:
        ssl.SSLError: the two cannot talk (a certificate one side does not trust, ...).
    """
    to_server, to_client = ssl.MemoryBIO(), ssl.MemoryBIO()
    from_server, from_client = ssl.MemoryBIO(), ssl.MemoryBIO()
    client_side = client.wrap_bio(to_client, from_client, server_side=False)
    server_side = server.wrap_bio(to_server, from_server, server_side=True)
    done = {"client": False, "server": False}
    for _ in range(_HANDSHAKE_ROUNDS):
        for name, side in (("client", client_side), ("server", server_side)):
            if not done[name]:
                try:
                    side.do_handshake()
                    done[name] = True
                except ssl.SSLWantReadError:
                    pass
        to_server.write(from_client.read())
        to_client.write(from_server.read())
        if all(done.values()):
            return
    raise ssl.SSLError("the test handshake did not complete")


def _check_peers(old: Candidate, new: Candidate) -> None:
    """Kafka's SslEngineValidator, both ways: old server with new client, new server with
    old client."""
    assert old.client is not None and new.client is not None
    for server, peer, which in (
        (old.tls.context, new.client, "a broker on the new settings to one on the old"),
        (new.tls.context, old.client, "a broker on the old settings to one on the new"),
    ):
        try:
            _handshake(server, peer)
        except ssl.SSLError as exc:
            raise SecurityConfigError(
                "ssl.keystore.location"
                if new.settings.keystore_location
                else "ssl.keystore.certificate.chain",
                f"this is the inter-broker listener and {which} could not connect "
                f"({exc.reason or exc}): change the truststores first",
            ) from None


class ListenerTls:
    """One TLS listener's context, replaceable while it serves. Event loop only (the
    broker's reconfiguration and its file poll run there).

    Args:
        settings: the listener's settings at start.
        inter_broker: the inter-broker listener: a candidate must pass the test handshake.

    Raises:
        SecurityConfigError: naming the key, when the settings do not load.
    """

    def __init__(self, settings: TlsSettings, *, inter_broker: bool = False) -> None:
        self._inter_broker = inter_broker
        self._current = _load(settings, as_client=inter_broker)

    @property
    def context(self) -> ssl.SSLContext:
        """The context for the next connection."""
        return self._current.tls.context

    @property
    def settings(self) -> TlsSettings:
        return self._current.settings

    @property
    def outgoing_context(self) -> ssl.SSLContext | None:
        """The inter-broker listener's settings as a client context (what this broker
        presents and trusts when it connects to the others); None on other listeners."""
        return self._current.outgoing

    @property
    def leaf(self) -> x509.Certificate | None:
        """The certificate served to new connections."""
        chain = self._current.tls.chain
        return chain[0] if chain else None

    def files_changed(self) -> bool:
        """Whether the key files differ from those in use (read, not loaded)."""
        return fingerprint(self.settings.key_files()) != self._current.files

    def prepare(self, settings: TlsSettings) -> Candidate | None:
        """``settings`` loaded and checked against the context in use; None when nothing
        would change (the same settings, and their files as they were when loaded).

        Raises:
            SecurityConfigError: naming the key (unprefixed) and why.
        """
        if settings == self.settings and not self.files_changed():
            return None
        candidate = _load(settings, as_client=self._inter_broker)
        if candidate.files == self._current.files and settings == self.settings:
            return None  # changed and changed back
        current = self._current
        if not current.tls.trusts and candidate.tls.trusts:
            raise SecurityConfigError(
                "ssl.truststore.location",
                "Cannot add SSL truststore to an existing listener for which no truststore "
                "was configured",
            )
        _check_identity(current.tls, candidate.tls, settings)
        if self._inter_broker:
            _check_peers(current, candidate)
        return candidate

    def install(self, candidate: Candidate) -> None:
        """New connections use ``candidate`` from now on."""
        self._current = candidate
