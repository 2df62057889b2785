"""A platform team's own registry, for the real-node installs and the release: the distribution
registry (Debian's docker-registry, hack/realnode/install.sh; never its package service) on
127.0.0.1, serving TLS with a certificate of a CA of the test's own, as a team's registry serves
with its company CA. Clients trust that CA the way a team's machines do, by a CA bundle (the
system's CAs and the test's) named by SSL_CERT_FILE in their environment, which Go programs
(skopeo, helm) and Python's requests read; the node's containerd trusts it for that host
alone (RealNode.trust_registry with the CA). The installs then pull the extender's image from it,
as on a cluster."""

from __future__ import annotations

import os
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import requests
import yaml

from extender.devcluster.pki import PKI
from extender.devcluster.processes import free_port

REF_NAME = "org.opencontainers.image.ref.name"
REGISTRY_BINARY = "/usr/bin/docker-registry"
# Where Debian (ca-certificates) keeps the system's CAs as one bundle.
SYSTEM_BUNDLE = Path("/etc/ssl/certs/ca-certificates.crt")


@dataclass(frozen=True)
class Registry:
    host: str  # 127.0.0.1:PORT
    ca: Path  # the test CA's certificate, which signed the registry's
    bundle: Path  # the system's CAs and the test CA, one PEM file

    @property
    def env(self) -> dict[str, str]:
        """The environment of a client of this registry (skopeo, helm, requests)."""
        return dict(os.environ, SSL_CERT_FILE=str(self.bundle), REQUESTS_CA_BUNDLE=str(self.bundle))


def ca_bundle(ca: Path, out: Path) -> Path:
    """The CAs a client trusts: the machine's (its SSL_CERT_FILE when set, else the system's) and `ca`."""
    system = Path(os.environ.get("SSL_CERT_FILE") or SYSTEM_BUNDLE)
    out.write_text((system.read_text() if system.is_file() else "") + "\n" + ca.read_text())
    return out


@contextmanager
def local_registry(workdir: Path) -> Iterator[Registry]:
    """The registry on 127.0.0.1 (a free port), its storage and config under `workdir`; stopped after."""
    assert Path(REGISTRY_BINARY).exists(), "docker-registry is not installed: sudo hack/realnode/install.sh"
    pki = PKI(workdir / "pki")
    pki.create()
    serving = pki.server("registry", ["127.0.0.1"])
    port = free_port()
    config = {
        "version": 0.1,
        "log": {"level": "info", "accesslog": {"disabled": True}},
        "storage": {"filesystem": {"rootdirectory": str(workdir / "storage")}, "delete": {"enabled": False}},
        "http": {
            "addr": f"127.0.0.1:{port}",
            "tls": {"certificate": str(serving.cert), "key": str(serving.key)},
            # no debug listener: it would take a port of its own on every interface
        },
    }
    (workdir / "config.yml").write_text(yaml.safe_dump(config))
    registry = Registry(f"127.0.0.1:{port}", pki.ca_cert, ca_bundle(pki.ca_cert, workdir / "ca-bundle.pem"))
    log = (workdir / "registry.log").open("w")
    argv = [REGISTRY_BINARY, "serve", str(workdir / "config.yml")]
    proc = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                if requests.get(f"https://{registry.host}/v2/", timeout=2, verify=str(pki.ca_cert)).status_code == 200:
                    break
            except requests.RequestException:
                pass
            assert proc.poll() is None and time.monotonic() < deadline, (workdir / "registry.log").read_text()
            time.sleep(0.2)
        yield registry
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        log.close()


def push(archive: Path, ref: str, registry: Registry) -> None:
    """Copy the OCI archive's one image to `ref` in the registry (skopeo, as the release docs do)."""
    out = subprocess.run(
        ["skopeo", "copy", "--quiet", f"oci-archive:{archive}", f"docker://{ref}"],
        capture_output=True,
        text=True,
        timeout=600,
        env=registry.env,
    )
    assert out.returncode == 0, out.stdout + out.stderr


def manifest_digest(registry: Registry, repository: str, reference: str) -> str:
    """The digest the registry serves for repository:reference (an OCI or Docker manifest)."""
    accept = ",".join(
        (
            "application/vnd.oci.image.manifest.v1+json",
            "application/vnd.oci.image.index.v1+json",
            "application/vnd.docker.distribution.manifest.v2+json",
        )
    )
    url = f"https://{registry.host}/v2/{repository}/manifests/{reference}"
    answer = requests.head(url, headers={"Accept": accept}, timeout=10, verify=str(registry.ca))
    answer.raise_for_status()
    return answer.headers["Docker-Content-Digest"]


def tags(registry: Registry, repository: str) -> list[str]:
    answer = requests.get(f"https://{registry.host}/v2/{repository}/tags/list", timeout=10, verify=str(registry.ca))
    answer.raise_for_status()
    return sorted(answer.json().get("tags") or [])
