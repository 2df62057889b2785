"""Measurement kinds: a workload's `kind` names a module here with `run(workload, *, arms, rounds,
workdir, tree, log) -> {"figures", "arms", "detail"}`, `report(result) -> str`, and optionally
`judge(targets, result) -> [verdicts]` (else the runner judges the flat figures) and
`SUPPORTS_BASE` (the `--base REV` mode)."""

from __future__ import annotations

import importlib
from types import ModuleType


def module(kind: str) -> ModuleType:
    return importlib.import_module(f"benchmarks.kinds.{kind}")
