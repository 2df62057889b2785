"""The image and the manifests that run it agree: the Dockerfile is the one source of
the extender's entry point, user and ports, and every container of deploy/ that runs the image
uses them as they are. A manifest that overrides the entry point, runs a subcommand the CLI does
not have, probes a port it does not listen on, or listens on a port the image does not declare
fails here, before anyone builds an image."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from extender.cli.commands import parser

ROOT = Path(__file__).resolve().parents[2]
IMAGE = "placement-extender"


def _image_config(text: str) -> dict[str, Any]:
    """The image config (Entrypoint, Cmd, User, ExposedPorts, Env) the Dockerfile's instructions set,
    as buildah writes it; the exec (JSON) forms and KEY=VALUE ENVs the repo's Dockerfile uses."""
    env: dict[str, str] = {"PATH": "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"}
    config: dict[str, Any] = {}
    for line in re.sub(r"\\\n\s*", " ", text).splitlines():
        word, _, rest = line.strip().partition(" ")
        word = word.upper()
        if word in ("ENTRYPOINT", "CMD"):
            config[word.title()] = json.loads(rest)
        elif word == "USER":
            config["User"] = rest.strip()
        elif word == "EXPOSE":
            config["ExposedPorts"] = {p if "/" in p else f"{p}/tcp": {} for p in rest.split()}
        elif word == "ENV":
            for key, value in re.findall(r"(\w+)=(\S+)", rest):
                env[key] = re.sub(r"\$\{?(\w+)\}?", lambda m: env.get(m.group(1), ""), value)
    return config | {"Env": [f"{k}={v}" for k, v in env.items()]}


CONFIG = _image_config((ROOT / "Dockerfile").read_text())


def _pod_specs(doc: Any) -> Iterator[dict[str, Any]]:
    """Every pod spec inside a Kubernetes object (Deployment, CronJob, Pod ...)."""
    if isinstance(doc, dict):
        if "containers" in doc and isinstance(doc["containers"], list):
            yield doc
        for value in doc.values():
            yield from _pod_specs(value)
    elif isinstance(doc, list):
        for value in doc:
            yield from _pod_specs(value)


def _extender_containers() -> list[tuple[str, dict[str, Any], dict[str, Any]]]:
    found = []
    for path in sorted((ROOT / "deploy").rglob("*.yaml")):
        if "helm" in path.parts:  # generated from these files (hack/helm/generate.py, checked there)
            continue
        for doc in yaml.safe_load_all(path.read_text()):
            for spec in _pod_specs(doc):
                for container in spec["containers"]:
                    if str(container.get("image", "")).split(":")[0] == IMAGE:
                        found.append((f"{path.relative_to(ROOT)}:{container['name']}", spec, container))
    return found


CONTAINERS = _extender_containers()
IDS = [name for name, _, _ in CONTAINERS]
SUBCOMMANDS = set(next(a for a in parser()._actions if a.dest == "command").choices)  # type: ignore[union-attr]


def _listen_port(container: dict[str, Any], flag: str = "--listen") -> int | None:
    for arg in container.get("args") or ():
        m = re.fullmatch(re.escape(flag) + r"=(?:\S*):(\d+)", arg.split("#")[0].strip())
        if m:
            return int(m.group(1))
    return None


def test_the_manifests_run_the_image_at_all() -> None:
    names = {name.split(":")[0] for name in IDS}
    assert {
        "deploy/base/deployment.yaml",
        "deploy/overlays/tls/extender.yaml",
        "deploy/optional/audit/audit-cronjob.yaml",
        "deploy/optional/scale-down/scale-down.yaml",
    } <= names


@pytest.mark.parametrize("name,spec,container", CONTAINERS, ids=IDS)
def test_the_image_is_named_bare_and_set_by_the_component(name, spec, container) -> None:  # noqa: ANN001
    """Its name and tag are set once, in deploy/components/image: each manifest names it
    bare, and the kustomization beside it lists it and includes that component (an `images:`
    reaches only its own kustomization's objects). deploy/optional's manifests hard-coded
    placement-extender:0.1.0 and had no kustomization: `kubectl apply -f` ran that default
    whatever the platform team had set."""
    assert container["image"] == IMAGE, f"{name} names {container['image']}: set it in deploy/components/image"
    manifest = ROOT / name.split(":")[0]
    kustomization = manifest.parent / "kustomization.yaml"
    assert kustomization.exists(), f"{name}: no kustomization beside it includes deploy/components/image"
    doc = yaml.safe_load(kustomization.read_text())
    assert manifest.name in (doc.get("resources") or ()), f"{kustomization.relative_to(ROOT)} lacks {manifest.name}"
    included = {(kustomization.parent / c).resolve() for c in doc.get("components") or ()}
    assert ROOT / "deploy" / "components" / "image" in included, f"{kustomization.relative_to(ROOT)}: {included}"


@pytest.mark.parametrize("name,spec,container", CONTAINERS, ids=IDS)
def test_the_container_keeps_the_images_entry_point_and_runs_a_real_subcommand(name, spec, container) -> None:  # noqa: ANN001
    assert "command" not in container or container["command"] == CONFIG["Entrypoint"], name
    args = container.get("args") or CONFIG["Cmd"]
    assert args[0] in SUBCOMMANDS, f"{name}: {args[0]!r} is not a subcommand of python -m extender"


@pytest.mark.parametrize("name,spec,container", CONTAINERS, ids=IDS)
def test_the_pod_runs_as_the_images_user(name, spec, container) -> None:  # noqa: ANN001
    user, group = (int(part) for part in CONFIG["User"].split(":"))
    context = {**(spec.get("securityContext") or {}), **(container.get("securityContext") or {})}
    assert context.get("runAsNonRoot") is True, name
    assert context.get("runAsUser", user) == user and context.get("runAsGroup", group) == group, name


@pytest.mark.parametrize("name,spec,container", CONTAINERS, ids=IDS)
def test_listened_declared_and_probed_ports_are_the_images(name, spec, container) -> None:  # noqa: ANN001
    exposed = {int(p.split("/")[0]) for p in CONFIG.get("ExposedPorts", {})}
    listen = _listen_port(container)
    if container.get("args", [CONFIG["Cmd"][0]])[0] != "serve":
        assert listen is None and not container.get("ports"), name
        return
    assert listen in exposed, f"{name} listens on {listen}; the Dockerfile EXPOSEs {sorted(exposed)}"
    # the metrics port (serve --metrics-listen) is declared as `metrics`, the name the monitoring
    # Services and deploy/optional/monitoring/ scrape by
    metrics = _listen_port(container, "--metrics-listen")
    if metrics is not None:
        assert metrics in exposed, f"{name}'s metrics port {metrics}; the Dockerfile EXPOSEs {sorted(exposed)}"
    declared = {p.get("name"): p["containerPort"] for p in container.get("ports") or ()}
    assert set(declared.values()) <= {listen, metrics}, f"{name} declares {declared}, listens on {listen}, {metrics}"
    assert declared.get("metrics") == metrics, f"{name} declares {declared}; its metrics port is {metrics}"
    for probe_name in ("livenessProbe", "readinessProbe", "startupProbe"):
        probe = container.get(probe_name)
        if not probe:
            continue
        if "exec" in probe:
            command = probe["exec"]["command"]
            assert command[0] == CONFIG["Entrypoint"][0], f"{name} {probe_name} runs {command[0]}, not the image's"
            # exec probes ask the health listener where there is one (beside a TLS listener the
            # kubelet cannot pass), else the main listener
            health = _listen_port(container, "--health-listen")
            target = health if health is not None else listen
            urls = [int(m) for part in command for m in re.findall(r"://[^/:]+:(\d+)/", part)]
            assert urls == [target], f"{name} {probe_name} asks {urls}, the extender answers probes on {target}"
            if health is not None:
                assert health in exposed, f"{name}'s health listener {health}; the Dockerfile EXPOSEs {sorted(exposed)}"
            continue
        handler = probe.get("httpGet") or probe.get("tcpSocket") or probe.get("grpc")
        port = handler["port"]
        assert declared.get(port, port) == listen, f"{name} {probe_name} probes {port}, listens on {listen}"


def test_every_install_serves_its_metrics_port() -> None:
    """The sidecar, TLS and in-scheduler installs each run the extender with a metrics port."""
    serving = {name.split(":")[0] for name, _, c in CONTAINERS if (c.get("args") or [""])[0] == "serve"}
    with_metrics = {name.split(":")[0] for name, _, c in CONTAINERS if _listen_port(c, "--metrics-listen")}
    assert serving == with_metrics == {"deploy/base/deployment.yaml", "deploy/overlays/tls/extender.yaml"}


def test_the_entry_points_python_is_on_the_images_path() -> None:
    """The probes' `python` and the ENTRYPOINT's are the virtual environment's, found by PATH."""
    env = dict(item.split("=", 1) for item in CONFIG["Env"])
    assert env["PATH"].split(":")[0] == "/opt/extender/bin"
    assert CONFIG["Entrypoint"] == ["python", "-m", "extender"]
