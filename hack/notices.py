"""THIRD_PARTY_NOTICES: every third-party package the image ships, its version and its licence.

    python notices.py [--root /] [--out FILE]        # in the image: its venv's python, at build time
    python notices.py --closure placement-extender   # here: the runtime dependencies of the package

It runs with the interpreter whose packages it lists (the Dockerfile runs it with the image's
/opt/extender/bin/python, so the file is the image's own truth) and uses the standard library only,
since nothing else is installed there. Two parts:

- Python packages: name, version, licence (the SPDX expression of the package's metadata: its
  License-Expression, else a known short License field, else its licence classifiers), each
  checked against ALLOWED, the one allow-list; a licence not on it, or one that cannot be read,
  fails the run (and so the image build, and tests/unit/test_notices.py).
- Debian packages (--root's var/lib/dpkg/status): name, version and the copyright file Debian
  ships for it (/usr/share/doc/<package>/copyright), which is where Debian states their licences.

hack/release.py copies the image's file into dist/.
"""

from __future__ import annotations

import argparse
import importlib.metadata as metadata
import re
import sys
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

PROJECT = "placement-extender"
# Licences under which a package may be redistributed inside an Apache-2.0 image without changing
# the image's terms: permissive ones (notice kept: this file and the packages' own licence files,
# which stay in their dist-info folders) and MPL-2.0, file-level copyleft that binds only the
# MPL files themselves, which are shipped unmodified (certifi's CA bundle, part of orjson).
# "BSD" is the generic BSD classifier some packages give instead of an SPDX id: every BSD variant
# is permissive.
ALLOWED = frozenset(
    {
        "Apache-2.0",
        "MIT",
        "MIT-0",
        "BSD",
        "BSD-2-Clause",
        "BSD-3-Clause",
        "ISC",
        "PSF-2.0",
        "Python-2.0",
        "MPL-2.0",
        "Unlicense",
        "0BSD",
    }
)
# Package metadata's free-text License field and licence classifiers, as SPDX ids.
SHORT_NAMES = {
    "apache 2.0": "Apache-2.0",
    "apache-2.0": "Apache-2.0",
    "apache software license": "Apache-2.0",
    "apache license 2.0": "Apache-2.0",
    "apache license, version 2.0": "Apache-2.0",
    "mit": "MIT",
    "mit license": "MIT",
    "bsd": "BSD",
    "bsd license": "BSD",
    "bsd-2-clause": "BSD-2-Clause",
    "bsd-3-clause": "BSD-3-Clause",
    "3-clause bsd license": "BSD-3-Clause",
    "new bsd license": "BSD-3-Clause",
    "isc": "ISC",
    "isc license": "ISC",
    "psf-2.0": "PSF-2.0",
    "psf": "PSF-2.0",
    "mpl-2.0": "MPL-2.0",
    "mpl 2.0": "MPL-2.0",
}
CLASSIFIERS = {
    "License :: OSI Approved :: Apache Software License": "Apache-2.0",
    "License :: OSI Approved :: MIT License": "MIT",
    "License :: OSI Approved :: BSD License": "BSD",
    "License :: OSI Approved :: ISC License (ISCL)": "ISC",
    "License :: OSI Approved :: Python Software Foundation License": "PSF-2.0",
    "License :: OSI Approved :: Mozilla Public License 2.0 (MPL 2.0)": "MPL-2.0",
    "License :: OSI Approved :: The Unlicense (Unlicense)": "Unlicense",
}
UNKNOWN = "UNKNOWN"


@dataclass(frozen=True)
class Package:
    name: str
    version: str
    licence: str


@dataclass(frozen=True)
class DebianPackage:
    name: str
    version: str
    architecture: str
    copyright: str  # the path in the image, or "" when Debian ships none for it


def canonical(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def licence_of(meta: metadata.PackageMetadata) -> str:
    """The package's licence as an SPDX expression, or UNKNOWN."""
    expression = (meta.get("License-Expression") or "").strip()
    if expression:
        return expression
    field = (meta.get("License") or "").strip()
    if field.lower() in SHORT_NAMES:
        return SHORT_NAMES[field.lower()]
    found = sorted({CLASSIFIERS[c] for c in meta.get_all("Classifier") or () if c in CLASSIFIERS})
    if found:
        # several licence classifiers mean the package may be taken under any of them
        return found[0] if len(found) == 1 else "(" + " OR ".join(found) + ")"
    return UNKNOWN


def allowed(expression: str, allow: frozenset[str] = ALLOWED) -> bool:
    """Whether an SPDX expression (ids, AND, OR, parentheses, WITH) is satisfiable from `allow`."""
    tokens = re.findall(r"\(|\)|[A-Za-z0-9.+:-]+", expression)
    position = 0

    def peek() -> str | None:
        return tokens[position] if position < len(tokens) else None

    def take() -> str:
        nonlocal position
        position += 1
        return tokens[position - 1]

    def primary() -> bool:
        token = take() if peek() is not None else ""
        if token == "(":
            value = either()
            if peek() != ")":
                raise ValueError(f"unbalanced parentheses in {expression!r}")
            take()
            return value
        if not token or token.upper() in ("AND", "OR", "WITH", ")"):
            raise ValueError(f"not an SPDX expression: {expression!r}")
        if peek() is not None and peek().upper() == "WITH":  # type: ignore[union-attr]
            take()
            take()  # an exception only widens what the licence allows
        return token.removesuffix("+") in allow

    def both() -> bool:
        value = primary()
        while peek() is not None and peek().upper() == "AND":  # type: ignore[union-attr]
            take()
            value = primary() and value
        return value

    def either() -> bool:
        value = both()
        while peek() is not None and peek().upper() == "OR":  # type: ignore[union-attr]
            take()
            value = both() or value
        return value

    try:
        result = either()
    except (ValueError, IndexError):
        return False
    return result and position == len(tokens)


def _package(dist: metadata.Distribution) -> Package:
    return Package(canonical(dist.metadata["Name"]), dist.version, licence_of(dist.metadata))


def environment_packages(paths: Iterable[str] | None = None) -> list[Package]:
    """Every distribution installed on `paths` (default: this interpreter's sys.path), but the
    project itself: what a virtual environment ships."""
    found = {}
    for dist in metadata.distributions(**({"path": list(paths)} if paths is not None else {})):
        package = _package(dist)
        if package.name != PROJECT:
            found.setdefault(package.name, package)
    return sorted(found.values(), key=lambda p: p.name)


def closure(root: str = PROJECT) -> list[Package]:
    """`root`'s runtime dependencies, transitively (no extras), as installed here: the packages
    the image's venv holds besides pip, whatever else this environment has."""
    seen: dict[str, Package] = {}
    todo = [root]
    while todo:
        name = canonical(todo.pop())
        if name in seen:
            continue
        dist = metadata.distribution(name)
        seen[name] = _package(dist)
        for requirement in dist.requires or ():
            spec, _, marker = requirement.partition(";")
            if "extra" in marker:
                continue  # an optional extra's dependency: not installed by `pip install .`
            if marker.strip() and not _marker_holds(marker):
                continue
            todo.append(re.split(r"[\s<>=!~\[(;]", spec.strip(), maxsplit=1)[0])
    seen.pop(canonical(root), None)
    return sorted(seen.values(), key=lambda p: p.name)


def _marker_holds(marker: str) -> bool:
    """An environment marker evaluated for this interpreter (packaging is not installed in the
    image, and the markers runtime dependencies use are python_version and platform ones)."""
    try:
        from packaging.markers import Marker
    except ImportError:  # pragma: no cover - only where packaging is absent
        return True
    return Marker(marker.strip()).evaluate()


def debian_packages(root: Path) -> list[DebianPackage]:
    """The installed packages of the root filesystem's dpkg database, with their copyright files."""
    status = root / "var/lib/dpkg/status"
    packages = []
    for stanza in dpkg_stanzas(status.read_text(encoding="utf-8", errors="replace")):
        if stanza.get("status", "").split()[-1:] != ["installed"]:
            continue
        name = stanza["package"]
        copyright = f"/usr/share/doc/{name}/copyright"
        packages.append(
            DebianPackage(
                name=name,
                version=stanza.get("version", ""),
                architecture=stanza.get("architecture", ""),
                copyright=copyright if (root / copyright.lstrip("/")).exists() else "",
            )
        )
    return sorted(packages, key=lambda p: p.name)


def dpkg_stanzas(text: str) -> Iterator[dict[str, str]]:
    """The stanzas of a dpkg status file (deb822), keys lower-cased, continuation lines dropped."""
    stanza: dict[str, str] = {}
    for line in text.splitlines() + [""]:
        if not line.strip():
            if stanza:
                yield stanza
            stanza = {}
        elif line[0] not in " \t" and ":" in line:
            key, value = line.split(":", 1)
            stanza[key.strip().lower()] = value.strip()


def render(python: list[Package], debian: list[DebianPackage]) -> str:
    lines = [
        "THIRD_PARTY_NOTICES for placement-extender",
        "",
        "placement-extender is licensed under the Apache License, Version 2.0 (LICENSE, beside this",
        "file). Its image also holds the software below, each under its own licence.",
        "",
        "Python packages (/opt/extender; each one's licence text is in its *.dist-info folder)",
        "",
        f"{'package':<28} {'version':<16} licence",
    ]
    lines += [f"{p.name:<28} {p.version:<16} {p.licence}" for p in python]
    if debian:
        lines += [
            "",
            "Debian packages (their licences are stated in the copyright file named for each)",
            "",
            f"{'package':<32} {'version':<28} copyright",
        ]
        lines += [f"{p.name:<32} {p.version:<28} {p.copyright or '(none shipped)'}" for p in debian]
    return "\n".join(lines) + "\n"


def refused(packages: Iterable[Package]) -> list[Package]:
    return [p for p in packages if not allowed(p.licence)]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--root", default="/", help="the root filesystem whose dpkg database to list")
    parser.add_argument("--closure", metavar="PACKAGE", help="list PACKAGE's runtime dependencies instead")
    parser.add_argument("--out", help="write the notices here (default: stdout)")
    args = parser.parse_args(argv)
    python = closure(args.closure) if args.closure else environment_packages()
    bad = refused(python)
    if bad:
        for package in bad:
            print(
                f"notices: {package.name} {package.version} is licensed {package.licence}, not on the "
                "allow-list (hack/notices.py ALLOWED)",
                file=sys.stderr,
            )
        return 1
    status = Path(args.root) / "var/lib/dpkg/status"
    debian = debian_packages(Path(args.root)) if not args.closure and status.exists() else []
    text = render(python, debian)
    if args.out:
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        Path(args.out).write_text(text)
    else:
        sys.stdout.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
