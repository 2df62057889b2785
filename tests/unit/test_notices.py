"""hack/notices.py: every runtime dependency's licence is on the one allow-list (hack/notices.py
ALLOWED), read from the packages' own metadata, and THIRD_PARTY_NOTICES lists each one; the image
build runs the same check (the Dockerfile), so a dependency whose licence changes fails here first."""

from __future__ import annotations

import email.message
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "hack"))

import notices  # noqa: E402


def _constraints() -> dict[str, str]:
    pins = {}
    for line in (ROOT / "constraints.txt").read_text().splitlines():
        if "==" in line and not line.startswith("#"):
            name, version = line.split("==")
            pins[notices.canonical(name)] = version.strip()
    return pins


def test_every_runtime_dependency_is_under_an_allowed_licence() -> None:
    packages = notices.closure()
    names = {p.name for p in packages}
    # the direct dependencies (pyproject.toml) are among them, at the pinned versions
    for direct in ("flask", "gunicorn", "httptools", "kubernetes", "orjson", "prometheus-client", "pydantic", "pyyaml"):
        assert direct in names, direct
    pins = _constraints()
    assert not [p for p in packages if pins.get(p.name) != p.version], "the venv is not at constraints.txt's pins"
    assert notices.refused(packages) == [], [(p.name, p.licence) for p in notices.refused(packages)]
    assert not [p for p in packages if p.licence == notices.UNKNOWN]


def _meta(**fields: str | list[str]) -> email.message.Message:
    message = email.message.Message()
    for key, value in fields.items():
        for item in value if isinstance(value, list) else [value]:
            message[key.replace("_", "-")] = item
    return message


MIT = "License :: OSI Approved :: MIT License"


@pytest.mark.parametrize(
    ("fields", "licence"),
    [
        ({"License_Expression": "MPL-2.0 AND (Apache-2.0 OR MIT)", "License": "x"}, "MPL-2.0 AND (Apache-2.0 OR MIT)"),
        ({"License": "Apache 2.0", "Classifier": MIT}, "Apache-2.0"),
        ({"License": "a whole licence text\nacross lines", "Classifier": MIT}, "MIT"),
        ({"Classifier": [MIT, "License :: OSI Approved :: Apache Software License"]}, "(Apache-2.0 OR MIT)"),
        ({"Classifier": "License :: OSI Approved :: GNU General Public License v3 (GPLv3)"}, notices.UNKNOWN),
        ({}, notices.UNKNOWN),
    ],
)  # fmt: skip
def test_the_licence_is_read_from_the_metadata(fields: dict, licence: str) -> None:
    assert notices.licence_of(_meta(**fields)) == licence  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("expression", "ok"),
    [
        ("MIT", True),
        ("MPL-2.0 AND (Apache-2.0 OR MIT)", True),
        ("GPL-3.0-only OR MIT", True),  # taken under MIT
        ("MIT AND GPL-3.0-only", False),
        ("LGPL-2.1-or-later", False),
        ("GPL-2.0-only WITH Classpath-exception-2.0", False),
        ("Apache-2.0 WITH LLVM-exception", True),
        (notices.UNKNOWN, False),
        ("(MIT", False),
        ("", False),
    ],
)
def test_the_allow_list_decides_an_expression(expression: str, ok: bool) -> None:
    assert notices.allowed(expression) is ok


def test_a_dependency_under_a_licence_not_allowed_fails_the_run(monkeypatch: pytest.MonkeyPatch, capsys) -> None:
    gpl = notices.Package("somelib", "1.0", "GPL-3.0-only")
    monkeypatch.setattr(notices, "environment_packages", lambda: [notices.Package("ok", "1", "MIT"), gpl])
    assert notices.main([]) == 1
    assert "somelib 1.0 is licensed GPL-3.0-only, not on the allow-list" in capsys.readouterr().err


def test_the_notices_list_python_and_debian_packages(tmp_path: Path) -> None:
    (tmp_path / "var/lib/dpkg").mkdir(parents=True)
    (tmp_path / "usr/share/doc/python3").mkdir(parents=True)
    (tmp_path / "usr/share/doc/python3/copyright").write_text("...")
    (tmp_path / "var/lib/dpkg/status").write_text(
        "Package: python3\nStatus: install ok installed\nArchitecture: amd64\nVersion: 3.11.2-1+b1\n"
        "Description: interactive\n high-level language\n\n"
        "Package: gone\nStatus: deinstall ok config-files\nVersion: 1\n\n"
        "Package: tzdata\nStatus: install ok installed\nArchitecture: all\nVersion: 2024a-0+deb12u1\n"
    )
    debian = notices.debian_packages(tmp_path)
    assert [(p.name, p.version, p.copyright) for p in debian] == [
        ("python3", "3.11.2-1+b1", "/usr/share/doc/python3/copyright"),
        ("tzdata", "2024a-0+deb12u1", ""),
    ]
    text = notices.render(notices.closure(), debian)
    assert "Apache License, Version 2.0" in text
    assert any(line.split()[:2] == ["kubernetes", _constraints()["kubernetes"]] for line in text.splitlines())
    assert "/usr/share/doc/python3/copyright" in text and "(none shipped)" in text


def test_the_image_build_runs_the_check() -> None:
    """The Dockerfile writes the notices with the image's own python, from what it installed: the
    allow-list lives in hack/notices.py alone."""
    text = (ROOT / "Dockerfile").read_text()
    assert (
        "/opt/extender/bin/python hack/notices.py --root / --out /usr/share/doc/placement-extender/THIRD_PARTY_NOTICES"
        in text
    )
    assert "COPY hack/notices.py" in text
