"""The install page's commands are the ones the real-node installs run (tests/realnode/installs.py):
a command changed on the page without the tests, or in the tests without the page, fails here."""

from __future__ import annotations

import re
from pathlib import Path

from realnode.installs import DOCUMENTED_OVERLAYS, HELM_INSTALL

ROOT = Path(__file__).resolve().parents[2]
PAGES = [ROOT / "docs" / "install" / "index.md", ROOT / "docs" / "install" / "in-scheduler.md", ROOT / "README.md"]


def _overlay(name: str) -> str:
    return "kube-<minor>" if re.fullmatch(r"kube-(1\.\d+|<minor>)", name) else name


def test_the_helm_install_the_real_node_runs_is_the_pages() -> None:
    assert HELM_INSTALL in (ROOT / "docs" / "install" / "index.md").read_text()


def test_every_overlay_the_pages_apply_is_one_the_real_node_installs() -> None:
    applied = {
        _overlay(m)
        for page in PAGES
        # `kubectl apply -k deploy/overlays/<name>/`, or a kustomization's `- .../deploy/overlays/<name>`
        for m in re.findall(r"(?:kubectl apply -k |- \S*/)deploy/overlays/([\w.<>-]+)", page.read_text())
    }
    assert applied, "the pages name no overlay: update this test"
    assert applied <= set(DOCUMENTED_OVERLAYS), applied - set(DOCUMENTED_OVERLAYS)
    assert set(DOCUMENTED_OVERLAYS) <= applied, set(DOCUMENTED_OVERLAYS) - applied


def test_every_helm_install_on_the_pages_creates_its_namespace_or_takes_over() -> None:
    """A first `helm install` into a cluster without placement-system needs --create-namespace
    (tests/realnode/test_chart_on_real_node.py found it failing without)."""
    for page in PAGES:
        for command in re.findall(r"`(helm install [^`]*)`", page.read_text()):
            assert "--create-namespace" in command or "..." in command, (page.name, command)
