"""Whether a client certificate is meant for client authentication: its extendedKeyUsage.

Why here and not in the TLS handshake: OpenSSL's purpose check accepts a certificate with no
extendedKeyUsage for any purpose, so a certificate issued by the same CA for something else (a
serving certificate without the extension, a signing certificate) passed as a client (such a
certificate was once served 200 on /filter and /bind).

The extender's rule, as docs/security.md states it: a client certificate must carry
extendedKeyUsage with clientAuth (or anyExtendedKeyUsage, which RFC 5280 and Go's verifier,
kube-scheduler's side, read as every usage). Python's ssl gives the certificate only as DER for
this, so the one extension is read here with a bounded DER walk (no new dependency).

Invariant: any bytes give an answer, never an exception; only a well-formed certificate whose
extendedKeyUsage lists clientAuth or anyExtendedKeyUsage is allowed.
"""

from __future__ import annotations

# DER of the object identifiers (tag 06, length, body)
EXTENDED_KEY_USAGE = bytes.fromhex("551d25")  # 2.5.29.37
CLIENT_AUTH = bytes.fromhex("2b06010505070302")  # 1.3.6.1.5.5.7.3.2
ANY_USAGE = bytes.fromhex("551d2500")  # 2.5.29.37.0

SEQUENCE, OID, BOOLEAN, OCTET_STRING, EXTENSIONS = 0x30, 0x06, 0x01, 0x04, 0xA3


class _Malformed(ValueError):
    pass


def _element(data: bytes, at: int, end: int) -> tuple[int, int, int]:
    """The DER element at `at`, within `end`: (tag, where its content starts, where it ends)."""
    if at + 2 > end:
        raise _Malformed("truncated")
    tag, first = data[at], data[at + 1]
    if first < 0x80:
        start, length = at + 2, first
    else:
        size = first & 0x7F
        if not 1 <= size <= 4 or at + 2 + size > end:
            raise _Malformed("bad length")
        start, length = at + 2 + size, int.from_bytes(data[at + 2 : at + 2 + size], "big")
    if start + length > end:
        raise _Malformed("overlong")
    return tag, start, start + length


def _children(data: bytes, start: int, end: int) -> list[tuple[int, int, int]]:
    out, at = [], start
    while at < end:
        element = _element(data, at, end)
        out.append(element)
        at = element[2]
    return out


def extended_key_usages(der: bytes) -> frozenset[bytes] | None:
    """The certificate's extendedKeyUsage OIDs (DER bodies), None if it has none.
    Raises ValueError for bytes that are not a certificate."""
    tag, start, end = _element(der, 0, len(der))
    if tag != SEQUENCE:
        raise _Malformed("not a certificate")
    tag, start, end = _element(der, start, end)  # tbsCertificate
    if tag != SEQUENCE:
        raise _Malformed("not a certificate")
    for tag, field_start, field_end in _children(der, start, end):
        if tag != EXTENSIONS:
            continue
        (seq_tag, seq_start, seq_end), *_ = _children(der, field_start, field_end) or [(0, 0, 0)]
        if seq_tag != SEQUENCE:
            raise _Malformed("bad extensions")
        for ext_tag, ext_start, ext_end in _children(der, seq_start, seq_end):
            parts = _children(der, ext_start, ext_end) if ext_tag == SEQUENCE else []
            if len(parts) < 2 or parts[0][0] != OID or parts[-1][0] != OCTET_STRING:
                raise _Malformed("bad extension")
            if der[parts[0][1] : parts[0][2]] != EXTENDED_KEY_USAGE:
                continue
            value_tag, value_start, value_end = _element(der, parts[-1][1], parts[-1][2])
            if value_tag != SEQUENCE:
                raise _Malformed("bad extendedKeyUsage")
            usages = _children(der, value_start, value_end)
            if any(usage_tag != OID for usage_tag, _, _ in usages):
                raise _Malformed("bad extendedKeyUsage")
            return frozenset(der[s:e] for _, s, e in usages)
    return None


def allows_client_auth(der: bytes | None) -> bool:
    """Whether `der` is a certificate whose extendedKeyUsage allows client authentication."""
    if not der:
        return False
    try:
        usages = extended_key_usages(der)
    except ValueError:
        return False
    return usages is not None and bool(usages & {CLIENT_AUTH, ANY_USAGE})
