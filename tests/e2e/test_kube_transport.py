"""The extender's one transport to the API server (extender/kube/client.py), against the local
control plane's real kube-apiserver, through kubeconfigs as an operator writes them (connect()):

- tls-server-name: the server reached at 127.0.0.1, its certificate verified for the name the
  kubeconfig gives (and refused for a name the certificate does not hold);
- the CA bundle and the client certificate files rewritten on disk while one KubeHttp runs: the
  next Binding and Event are made as the new certificate's user (its old user's rights removed
  first), and a CA bundle without the cluster's CA is refused on the next call;
- proxies: HTTPS_PROXY through a CONNECT proxy on loopback (it counts its tunnels), NO_PROXY
  naming the server skips it, a loopback server is never proxied from the environment (Go's
  rule), a kubeconfig's proxy-url always is;
- a tokenFile replaced on disk: the next call is made as the new token's ServiceAccount.
"""

from __future__ import annotations

import shutil
import socket
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from extender.devcluster.api import wait_for
from extender.devcluster.cluster import LocalCluster, zoned_nodes
from extender.devcluster.pki import PKI
from extender.kube.client import KubeApiError, KubeHttp, connect

from .workloads import service_account_token

pytestmark = pytest.mark.e2e

CLUSTER_OPTIONS = {"extender": False}  # only the API server is under test
NS = "kube-transport"
NODE = "kt-a-1"
REVIEW = "/apis/authentication.k8s.io/v1/selfsubjectreviews"
# A name that never resolves (RFC 6761): only the proxy, which sends every tunnel to loopback, reaches it.
UNRESOLVABLE = "api.kube-transport.test"


def _kubeconfig(path: Path, cluster: dict[str, Any], user: dict[str, Any]) -> str:
    path.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "clusters": [{"name": "local", "cluster": cluster}],
                "users": [{"name": "user", "user": user}],
                "contexts": [{"name": "local", "context": {"cluster": "local", "user": "user"}}],
                "current-context": "local",
            }
        )
    )
    return str(path)


def _whoami(api: KubeHttp) -> str:
    review = api.call("POST", REVIEW, body={"apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview"})
    return review["status"]["userInfo"]["username"]


def _binding(name: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Binding",
        "metadata": {"name": name, "namespace": NS},
        "target": {"apiVersion": "v1", "kind": "Node", "name": NODE},
    }


def _event(name: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": {"name": f"{name}.kube-transport", "namespace": NS},
        "involvedObject": {"apiVersion": "v1", "kind": "Pod", "name": name, "namespace": NS},
        "reason": "TransportTest",
        "message": "sent by the transport under test",
        "type": "Normal",
        "source": {"component": "kube-transport-test"},
    }


@pytest.fixture(scope="module")
def ready(cluster: LocalCluster) -> LocalCluster:
    cluster.add_nodes(zoned_nodes({"kt-a": 1}, prefix="kt"))
    cluster.namespace(NS)
    assert cluster.admin is not None
    # Who may bind pods and write events here: the certificate users below, one binding each.
    cluster.admin.ensure(
        "/apis/rbac.authorization.k8s.io/v1/clusterroles",
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRole",
            "metadata": {"name": "kube-transport-binder"},
            "rules": [
                {"apiGroups": [""], "resources": ["pods/binding", "events"], "verbs": ["create"]},
                {"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list"]},
            ],
        },
    )
    return cluster


def _pod(cluster: LocalCluster, name: str) -> str:
    """A pod no scheduler takes (its schedulerName is nobody's), for the transport to bind."""
    assert cluster.admin is not None
    cluster.admin.create(
        f"/api/v1/namespaces/{NS}/pods",
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": name},
            "spec": {
                "schedulerName": "kube-transport-nobody",
                "containers": [{"name": "main", "image": "registry.invalid/kube-transport:1"}],
            },
        },
    )
    return name


def _bound_to(cluster: LocalCluster, name: str) -> str | None:
    assert cluster.admin is not None
    return cluster.admin.get(f"/api/v1/namespaces/{NS}/pods/{name}")["spec"].get("nodeName")


def _grant(cluster: LocalCluster, user: str) -> str:
    assert cluster.admin is not None
    name = f"kube-transport-{user}"
    cluster.admin.ensure(
        "/apis/rbac.authorization.k8s.io/v1/clusterrolebindings",
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRoleBinding",
            "metadata": {"name": name},
            "roleRef": {
                "apiGroup": "rbac.authorization.k8s.io",
                "kind": "ClusterRole",
                "name": "kube-transport-binder",
            },
            "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": user}],
        },
    )
    return name


def _may_bind(cluster: LocalCluster, user: str) -> bool:
    assert cluster.admin is not None
    review = cluster.admin.create(
        "/apis/authorization.k8s.io/v1/subjectaccessreviews",
        {
            "apiVersion": "authorization.k8s.io/v1",
            "kind": "SubjectAccessReview",
            "spec": {
                "user": user,
                "resourceAttributes": {"namespace": NS, "verb": "create", "resource": "pods", "subresource": "binding"},
            },
        },
    )
    return bool(review["status"].get("allowed"))


# ------------------------------------------------------------------------------- tls-server-name


def test_tls_server_name_verifies_the_api_servers_certificate_for_that_name(ready, tmp_path) -> None:
    cluster = ready
    pki = cluster.pki
    admin = pki.root / "admin"
    server = cluster.server.replace("localhost", "127.0.0.1")
    assert "127.0.0.1" in server
    user = {"client-certificate": f"{admin}.crt", "client-key": f"{admin}.key"}
    named = {"server": server, "certificate-authority": str(pki.ca_cert), "tls-server-name": "kubernetes.default.svc"}
    api = connect(kubeconfig=_kubeconfig(tmp_path / "named.kubeconfig", named, user))
    assert api.call("GET", "/version", timeout=10)["gitVersion"]
    pod = _pod(cluster, "tsn")
    api.create(f"/api/v1/namespaces/{NS}/pods/{pod}/binding", _binding(pod), timeout=10)
    assert _bound_to(cluster, pod) == NODE

    wrong = dict(named, **{"tls-server-name": "not-in-the-certificate.test"})
    refused = connect(kubeconfig=_kubeconfig(tmp_path / "wrong.kubeconfig", wrong, user))
    with pytest.raises(Exception, match="(?i)certificate|hostname|match"):
        refused.call("GET", "/version", timeout=10)


# ----------------------------------------------------------------------------- files rotated on disk


def test_ca_and_client_certificate_files_rotated_on_disk_are_used_by_the_next_request(ready, tmp_path) -> None:
    cluster = ready
    pki = cluster.pki
    first = pki.client("kt-rot-a", "kube-transport-a")
    second = pki.client("kt-rot-b", "kube-transport-b")
    grant_a = _grant(cluster, "kube-transport-a")
    _grant(cluster, "kube-transport-b")
    ca, cert, key = tmp_path / "ca.crt", tmp_path / "client.crt", tmp_path / "client.key"
    shutil.copy(pki.ca_cert, ca)
    shutil.copy(first.cert, cert)
    shutil.copy(first.key, key)
    config = _kubeconfig(
        tmp_path / "rotating.kubeconfig",
        {"server": cluster.server, "certificate-authority": str(ca)},
        {"client-certificate": str(cert), "client-key": str(key)},
    )
    api = connect(kubeconfig=config)
    assert _whoami(api) == "kube-transport-a"
    pod = _pod(cluster, "rot-a")
    api.create(f"/api/v1/namespaces/{NS}/pods/{pod}/binding", _binding(pod), timeout=10)
    assert _bound_to(cluster, pod) == NODE

    # The rotation: the second user's certificate over the same files, and the first user's
    # rights gone, so a Binding or Event made on the old certificate is refused.
    shutil.copy(second.cert, cert)
    shutil.copy(second.key, key)
    assert cluster.admin is not None
    cluster.admin.delete(f"/apis/rbac.authorization.k8s.io/v1/clusterrolebindings/{grant_a}")
    wait_for("the first user's rights gone", lambda: not _may_bind(cluster, "kube-transport-a"), 30)
    pod = _pod(cluster, "rot-b")
    api.create(f"/api/v1/namespaces/{NS}/pods/{pod}/binding", _binding(pod), timeout=10)
    api.create(f"/api/v1/namespaces/{NS}/events", _event(pod), timeout=10)
    assert _bound_to(cluster, pod) == NODE
    assert _whoami(api) == "kube-transport-b"

    # The CA bundle rewritten without the cluster's CA: the next call does not trust the server;
    # rewritten with it again (beside another CA, as a bundle mid-rotation holds both): it does.
    other_ca = tmp_path / "other"
    other = PKI(other_ca)
    other.create()
    shutil.copy(other.ca_cert, ca)
    with pytest.raises(Exception, match="(?i)certificate"):
        api.call("GET", "/version", timeout=10)
    ca.write_bytes(other.ca_cert.read_bytes() + pki.ca_cert.read_bytes())
    assert _whoami(api) == "kube-transport-b"


# ------------------------------------------------------------------------------------------ proxies


class ConnectProxy:
    """An HTTPS (CONNECT) proxy on loopback that sends every tunnel to 127.0.0.1 at the port asked
    for, whatever the name (so a name that resolves nowhere reaches the local API server through
    it and through nothing else), and records each tunnel's target."""

    def __init__(self) -> None:
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.tunnels: list[str] = []
        self.url = f"http://127.0.0.1:{self.listener.getsockname()[1]}"
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self.listener.accept()
            except OSError:
                return
            threading.Thread(target=self._tunnel, args=(conn,), daemon=True).start()

    def _tunnel(self, conn: socket.socket) -> None:
        head = b""
        while b"\r\n\r\n" not in head:
            data = conn.recv(4096)
            if not data:
                conn.close()
                return
            head += data
        method, target, _ = head.split(b"\r\n", 1)[0].decode("latin-1").split(" ", 2)
        if method != "CONNECT":
            conn.sendall(b"HTTP/1.1 405 Method Not Allowed\r\nContent-Length: 0\r\n\r\n")
            conn.close()
            return
        self.tunnels.append(target)
        upstream = socket.create_connection(("127.0.0.1", int(target.rsplit(":", 1)[1])))
        conn.sendall(b"HTTP/1.1 200 Connection established\r\n\r\n")
        threading.Thread(target=_pump, args=(upstream, conn), daemon=True).start()
        _pump(conn, upstream)

    def close(self) -> None:
        self.listener.close()


def _pump(source: socket.socket, sink: socket.socket) -> None:
    try:
        while data := source.recv(65536):
            sink.sendall(data)
    except OSError:
        pass
    finally:
        for sock in (source, sink):
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass


@pytest.fixture
def proxy(monkeypatch: pytest.MonkeyPatch) -> Iterator[ConnectProxy]:
    for name in ("HTTPS_PROXY", "https_proxy", "HTTP_PROXY", "http_proxy", "NO_PROXY", "no_proxy", "ALL_PROXY"):
        monkeypatch.delenv(name, raising=False)
    server = ConnectProxy()
    yield server
    server.close()


def _admin_user(cluster: LocalCluster) -> dict[str, str]:
    admin = cluster.pki.root / "admin"
    return {"client-certificate": f"{admin}.crt", "client-key": f"{admin}.key"}


def _port(cluster: LocalCluster) -> int:
    return int(cluster.server.rsplit(":", 1)[1])


def test_https_proxy_carries_every_request_unless_no_proxy_names_the_server(
    ready, proxy, monkeypatch, tmp_path
) -> None:
    cluster = ready
    far = {
        "server": f"https://{UNRESOLVABLE}:{_port(cluster)}",
        "certificate-authority": str(cluster.pki.ca_cert),
        "tls-server-name": "kubernetes",
    }
    config = _kubeconfig(tmp_path / "far.kubeconfig", far, _admin_user(cluster))
    monkeypatch.setenv("HTTPS_PROXY", proxy.url)
    api = connect(kubeconfig=config)
    assert api.call("GET", "/version", timeout=10)["gitVersion"]
    pod = _pod(cluster, "proxied")
    api.create(f"/api/v1/namespaces/{NS}/pods/{pod}/binding", _binding(pod), timeout=10)
    assert _bound_to(cluster, pod) == NODE
    assert proxy.tunnels and set(proxy.tunnels) == {f"{UNRESOLVABLE}:{_port(cluster)}"}

    # NO_PROXY naming the server's domain: straight to a name that resolves nowhere, never the proxy.
    seen = len(proxy.tunnels)
    monkeypatch.setenv("NO_PROXY", "other.test, kube-transport.test")
    direct = connect(kubeconfig=config)
    with pytest.raises(Exception, match="(?i)resol|name|address"):
        direct.call("GET", "/version", timeout=10)
    assert len(proxy.tunnels) == seen


def test_a_loopback_server_is_not_proxied_from_the_environment_but_by_proxy_url(
    ready, proxy, monkeypatch, tmp_path
) -> None:
    """client-go: HTTPS_PROXY never applies to localhost or loopback addresses; a kubeconfig's
    proxy-url applies to every server, NO_PROXY or not."""
    cluster = ready
    local = {"server": cluster.server, "certificate-authority": str(cluster.pki.ca_cert)}
    monkeypatch.setenv("HTTPS_PROXY", proxy.url)
    api = connect(kubeconfig=_kubeconfig(tmp_path / "local.kubeconfig", local, _admin_user(cluster)))
    assert api.call("GET", "/version", timeout=10)["gitVersion"]
    assert proxy.tunnels == []

    monkeypatch.setenv("NO_PROXY", "127.0.0.1")
    via = dict(local, **{"proxy-url": proxy.url})
    api = connect(kubeconfig=_kubeconfig(tmp_path / "via.kubeconfig", via, _admin_user(cluster)))
    pod = _pod(cluster, "proxy-url")
    api.create(f"/api/v1/namespaces/{NS}/pods/{pod}/binding", _binding(pod), timeout=10)
    assert _bound_to(cluster, pod) == NODE
    assert api.call("GET", "/version", timeout=10)["gitVersion"]
    assert proxy.tunnels and set(proxy.tunnels) == {f"127.0.0.1:{_port(cluster)}"}


# ----------------------------------------------------------------------------------------- tokens


def test_a_token_file_replaced_on_disk_is_used_by_the_next_call(ready, tmp_path) -> None:
    cluster = ready
    assert cluster.admin is not None
    first = service_account_token(cluster.admin, NS, "kube-transport-first")
    second = service_account_token(cluster.admin, NS, "kube-transport-second")
    token = tmp_path / "token"
    token.write_text(first)
    config = _kubeconfig(
        tmp_path / "token.kubeconfig",
        {"server": cluster.server, "certificate-authority": str(cluster.pki.ca_cert)},
        {"tokenFile": "token"},
    )
    api = connect(kubeconfig=config)
    assert _whoami(api) == f"system:serviceaccount:{NS}:kube-transport-first"
    token.write_text(second)
    assert _whoami(api) == f"system:serviceaccount:{NS}:kube-transport-second"
    token.write_text("not-a-token")
    with pytest.raises(KubeApiError) as err:
        _whoami(api)
    assert err.value.status == 401
