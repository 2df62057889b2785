"""The transport to the API server (extender/kube/client.py _Transport): the proxy chosen as
client-go chooses it, tls-server-name, TLS and token files re-read when they change on disk, and
credentials from exec plugins, against local servers on loopback (the API server's own answers
are tests/e2e/test_kube_transport.py's)."""

from __future__ import annotations

import ipaddress
import json
import shutil
import ssl
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import given
from hypothesis import strategies as st
from kubernetes import client

from extender.devcluster.pki import PKI
from extender.kube.client import KubeHttp, bypasses_proxy, connect, proxy_for

BINDING = {"apiVersion": "v1", "kind": "Binding", "metadata": {"name": "p", "namespace": "db"}}
BIND = "/api/v1/namespaces/db/pods/p/binding"

# ------------------------------------------------------------------------------------ proxies

LABEL = st.from_regex(r"[a-z][a-z0-9]{0,8}", fullmatch=True)
NAME = st.lists(LABEL, min_size=2, max_size=4).map(".".join).filter(lambda n: n != "localhost")


def _cfg(monkeypatch: pytest.MonkeyPatch, host: str, env: dict[str, str]) -> client.Configuration:
    for name in ("HTTPS_PROXY", "https_proxy", "HTTP_PROXY", "http_proxy", "NO_PROXY", "no_proxy", "ALL_PROXY"):
        monkeypatch.delenv(name, raising=False)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    cfg = client.Configuration()
    cfg.host = host
    return cfg


@pytest.mark.parametrize(
    ("host", "env", "proxied"),
    [
        ("https://api.example.test:6443", {"HTTPS_PROXY": "http://proxy.test:3128"}, True),
        ("https://api.example.test:6443", {"https_proxy": "http://proxy.test:3128"}, True),
        ("https://api.example.test:6443", {"HTTP_PROXY": "http://proxy.test:3128"}, False),  # not for https
        ("http://api.example.test:8080", {"HTTP_PROXY": "http://proxy.test:3128"}, True),
        ("https://api.example.test:6443", {"HTTPS_PROXY": "http://p.test:1", "NO_PROXY": "example.test"}, False),
        ("https://api.example.test:6443", {"HTTPS_PROXY": "http://p.test:1", "NO_PROXY": ".example.test"}, False),
        ("https://api.example.test:6443", {"HTTPS_PROXY": "http://p.test:1", "NO_PROXY": "other.test"}, True),
        ("https://10.96.0.1:443", {"HTTPS_PROXY": "http://p.test:1", "NO_PROXY": "10.0.0.0/8"}, False),
        ("https://10.96.0.1:443", {"HTTPS_PROXY": "http://p.test:1", "NO_PROXY": "192.168.0.0/16"}, True),
        ("https://api.example.test:6443", {"HTTPS_PROXY": "http://p.test:1", "NO_PROXY": "*"}, False),
        ("https://127.0.0.1:6443", {"HTTPS_PROXY": "http://p.test:1"}, False),  # Go never proxies loopback
        ("https://localhost:6443", {"HTTPS_PROXY": "http://p.test:1"}, False),
        ("https://[::1]:6443", {"HTTPS_PROXY": "http://p.test:1"}, False),
        ("https://api.example.test:6443", {}, False),
    ],
)
def test_the_environments_proxy_is_chosen_as_client_go_chooses_it(monkeypatch, host, env, proxied) -> None:
    cfg = _cfg(monkeypatch, host, env)
    assert (proxy_for(cfg) is not None) is proxied


def test_a_kubeconfig_proxy_url_is_used_whatever_no_proxy_says(monkeypatch) -> None:
    """client-go: a cluster's proxy-url is http.ProxyURL, which neither NO_PROXY nor loopback skips."""
    cfg = _cfg(monkeypatch, "https://127.0.0.1:6443", {"NO_PROXY": "127.0.0.1,*"})
    cfg.proxy = "http://proxy.test:3128"
    assert proxy_for(cfg) == "http://proxy.test:3128"


@given(
    name=NAME,
    port=st.integers(1, 65535),
    others=st.lists(NAME, max_size=4),
    form=st.sampled_from(["name", "dot", "parent", "hostport", "star"]),
    at=st.integers(0, 4),
)
def test_a_host_no_proxy_names_is_never_proxied(name, port, others, form, at) -> None:
    entry = {
        "name": name,
        "dot": "." + name,
        "parent": name.split(".", 1)[1],  # a domain covers its subdomains
        "hostport": f"{name}:{port}",
        "star": "*",
    }[form]
    rules = [o for o in others if o != name]
    rules.insert(min(at, len(rules)), entry)
    assert bypasses_proxy(f"https://{name}:{port}", " , ".join(rules))


@given(name=NAME, others=st.lists(NAME, max_size=4))
def test_a_host_no_proxy_does_not_name_is_proxied(name, others) -> None:
    rules = [o for o in others if o != name and not name.endswith("." + o)]
    assert not bypasses_proxy(f"https://{name}:6443", ",".join(rules))


@given(address=st.integers(0, 2**24 - 1), no_proxy=st.sampled_from(["", "example.test", "10.0.0.0/8"]))
def test_a_loopback_address_is_never_proxied_from_the_environment(address, no_proxy) -> None:
    ip = ipaddress.IPv4Address((127 << 24) + address)
    assert bypasses_proxy(f"https://{ip}:6443", no_proxy)


# ------------------------------------------------------------------ a local API server stand-in


class _Recorder(BaseHTTPRequestHandler):
    """Answers every POST 201 and records who sent it: the Authorization header and, over TLS,
    the client certificate's common name. HTTP/1.0: each connection closes after its answer."""

    seen: list[dict[str, Any]] = []

    def do_POST(self) -> None:  # noqa: N802 (the stdlib's name)
        self.rfile.read(int(self.headers["Content-Length"]))
        peer = self.connection.getpeercert() if isinstance(self.connection, ssl.SSLSocket) else None
        common_name = dict(item[0] for item in peer["subject"])["commonName"] if peer else None
        seen = {"authorization": self.headers.get("Authorization"), "user": common_name}
        type(self).seen.append(seen | {"target": self.path, "host": self.headers.get("Host")})
        self.send_response(201)
        self.send_header("Content-Length", "2")
        self.end_headers()
        self.wfile.write(b"{}")

    def log_message(self, *args: Any) -> None:
        pass


class _Server:
    def __init__(self, context: ssl.SSLContext | None = None) -> None:
        _Recorder.seen = []
        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), _Recorder)
        if context is not None:
            self.httpd.socket = context.wrap_socket(self.httpd.socket, server_side=True)
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()
        scheme = "https" if context is not None else "http"
        self.url = f"{scheme}://127.0.0.1:{self.httpd.server_address[1]}"

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> PKI:
    pki = PKI(tmp_path_factory.mktemp("pki"))
    pki.create()
    return pki


def _serving(pki: PKI, cert: Path, key: Path) -> ssl.SSLContext:
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert, key)
    context.load_verify_locations(pki.ca_cert)
    context.verify_mode = ssl.CERT_REQUIRED
    return context


@pytest.fixture
def named_server(pki: PKI) -> Iterator[_Server]:
    """A server on 127.0.0.1 whose certificate names only api.internal.test."""
    serving = pki.server("named", ["api.internal.test"])
    server = _Server(_serving(pki, serving.cert, serving.key))
    yield server
    server.close()


def _tls_cfg(url: str, ca: Path, cert: Path, key: Path, server_name: str | None) -> client.Configuration:
    cfg = client.Configuration()
    cfg.host = url
    cfg.ssl_ca_cert, cfg.cert_file, cfg.key_file = str(ca), str(cert), str(key)
    cfg.tls_server_name = server_name
    return cfg


def test_tls_server_name_is_the_name_sent_and_verified(pki, named_server) -> None:
    admin = pki.client("tsn-admin", "tsn-admin")
    api = KubeHttp(_tls_cfg(named_server.url, pki.ca_cert, admin.cert, admin.key, "api.internal.test"))
    api.create(BIND, BINDING, timeout=5)
    assert [(s["authorization"], s["user"]) for s in _Recorder.seen] == [(None, "tsn-admin")]
    without = KubeHttp(_tls_cfg(named_server.url, pki.ca_cert, admin.cert, admin.key, None))
    with pytest.raises(Exception, match="(?i)certificate|hostname|match"):
        without.create(BIND, BINDING, timeout=5)  # 127.0.0.1 is not in the certificate


def test_a_client_certificate_rotated_on_disk_is_used_by_the_next_request(pki, tmp_path) -> None:
    serving = pki.server("rot-serving", ["127.0.0.1"])
    server = _Server(_serving(pki, serving.cert, serving.key))
    first, second = pki.client("rot-a", "user-a"), pki.client("rot-b", "user-b")
    cert, key = tmp_path / "client.crt", tmp_path / "client.key"
    shutil.copy(first.cert, cert)
    shutil.copy(first.key, key)
    api = KubeHttp(_tls_cfg(server.url, pki.ca_cert, cert, key, None))
    try:
        api.create(BIND, BINDING, timeout=5)
        shutil.copy(second.cert, cert)  # half-way through a rotation: the key does not match yet
        api.create(BIND, BINDING, timeout=5)
        shutil.copy(second.key, key)
        api.create(BIND, BINDING, timeout=5)
        api.call("POST", BIND, body=BINDING, timeout=5)  # call() takes the same transport
    finally:
        server.close()
    assert [s["user"] for s in _Recorder.seen] == ["user-a", "user-a", "user-b", "user-b"]


def test_a_ca_rotated_on_disk_is_trusted_by_the_next_request(pki, tmp_path) -> None:
    """The server moves to a certificate of a new CA while the client's CA file is rewritten
    with the new CA: the next connection verifies against the file as it is now."""
    other = PKI(tmp_path / "other")
    other.create()
    old, new = pki.server("ca-old", ["127.0.0.1"]), other.server("ca-new", ["127.0.0.1"])
    context = _serving(pki, old.cert, old.key)
    server = _Server(context)
    ca = tmp_path / "ca.crt"
    shutil.copy(pki.ca_cert, ca)
    user = pki.client("ca-user", "ca-user")
    api = KubeHttp(_tls_cfg(server.url, ca, user.cert, user.key, None))
    try:
        api.create(BIND, BINDING, timeout=5)
        context.load_cert_chain(new.cert, new.key)  # new handshakes present the new CA's certificate
        shutil.copy(other.ca_cert, ca)
        api.create(BIND, BINDING, timeout=5)
    finally:
        server.close()
    assert len(_Recorder.seen) == 2


# ------------------------------------------------------------------------ tokens from kubeconfigs


def _kubeconfig(path: Path, server: str, user: dict[str, Any]) -> str:
    path.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "clusters": [{"name": "c", "cluster": {"server": server}}],
                "users": [{"name": "u", "user": user}],
                "contexts": [{"name": "x", "context": {"cluster": "c", "user": "u"}}],
                "current-context": "x",
            }
        )
    )
    return str(path)


def test_a_token_file_replaced_on_disk_is_sent_from_the_next_call(tmp_path) -> None:
    server = _Server()
    token = tmp_path / "token"
    token.write_text("first-token\n")
    api = connect(kubeconfig=_kubeconfig(tmp_path / "kubeconfig", server.url, {"tokenFile": "token"}))
    try:
        api.create(BIND, BINDING, timeout=5)
        token.write_text("second-token\n")
        api.create(BIND, BINDING, timeout=5)  # within CREDENTIALS_REUSE of the first: the file decides
    finally:
        server.close()
    assert [s["authorization"] for s in _Recorder.seen] == ["Bearer first-token", "Bearer second-token"]


def test_an_inline_token_wins_over_a_token_file_as_in_the_client(tmp_path) -> None:
    server = _Server()
    (tmp_path / "token").write_text("from-file")
    user = {"token": "inline", "tokenFile": "token"}
    api = connect(kubeconfig=_kubeconfig(tmp_path / "kubeconfig", server.url, user))
    try:
        api.create(BIND, BINDING, timeout=5)
    finally:
        server.close()
    assert [s["authorization"] for s in _Recorder.seen] == ["Bearer inline"]


def test_an_exec_plugins_token_is_sent(tmp_path) -> None:
    server = _Server()
    plugin = tmp_path / "plugin.py"
    credential = {"apiVersion": "client.authentication.k8s.io/v1", "kind": "ExecCredential"}
    credential["status"] = {"token": "from-exec"}  # type: ignore[assignment]
    plugin.write_text(f"print({json.dumps(json.dumps(credential))})\n")
    user = {
        "exec": {
            "apiVersion": "client.authentication.k8s.io/v1",
            "command": sys.executable,
            "args": [str(plugin)],
            "interactiveMode": "Never",
        }
    }
    api = connect(kubeconfig=_kubeconfig(tmp_path / "kubeconfig", server.url, user))
    try:
        api.create(BIND, BINDING, timeout=5)
    finally:
        server.close()
    assert [s["authorization"] for s in _Recorder.seen] == ["Bearer from-exec"]


def test_an_exec_plugins_client_certificate_is_renewed_once_expired(pki, tmp_path) -> None:
    """The client runs an exec plugin again only for tokens; one that answers with a client
    certificate is run again once its expirationTimestamp passed, and the next request after
    that presents the new certificate."""
    serving = pki.server("exec-serving", ["127.0.0.1"])
    server = _Server(_serving(pki, serving.cert, serving.key))
    certs = {"a": pki.client("exec-a", "exec-user-a"), "b": pki.client("exec-b", "exec-user-b")}
    which = tmp_path / "which"
    which.write_text("a")
    plugin = tmp_path / "plugin.py"
    plugin.write_text(
        "import json, pathlib\n"
        f"certs = {json.dumps({k: [str(c.cert), str(c.key)] for k, c in certs.items()})}\n"
        f"cert, key = certs[pathlib.Path({str(which)!r}).read_text()]\n"
        "print(json.dumps({'apiVersion': 'client.authentication.k8s.io/v1', 'kind': 'ExecCredential',\n"
        "    'status': {'clientCertificateData': pathlib.Path(cert).read_text(),\n"
        "               'clientKeyData': pathlib.Path(key).read_text(),\n"
        "               'expirationTimestamp': '2000-01-01T00:00:00Z'}}))\n"
    )
    user = {
        "exec": {
            "apiVersion": "client.authentication.k8s.io/v1",
            "command": sys.executable,
            "args": [str(plugin)],
            "interactiveMode": "Never",
        }
    }
    cluster = {"server": server.url, "certificate-authority": str(pki.ca_cert)}
    path = tmp_path / "kubeconfig"
    path.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "clusters": [{"name": "c", "cluster": cluster}],
                "users": [{"name": "u", "user": user}],
                "contexts": [{"name": "x", "context": {"cluster": "c", "user": "u"}}],
                "current-context": "x",
            }
        )
    )
    api = connect(kubeconfig=str(path))
    try:
        api.create(BIND, BINDING, timeout=5)
        which.write_text("b")
        api._cached_headers = None  # the credentials are asked again (at most once a second otherwise)
        api.create(BIND, BINDING, timeout=5)
    finally:
        server.close()
    assert [s["user"] for s in _Recorder.seen] == ["exec-user-a", "exec-user-b"]


def test_plain_http_through_a_proxy_names_the_whole_url(monkeypatch) -> None:
    """An http:// API server behind a forwarding proxy (no CONNECT): every request goes to the
    proxy naming the server's whole URL, the Binding's as the calls'. The stand-in answers as
    the proxy would relay; the server's name resolves nowhere, so only the proxy is reached."""
    proxy = _Server()
    cfg = _cfg(monkeypatch, "http://api.kube-transport.test:8080", {})
    cfg.proxy = proxy.url  # a kubeconfig's proxy-url
    api = KubeHttp(cfg)
    try:
        api.create(BIND, BINDING, timeout=5)
        api.call("POST", BIND, body=BINDING, timeout=5)
    finally:
        proxy.close()
    assert [(s["target"], s["host"]) for s in _Recorder.seen] == [
        ("http://api.kube-transport.test:8080" + BIND, "api.kube-transport.test:8080")
    ] * 2
