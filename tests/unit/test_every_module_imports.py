"""Every module of the package imports: a moved module's old import path fails here, in the unit
suite, not in the one e2e scenario that happens to reach it."""

from __future__ import annotations

import importlib
import pkgutil

import pytest

import extender

MODULES = sorted(m.name for m in pkgutil.walk_packages(extender.__path__, "extender.") if m.name != "extender.__main__")


@pytest.mark.parametrize("name", MODULES)
def test_module_imports(name: str) -> None:
    importlib.import_module(name)
