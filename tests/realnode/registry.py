"""A platform team's own registry, for the real-node installs: `crane registry serve` on loopback
(hack/registry/build.sh builds the pinned crane), the image pushed to it under a name that is not
the default, and the node's containerd told to pull from it over plain HTTP. The installs then
pull the extender's image, as on a cluster (issue 52: before, the image was imported into
containerd under exactly the default name, so nothing was ever pulled and a wrong name passed)."""

from __future__ import annotations

import json
import subprocess
import tarfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import requests

from extender.devcluster.cluster import REPO
from extender.devcluster.processes import free_port

REF_NAME = "org.opencontainers.image.ref.name"


def crane() -> Path:
    out = subprocess.run(["bash", str(REPO / "hack/registry/build.sh")], capture_output=True, text=True, timeout=1800)
    assert out.returncode == 0, out.stderr[-2000:]
    return Path(out.stdout.strip().splitlines()[-1])


@contextmanager
def local_registry(workdir: Path) -> Iterator[str]:
    """A registry on 127.0.0.1 (HOST:PORT yielded), its blobs under `workdir`; stopped after."""
    binary, port = crane(), free_port()
    blobs = workdir / "registry-blobs"
    blobs.mkdir(parents=True, exist_ok=True)
    log = (workdir / "registry.log").open("w")
    proc = subprocess.Popen(
        [str(binary), "registry", "serve", "--address", f"127.0.0.1:{port}", "--disk", str(blobs)],
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                if requests.get(f"http://127.0.0.1:{port}/v2/", timeout=2).status_code == 200:
                    break
            except requests.RequestException:
                pass
            assert proc.poll() is None and time.monotonic() < deadline, (workdir / "registry.log").read_text()
            time.sleep(0.2)
        yield f"127.0.0.1:{port}"
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
        log.close()


def push(archive: Path, ref: str, workdir: Path, tag: str) -> None:
    """Push the OCI archive's image tagged `tag` as `ref` (crane push of its layout, the index cut
    to that one image: the archive names it twice, <version> and dev)."""
    layout = workdir / "layout"
    layout.mkdir(parents=True, exist_ok=True)
    with tarfile.open(archive) as tar:
        tar.extractall(layout, filter="data")
    index = json.loads((layout / "index.json").read_text())
    index["manifests"] = [
        m for m in index["manifests"] if m.get("annotations", {}).get(REF_NAME, "").endswith(f":{tag}")
    ][:1]
    assert index["manifests"], f"{archive} holds no image tagged {tag}"
    (layout / "index.json").write_text(json.dumps(index))
    out = subprocess.run(
        [str(crane()), "push", str(layout), ref, "--insecure"], capture_output=True, text=True, timeout=600
    )
    assert out.returncode == 0, out.stdout + out.stderr
