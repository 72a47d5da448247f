"""The broker keys of listeners, TLS and SASL (issue 22), and the per-listener settings.

Kafka's names and, where tierlog has the setting, Kafka's defaults. Each TLS and SASL key
may be set per listener with the prefix ``listener.name.<listener>.`` (and a SASL key per
mechanism, ``listener.name.<listener>.<mechanism>.``), the most specific found first
(``tierlog.security.authenticator.listener_setting``). ``security_settings`` collects the
keys as written, prefixed ones included, for ``tierlog.security.tls`` and
``tierlog.security.authenticator``, which read Kafka's keys themselves.

Secrets (passwords, inline keys, JAAS entries) are ``SENSITIVE``: DescribeConfigs answers
them as Kafka does, with no value.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from tierlog.security.oauthbearer import JWT_VALIDATOR_CLASSES, UNSECURED_VALIDATOR_CLASS
from tierlog.security.tls_rotation import RECONFIGURABLE_SSL_KEYS
from tierlog.util.configdef import ConfigError, ConfigKey, KafkaNotes, at_least, one_of

__all__ = [
    "LISTENER_PREFIX",
    "SECURITY_KEYS",
    "SECURITY_NOTES",
    "SENSITIVE",
    "is_listener_key",
    "listener_base_key",
    "security_settings",
]

LISTENER_PREFIX: Final = "listener.name."
_MECHANISMS: Final = ("plain", "scram-sha-256", "scram-sha-512", "oauthbearer")


def _text(name: str, doc: str, default: str = "") -> ConfigKey:
    return ConfigKey(name, "string", default, doc)


SECURITY_KEYS: Final = [
    ConfigKey(
        "listener.security.protocol.map",
        "list",
        [],
        "NAME:PROTOCOL per listener; default PLAINTEXT, SSL, SASL_PLAINTEXT and SASL_SSL "
        "each mapped to itself",
    ),
    _text(
        "inter.broker.listener.name",
        "the listener other brokers connect to, with its TLS and SASL settings; not with "
        "security.inter.broker.protocol",
    ),
    _text(
        "security.inter.broker.protocol",
        "the inter-broker listener by protocol name (default PLAINTEXT); not with "
        "inter.broker.listener.name",
        "PLAINTEXT",
    ),
    _text(
        "sasl.mechanism.inter.broker.protocol",
        "the mechanism brokers log in to each other with on a SASL inter-broker listener; "
        "the login is the username= and password= of that listener's JAAS entry for it",
        "GSSAPI",
    ),
    ConfigKey(
        "ssl.keystore.type", "string", "PEM", "PEM or PKCS12", one_of("PEM", "PKCS12", "JKS")
    ),
    _text("ssl.keystore.location", "PEM: the key then the chain; PKCS12: the keystore file"),
    _text("ssl.keystore.password", "a PKCS12 keystore's password"),
    _text("ssl.keystore.key", "the PEM private key, inline"),
    _text("ssl.keystore.certificate.chain", "the PEM certificate chain, inline"),
    _text("ssl.key.password", "opens an encrypted private key"),
    ConfigKey(
        "ssl.truststore.type", "string", "PEM", "PEM or PKCS12", one_of("PEM", "PKCS12", "JKS")
    ),
    _text("ssl.truststore.location", "the certificates to trust (client certificates)"),
    _text("ssl.truststore.password", "a PKCS12 truststore's password"),
    _text("ssl.truststore.certificates", "PEM certificates to trust, inline"),
    ConfigKey(
        "ssl.client.auth",
        "string",
        "none",
        "client certificates: none, requested or required",
        one_of("none", "requested", "required"),
    ),
    ConfigKey("ssl.enabled.protocols", "list", ["TLSv1.2", "TLSv1.3"], "TLS versions"),
    ConfigKey("ssl.cipher.suites", "list", [], "TLS 1.2 suites (IANA or OpenSSL names)"),
    _text(
        "ssl.endpoint.identification.algorithm",
        "https: clients check host names; empty: no check",
        "https",
    ),
    ConfigKey(
        "ssl.keystore.reload.interval.ms",
        "long",
        60_000,
        "how often the TLS listeners' keystore and truststore files are checked for new "
        "contents, taken without a restart; 0: never (only a dynamic config reloads them)",
        at_least(0),
    ),
    ConfigKey(
        "ssl.allow.dn.changes",
        "bool",
        False,
        "a certificate reloaded while running may change its subject DN (KIP-978)",
    ),
    ConfigKey(
        "ssl.allow.san.changes",
        "bool",
        False,
        "a certificate reloaded while running may drop subject alternative names (KIP-978)",
    ),
    _text(
        "ssl.principal.mapping.rules",
        "client certificate DN -> principal name: RULE:pattern/replacement/[LU], DEFAULT",
        "DEFAULT",
    ),
    ConfigKey("sasl.enabled.mechanisms", "list", [], "PLAIN, SCRAM-SHA-256/512, OAUTHBEARER"),
    _text("sasl.jaas.config", "the login entry (per listener and mechanism with the prefix)"),
    ConfigKey(
        "sasl.server.max.receive.size",
        "int",
        524_288,
        "the largest frame before authentication",
        at_least(1),
    ),
    ConfigKey(
        "connections.max.reauth.ms",
        "long",
        0,
        "a SASL session's longest life (KIP-368); 0: no limit",
        at_least(0),
    ),
    ConfigKey(
        "connection.failed.authentication.delay.ms",
        "int",
        100,
        "how long a failed authentication waits before its answer and close",
        at_least(0),
    ),
    ConfigKey(
        "sasl.server.callback.handler.class",
        "string",
        "",
        "an OAUTHBEARER listener's token validator, as Kafka names its two: "
        "OAuthBearerValidatorCallbackHandler (JWTs against the JWKS) or "
        "OAuthBearerUnsecuredValidatorCallbackHandler (unsecured tokens); unset: JWTs when "
        "sasl.oauthbearer.jwks.endpoint.url is set, else unsecured",
        one_of("", *sorted(JWT_VALIDATOR_CLASSES), UNSECURED_VALIDATOR_CLASS),
    ),
    _text("sasl.oauthbearer.jwks.endpoint.url", "KIP-768 JWKS (file:, http: or https:)"),
    ConfigKey(
        "sasl.oauthbearer.jwks.endpoint.refresh.ms", "long", 3_600_000, "JWKS refresh", at_least(0)
    ),
    ConfigKey(
        "sasl.oauthbearer.jwks.endpoint.retry.backoff.ms",
        "long",
        100,
        "refetch bound for unknown key ids",
        at_least(0),
    ),
    ConfigKey("sasl.oauthbearer.expected.audience", "list", [], "aud must contain one"),
    _text("sasl.oauthbearer.expected.issuer", "iss must equal it"),
    _text("sasl.oauthbearer.sub.claim.name", "the principal's claim", "sub"),
    _text("sasl.oauthbearer.scope.claim.name", "the scope claim", "scope"),
    ConfigKey(
        "sasl.oauthbearer.clock.skew.seconds", "int", 30, "slack for exp and nbf", at_least(0)
    ),
]

_NAMES: Final = frozenset(key.name for key in SECURITY_KEYS)
# Settable per listener: the TLS and SASL keys, not the listener layout itself.
_PER_LISTENER: Final = _NAMES - {
    "listener.security.protocol.map",
    "inter.broker.listener.name",
    "security.inter.broker.protocol",
    "sasl.mechanism.inter.broker.protocol",
    "ssl.keystore.reload.interval.ms",
}
SENSITIVE: Final = frozenset(
    {
        "ssl.keystore.password",
        "ssl.keystore.key",
        "ssl.key.password",
        "ssl.truststore.password",
        "sasl.jaas.config",
        # ZooKeeper's: the digest identity's password, the TLS keystore's.
        "zookeeper.jaas.config",
        "zookeeper.ssl.keystore.password",
        "zookeeper.ssl.truststore.password",
    }
)

_RO = "read-only"
SECURITY_NOTES: Final[dict[str, KafkaNotes]] = (
    {name: KafkaNotes(_RO) for name in _NAMES}
    | {
        "ssl.keystore.type": KafkaNotes(_RO, "default PEM (Kafka: JKS, a Java format; use PKCS12)"),
        "ssl.truststore.type": KafkaNotes(
            _RO, "default PEM (Kafka: JKS, a Java format; use PKCS12)"
        ),
        "sasl.mechanism.inter.broker.protocol": KafkaNotes(
            _RO,
            "PLAIN, SCRAM-SHA-256/512 or OAUTHBEARER (unsecured tokens); GSSAPI is not supported",
        ),
    }
    | {
        # Kafka's SslConfigs.RECONFIGURABLE_CONFIGS: per broker, with the listener prefix only.
        name: KafkaNotes(
            "per-broker",
            f"dynamic as listener.name.<listener>.{name} only (docs/security.md, certificate "
            "rotation)"
            + (
                "; default PEM (Kafka: JKS, a Java format; use PKCS12)"
                if name.endswith(".type")
                else ""
            ),
        )
        for name in RECONFIGURABLE_SSL_KEYS
    }
)


def is_listener_key(name: str) -> bool:
    return name.startswith(LISTENER_PREFIX)


def listener_base_key(name: str) -> str | None:
    """``listener.name.<l>.[<mechanism>.]<key>`` -> ``<key>``; None if ``name`` is not
    such a key."""
    if not is_listener_key(name):
        return None
    try:
        return _listener_key_suffix(name)
    except ConfigError:
        return None


def _listener_key_suffix(name: str) -> str:
    """``listener.name.<l>.[<mechanism>.]<key>`` -> ``<key>``.

    Raises:
        ConfigError: naming ``name``: not a per-listener TLS or SASL key.
    """
    rest = name[len(LISTENER_PREFIX) :]
    listener, dot, key = rest.partition(".")
    if not listener or not dot:
        raise ConfigError(name, "expected listener.name.<listener>.<key>")
    for mechanism in _MECHANISMS:
        if key.startswith(mechanism + "."):
            key = key[len(mechanism) + 1 :]
            break
    if key not in _PER_LISTENER:
        raise ConfigError(
            name,
            f"{key} cannot be set per listener here (per-listener keys: the ssl.* and "
            "sasl.* keys tierlog honours, connections.max.reauth.ms, "
            "connection.failed.authentication.delay.ms)",
        )
    return key


def _as_text(value: Any) -> str:
    if isinstance(value, list | tuple):
        return ",".join(str(v) for v in value)
    return str(value)


def security_settings(raw: Mapping[str, Any]) -> dict[str, str]:
    """The TLS and SASL keys as written, ``listener.name.*`` ones included, as text.

    Raises:
        ConfigError: a ``listener.name.*`` key that is not a per-listener security key.
    """
    found: dict[str, str] = {}
    for name, value in raw.items():
        if is_listener_key(name):
            _listener_key_suffix(name)
            found[name] = _as_text(value)
        elif name in _PER_LISTENER:
            found[name] = _as_text(value)
    return found
