"""A client's security settings, from Kafka's client keys, read in one place.

``ClientSecurity.from_config`` reads what a Kafka client's properties (or Spark's
``kafka.*`` options, prefix stripped) say about security:

- ``security.protocol``: PLAINTEXT (default), SSL, SASL_PLAINTEXT or SASL_SSL (any case,
  as librdkafka writes them).
- TLS: the ``ssl.*`` keys of ``tierlog.security.tls`` (PEM or PKCS12 truststore and,
  for mutual TLS, keystore; ``ssl.endpoint.identification.algorithm`` ``https`` by
  default, empty to skip the host name check), plus librdkafka's ``ssl.ca.location``
  for the truststore file.
- SASL: ``sasl.mechanism`` (librdkafka: ``sasl.mechanisms``) PLAIN, SCRAM-SHA-256,
  SCRAM-SHA-512 or OAUTHBEARER, and the login either as Kafka's Java clients write it,
  ``sasl.jaas.config`` (``username=``/``password=`` in a Plain or Scram login module), or
  as librdkafka names it, ``sasl.username``/``sasl.password``. OAUTHBEARER logs in with
  Kafka's unsecured development token, made from the OAuthBearerLoginModule's
  ``unsecuredLogin*`` options as Kafka's ``OAuthBearerUnsecuredLoginCallbackHandler``
  makes it (``unsecuredLoginStringClaim_sub="alice"``, ``unsecuredLoginLifetimeSeconds``,
  ``unsecuredLoginExtension_<name>``...).

Other ``ssl.*`` and ``sasl.*`` keys are refused by name (a Kerberos or login-callback key
cannot be honoured, and silently ignoring it would connect some other way than asked);
keys outside those families are not security's and are left to their owner. Secrets are
kept as ``Password``, so a ``ClientSecurity`` prints none. ``librdkafka_config`` says the
same settings in librdkafka's words (for confluent-kafka clients, e.g. the Spark sink).
"""

from __future__ import annotations

import json
import ssl
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Final

from tierlog.security.api import SecurityProtocol
from tierlog.security.errors import SecurityConfigError
from tierlog.security.jaas import (
    OAUTHBEARER_LOGIN_MODULE,
    PLAIN_LOGIN_MODULE,
    SCRAM_LOGIN_MODULE,
    JaasEntry,
    parse_jaas_config,
)
from tierlog.security.oauth_unsecured import unsecured_token
from tierlog.security.password import HIDDEN, Password, is_secret_key
from tierlog.security.sasl_client import (
    OAuthBearerSaslClient,
    PlainSaslClient,
    SaslMechanismClient,
    ScramMechanismClient,
)
from tierlog.security.scram_client import ScramSaslClient
from tierlog.security.scram_credentials import ScramMechanism
from tierlog.security.tls import TlsSettings, client_context
from tierlog.util.clock import Clock, SystemClock

__all__ = [
    "CLIENT_SECURITY_KEYS",
    "ClientSecurity",
    "SaslLogin",
    "librdkafka_config",
    "redacted",
    "sasl_login_from_jaas",
]

MECHANISMS: Final = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "OAUTHBEARER")
_SSL_KEYS: Final = frozenset(
    f"ssl.{k}"
    for k in (
        "keystore.type",
        "keystore.location",
        "keystore.password",
        "keystore.key",
        "keystore.certificate.chain",
        "key.password",
        "truststore.type",
        "truststore.location",
        "truststore.password",
        "truststore.certificates",
        "enabled.protocols",
        "cipher.suites",
        "endpoint.identification.algorithm",
        "ca.location",
    )
)
_SASL_KEYS: Final = frozenset(
    {"sasl.mechanism", "sasl.mechanisms", "sasl.jaas.config", "sasl.username", "sasl.password"}
)
# Every key ``from_config`` reads; the ``ssl.``/``sasl.`` keys not in it are refused.
CLIENT_SECURITY_KEYS: Final = frozenset({"security.protocol"}) | _SSL_KEYS | _SASL_KEYS
# Kafka's OAuthBearerUnsecuredLoginCallbackHandler options.
_LOGIN: Final = "unsecuredLogin"
_DEFAULT_LIFETIME_S: Final = 3600


def redacted(options: Mapping[str, Any]) -> dict[str, Any]:
    """``options`` with every secret's value shown as ``[hidden]`` (for errors and logs)."""
    return {k: (HIDDEN if is_secret_key(str(k)) else v) for k, v in options.items()}


@dataclass(frozen=True)
class SaslLogin:
    """Who logs in, and how: a mechanism and its credentials (secrets as ``Password``).

    ``oauth_login`` is the OAuthBearerLoginModule entry an OAUTHBEARER token is made from.
    """

    mechanism: str
    username: str | None = None
    password: Password | None = None
    oauth_login: JaasEntry | None = None

    def client(self, clock: Clock) -> SaslMechanismClient:
        """A fresh mechanism client for one login (a SCRAM nonce is never reused)."""
        scram = ScramMechanism.by_name(self.mechanism)
        if scram is not None:
            assert self.username is not None and self.password is not None
            return ScramMechanismClient(ScramSaslClient(scram, self.username, self.password))
        if self.mechanism == "PLAIN":
            assert self.username is not None and self.password is not None
            return PlainSaslClient(self.username, self.password)
        assert self.oauth_login is not None
        token, extensions = _unsecured_login(self.oauth_login, clock)
        return OAuthBearerSaslClient(token, extensions)


@dataclass(frozen=True)
class ClientSecurity:
    """How a client connects: the protocol, its TLS settings and its SASL login."""

    protocol: SecurityProtocol = SecurityProtocol.PLAINTEXT
    tls: TlsSettings | None = None
    sasl: SaslLogin | None = None
    clock: Clock = field(default_factory=SystemClock, compare=False, repr=False)
    # The SSL context, built on first use and shared by every connection.
    _context: list[ssl.SSLContext] = field(
        default_factory=list, compare=False, repr=False, hash=False
    )

    @classmethod
    def from_config(cls, config: Mapping[str, Any], clock: Clock | None = None) -> ClientSecurity:
        """From a client's properties (module docstring); other keys are ignored.

        Raises:
            SecurityConfigError: naming the key: an unsupported ``ssl.*``/``sasl.*`` key,
                a bad value, or a login that the mechanism cannot use.
        """
        for key in config:
            name = str(key)
            if name.startswith(("ssl.", "sasl.")) and name not in CLIENT_SECURITY_KEYS:
                raise SecurityConfigError(
                    name,
                    "not supported by tierlog's client (it reads "
                    f"{', '.join(sorted(CLIENT_SECURITY_KEYS))})",
                )
        raw = str(config.get("security.protocol") or "PLAINTEXT").strip().upper()
        try:
            protocol = SecurityProtocol(raw)
        except ValueError:
            raise SecurityConfigError(
                "security.protocol",
                f"{raw!r} is not a security protocol (PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL)",
            ) from None
        tls = None
        if protocol.uses_tls:
            settings = {k: v for k, v in config.items() if str(k).startswith("ssl.")}
            if settings.get("ssl.ca.location") and not settings.get("ssl.truststore.location"):
                settings["ssl.truststore.location"] = settings["ssl.ca.location"]
            settings.pop("ssl.ca.location", None)
            tls = TlsSettings.from_config(settings)
        sasl = _sasl_login(config) if protocol.uses_sasl else None
        return cls(protocol, tls, sasl, clock or SystemClock())

    def ssl_context(self) -> ssl.SSLContext | None:
        """The client TLS context (None without TLS), built once.

        Raises:
            SecurityConfigError: a key or trust file that cannot be used.
        """
        if self.tls is None:
            return None
        if not self._context:
            self._context.append(client_context(self.tls))
        return self._context[0]

    def use_ssl_context(self, context: ssl.SSLContext) -> None:
        """Connections made from now on use ``context`` (a broker's inter-broker
        certificate reloaded while it runs); those already made keep theirs."""
        self._context[:] = [context]

    def sasl_client(self) -> SaslMechanismClient | None:
        """A mechanism client for one login, or None without SASL."""
        return None if self.sasl is None else self.sasl.client(self.clock)


def _sasl_login(config: Mapping[str, Any]) -> SaslLogin:
    found = config.get("sasl.mechanism") or config.get("sasl.mechanisms")
    key = "sasl.mechanism" if config.get("sasl.mechanism") else "sasl.mechanisms"
    if not found:
        # Kafka's default is GSSAPI (Kerberos), which tierlog does not speak.
        raise SecurityConfigError(
            "sasl.mechanism", f"required with SASL: one of {', '.join(MECHANISMS)}"
        )
    mechanism = str(found).strip().upper()
    if mechanism not in MECHANISMS:
        raise SecurityConfigError(
            key, f"{mechanism} is not supported (use {', '.join(MECHANISMS)})"
        )
    jaas_text = config.get("sasl.jaas.config")
    entry = parse_jaas_config(str(jaas_text)) if jaas_text else None
    if entry is not None or mechanism == "OAUTHBEARER":
        return sasl_login_from_jaas(mechanism, entry, "sasl.jaas.config")
    username = config.get("sasl.username")
    secret = config.get("sasl.password")
    password = secret.value if isinstance(secret, Password) else secret
    if not username or password is None:
        raise SecurityConfigError(
            "sasl.username" if not username else "sasl.password",
            f"{mechanism} needs a username and a password: username=/password= in "
            "sasl.jaas.config, or sasl.username and sasl.password",
        )
    return SaslLogin(mechanism, str(username), Password(str(password)))


def sasl_login_from_jaas(mechanism: str, entry: JaasEntry | None, key: str) -> SaslLogin:
    """The login a JAAS entry holds for ``mechanism``: ``username=``/``password=`` of a
    Plain or Scram login module, or an OAuthBearerLoginModule's ``unsecuredLogin*``
    claims. Brokers read their inter-broker login from their listener's entry this way.

    Raises:
        SecurityConfigError: naming ``key``: the wrong login module, or a missing value.
    """
    if mechanism == "OAUTHBEARER":
        if entry is None or entry.login_module != OAUTHBEARER_LOGIN_MODULE:
            raise SecurityConfigError(
                key,
                f"OAUTHBEARER needs a {OAUTHBEARER_LOGIN_MODULE} entry with the token's "
                f'claims, e.g. {_LOGIN}StringClaim_sub="alice"',
            )
        _unsecured_claims(entry, SystemClock())  # refuse a bad entry now, not at login
        return SaslLogin(mechanism, oauth_login=entry)
    if entry is None or entry.login_module not in (PLAIN_LOGIN_MODULE, SCRAM_LOGIN_MODULE):
        found = "no login entry" if entry is None else entry.login_module
        raise SecurityConfigError(
            key,
            f"{mechanism} logs in with {PLAIN_LOGIN_MODULE} or {SCRAM_LOGIN_MODULE}, not {found}",
        )
    username, password = entry.option("username"), entry.option("password")
    if not username or password is None:
        raise SecurityConfigError(
            key, f"{mechanism} needs username= and password= in the login entry"
        )
    return SaslLogin(mechanism, username, Password(password))


def _unsecured_claims(entry: JaasEntry, clock: Clock) -> tuple[dict[str, Any], dict[str, str]]:
    """The claims and SASL extensions of Kafka's unsecured login (module docstring)."""
    principal_claim = entry.option(f"{_LOGIN}PrincipalClaimName") or "sub"
    lifetime_text = entry.option(f"{_LOGIN}LifetimeSeconds") or str(_DEFAULT_LIFETIME_S)
    try:
        lifetime_s = int(lifetime_text)
    except ValueError:
        raise SecurityConfigError(
            f"{_LOGIN}LifetimeSeconds", f"not an integer: {lifetime_text!r}"
        ) from None
    claims: dict[str, Any] = {}
    extensions: dict[str, str] = {}
    for name, value in entry.options.items():
        kind, _, claim = name.partition("Claim_")
        if name.startswith(f"{_LOGIN}Extension_"):
            extensions[name[len(f"{_LOGIN}Extension_") :]] = value
        elif kind == f"{_LOGIN}String" and claim:
            claims[claim] = value
        elif kind == f"{_LOGIN}Number" and claim:
            try:
                claims[claim] = json.loads(value)
            except ValueError:
                raise SecurityConfigError(name, f"not a number: {value!r}") from None
        elif kind == f"{_LOGIN}List" and claim:
            # Kafka: the first character is the delimiter of the rest.
            claims[claim] = [item for item in value[1:].split(value[:1]) if item] if value else []
    if not isinstance(claims.get(principal_claim), str) or not claims[principal_claim]:
        raise SecurityConfigError(
            f"{_LOGIN}StringClaim_{principal_claim}",
            f"the unsecured OAUTHBEARER login needs the principal claim {principal_claim!r}",
        )
    now_s = clock.milliseconds() / 1000
    claims.setdefault("iat", now_s)
    claims.setdefault("exp", now_s + lifetime_s)
    return claims, extensions


def _unsecured_login(entry: JaasEntry, clock: Clock) -> tuple[Password, dict[str, str]]:
    claims, extensions = _unsecured_claims(entry, clock)
    return Password(unsecured_token(claims)), extensions


def librdkafka_config(security: ClientSecurity) -> dict[str, str]:
    """The same settings in librdkafka's keys (confluent-kafka), secrets included: hand
    the result to the client, never to a log.

    Raises:
        SecurityConfigError: a setting librdkafka cannot take (a PKCS12 truststore).
    """
    out: dict[str, str] = {"security.protocol": security.protocol.value.lower()}
    tls = security.tls
    if tls is not None:
        if tls.truststore_type == "PKCS12" and tls.truststore_location:
            raise SecurityConfigError(
                "ssl.truststore.type", "librdkafka reads PEM truststores only: use PEM"
            )
        if tls.truststore_location:
            out["ssl.ca.location"] = tls.truststore_location
        elif tls.truststore_certificates:
            out["ssl.ca.pem"] = tls.truststore_certificates
        if tls.keystore_type == "PKCS12" and tls.keystore_location:
            out["ssl.keystore.location"] = tls.keystore_location
            if tls.keystore_password:
                out["ssl.keystore.password"] = tls.keystore_password.value
        elif tls.keystore_location:
            # One PEM file holds the key and the chain; OpenSSL reads each from it.
            out["ssl.certificate.location"] = tls.keystore_location
            out["ssl.key.location"] = tls.keystore_location
        elif tls.keystore_key and tls.keystore_certificate_chain:
            out["ssl.key.pem"] = tls.keystore_key.value
            out["ssl.certificate.pem"] = tls.keystore_certificate_chain
        if tls.key_password:
            out["ssl.key.password"] = tls.key_password.value
        https = tls.endpoint_identification_algorithm.lower() == "https"
        out["ssl.endpoint.identification.algorithm"] = "https" if https else "none"
    sasl = security.sasl
    if sasl is not None:
        out["sasl.mechanism"] = sasl.mechanism
        if sasl.oauth_login is not None:
            claims, extensions = _unsecured_claims(sasl.oauth_login, security.clock)
            principal_claim = sasl.oauth_login.option(f"{_LOGIN}PrincipalClaimName") or "sub"
            lifetime = int(claims["exp"] - claims["iat"])
            parts = [f"principal={claims[principal_claim]}", f"lifeSeconds={lifetime}"]
            if principal_claim != "sub":
                parts.append(f"principalClaimName={principal_claim}")
            if isinstance(claims.get("scope"), str):
                parts.append(f"scope={claims['scope'].replace(' ', ',')}")
            parts += [f"extension_{k}={v}" for k, v in sorted(extensions.items())]
            out["enable.sasl.oauthbearer.unsecure.jwt"] = "true"
            out["sasl.oauthbearer.config"] = " ".join(parts)
        else:
            assert sasl.username is not None and sasl.password is not None
            out["sasl.username"] = sasl.username
            out["sasl.password"] = sasl.password.value
    return out
