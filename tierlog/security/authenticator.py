"""The default ``Authenticator``: one listener's security protocol and SASL mechanisms,
configured with Kafka's keys.

Per-listener and per-mechanism keys are looked up most specific first, as Kafka does:
``listener.name.<listener>.<mechanism>.<key>``, then ``listener.name.<listener>.<key>``,
then ``<key>`` (listener and mechanism lower case, e.g.
``listener.name.sasl_ssl.scram-sha-256.sasl.jaas.config``).

- ``sasl.enabled.mechanisms``: PLAIN, SCRAM-SHA-256, SCRAM-SHA-512, OAUTHBEARER; each
  needs its ``sasl.jaas.config`` login entry (PLAIN's holds the users).
- SCRAM reads credentials from the ``ScramCredentials`` store it is given.
- OAUTHBEARER validates KIP-768 JWTs when ``sasl.oauthbearer.jwks.endpoint.url`` is set,
  else Kafka's unsecured tokens (its default, for development; logged as a warning).
- ``connections.max.reauth.ms`` (default 0: no limit), ``connection.failed.authentication.
  delay.ms`` (100), ``sasl.server.max.receive.size`` (524288).
- SSL: the client certificate's DN through ``ssl.principal.mapping.rules``; no
  certificate is ``User:ANONYMOUS``, as in Kafka.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from functools import partial
from typing import Final

from tierlog.security.api import ConnectionInfo, SecurityProtocol
from tierlog.security.dn import subject_dn
from tierlog.security.errors import AuthenticationError, SecurityConfigError
from tierlog.security.jaas import (
    OAUTHBEARER_LOGIN_MODULE,
    PLAIN_LOGIN_MODULE,
    SCRAM_LOGIN_MODULE,
    JaasEntry,
    parse_jaas_config,
)
from tierlog.security.jwks_fetch import fetcher
from tierlog.security.oauth_jwt import JwksKeys, JwtValidator, JwtValidatorConfig
from tierlog.security.oauth_unsecured import UnsecuredJwsValidator
from tierlog.security.oauthbearer import (
    JWT_VALIDATOR_CLASSES,
    OAUTHBEARER,
    UNSECURED_VALIDATOR_CLASS,
    OAuthBearerSaslServer,
    TokenValidator,
)
from tierlog.security.plain import PLAIN, PlainSaslServer, PlainUsers
from tierlog.security.principal import ANONYMOUS, KafkaPrincipal
from tierlog.security.sasl_server import SaslServer
from tierlog.security.sasl_session import (
    DEFAULT_FAILED_AUTHENTICATION_DELAY_MS,
    DEFAULT_MAX_RECEIVE_BYTES,
    SaslSession,
)
from tierlog.security.scram import ScramCredentials, ScramSaslServer
from tierlog.security.scram_credentials import ScramMechanism
from tierlog.security.ssl_principal_mapper import NoMatchingRuleError, SslPrincipalMapper
from tierlog.util.clock import Clock

__all__ = ["ListenerAuthenticator", "listener_setting"]

_log = logging.getLogger(__name__)
_MECHANISMS: Final = (PLAIN, "SCRAM-SHA-256", "SCRAM-SHA-512", OAUTHBEARER)


def listener_setting(
    config: Mapping[str, str], listener: str, key: str, mechanism: str | None = None
) -> tuple[str, str] | None:
    """The most specific ``(key as found, value)`` for ``key`` on a listener, or None."""
    prefix = f"listener.name.{listener.lower()}."
    names = [f"{prefix}{mechanism.lower()}.{key}"] if mechanism else []
    names += [f"{prefix}{key}", key]
    for name in names:
        value = config.get(name)
        if value is not None and str(value).strip() != "":
            return name, str(value)
    return None


def _int(
    config: Mapping[str, str], listener: str, key: str, default: int, mechanism: str | None = None
) -> int:
    found = listener_setting(config, listener, key, mechanism)
    if found is None:
        return default
    try:
        return int(found[1].strip())
    except ValueError:
        raise SecurityConfigError(found[0], f"expected an integer, got {found[1]!r}") from None


class ListenerAuthenticator:
    """Authenticates one listener's connections (``Authenticator``)."""

    def __init__(
        self,
        listener_name: str,
        security_protocol: SecurityProtocol,
        clock: Clock,
        mechanisms: Mapping[str, Callable[[], SaslServer]] | None = None,
        principal_mapper: SslPrincipalMapper | None = None,
        max_reauth_ms: Mapping[str, int] | None = None,
        failed_authentication_delay_ms: int = DEFAULT_FAILED_AUTHENTICATION_DELAY_MS,
        max_receive_bytes: int = DEFAULT_MAX_RECEIVE_BYTES,
    ) -> None:
        if security_protocol.uses_sasl and not mechanisms:
            raise SecurityConfigError(
                "sasl.enabled.mechanisms",
                f"listener {listener_name} is {security_protocol.value} but enables no mechanism",
            )
        self.listener_name = listener_name
        self.security_protocol = security_protocol
        self._clock = clock
        self._mechanisms = dict(mechanisms or {})
        self._mapper = principal_mapper or SslPrincipalMapper("DEFAULT")
        self._max_reauth_ms = dict(max_reauth_ms or {})
        self._delay_ms = failed_authentication_delay_ms
        self._max_receive = max_receive_bytes

    @classmethod
    def from_config(
        cls,
        config: Mapping[str, str],
        listener_name: str,
        security_protocol: SecurityProtocol,
        clock: Clock,
        scram_credentials: ScramCredentials | None = None,
        jwks_fetcher: Callable[[str], Callable[[], bytes]] | None = None,
    ) -> ListenerAuthenticator:
        """Builds a listener's authenticator from Kafka's keys (module docstring).

        Raises:
            SecurityConfigError: naming the key that is missing or wrong.
        """
        mechanisms: dict[str, Callable[[], SaslServer]] = {}
        reauth: dict[str, int] = {}
        if security_protocol.uses_sasl:
            found = listener_setting(config, listener_name, "sasl.enabled.mechanisms")
            names = [m.strip() for m in (found[1] if found else "").split(",") if m.strip()]
            for name in names:
                mechanisms[name] = _mechanism(
                    config, listener_name, name, clock, scram_credentials, jwks_fetcher
                )
                reauth[name] = _int(config, listener_name, "connections.max.reauth.ms", 0, name)
        rules = listener_setting(config, listener_name, "ssl.principal.mapping.rules")
        return cls(
            listener_name,
            security_protocol,
            clock,
            mechanisms,
            SslPrincipalMapper(rules[1] if rules else "DEFAULT"),
            reauth,
            _int(
                config,
                listener_name,
                "connection.failed.authentication.delay.ms",
                DEFAULT_FAILED_AUTHENTICATION_DELAY_MS,
            ),
            _int(config, listener_name, "sasl.server.max.receive.size", DEFAULT_MAX_RECEIVE_BYTES),
        )

    @property
    def mechanisms(self) -> tuple[str, ...]:
        return tuple(self._mechanisms)

    def start(self, connection: ConnectionInfo) -> KafkaPrincipal | SaslSession:
        if self.security_protocol.uses_sasl:
            return SaslSession(
                self._mechanisms,
                self._clock,
                self._max_reauth_ms,
                self._delay_ms,
                self._max_receive,
            )
        if self.security_protocol is SecurityProtocol.SSL and connection.peer_certificate:
            dn = subject_dn(connection.peer_certificate)
            try:
                return KafkaPrincipal.user(self._mapper.name(dn))
            except NoMatchingRuleError as exc:
                raise AuthenticationError(str(exc)) from None
        return ANONYMOUS


def _mechanism(
    config: Mapping[str, str],
    listener: str,
    name: str,
    clock: Clock,
    scram_credentials: ScramCredentials | None,
    jwks_fetcher: Callable[[str], Callable[[], bytes]] | None,
) -> Callable[[], SaslServer]:
    if name not in _MECHANISMS:
        raise SecurityConfigError(
            "sasl.enabled.mechanisms", f"{name} is not supported (use {', '.join(_MECHANISMS)})"
        )
    found = listener_setting(config, listener, "sasl.jaas.config", name)
    key = f"listener.name.{listener.lower()}.{name.lower()}.sasl.jaas.config"
    if found is None:
        raise SecurityConfigError(
            key, f"{name} is enabled on {listener} but has no JAAS login entry"
        )
    entry = parse_jaas_config(found[1], found[0])
    expected = {PLAIN: PLAIN_LOGIN_MODULE, OAUTHBEARER: OAUTHBEARER_LOGIN_MODULE}.get(
        name, SCRAM_LOGIN_MODULE
    )
    if entry.login_module != expected:
        raise SecurityConfigError(found[0], f"{name} needs {expected}, got {entry.login_module}")
    if name == PLAIN:
        users = PlainUsers.from_jaas(entry, found[0])
        return partial(PlainSaslServer, users)
    scram = ScramMechanism.by_name(name)
    if scram is not None:
        if scram_credentials is None:
            raise SecurityConfigError("sasl.enabled.mechanisms", f"{name} needs a credential store")
        return partial(ScramSaslServer, scram, scram_credentials)
    validator = _token_validator(config, listener, entry, clock, jwks_fetcher)
    return partial(OAuthBearerSaslServer, validator)


def _token_validator(
    config: Mapping[str, str],
    listener: str,
    entry: JaasEntry,
    clock: Clock,
    jwks_fetcher: Callable[[str], Callable[[], bytes]] | None,
) -> TokenValidator:
    url = listener_setting(config, listener, "sasl.oauthbearer.jwks.endpoint.url", OAUTHBEARER)
    handler = listener_setting(config, listener, "sasl.server.callback.handler.class", OAUTHBEARER)
    named = handler[1].strip() if handler is not None else ""
    if handler is not None and named in JWT_VALIDATOR_CLASSES and url is None:
        raise SecurityConfigError(
            handler[0], "the JWT validator needs sasl.oauthbearer.jwks.endpoint.url"
        )
    # Named as Kafka names it, the unsecured validator is what it says even beside a JWKS.
    if url is None or named == UNSECURED_VALIDATOR_CLASS:
        _log.warning(
            "listener %s accepts unsecured OAUTHBEARER tokens (%s): anyone can log in as "
            "anyone; for development only",
            listener,
            "no sasl.oauthbearer.jwks.endpoint.url"
            if url is None
            else "sasl.server.callback.handler.class names the unsecured validator",
        )
        return UnsecuredJwsValidator.from_jaas(entry, clock)
    fetch_from = jwks_fetcher or fetcher
    audience = listener_setting(config, listener, "sasl.oauthbearer.expected.audience", OAUTHBEARER)
    issuer = listener_setting(config, listener, "sasl.oauthbearer.expected.issuer", OAUTHBEARER)
    sub = listener_setting(config, listener, "sasl.oauthbearer.sub.claim.name", OAUTHBEARER)
    scope = listener_setting(config, listener, "sasl.oauthbearer.scope.claim.name", OAUTHBEARER)
    keys = JwksKeys(
        fetch_from(url[1]),
        clock,
        _int(config, listener, "sasl.oauthbearer.jwks.endpoint.refresh.ms", 3_600_000, OAUTHBEARER),
        _int(config, listener, "sasl.oauthbearer.jwks.endpoint.retry.backoff.ms", 100, OAUTHBEARER),
    )
    return JwtValidator(
        keys,
        clock,
        JwtValidatorConfig(
            tuple(a.strip() for a in (audience[1] if audience else "").split(",") if a.strip()),
            issuer[1].strip() if issuer else None,
            sub[1].strip() if sub else "sub",
            scope[1].strip() if scope else "scope",
            _int(config, listener, "sasl.oauthbearer.clock.skew.seconds", 30, OAUTHBEARER),
        ),
    )
