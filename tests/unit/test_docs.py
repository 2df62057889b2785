"""The documentation site (docs/, mkdocs.yml) is tested like the code.

The reference pages generated from the code (hack/docs/generate.py: the policy fields, the command
line, the metrics) are committed so the site builds from a clean clone; they must equal what the
generator writes now, so a new flag, field or metric without `make docs` fails here. And the site
must build with `mkdocs build --strict`: a link to a page or an anchor that does not exist, an
absolute link, or a page left out of the nav is an error. MkDocs is a test dependency, so this
runs in every `make test`.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def generate():
    spec = importlib.util.spec_from_file_location("hack_docs_generate", ROOT / "hack" / "docs" / "generate.py")
    module = importlib.util.module_from_spec(spec)
    assert spec.loader is not None
    spec.loader.exec_module(module)
    return module


def test_the_generated_reference_pages_are_what_the_code_gives_now(generate) -> None:
    pages = generate.pages()
    assert {p.name for p in pages} == {"policy.md", "cli.md", "metrics.md", "examples.md"}
    for path, text in pages.items():
        rel = path.relative_to(ROOT)
        assert path.exists(), f"{rel} is missing: run make docs and commit it"
        assert path.read_text() == text, f"{rel} differs from the code: run make docs and commit it"


def test_the_generator_checks_and_writes(generate, tmp_path: Path, monkeypatch, capsys) -> None:
    monkeypatch.setattr(generate, "REFERENCE", tmp_path)
    assert generate.main(["--check"]) == 1  # nothing written yet
    assert "run make docs" in capsys.readouterr().out
    assert generate.main([]) == 0
    assert sorted(p.name for p in tmp_path.iterdir()) == ["cli.md", "examples.md", "metrics.md", "policy.md"]
    assert generate.main(["--check"]) == 0


def test_the_pages_do_not_depend_on_the_environment(generate, monkeypatch) -> None:
    """The parsers' defaults read EXTENDER_* and KUBECONFIG; the page shows them without."""
    before = generate.cli_page()
    monkeypatch.setenv("KUBECONFIG", "/somewhere/kubeconfig")
    monkeypatch.setenv("EXTENDER_THREADS", "7")
    monkeypatch.setenv("EXTENDER_LISTEN", "0.0.0.0:1")
    assert generate.cli_page() == before
    assert os.environ["KUBECONFIG"] == "/somewhere/kubeconfig"  # given back afterwards


def test_every_policy_field_command_flag_exit_code_and_metric_is_documented(generate) -> None:
    from extender.api.policy import PlacementPolicySpec
    from extender.cli import commands, kubectl_plugin
    from extender.cli.exit_codes import EXIT_CODES
    from extender.metrics import Metrics

    policy = generate.policy_page()
    for path in generate._model_defaults(PlacementPolicySpec):
        assert f"| `{path}` |" in policy, path
    cli = generate.cli_page()
    for top in (commands.parser(), kubectl_plugin.parser()):
        for name, _, sub in generate._subcommands(top):
            assert f"### {top.prog} {name}\n" in cli, name
            for action in sub._actions:
                if isinstance(action, argparse._HelpAction):
                    continue
                for flag in action.option_strings:
                    assert f"`{flag}`" in cli, (name, flag)
    for code in EXIT_CODES:
        assert f"\n| {int(code)} |" in cli, code
    metrics = generate.metrics_page()
    for family in Metrics().registry.collect():
        assert family.name in metrics, family.name


def test_the_site_builds_strictly(tmp_path: Path) -> None:
    config = yaml.safe_load((ROOT / "mkdocs.yml").read_text())
    assert config["strict"] is True
    checks = config["validation"]
    assert all(v == "warn" for v in checks["links"].values()) and all(v == "warn" for v in checks["nav"].values())
    run = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "-f", str(ROOT / "mkdocs.yml"), "-d", str(tmp_path)],
        capture_output=True,
        text=True,
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},
        timeout=300,
    )
    assert run.returncode == 0, f"mkdocs build --strict failed (run make docs to see it):\n{run.stderr}{run.stdout}"
    assert (tmp_path / "index.html").exists() and (tmp_path / "reference" / "cli" / "index.html").exists()


def test_the_readmes_links_point_at_files_that_exist() -> None:
    """The README is the front door: its relative links (to docs/ pages, mostly) must work on GitHub."""
    text = (ROOT / "README.md").read_text()
    targets = re.findall(r"\]\(([^)\s]+)\)", text)
    local = [t.split("#")[0] for t in targets if not re.match(r"[a-z]+:", t) and not t.startswith("#")]
    assert any(t.startswith("docs/") for t in local), "the README links into the documentation"
    missing = sorted({t for t in local if t and not (ROOT / t).exists()})
    assert not missing, missing


def test_getting_started_shows_what_the_demo_prints_to_try() -> None:
    """The page's real handover block lists exactly the commands the demo prints (demo.TRY), which
    tests/e2e/test_demo_handover.py runs as printed."""
    from extender.devcluster.demo import TRY

    page = (ROOT / "docs" / "getting-started.md").read_text()
    shown = [line.strip() for line in page.splitlines() if line.startswith("  kubectl")]
    assert shown == list(TRY), shown
