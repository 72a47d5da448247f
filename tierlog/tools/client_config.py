"""What the Kafka client tools (``topics``, ``produce``, ``consume``, ``groups``) share: their
connection options, building confluent-kafka clients from them, and turning client failures
into one-line messages (:class:`ToolError`, exit code 1) instead of tracebacks.

The tools speak only the Kafka protocol through confluent-kafka, so they work against any
Kafka-protocol broker, Apache Kafka or tierlog. confluent-kafka is imported inside functions:
``tierlog dump-log`` and the broker never load it.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import logging
import os
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from tierlog.security.config_providers import is_provider_key
from tierlog.security.config_providers import resolve as resolve_config_providers
from tierlog.util.configdef import ConfigError
from tierlog.util.properties import PropertiesError, load_properties

if TYPE_CHECKING:
    from confluent_kafka import KafkaError
    from confluent_kafka.admin import AdminClient, ClusterMetadata

    from tierlog.security.client_config import ClientSecurity

DEFAULT_BOOTSTRAP = "127.0.0.1:9092"
# Kafka's own request.timeout.ms default; it also bounds how long "broker unreachable" takes.
DEFAULT_TIMEOUT_MS = 30_000
INSTALL_HINT = "the Kafka tools need confluent-kafka: pip install 'confluent-kafka>=2.4'"

T = TypeVar("T")


class ToolError(Exception):
    """A failure the user can act on: printed as one line on stderr, exit code 1."""


def add_client_options(parser: argparse.ArgumentParser) -> None:
    """The options every client tool takes (named as Kafka's own tools name them)."""
    parser.add_argument(
        "--bootstrap-server",
        metavar="HOST:PORT",
        help=f"broker(s) to connect to, comma-separated (default: bootstrap.servers from "
        f"--command-config, else {DEFAULT_BOOTSTRAP})",
    )
    parser.add_argument(
        "--command-config",
        metavar="FILE",
        help="extra client properties (librdkafka names, Java properties format)",
    )
    parser.add_argument(
        "--request-timeout-ms",
        type=int,
        default=DEFAULT_TIMEOUT_MS,
        metavar="MS",
        help="give up on a request, or on reaching the broker, after this long "
        f"(default: {DEFAULT_TIMEOUT_MS}, Kafka's request.timeout.ms)",
    )


def parse_key_values(items: list[str], option: str) -> dict[str, str]:
    """``["k=v", ...]`` from a repeatable option into a dict; raises ToolError on a bad item."""
    result: dict[str, str] = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise ToolError(f"{option} expects key=value, got {item!r}")
        result[key.strip()] = value.strip()
    return result


def _client_logger(verbose: bool) -> logging.Logger:
    # librdkafka logs every failed connection attempt; the tools report failures themselves,
    # so its log is shown only with -v.
    logger = logging.getLogger("tierlog.tools.librdkafka")
    logger.setLevel(logging.DEBUG if verbose else logging.CRITICAL)
    return logger


# Security keys of Kafka's Java clients that librdkafka does not know. A --command-config
# written for Kafka's own tools says its login and truststore with them; they are said again
# in librdkafka's words (``sasl.username``, ``ssl.ca.location``...) for confluent-kafka.
JAVA_SECURITY_KEYS = frozenset(
    {
        "sasl.jaas.config",
        "ssl.truststore.type",
        "ssl.truststore.location",
        "ssl.truststore.certificates",
        "ssl.truststore.password",
        "ssl.keystore.type",
        "ssl.keystore.location",
        "ssl.keystore.key",
        "ssl.keystore.certificate.chain",
        "ssl.keystore.password",
    }
)


def librdkafka_properties(properties: dict[str, str]) -> dict[str, str]:
    """``properties`` for confluent-kafka: when they hold Kafka's Java security keys, the
    security settings translated (``librdkafka_config``) and the rest as they are; else
    unchanged (librdkafka's own keys pass through).

    Raises:
        ToolError: a security setting is wrong (named, its value never shown).
    """
    if not JAVA_SECURITY_KEYS & properties.keys():
        return properties
    from tierlog.security.client_config import (
        CLIENT_SECURITY_KEYS,
        ClientSecurity,
        librdkafka_config,
    )
    from tierlog.security.errors import SecurityConfigError

    security = {k: v for k, v in properties.items() if k in CLIENT_SECURITY_KEYS}
    rest = {k: v for k, v in properties.items() if k not in CLIENT_SECURITY_KEYS}
    try:
        return {**rest, **librdkafka_config(ClientSecurity.from_config(security))}
    except (SecurityConfigError, ValueError) as exc:
        raise ToolError(f"--command-config: {exc}") from None


def client_security(properties: dict[str, str]) -> ClientSecurity | None:
    """The TLS and SASL settings of ``properties`` (Kafka's Java keys or librdkafka's) for
    tierlog's own client; None when they ask for PLAINTEXT.

    Raises:
        ToolError: a security setting is wrong (named, its value never shown).
    """
    from tierlog.security.client_config import CLIENT_SECURITY_KEYS, ClientSecurity
    from tierlog.security.errors import SecurityConfigError

    security = {k: v for k, v in properties.items() if k in CLIENT_SECURITY_KEYS}
    if security.get("security.protocol", "PLAINTEXT").upper() == "PLAINTEXT":
        return None
    try:
        return ClientSecurity.from_config(security)
    except (SecurityConfigError, ValueError) as exc:
        raise ToolError(f"--command-config: {exc}") from None


@dataclass
class ClientSettings:
    """Connection settings of one tool run, and the errors its clients reported.

    Args:
        bootstrap: ``bootstrap.servers``.
        properties: extra client properties from ``--command-config``.
        timeout: seconds for one request (and for reaching the broker at all).
        verbose: show librdkafka's log.
    """

    bootstrap: str
    properties: dict[str, str] = field(default_factory=dict)
    timeout: float = DEFAULT_TIMEOUT_MS / 1000
    verbose: bool = False
    transport_errors: list[str] = field(default_factory=list)

    @classmethod
    def from_options(
        cls,
        bootstrap: str | None,
        command_config: str | None,
        timeout_ms: int = DEFAULT_TIMEOUT_MS,
        verbose: bool = False,
    ) -> ClientSettings:
        properties: dict[str, str] = {}
        if command_config:
            try:
                # ${file:...}/${env:...} references (KIP-297), as Kafka's tools resolve them;
                # the config.providers keys themselves are not client settings.
                resolved = resolve_config_providers(load_properties(Path(command_config)))
                properties = {k: v for k, v in resolved.items() if not is_provider_key(k)}
            except ConfigError as exc:
                raise ToolError(f"--command-config: {exc}") from None
            except PropertiesError as exc:
                raise ToolError(f"--command-config: {exc}") from None
            except OSError as exc:
                raise ToolError(f"--command-config {command_config}: {exc.strerror}") from None
        if timeout_ms <= 0:
            raise ToolError(f"--request-timeout-ms must be positive, got {timeout_ms}")
        bootstrap = bootstrap or properties.pop("bootstrap.servers", None) or DEFAULT_BOOTSTRAP
        return cls(bootstrap, librdkafka_properties(properties), timeout_ms / 1000, verbose)

    @classmethod
    def from_args(cls, args: argparse.Namespace) -> ClientSettings:
        return cls.from_options(
            args.bootstrap_server,
            args.command_config,
            args.request_timeout_ms,
            getattr(args, "verbose", False),
        )

    def check_reachable(self) -> None:
        """Fail at once when every bootstrap server refuses the connection (see
        :func:`tierlog.util.cli_errors.require_listening`).

        Raises:
            ToolError: every bootstrap server refused.
        """
        from tierlog.util.cli_errors import CliError, require_listening

        try:
            require_listening(self.bootstrap, min(self.timeout, 1.0))
        except CliError as exc:
            raise ToolError(str(exc)) from None

    def config(
        self, defaults: dict[str, Any] | None = None, overrides: dict[str, Any] | None = None
    ) -> dict[str, Any]:
        """Client configuration: tool ``defaults`` < ``--command-config`` < ``overrides``
        (what the tool's own flags ask for), like Kafka's tools."""
        conf: dict[str, Any] = {**(defaults or {}), **self.properties, **(overrides or {})}
        conf["bootstrap.servers"] = self.bootstrap
        conf["error_cb"] = self._on_error
        conf["logger"] = _client_logger(self.verbose)
        return conf

    def _on_error(self, err: KafkaError) -> None:
        from confluent_kafka import KafkaError

        if err.code() != KafkaError._ALL_BROKERS_DOWN:
            del self.transport_errors[:-4]  # only the latest matter
            self.transport_errors.append(err.str())
        if self.verbose:
            print(f"tierlog: client error: {err.str()}", file=sys.stderr)

    def admin(self) -> AdminClient:
        from confluent_kafka.admin import AdminClient

        # An AdminClient is a producer inside librdkafka, which may ask the broker to
        # auto-create a topic it looks up; the tools never want that.
        return AdminClient(self.config(overrides={"allow.auto.create.topics": False}))

    def metadata(self, client: Any, what: str, topic: str | None = None) -> ClusterMetadata:
        """Cluster metadata (of one topic, or all) from any client; failures become
        :class:`ToolError`. This is also the tools' "is the broker reachable" check."""
        from confluent_kafka import KafkaException

        try:
            metadata: ClusterMetadata = client.list_topics(topic=topic, timeout=self.timeout)
        except KafkaException as exc:
            raise self.error(exc, what, client) from None
        return metadata

    def outcome(self, future: concurrent.futures.Future[T], what: str) -> T | KafkaError:
        """The result of an AdminClient future, or the KafkaError it failed with."""
        from confluent_kafka import KafkaException

        try:
            # The client times the request out itself; the margin only guards against a hang.
            return future.result(timeout=self.timeout + 5)
        except KafkaException as exc:
            error: KafkaError = exc.args[0]
            return error
        except concurrent.futures.TimeoutError:
            raise ToolError(f"{what}: no answer within {self.timeout:g}s") from None

    def wait(self, future: concurrent.futures.Future[T], what: str, client: Any) -> T:
        """The result of an AdminClient future; failures become :class:`ToolError`."""
        from confluent_kafka import KafkaError

        result = self.outcome(future, what)
        if isinstance(result, KafkaError):
            raise self.error(result, what, client)
        return result

    def error(self, exc: BaseException | KafkaError, what: str, client: Any = None) -> ToolError:
        """A one-line :class:`ToolError` for a confluent-kafka failure while doing ``what``."""
        from confluent_kafka import Consumer, KafkaError, KafkaException

        err = exc.args[0] if isinstance(exc, KafkaException) and exc.args else exc
        if not isinstance(err, KafkaError):
            return ToolError(f"{what}: {err}")
        if client is not None and not isinstance(client, Consumer):
            client.poll(0)  # serve error_cb, which names the connection failure
        unreachable = err.code() in (
            KafkaError._TRANSPORT,
            KafkaError._ALL_BROKERS_DOWN,
            KafkaError._RESOLVE,
        )
        if unreachable or (err.code() == KafkaError._TIMED_OUT and self.transport_errors):
            detail = self.transport_errors[-1] if self.transport_errors else err.str()
            return ToolError(
                f"{what}: cannot reach a broker at {self.bootstrap} within "
                f"{self.timeout:g}s ({detail})"
            )
        if err.code() == KafkaError._TIMED_OUT:
            return ToolError(f"{what}: timed out after {self.timeout:g}s ({err.str()})")
        return ToolError(f"{what}: {err.str()}")


def run_tool(action: Callable[[], int]) -> int:
    """Run one tool action; expected failures print one line on stderr and return 1."""
    try:
        import confluent_kafka
    except ImportError:
        print(f"tierlog: {INSTALL_HINT}", file=sys.stderr)
        return 1
    try:
        return action()
    except ToolError as exc:
        print(f"tierlog: {exc}", file=sys.stderr)
        return 1
    except confluent_kafka.KafkaException as exc:
        detail = exc.args[0].str() if exc.args and hasattr(exc.args[0], "str") else exc
        print(f"tierlog: {detail}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        # The reader went away (``| head``): stop quietly, and keep Python's exit-time flush
        # of stdout from failing again.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 0
