"""A small certificate authority for tests and local clusters: a CA, then broker and
client certificates signed by it (``cryptography``; EC P-256 keys).

Used by ``tests/security`` and by ``tierlog cluster start --secure`` (``dev_security``). Files it
writes that hold a private key are created 0600; a keystore may be encrypted with a
password (``ssl.key.password`` / ``ssl.keystore.password``).
"""

from __future__ import annotations

import datetime
import ipaddress
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.serialization import pkcs12
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

__all__ = ["Issued", "LocalCa"]

_ONE_DAY = datetime.timedelta(days=1)


def _name(common_name: str, organizational_unit: str | None, organization: str | None) -> x509.Name:
    attributes = [x509.NameAttribute(NameOID.COMMON_NAME, common_name)]
    if organizational_unit:
        attributes.append(x509.NameAttribute(NameOID.ORGANIZATIONAL_UNIT_NAME, organizational_unit))
    if organization:
        attributes.append(x509.NameAttribute(NameOID.ORGANIZATION_NAME, organization))
    # x509 lists the least specific RDN first: O, OU, CN (so the RFC 2253 form is CN,OU,O).
    return x509.Name(list(reversed(attributes)))


def _write_private(path: Path, data: bytes) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.touch(mode=0o600, exist_ok=True)
    path.chmod(0o600)
    path.write_bytes(data)
    return path


@dataclass(frozen=True)
class Issued:
    """A key and its certificate chain (leaf first, then the CA)."""

    key: ec.EllipticCurvePrivateKey
    certificate: x509.Certificate
    ca_certificate: x509.Certificate

    def key_pem(self, password: str | None = None) -> bytes:
        encryption: serialization.KeySerializationEncryption = (
            serialization.BestAvailableEncryption(password.encode())
            if password
            else serialization.NoEncryption()
        )
        return self.key.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, encryption
        )

    def chain_pem(self) -> bytes:
        return b"".join(
            c.public_bytes(serialization.Encoding.PEM)
            for c in (self.certificate, self.ca_certificate)
        )

    def certificate_der(self) -> bytes:
        return self.certificate.public_bytes(serialization.Encoding.DER)

    def write_pem_keystore(self, path: Path, password: str | None = None) -> Path:
        """Kafka's PEM keystore file (``ssl.keystore.location``): key, then chain; 0600."""
        return _write_private(Path(path), self.key_pem(password) + self.chain_pem())

    def write_pkcs12(self, path: Path, password: str) -> Path:
        """A PKCS12 keystore (``ssl.keystore.type=PKCS12``); 0600."""
        data = pkcs12.serialize_key_and_certificates(
            b"tierlog",
            self.key,
            self.certificate,
            [self.ca_certificate],
            serialization.BestAvailableEncryption(password.encode()),
        )
        return _write_private(Path(path), data)


class LocalCa:
    """A self-signed CA that issues server and client certificates."""

    def __init__(self, key: ec.EllipticCurvePrivateKey, certificate: x509.Certificate) -> None:
        self.key = key
        self.certificate = certificate

    @classmethod
    def create(cls, common_name: str = "tierlog local CA", days: int = 365) -> LocalCa:
        key = ec.generate_private_key(ec.SECP256R1())
        name = _name(common_name, None, "tierlog")
        now = datetime.datetime.now(datetime.UTC)
        certificate = (
            x509.CertificateBuilder()
            .subject_name(name)
            .issuer_name(name)
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - _ONE_DAY)
            .not_valid_after(now + days * _ONE_DAY)
            .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
            .add_extension(
                x509.KeyUsage(
                    digital_signature=True,
                    content_commitment=False,
                    key_encipherment=False,
                    data_encipherment=False,
                    key_agreement=False,
                    key_cert_sign=True,
                    crl_sign=True,
                    encipher_only=False,
                    decipher_only=False,
                ),
                critical=True,
            )
            .sign(key, hashes.SHA256())
        )
        return cls(key, certificate)

    @classmethod
    def load(cls, certificate_path: Path, key_path: Path) -> LocalCa:
        """The CA written earlier by ``write_ca`` and ``write_key`` (reused across runs)."""
        certificate = x509.load_pem_x509_certificate(Path(certificate_path).read_bytes())
        key = serialization.load_pem_private_key(Path(key_path).read_bytes(), password=None)
        if not isinstance(key, ec.EllipticCurvePrivateKey):
            raise ValueError(f"{key_path}: not an EC private key")
        return cls(key, certificate)

    def ca_pem(self) -> bytes:
        return self.certificate.public_bytes(serialization.Encoding.PEM)

    def write_key(self, path: Path) -> Path:
        """The CA's private key (PKCS#8 PEM, unencrypted; 0600): what issues more
        certificates later, so keep it as private as the keystores."""
        data = self.key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
        return _write_private(Path(path), data)

    def write_ca(self, path: Path) -> Path:
        """The CA certificate (a truststore, ``ssl.truststore.location``); public."""
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(self.ca_pem())
        return path

    def issue(
        self,
        common_name: str,
        hosts: Sequence[str] = ("localhost", "127.0.0.1"),
        organizational_unit: str | None = None,
        organization: str | None = None,
        days: int = 365,
        not_before: datetime.datetime | None = None,
    ) -> Issued:
        """A certificate for ``common_name``, valid for server and client use; ``hosts``
        become its subject alternative names (DNS names and IP addresses)."""
        key = ec.generate_private_key(ec.SECP256R1())
        start = not_before or datetime.datetime.now(datetime.UTC) - _ONE_DAY
        alt_names: list[x509.GeneralName] = []
        for host in hosts:
            try:
                alt_names.append(x509.IPAddress(ipaddress.ip_address(host)))
            except ValueError:
                alt_names.append(x509.DNSName(host))
        builder = (
            x509.CertificateBuilder()
            .subject_name(_name(common_name, organizational_unit, organization))
            .issuer_name(self.certificate.subject)
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(start)
            .not_valid_after(start + days * _ONE_DAY)
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .add_extension(
                x509.ExtendedKeyUsage(
                    [ExtendedKeyUsageOID.SERVER_AUTH, ExtendedKeyUsageOID.CLIENT_AUTH]
                ),
                critical=False,
            )
        )
        if alt_names:
            builder = builder.add_extension(x509.SubjectAlternativeName(alt_names), critical=False)
        return Issued(key, builder.sign(self.key, hashes.SHA256()), self.certificate)
