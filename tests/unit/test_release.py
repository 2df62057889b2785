"""One version, set in pyproject.toml: every other place naming it agrees, and hack/release.py
names each one that does not (issue 52)."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "hack"))

import release  # noqa: E402


def test_every_place_names_pyprojects_version() -> None:
    assert release.disagreements() == []
    places = release.version_places()
    assert len(places) >= 4, places  # the chart twice, its image tag, the component
    # every kustomize install takes the tag from the component: no manifest hard-codes one
    assert not [where for where in places if where.endswith(" image")], places


@pytest.fixture()
def copy(tmp_path: Path) -> Path:
    shutil.copy(ROOT / "pyproject.toml", tmp_path / "pyproject.toml")
    shutil.copytree(ROOT / "deploy", tmp_path / "deploy", ignore=shutil.ignore_patterns("templates"))
    return tmp_path


@pytest.mark.parametrize(
    ("path", "old", "new"),
    [
        ("deploy/helm/placement-scheduler/Chart.yaml", 'appVersion: "0.1.0"', 'appVersion: "0.1.1"'),
        ("deploy/helm/placement-scheduler/values.yaml", 'tag: "0.1.0"', 'tag: "0.2.0"'),
        ("deploy/components/image/kustomization.yaml", 'newTag: "0.1.0"', 'newTag: "9"'),
        # a manifest that hard-codes the tag again (the optional ones did, before they took the component)
        (
            "deploy/optional/audit/audit-cronjob.yaml",
            "image: placement-extender\n",
            "image: placement-extender:0.0.9\n",
        ),
    ],
)
def test_a_place_that_disagrees_is_named(copy: Path, path: str, old: str, new: str) -> None:
    file = copy / path
    text = file.read_text()
    assert old in text, (path, old)
    file.write_text(text.replace(old, new, 1))
    [problem] = release.disagreements(copy)
    assert path in problem and new.split(":")[-1].strip().strip('"') in problem, problem


def test_check_only_passes_on_the_repo(capsys) -> None:  # noqa: ANN001
    assert release.main(["--check-only"]) == 0
    assert "every place agrees" in capsys.readouterr().out


def test_the_charts_kube_version_admits_what_the_kustomize_page_suggests_for_an_untested_minor() -> None:
    """docs/install/index.md suggests an untested minor's tag (v1.32.9) to kustomize users; the
    chart must not refuse that minor (issue 52: it said >=1.34)."""
    import re

    import yaml

    text = (ROOT / "docs/install/index.md").read_text()
    suggested = re.search(r"For a minor not in the table.*?newTag: v1\.(\d+)\.", text, re.S)
    assert suggested, "the page's suggestion moved: update this test"
    floor = yaml.safe_load((ROOT / "deploy/helm/placement-scheduler/Chart.yaml").read_text())["kubeVersion"]
    assert int(re.match(r">=1\.(\d+)", floor).group(1)) <= int(suggested.group(1)), floor  # type: ignore[union-attr]
