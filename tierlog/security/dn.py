"""A certificate's subject DN as Java's ``X500Principal.getName()`` writes it (RFC 2253).

Kafka's ``ssl.principal.mapping.rules`` match this exact string, so the text must be
Java's, byte for byte, or an operator's rules would behave differently here:

- RDNs from the most specific (last in the certificate) to the least, joined by ``,``
  with no spaces; the attributes of a multi-valued RDN joined by ``+``.
- Keywords only for RFC 2253's set (CN, C, L, ST, O, OU, STREET, DC, UID); any other
  attribute is its dotted OID with the value as ``#`` + hex of its DER encoding (so an
  e-mail address shows as ``1.2.840.113549.1.9.1=#16...``). A value of a non-string
  ASN.1 type is written in hex as well.
- In string values, ``, = + < > # ; " \\`` are escaped with a backslash, NUL as ``\\00``,
  and leading or trailing spaces (and carriage returns) each with a backslash.
"""

from __future__ import annotations

from typing import Final

from cryptography import x509

from tierlog.security.errors import SecurityError

__all__ = ["rfc2253_name", "subject_dn"]

# RFC 2253's keywords, by dotted OID (Java's AVAKeyword table, RFC 2253-compliant rows).
_KEYWORDS: Final[dict[str, str]] = {
    "2.5.4.3": "CN",
    "2.5.4.6": "C",
    "2.5.4.7": "L",
    "2.5.4.8": "ST",
    "2.5.4.10": "O",
    "2.5.4.11": "OU",
    "2.5.4.9": "STREET",
    "0.9.2342.19200300.100.1.25": "DC",
    "0.9.2342.19200300.100.1.1": "UID",
}

# ASN.1 string types Java writes as text (AVA.isDerString, non-canonical): UTF8String,
# PrintableString, T61String, IA5String, GeneralString, BMPString; tag -> how Java reads
# the bytes (``new String(value.getDataBytes(), UTF_8)``: UTF-8 for all of them).
_STRING_TAGS: Final = frozenset({12, 19, 20, 22, 27, 30})
_ESCAPED: Final = ',=+<>#;"\\'


class _Der:
    """A minimal DER reader over one buffer: enough for a certificate's Name."""

    def __init__(self, data: bytes, start: int = 0, end: int | None = None) -> None:
        self.data = data
        self.pos = start
        self.end = len(data) if end is None else end

    def more(self) -> bool:
        return self.pos < self.end

    def read(self) -> tuple[int, int, int, int]:
        """The next element: (tag, element start, content start, content end)."""
        start = self.pos
        if self.pos + 2 > self.end:
            raise SecurityError("truncated DER in a distinguished name")
        tag = self.data[self.pos]
        first = self.data[self.pos + 1]
        self.pos += 2
        if first < 0x80:
            size = first
        else:
            count = first & 0x7F
            if count == 0 or count > 4 or self.pos + count > self.end:
                raise SecurityError("bad DER length in a distinguished name")
            size = int.from_bytes(self.data[self.pos : self.pos + count], "big")
            self.pos += count
        content = self.pos
        self.pos += size
        if self.pos > self.end:
            raise SecurityError("truncated DER in a distinguished name")
        return tag, start, content, self.pos


def _oid(body: bytes) -> str:
    if not body or body[-1] & 0x80:
        raise SecurityError("empty or truncated OID in a distinguished name")
    arcs: list[int] = []
    value = 0
    for byte in body:
        value = (value << 7) | (byte & 0x7F)
        if not byte & 0x80:
            arcs.append(value)
            value = 0
    first = arcs[0]
    head = [0, first] if first < 40 else [1, first - 40] if first < 80 else [2, first - 80]
    return ".".join(str(arc) for arc in head + arcs[1:])


def _escape(value: str) -> str:
    chars = []
    for ch in value:
        if ch in _ESCAPED:
            chars.append("\\" + ch)
        elif ch == "\0":
            chars.append("\\00")
        else:
            chars.append(ch)
    # Leading and trailing spaces or CRs get a backslash each (counted on the escaped text,
    # as Java does).
    lead = 0
    while lead < len(chars) and chars[lead] in (" ", "\r"):
        lead += 1
    trail = len(chars)
    while trail > lead and chars[trail - 1] in (" ", "\r"):
        trail -= 1
    return "".join("\\" + c if (i < lead or i >= trail) else c for i, c in enumerate(chars))


def _attribute(der: bytes, reader: _Der) -> str:
    tag, _, content, end = reader.read()
    if tag != 0x30:
        raise SecurityError("a DN attribute is not a SEQUENCE")
    inner = _Der(der, content, end)
    oid_tag, _, oid_start, oid_end = inner.read()
    if oid_tag != 0x06:
        raise SecurityError("a DN attribute has no OID")
    dotted = _oid(der[oid_start:oid_end])
    value_tag, value_start, value_content, value_end = inner.read()
    keyword = _KEYWORDS.get(dotted)
    if keyword is None or value_tag not in _STRING_TAGS:
        return f"{keyword or dotted}=#{der[value_start:value_end].hex()}"
    text = der[value_content:value_end].decode("utf-8", errors="replace")
    return f"{keyword}={_escape(text)}"


def rfc2253_name(name: x509.Name | bytes) -> str:
    """``name`` (or its DER) in Java's RFC 2253 form (see the module docstring).

    Raises:
        SecurityError: the DER is not a Name.
    """
    der = name.public_bytes() if isinstance(name, x509.Name) else bytes(name)
    top = _Der(der)
    tag, _, content, end = top.read()
    if tag != 0x30:
        raise SecurityError("a distinguished name is not a SEQUENCE")
    rdns: list[str] = []
    sequence = _Der(der, content, end)
    while sequence.more():
        set_tag, _, set_start, set_end = sequence.read()
        if set_tag != 0x31:
            raise SecurityError("an RDN is not a SET")
        members = _Der(der, set_start, set_end)
        parts = []
        while members.more():
            parts.append(_attribute(der, members))
        rdns.append("+".join(parts))
    return ",".join(reversed(rdns))


def subject_dn(certificate_der: bytes) -> str:
    """The subject DN of a DER certificate (``SSLSocket.getpeercert(binary_form=True)``)."""
    return rfc2253_name(x509.load_der_x509_certificate(certificate_der).subject)
