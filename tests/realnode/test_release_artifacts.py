"""`make release` (hack/release.py): the image as an OCI archive, the packaged chart and their
checksums, at pyproject.toml's version (issue 52). Here, beside the real node, because the image
the node runs was just built from the Dockerfile: the release takes the same build (cached by its
inputs) and must name it placement-extender:<version>."""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
import tarfile
import tomllib
from pathlib import Path

import pytest
import yaml

from extender.devcluster.cluster import REPO

from .installs import Images

pytestmark = pytest.mark.e2e

REF_NAME = "org.opencontainers.image.ref.name"


def test_release_writes_the_image_the_chart_and_their_checksums(images: Images, tmp_path: Path) -> None:
    version = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["version"]
    out = tmp_path / "dist"
    result = subprocess.run(
        [sys.executable, str(REPO / "hack/release.py"), "--out", str(out)],
        capture_output=True,
        text=True,
        timeout=1800,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    image, chart = out / f"placement-extender-{version}.oci.tar", out / f"placement-scheduler-{version}.tgz"
    sums = dict(reversed(line.split("  ")) for line in (out / "SHA256SUMS").read_text().splitlines())
    assert set(sums) == {image.name, chart.name}
    for path in (image, chart):
        assert hashlib.sha256(path.read_bytes()).hexdigest() == sums[path.name], path
    with tarfile.open(image) as archive:
        index = json.load(archive.extractfile("index.json"))  # type: ignore[arg-type]
    refs = {m.get("annotations", {}).get(REF_NAME) for m in index["manifests"]}
    assert any(ref and ref.endswith(f"placement-extender:{version}") for ref in refs), refs
    with tarfile.open(chart) as packaged:
        meta = yaml.safe_load(packaged.extractfile("placement-scheduler/Chart.yaml"))  # type: ignore[arg-type]
    assert meta["version"] == version and meta["appVersion"] == version
