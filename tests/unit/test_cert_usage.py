"""A client certificate must carry extendedKeyUsage clientAuth (extender/server/cert_usage.py):
real certificates made by openssl in a table, and the DER reader as a property over generated
certificates and over any bytes."""

from __future__ import annotations

import ssl
import subprocess
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from extender.server.cert_usage import ANY_USAGE, CLIENT_AUTH, EXTENDED_KEY_USAGE, allows_client_auth

SERVER_AUTH = bytes.fromhex("2b06010505070301")
CODE_SIGNING = bytes.fromhex("2b06010505070303")
BASIC_CONSTRAINTS = bytes.fromhex("551d13")
SUBJECT_ALT_NAME = bytes.fromhex("551d11")

# name -> (openssl extension lines, allowed)
CASES = {
    "clientAuth": ("extendedKeyUsage=clientAuth", True),
    "clientAuth and serverAuth": ("extendedKeyUsage=serverAuth,clientAuth", True),
    "anyExtendedKeyUsage": ("extendedKeyUsage=anyExtendedKeyUsage", True),
    "serverAuth only": ("extendedKeyUsage=serverAuth", False),
    "no extendedKeyUsage": ("subjectAltName=DNS:placement-scheduler-client", False),
    "no extensions at all": (None, False),
    "critical clientAuth": ("extendedKeyUsage=critical,clientAuth", True),
}


@pytest.fixture(scope="module")
def certificates(tmp_path_factory) -> dict[str, bytes]:  # noqa: ANN001
    root: Path = tmp_path_factory.mktemp("certs")

    def run(*args: str) -> None:
        subprocess.run(["openssl", *args], cwd=root, check=True, capture_output=True)

    run("ecparam", "-name", "prime256v1", "-genkey", "-noout", "-out", "ca.key")
    run("req", "-x509", "-new", "-key", "ca.key", "-days", "1", "-subj", "/CN=ca", "-out", "ca.crt")
    made = {}
    for i, (name, (extension, _)) in enumerate(CASES.items()):
        run("ecparam", "-name", "prime256v1", "-genkey", "-noout", "-out", f"{i}.key")
        run("req", "-new", "-key", f"{i}.key", "-subj", "/CN=placement-scheduler-client", "-out", f"{i}.csr")
        sign = ["x509", "-req", "-in", f"{i}.csr", "-CA", "ca.crt", "-CAkey", "ca.key", "-days", "1"]
        sign += ["-set_serial", str(i + 1), "-out", f"{i}.crt"]
        if extension is not None:
            (root / f"{i}.ext").write_text(extension + "\n")
            sign += ["-extfile", f"{i}.ext"]
        run(*sign)
        made[name] = ssl.PEM_cert_to_DER_cert((root / f"{i}.crt").read_text())
    return made


@pytest.mark.parametrize("name", CASES)
def test_only_certificates_issued_for_client_auth_are_allowed(certificates, name) -> None:  # noqa: ANN001
    assert allows_client_auth(certificates[name]) is CASES[name][1]


def test_nothing_is_not_a_client_certificate() -> None:
    assert not allows_client_auth(None) and not allows_client_auth(b"")


# -- a DER encoder, for generated certificates ---------------------------------------------------


def _der(tag: int, body: bytes) -> bytes:
    if len(body) < 0x80:
        return bytes([tag, len(body)]) + body
    size = (len(body).bit_length() + 7) // 8
    return bytes([tag, 0x80 | size]) + len(body).to_bytes(size, "big") + body


def _oid(body: bytes) -> bytes:
    return _der(0x06, body)


def _extension(oid: bytes, value: bytes, critical: bool) -> bytes:
    return _der(0x30, _oid(oid) + (_der(0x01, b"\xff") if critical else b"") + _der(0x04, value))


def _certificate(extensions: list[bytes] | None, filler: bytes) -> bytes:
    """A certificate's shape: tbsCertificate (version, serial, filler fields, [3] extensions),
    the signature algorithm and the signature."""
    tbs = _der(0xA0, _der(0x02, b"\x02")) + _der(0x02, b"\x01") + _der(0x30, filler)
    if extensions is not None:
        tbs += _der(0xA3, _der(0x30, b"".join(extensions)))
    return _der(0x30, _der(0x30, tbs) + _der(0x30, _oid(b"\x2a\x86\x48")) + _der(0x03, b"\x00" + filler))


USAGES = st.lists(st.sampled_from([CLIENT_AUTH, SERVER_AUTH, CODE_SIGNING, ANY_USAGE]), max_size=4)
OTHER_EXTENSIONS = st.lists(
    st.tuples(st.sampled_from([BASIC_CONSTRAINTS, SUBJECT_ALT_NAME]), st.binary(max_size=200), st.booleans()),
    max_size=3,
)


@settings(max_examples=300)
@given(
    usages=st.none() | USAGES,
    others=OTHER_EXTENSIONS,
    critical=st.booleans(),
    filler=st.binary(max_size=400),
    no_extensions=st.booleans(),
)
def test_a_generated_certificate_is_allowed_exactly_when_its_usages_allow_client_auth(
    usages, others, critical, filler, no_extensions
) -> None:  # noqa: ANN001
    extensions = [_extension(oid, value, crit) for oid, value, crit in others]
    if usages is not None:
        eku = _extension(EXTENDED_KEY_USAGE, _der(0x30, b"".join(_oid(u) for u in usages)), critical)
        extensions.insert(len(extensions) // 2, eku)
    certificate = _certificate(None if no_extensions and usages is None else extensions, filler)
    expected = usages is not None and bool({CLIENT_AUTH, ANY_USAGE} & set(usages))
    assert allows_client_auth(certificate) is expected


@settings(max_examples=300)
@given(data=st.binary(max_size=600), cut=st.integers(0, 600))
def test_any_bytes_get_an_answer_and_a_broken_certificate_is_refused(data, cut) -> None:  # noqa: ANN001
    assert allows_client_auth(data) in (True, False)
    good = _certificate([_extension(EXTENDED_KEY_USAGE, _der(0x30, _oid(CLIENT_AUTH)), False)], data[:50])
    assert allows_client_auth(good)
    truncated = good[: min(cut, len(good) - 1)]
    assert not allows_client_auth(truncated)
