"""A platform team's own repository consuming the install, as docs/install/index.md ("Install with
kustomize, from your own repository") lays it out, made by the page's own commands: the release
tag's deploy/ and config/ vendored under vendor/placement-extender/ (`git archive` of the tag),
the image's digest read from the team's registry (`skopeo inspect`), and the page's kustomization
in clusters/prod/placement/. What a reader puts in is put in here too, and nothing else: the
checkout, the version, the registry and the digest."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

from extender.devcluster.cluster import REPO

from .installs import DOCS_REGISTRY, DOCS_VERSION

INSTALL_PAGE = REPO / "docs" / "install" / "index.md"
CHECKOUT = "<checkout-of-this-repository>"
PLACEHOLDER_DIGEST = "sha256:" + "0" * 64
FOLDER = Path("clusters") / "prod" / "placement"


def block(marker: str, language: str) -> str:
    """The fenced block of `language` right after the page's `<!-- marker: ... -->`."""
    found = re.search(rf"<!-- {re.escape(marker)}:[^>]*-->\n```{language}\n(.*?)```", INSTALL_PAGE.read_text(), re.S)
    assert found, f"{INSTALL_PAGE} has no `<!-- {marker}: ... -->` {language} block"
    return found.group(1)


def team_repository(root: Path, checkout: Path, version: str, registry: str, env: dict[str, str]) -> Path:
    """The team's repository under `root`, made by the page's commands (vendoring the tag v<version>
    of `checkout`, reading the digest from `registry`) and its kustomization. Returns the
    kustomization's folder, what `kubectl apply -k` takes."""
    commands = block("gitops-vendor", "sh")
    for placeholder, value in ((CHECKOUT, str(checkout)), (DOCS_VERSION, version), (DOCS_REGISTRY, registry)):
        assert placeholder in commands, f"the page's commands no longer name {placeholder}"
        commands = commands.replace(placeholder, value)
    root.mkdir(parents=True, exist_ok=True)
    run = subprocess.run(
        ["bash", "-euo", "pipefail", "-c", commands], cwd=root, env=env, capture_output=True, text=True, timeout=300
    )
    assert run.returncode == 0, f"$ {commands}\n{run.stdout}{run.stderr}"
    digest = run.stdout.strip().splitlines()[-1]  # the page's last command prints it
    assert re.fullmatch(r"sha256:[0-9a-f]{64}", digest), run.stdout
    text = block("gitops-kustomization", "yaml")
    assert DOCS_REGISTRY in text and PLACEHOLDER_DIGEST in text, text
    folder = root / FOLDER
    (folder / "kustomization.yaml").write_text(
        text.replace(DOCS_REGISTRY, registry).replace(PLACEHOLDER_DIGEST, digest)
    )
    return folder
