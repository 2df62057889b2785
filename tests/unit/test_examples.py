"""Every shipped example policy (config/examples/, published as docs/reference/examples.md) is
one complete manifest, a PlacementPolicy or a workload carrying its policy inline, that `check`
accepts."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from extender.api.policy import INLINE_POLICY_ANNOTATION, parse_annotation
from extender.cli.commands import main

EXAMPLES = sorted((Path(__file__).resolve().parents[2] / "config" / "examples").glob("*.yaml"))


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.stem)
def test_each_example_is_a_policy_check_accepts(path: Path, capsys) -> None:  # noqa: ANN001
    docs = [d for d in yaml.safe_load_all(path.read_text()) if d]
    assert len(docs) == 1 and docs[0]["kind"] in ("PlacementPolicy", "StatefulSet", "Deployment"), path
    if docs[0]["kind"] == "PlacementPolicy":
        assert main(["check", str(path)]) == 0, capsys.readouterr()
    else:
        annotations = docs[0]["spec"]["template"]["metadata"]["annotations"]
        parse_annotation(annotations[INLINE_POLICY_ANNOTATION], str(path))  # raises on an invalid policy


def test_there_are_examples() -> None:
    assert len(EXAMPLES) >= 4
