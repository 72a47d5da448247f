from __future__ import annotations

import pytest
from cryptography import x509
from cryptography.x509.oid import NameOID

from tierlog.security.dn import rfc2253_name
from tierlog.security.errors import SecurityError


def _name(*attributes: tuple[x509.ObjectIdentifier, str]) -> x509.Name:
    return x509.Name([x509.NameAttribute(oid, value) for oid, value in attributes])


def test_most_specific_first_without_spaces() -> None:
    name = _name(
        (NameOID.COUNTRY_NAME, "US"),
        (NameOID.ORGANIZATION_NAME, "Sun Microsystems"),
        (NameOID.ORGANIZATIONAL_UNIT_NAME, "JavaSoft"),
        (NameOID.COMMON_NAME, "Duke"),
    )
    assert rfc2253_name(name) == "CN=Duke,OU=JavaSoft,O=Sun Microsystems,C=US"


def test_escaping_as_java_does() -> None:
    name = _name(
        (NameOID.COMMON_NAME, 'Tkac, Adam+"x"=<y>#;\\'), (NameOID.ORGANIZATIONAL_UNIT_NAME, " pad ")
    )
    assert rfc2253_name(name) == 'OU=\\ pad\\ ,CN=Tkac\\, Adam\\+\\"x\\"\\=\\<y\\>\\#\\;\\\\'


def test_attributes_without_an_rfc_2253_keyword_are_hex() -> None:
    name = _name((NameOID.EMAIL_ADDRESS, "a@b.c"), (NameOID.COMMON_NAME, "svc"))
    assert rfc2253_name(name) == "CN=svc,1.2.840.113549.1.9.1=#1605614062" + "2e63"


def test_multi_valued_rdn_and_dc_uid() -> None:
    name = x509.Name(
        [
            x509.RelativeDistinguishedName([x509.NameAttribute(NameOID.DOMAIN_COMPONENT, "com")]),
            x509.RelativeDistinguishedName(
                [
                    x509.NameAttribute(NameOID.COMMON_NAME, "a"),
                    x509.NameAttribute(NameOID.USER_ID, "u1"),
                ]
            ),
        ]
    )
    text = rfc2253_name(name)
    assert text in ("CN=a+UID=u1,DC=com", "UID=u1+CN=a,DC=com")


@pytest.mark.parametrize(
    "der",
    [
        b"",
        b"\x30",
        b"\x31\x00",
        b"\x30\x05\x31\x03\x30\x01\x06",
        b"\x30\x84\xff\xff\xff\xff",
        b"\x30\x07\x31\x05\x30\x03\x06\x01\x81",  # an OID cut inside an arc (fuzzing)
    ],
)
def test_bad_der_is_refused(der: bytes) -> None:
    with pytest.raises(SecurityError):
        rfc2253_name(der)
