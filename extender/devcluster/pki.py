"""Certificates for the local control plane, made with the openssl CLI.

A CA, the apiserver's serving certificate (for 127.0.0.1, localhost and any extra IPs), one client certificate
per identity, and the service-account signing key pair. ECDSA P-256 keys throughout: every e2e module
starts a control plane, and RSA 2048 keys took about 2.5 s of CPU of each start (0.2 s with P-256);
kube-apiserver signs service-account tokens with ES256 from such a key.
"""

from __future__ import annotations

import subprocess
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class ClientCert:
    cert: Path
    key: Path


NEW_KEY = ("-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1")


def _run(*args: str, cwd: Path) -> None:
    subprocess.run(["openssl", *args], cwd=cwd, check=True, capture_output=True)


class PKI:
    def __init__(self, root: Path) -> None:
        self.root = root
        root.mkdir(parents=True, exist_ok=True)
        self.ca_cert = root / "ca.crt"
        self.ca_key = root / "ca.key"
        self.serving_cert = root / "apiserver.crt"
        self.serving_key = root / "apiserver.key"
        self.sa_key = root / "sa.key"
        self.sa_pub = root / "sa.pub"

    def create(self, extra_ips: Iterable[str] = ()) -> None:
        """extra_ips: more addresses the API server is reached at (the real node's bridge and the
        `kubernetes` Service's IP), added to its serving certificate."""
        r = self.root
        ips = "".join(f",IP:{ip}" for ip in extra_ips)
        _run(
            "req",
            "-x509",
            *NEW_KEY,
            "-nodes",
            "-days",
            "30",
            "-keyout",
            "ca.key",
            "-out",
            "ca.crt",
            "-subj",
            "/CN=placement-extender-local-ca",
            cwd=r,
        )
        (r / "serving.ext").write_text(
            f"subjectAltName=IP:127.0.0.1{ips},DNS:localhost,DNS:kubernetes,DNS:kubernetes.default,"
            "DNS:kubernetes.default.svc\n"
            "extendedKeyUsage=serverAuth\n"
        )
        self._sign("apiserver", "/CN=kube-apiserver", "serving.ext")
        _run("ecparam", "-name", "prime256v1", "-genkey", "-noout", "-out", "sa.key", cwd=r)
        _run("ec", "-in", "sa.key", "-pubout", "-out", "sa.pub", cwd=r)

    def _sign(self, name: str, subject: str, extfile: str | None = None) -> None:
        r = self.root
        _run(
            "req",
            *NEW_KEY,
            "-nodes",
            "-keyout",
            f"{name}.key",
            "-out",
            f"{name}.csr",
            "-subj",
            subject,
            cwd=r,
        )
        args = [
            "x509",
            "-req",
            "-in",
            f"{name}.csr",
            "-CA",
            "ca.crt",
            "-CAkey",
            "ca.key",
            "-CAcreateserial",
            "-days",
            "30",
            "-out",
            f"{name}.crt",
        ]
        if extfile:
            args += ["-extfile", extfile]
        _run(*args, cwd=r)

    def server(self, name: str, hosts: Iterable[str]) -> ClientCert:
        """A serving certificate of this CA for `hosts` (DNS names and IP addresses), as a user's
        cert-manager Certificate would make for the extender's Service."""
        hosts = list(hosts)
        sans = ",".join(f"IP:{h}" if h.replace(".", "").isdigit() else f"DNS:{h}" for h in hosts)
        (self.root / f"{name}.ext").write_text(f"subjectAltName={sans}\nextendedKeyUsage=serverAuth\n")
        self._sign(name, f"/CN={hosts[0]}", f"{name}.ext")
        return ClientCert(self.root / f"{name}.crt", self.root / f"{name}.key")

    def client(self, name: str, user: str, group: str | None = None, *, usage: bool = True) -> ClientCert:
        """A client certificate: CN is the user, O the group (system:masters for admin); without
        `usage`, no extendedKeyUsage at all (which OpenSSL's handshake accepts for any purpose)."""
        subject = f"/CN={user}" + (f"/O={group}" if group else "")
        if not usage:
            self._sign(name, subject)
            return ClientCert(self.root / f"{name}.crt", self.root / f"{name}.key")
        (self.root / "client.ext").write_text("extendedKeyUsage=clientAuth\n")
        self._sign(name, subject, "client.ext")
        return ClientCert(self.root / f"{name}.crt", self.root / f"{name}.key")
