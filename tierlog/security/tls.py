"""Kafka's ``ssl.*`` keys -> an ``ssl.SSLContext`` (replaced while running: ``tls_rotation``).

Keys (Kafka's names and defaults):

- ``ssl.keystore.type``: ``PEM`` (KIP-651) or ``PKCS12``; Kafka's default ``JKS`` is a
  Java format: convert it with ``keytool -importkeystore -deststoretype PKCS12``.
- PEM: ``ssl.keystore.location`` (one file: the private key, PKCS#8, then the certificate
  chain) or inline ``ssl.keystore.key`` + ``ssl.keystore.certificate.chain``; an
  encrypted key is opened with ``ssl.key.password``.
- PKCS12: ``ssl.keystore.location`` + ``ssl.keystore.password`` (and ``ssl.key.password``
  if the key has its own).
- ``ssl.truststore.type`` ``PEM`` (``ssl.truststore.location`` or inline
  ``ssl.truststore.certificates``) or ``PKCS12`` (with ``ssl.truststore.password``).
- ``ssl.client.auth``: ``none`` (default), ``requested`` or ``required`` (server side).
- ``ssl.enabled.protocols`` (default ``TLSv1.2,TLSv1.3``); ``ssl.cipher.suites`` (IANA
  names as Java takes them, or OpenSSL names; TLS 1.3 suites are OpenSSL's fixed set).
- ``ssl.endpoint.identification.algorithm``: ``https`` (default: the client checks the
  server's host name) or empty (no check).
- ``ssl.allow.dn.changes``, ``ssl.allow.san.changes`` (KIP-978, default false): whether a
  certificate reloaded while the listener runs may change its subject or drop names.

Python's ``ssl`` loads a key only from a file. Inline and PKCS12 keys are therefore
re-encrypted with a one-time random password into a file created 0600 inside a fresh
0700 directory, loaded, and removed at once: key material is never on disk in clear, nor
readable by anyone else, nor logged (the settings keep secrets as ``Password``).
"""

from __future__ import annotations

import secrets
import ssl
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from cryptography import x509
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.serialization import pkcs12

from tierlog.security.errors import SecurityConfigError
from tierlog.security.password import Password

__all__ = ["ServerTls", "TlsSettings", "client_context", "load_server_tls", "server_context"]

_PROTOCOLS: Final = {
    "TLSv1.2": ssl.TLSVersion.TLSv1_2,
    "TLSv1.3": ssl.TLSVersion.TLSv1_3,
}
# IANA -> OpenSSL names of the TLS 1.2 suites worth enabling (forward secret, AEAD).
_IANA_CIPHERS: Final = {
    "TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256": "ECDHE-ECDSA-AES128-GCM-SHA256",
    "TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384": "ECDHE-ECDSA-AES256-GCM-SHA384",
    "TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256": "ECDHE-RSA-AES128-GCM-SHA256",
    "TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384": "ECDHE-RSA-AES256-GCM-SHA384",
    "TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256": "ECDHE-ECDSA-CHACHA20-POLY1305",
    "TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256": "ECDHE-RSA-CHACHA20-POLY1305",
    "TLS_DHE_RSA_WITH_AES_128_GCM_SHA256": "DHE-RSA-AES128-GCM-SHA256",
    "TLS_DHE_RSA_WITH_AES_256_GCM_SHA384": "DHE-RSA-AES256-GCM-SHA384",
}
_TLS13_SUITES: Final = frozenset(
    {"TLS_AES_128_GCM_SHA256", "TLS_AES_256_GCM_SHA384", "TLS_CHACHA20_POLY1305_SHA256"}
)


def _password(value: object | None) -> Password | None:
    if value is None or value == "":
        return None
    return value if isinstance(value, Password) else Password(str(value))


@dataclass(frozen=True)
class TlsSettings:
    """The ``ssl.*`` settings of one listener (or one client); secrets as ``Password``."""

    keystore_type: str = "PEM"
    keystore_location: str | None = None
    keystore_password: Password | None = None
    keystore_key: Password | None = None
    keystore_certificate_chain: str | None = None
    key_password: Password | None = None
    truststore_type: str = "PEM"
    truststore_location: str | None = None
    truststore_password: Password | None = None
    truststore_certificates: str | None = None
    client_auth: str = "none"
    enabled_protocols: tuple[str, ...] = ("TLSv1.2", "TLSv1.3")
    cipher_suites: tuple[str, ...] = ()
    endpoint_identification_algorithm: str = "https"
    # KIP-978: whether a certificate reloaded while running may change its subject DN, or
    # drop subject alternative names (``tls_rotation``).
    allow_dn_changes: bool = False
    allow_san_changes: bool = False

    @classmethod
    def from_config(cls, config: Mapping[str, object], prefix: str = "") -> TlsSettings:
        """From Kafka's keys, each read as ``<prefix>ssl.<key>`` (``prefix`` e.g.
        ``listener.name.sasl_ssl.``), falling back to the plain ``ssl.<key>``.

        Raises:
            SecurityConfigError: naming the key: an unknown type, client auth or protocol.
        """

        def get(key: str) -> object | None:
            for name in (f"{prefix}ssl.{key}", f"ssl.{key}"):
                if config.get(name) is not None:
                    return config[name]
            return None

        def text(key: str, default: str | None = None) -> str | None:
            value = get(key)
            return default if value is None or str(value).strip() == "" else str(value).strip()

        def listed(key: str, default: tuple[str, ...]) -> tuple[str, ...]:
            value = get(key)
            if value is None or value == "":
                return default
            items = value if isinstance(value, list | tuple) else str(value).split(",")
            return tuple(str(item).strip() for item in items if str(item).strip())

        def flag(key: str) -> bool:
            value = (text(key, "false") or "false").lower()
            if value not in ("true", "false"):
                raise SecurityConfigError(f"ssl.{key}", f"must be true or false, got {value}")
            return value == "true"

        settings = cls(
            keystore_type=(text("keystore.type", "PEM") or "PEM").upper(),
            keystore_location=text("keystore.location"),
            keystore_password=_password(get("keystore.password")),
            keystore_key=_password(get("keystore.key")),
            keystore_certificate_chain=text("keystore.certificate.chain"),
            key_password=_password(get("key.password")),
            truststore_type=(text("truststore.type", "PEM") or "PEM").upper(),
            truststore_location=text("truststore.location"),
            truststore_password=_password(get("truststore.password")),
            truststore_certificates=text("truststore.certificates"),
            client_auth=(text("client.auth", "none") or "none").lower(),
            enabled_protocols=listed("enabled.protocols", ("TLSv1.2", "TLSv1.3")),
            cipher_suites=listed("cipher.suites", ()),
            # An empty value is meaningful here: it turns host name checking off.
            endpoint_identification_algorithm=str(
                get("endpoint.identification.algorithm")
                if get("endpoint.identification.algorithm") is not None
                else "https"
            ).strip(),
            allow_dn_changes=flag("allow.dn.changes"),
            allow_san_changes=flag("allow.san.changes"),
        )
        settings.check()
        return settings

    def check(self) -> None:
        """Raises ``SecurityConfigError`` naming the first key Kafka would refuse."""
        for key, kind in (
            ("ssl.keystore.type", self.keystore_type),
            ("ssl.truststore.type", self.truststore_type),
        ):
            if kind == "JKS":
                raise SecurityConfigError(
                    key,
                    "JKS is a Java format: convert it to PKCS12 (keytool -importkeystore "
                    "-deststoretype PKCS12) or use PEM",
                )
            if kind not in ("PEM", "PKCS12"):
                raise SecurityConfigError(key, f"must be PEM or PKCS12, got {kind}")
        if self.client_auth not in ("none", "requested", "required"):
            raise SecurityConfigError(
                "ssl.client.auth", f"must be none, requested or required, got {self.client_auth}"
            )
        for protocol in self.enabled_protocols:
            if protocol not in _PROTOCOLS:
                raise SecurityConfigError(
                    "ssl.enabled.protocols", f"{protocol} is not supported (use TLSv1.2, TLSv1.3)"
                )
        if not self.enabled_protocols:
            raise SecurityConfigError("ssl.enabled.protocols", "no protocol enabled")
        if self.keystore_location and (self.keystore_key or self.keystore_certificate_chain):
            raise SecurityConfigError(
                "ssl.keystore.key", "set either ssl.keystore.location or the inline key and chain"
            )
        if bool(self.keystore_key) != bool(self.keystore_certificate_chain):
            raise SecurityConfigError(
                "ssl.keystore.certificate.chain" if self.keystore_key else "ssl.keystore.key",
                "ssl.keystore.key and ssl.keystore.certificate.chain go together",
            )
        if self.truststore_location and self.truststore_certificates:
            raise SecurityConfigError(
                "ssl.truststore.certificates",
                "set either ssl.truststore.location or the inline certificates",
            )
        if self.endpoint_identification_algorithm.lower() not in ("", "https"):
            raise SecurityConfigError(
                "ssl.endpoint.identification.algorithm", "must be https or empty"
            )

    def key_files(self) -> tuple[Path, ...]:
        """The files this configuration reads (what ``tls_rotation`` watches)."""
        return tuple(Path(p) for p in (self.keystore_location, self.truststore_location) if p)


# --- key material ----------------------------------------------------------------------


def _read(path: str, key: str) -> bytes:
    try:
        return Path(path).read_bytes()
    except OSError as exc:
        raise SecurityConfigError(key, f"cannot read {path}: {exc.strerror}") from None


def _key_and_chain(settings: TlsSettings) -> tuple[object, list[x509.Certificate]] | None:
    key_password = settings.key_password.value.encode() if settings.key_password else None
    if settings.keystore_type == "PKCS12":
        if not settings.keystore_location:
            raise SecurityConfigError("ssl.keystore.location", "a PKCS12 keystore needs a file")
        data = _read(settings.keystore_location, "ssl.keystore.location")
        store_password = (
            settings.keystore_password.value.encode() if settings.keystore_password else None
        )
        try:
            key, cert, extra = pkcs12.load_key_and_certificates(data, store_password)
        except ValueError:
            raise SecurityConfigError(
                "ssl.keystore.password", "cannot open the PKCS12 keystore (wrong password?)"
            ) from None
        if key is None or cert is None:
            raise SecurityConfigError("ssl.keystore.location", "the PKCS12 keystore holds no key")
        return key, [cert, *extra]
    if settings.keystore_location:
        pem = _read(settings.keystore_location, "ssl.keystore.location")
        key_key, chain_pem = "ssl.keystore.location", pem
    elif settings.keystore_key and settings.keystore_certificate_chain:
        pem = settings.keystore_key.value.encode()
        key_key, chain_pem = "ssl.keystore.key", settings.keystore_certificate_chain.encode()
    else:
        return None
    try:
        key = serialization.load_pem_private_key(pem, key_password)
    except TypeError:
        raise SecurityConfigError(
            "ssl.key.password", "the private key is encrypted: set ssl.key.password"
        ) from None
    except ValueError:
        raise SecurityConfigError(
            key_key, "no readable PEM private key (or ssl.key.password is wrong)"
        ) from None
    try:
        chain = x509.load_pem_x509_certificates(chain_pem)
    except ValueError:
        raise SecurityConfigError(key_key, "no PEM certificate chain") from None
    return key, chain


def _load_key(context: ssl.SSLContext, settings: TlsSettings) -> tuple[x509.Certificate, ...]:
    """Loads the keystore into ``context``; returns its chain, leaf first (empty: none)."""
    material = _key_and_chain(settings)
    if material is None:
        return ()
    key, chain = material
    one_time = secrets.token_urlsafe(32)
    encrypted = key.private_bytes(  # type: ignore[attr-defined]
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.BestAvailableEncryption(one_time.encode()),
    )
    chain_pem = b"".join(cert.public_bytes(serialization.Encoding.PEM) for cert in chain)
    # mkdtemp makes the directory 0700; the file is created 0600 and removed at once.
    with tempfile.TemporaryDirectory(prefix="tierlog-tls-") as private_dir:
        path = Path(private_dir) / "key.pem"
        path.touch(mode=0o600)
        path.write_bytes(encrypted + chain_pem)
        try:
            context.load_cert_chain(path, password=one_time)
        except ssl.SSLError as exc:
            raise SecurityConfigError(
                "ssl.keystore.location", f"the key does not fit the certificate: {exc}"
            ) from None
        finally:
            path.unlink()
    return tuple(chain)


def _trusted_pem(settings: TlsSettings) -> str | None:
    if settings.truststore_type == "PKCS12":
        if not settings.truststore_location:
            return None
        data = _read(settings.truststore_location, "ssl.truststore.location")
        password = (
            settings.truststore_password.value.encode() if settings.truststore_password else None
        )
        try:
            _, cert, extra = pkcs12.load_key_and_certificates(data, password)
        except ValueError:
            raise SecurityConfigError(
                "ssl.truststore.password", "cannot open the PKCS12 truststore"
            ) from None
        certs = [c for c in (cert, *extra) if c is not None]
        return "".join(c.public_bytes(serialization.Encoding.PEM).decode() for c in certs)
    if settings.truststore_location:
        return _read(settings.truststore_location, "ssl.truststore.location").decode()
    return settings.truststore_certificates


def _base_context(
    purpose: ssl.Purpose, settings: TlsSettings
) -> tuple[ssl.SSLContext, tuple[x509.Certificate, ...], bool]:
    """The context, the keystore chain it holds and whether a truststore was loaded (the
    files are read once, so what is checked is what is served)."""
    if purpose is ssl.Purpose.CLIENT_AUTH:
        # A listener trusts only its truststore for client certificates, never the
        # system's public roots (which Kafka's JVM default truststore would add).
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    else:
        context = ssl.create_default_context(purpose)
    versions = sorted(_PROTOCOLS[p] for p in settings.enabled_protocols)
    context.minimum_version, context.maximum_version = versions[0], versions[-1]
    tls12 = [s for s in settings.cipher_suites if s not in _TLS13_SUITES]
    if tls12:
        names = [_IANA_CIPHERS.get(s, s) for s in tls12]
        try:
            context.set_ciphers(":".join(names))
        except ssl.SSLError:
            raise SecurityConfigError(
                "ssl.cipher.suites", f"no usable cipher suite in {', '.join(tls12)}"
            ) from None
    chain = _load_key(context, settings)
    trusted = _trusted_pem(settings)
    if trusted is not None:
        try:
            context.load_verify_locations(cadata=trusted)
        except (ssl.SSLError, ValueError):
            raise SecurityConfigError(
                "ssl.truststore.certificates", "no PEM certificate to trust"
            ) from None
    return context, chain, trusted is not None


@dataclass(frozen=True)
class ServerTls:
    """A listener's TLS as loaded: the context and what a reload compares with it.

    Attributes:
        context: the server context.
        chain: the keystore's certificate chain, leaf first.
        trusts: whether a truststore was loaded (client certificates can be checked).
    """

    context: ssl.SSLContext
    chain: tuple[x509.Certificate, ...]
    trusts: bool


def server_context(settings: TlsSettings) -> ssl.SSLContext:
    """A listener's context: its key and chain, and client certificates per ssl.client.auth.

    Raises:
        SecurityConfigError: naming the key that is missing or wrong.
    """
    return load_server_tls(settings).context


def load_server_tls(settings: TlsSettings) -> ServerTls:
    """``server_context``'s context with the chain it serves (``tls_rotation`` compares it).

    Raises:
        SecurityConfigError: naming the key that is missing or wrong.
    """
    if not (settings.keystore_location or settings.keystore_key):
        raise SecurityConfigError("ssl.keystore.location", "a TLS listener needs a keystore")
    if settings.client_auth != "none" and not (
        settings.truststore_location or settings.truststore_certificates
    ):
        raise SecurityConfigError(
            "ssl.truststore.location",
            f"ssl.client.auth={settings.client_auth} needs a truststore to check client "
            "certificates against",
        )
    context, chain, trusts = _base_context(ssl.Purpose.CLIENT_AUTH, settings)
    context.verify_mode = {
        "none": ssl.CERT_NONE,
        "requested": ssl.CERT_OPTIONAL,
        "required": ssl.CERT_REQUIRED,
    }[settings.client_auth]
    return ServerTls(context, chain, trusts)


def client_context(settings: TlsSettings) -> ssl.SSLContext:
    """A client's context (inter-broker, tools): trusts the truststore (or the system's
    roots), checks host names per ``ssl.endpoint.identification.algorithm``, and presents
    a client certificate when a keystore is set (mutual TLS)."""
    context, _, _ = _base_context(ssl.Purpose.SERVER_AUTH, settings)
    context.check_hostname = settings.endpoint_identification_algorithm.lower() == "https"
    return context
