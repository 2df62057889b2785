"""The real-node harness (tests/realnode/harness/: it rewrites a host's containerd, CNI and
iptables as root) is not installed with the extender: no module of the wheel is a real node's,
and the control plane that can drive one imports none.

The packages are found as the build finds them: setuptools' own finder, with pyproject.toml's
[tool.setuptools.packages.find] (namespaces on, as setuptools reads a pyproject.toml). The
venv's setuptools is older than the build's (>=77), so the wheel itself is not built here.
"""

from __future__ import annotations

import subprocess
import sys
import tomllib
from pathlib import Path

from setuptools import find_namespace_packages, find_packages

ROOT = Path(__file__).resolve().parents[2]


def wheel_modules() -> list[str]:
    """Every module the wheel would hold, dotted."""
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    found = config["packages"]["find"]
    where = ROOT / config.get("package-dir", {}).get("", ".") / found.get("where", ["."])[0]
    finder = find_namespace_packages if found.get("namespaces", True) else find_packages
    packages = finder(where=str(where), include=found.get("include", ("*",)), exclude=found.get("exclude", ()))
    modules = []
    for package in packages:
        for source in sorted((where / package.replace(".", "/")).glob("*.py")):
            modules.append(f"{package}.{source.stem}")
    return modules


def test_the_wheel_holds_the_extender_and_no_real_node() -> None:
    modules = wheel_modules()
    assert "extender.devcluster.cluster" in modules and "extender.server.app" in modules  # the finder works
    assert [m for m in modules if "realnode" in m] == []


def test_the_control_plane_imports_no_real_node_and_says_what_to_pass() -> None:
    script = (
        "import sys\n"
        "from extender.devcluster.cluster import LocalCluster\n"
        "try:\n"
        "    LocalCluster(real_node=True)\n"
        "except TypeError as err:\n"
        "    print(err)\n"
        "print(sorted(m for m in sys.modules if 'realnode' in m or 'harness' in m))\n"
    )
    out = subprocess.run([sys.executable, "-c", script], cwd=ROOT, capture_output=True, text=True, check=True).stdout
    message, imported = out.strip().splitlines()
    assert "tests/realnode/harness" in message and "REALNODE=1 make test" in message
    assert imported == "[]"
