"""Reloading the TLS listeners' certificates while the broker runs (issue 22), two ways:

- a dynamic broker config (KIP-226), as Kafka does it:
  ``kafka-configs --bootstrap-server ... --entity-type brokers --entity-name 0 --alter
  --add-config listener.name.ssl.ssl.keystore.location=/new.pem``. The new settings are
  loaded and checked (``tls_rotation``) before anything is stored, so a bad file is refused
  in the AlterConfigs answer with the key named, and the old certificate stays in use.
  The same path set again is read again (its file may have changed), as in Kafka.
- the files changing on disk (cert-manager, a Kubernetes secret rewritten in place):
  every ``ssl.keystore.reload.interval.ms`` the keystore and truststore files are hashed;
  when they differ from those in use they are loaded and checked the same way. A file
  half-written, or one that changes while it is read, is not taken: the old context
  stays and the next poll tries again. Kafka has no such key (its brokers reload files
  only when told through a dynamic config): this is tierlog's extension; 0 turns it off.

Each failure is logged once per content, naming the listener, the key and why. Event loop
only (``DynamicBrokerConfig`` and the broker's scheduler run there).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping

from tierlog.broker.config import BrokerConfig
from tierlog.broker.dynamic_config import Reconfigurable
from tierlog.broker.security_config import LISTENER_PREFIX
from tierlog.security.client_config import ClientSecurity
from tierlog.security.errors import SecurityConfigError
from tierlog.security.tls import TlsSettings
from tierlog.security.tls_rotation import (
    RECONFIGURABLE_SSL_KEYS,
    Candidate,
    ListenerTls,
    fingerprint,
)
from tierlog.util.configdef import ConfigError
from tierlog.util.scheduler import Scheduler

__all__ = ["ListenerCertificates"]

log = logging.getLogger(__name__)


def _describe(tls: ListenerTls) -> str:
    leaf = tls.leaf
    if leaf is None:
        return "no certificate"
    return f"certificate {leaf.subject.rfc4514_string()} serial {leaf.serial_number:x}"


class ListenerCertificates:
    """The TLS listeners' contexts, reloaded by dynamic config or when their files change.

    Args:
        listeners: each TLS listener's ``ListenerTls`` by listener name (the same objects
            the listeners serve from).
        inter_broker: the inter-broker listener's name.
        peer: how this broker connects to the others; it takes the inter-broker listener's
            new keystore and truststore too (Kafka reconfigures its inter-broker clients
            so), for connections made from then on.
    """

    def __init__(
        self,
        listeners: Mapping[str, ListenerTls],
        inter_broker: str = "",
        peer: ClientSecurity | None = None,
    ) -> None:
        self._listeners = dict(listeners)
        self._inter_broker = inter_broker
        self._peer = peer
        # The file contents whose failure was logged, per listener: logged once each.
        self._failed: dict[str, tuple[str | None, ...]] = {}

    @staticmethod
    def _prefix(listener: str) -> str:
        return f"{LISTENER_PREFIX}{listener.lower()}."

    def dynamic_keys(self) -> frozenset[str]:
        """Every dynamic key of every TLS listener (``listener.name.<l>.ssl.*``)."""
        return frozenset(
            f"{self._prefix(name)}{key}"
            for name in self._listeners
            for key in RECONFIGURABLE_SSL_KEYS
        )

    def reconfigurable(self) -> Reconfigurable:
        return Reconfigurable("TLS listeners", self.dynamic_keys(), self.apply, self.validate)

    def _settings(self, config: BrokerConfig, listener: str) -> TlsSettings:
        return TlsSettings.from_config(config.security, self._prefix(listener))

    def _named(self, listener: str, error: SecurityConfigError) -> ConfigError:
        """The error naming the key as it is set for ``listener``."""
        return ConfigError(f"{self._prefix(listener)}{error.key}", error.reason)

    def validate(self, config: BrokerConfig) -> None:
        """Each listener's new settings in ``config`` load and pass the checks.

        Raises:
            ConfigError: naming the listener's key (``listener.name.<l>.ssl.*``) and why.
        """
        for name, tls in self._listeners.items():
            try:
                tls.prepare(self._settings(config, name))
            except SecurityConfigError as exc:
                raise self._named(name, exc) from None

    def apply(self, config: BrokerConfig) -> None:
        """Install each listener's new settings; a listener whose settings fail keeps its
        context (logged), the others still change.

        Raises:
            ConfigError: the first failure, after every listener was tried.
        """
        first: ConfigError | None = None
        for name, tls in self._listeners.items():
            try:
                candidate = tls.prepare(self._settings(config, name))
            except SecurityConfigError as exc:
                first = first or self._named(name, exc)
                continue
            if candidate is not None:
                self._install(name, tls, candidate)
                log.info("listener %s now serves %s (dynamic config)", name, _describe(tls))
        if first is not None:
            raise first

    def _install(self, name: str, tls: ListenerTls, candidate: Candidate) -> None:
        tls.install(candidate)
        outgoing = tls.outgoing_context
        if name == self._inter_broker and self._peer is not None and outgoing is not None:
            self._peer.use_ssl_context(outgoing)

    def schedule_file_checks(self, scheduler: Scheduler, interval_ms: int) -> None:
        """Check the files every ``interval_ms`` (``ssl.keystore.reload.interval.ms``) on
        ``scheduler``; 0, or no TLS listener: never."""
        if interval_ms > 0 and self._listeners:
            scheduler.schedule(
                "tls-file-reload", self.reload_changed_files, interval_ms, interval_ms
            )

    def reload_changed_files(self) -> list[str]:
        """Reload the listeners whose key files changed; returns their names. A listener
        whose new files fail to load or pass the checks keeps its context: logged once
        per content, tried again at the next call."""
        reloaded = []
        for name, tls in self._listeners.items():
            if not tls.files_changed():
                continue
            files = fingerprint(tls.settings.key_files())
            try:
                candidate = tls.prepare(tls.settings)
            except SecurityConfigError as exc:
                if self._failed.get(name) != files:
                    self._failed[name] = files
                    log.warning(
                        "listener %s keeps its certificate: its changed files are not taken "
                        "(%s); tried again in the next poll",
                        name,
                        self._named(name, exc),
                    )
                continue
            self._failed.pop(name, None)
            if candidate is not None:
                self._install(name, tls, candidate)
                reloaded.append(name)
                log.info("listener %s now serves %s (files changed)", name, _describe(tls))
        return reloaded
