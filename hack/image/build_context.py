"""The build context: which files a COPY takes (its sources, minus .dockerignore), and a digest of
them for the image cache key.

    files = copy_sources(context, ("extender",), line=13)   # [(source path, path relative to it)]
"""

from __future__ import annotations

import glob
import hashlib
import posixpath
import re
from pathlib import Path

from dockerfile import DockerfileError


def ignore_patterns(context: Path) -> list[tuple[bool, re.Pattern[str]]]:
    """.dockerignore as (is an exception '!', regex) in file order; none when the file is absent."""
    path = context / ".dockerignore"
    if not path.is_file():
        return []
    patterns = []
    for raw in path.read_text().splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        negate = line.startswith("!")
        line = posixpath.normpath(line.lstrip("!").strip().lstrip("/"))
        patterns.append((negate, re.compile(_pattern_regex(line))))
    return patterns


def _pattern_regex(pattern: str) -> str:
    """Go filepath.Match syntax plus docker's `**` (any number of folders)."""
    out, i = [], 0
    while i < len(pattern):
        c = pattern[i]
        if pattern.startswith("**/", i):
            out.append("(?:.*/)?")
            i += 3
            continue
        if pattern.startswith("**", i):
            out.append(".*")
            i += 2
            continue
        if c == "*":
            out.append("[^/]*")
        elif c == "?":
            out.append("[^/]")
        elif c == "[":
            end = pattern.find("]", i + 1)
            if end < 0:
                out.append(re.escape(c))
            else:
                body = pattern[i + 1 : end].replace("\\", "\\\\")
                out.append("[" + ("^" + body[1:] if body.startswith("^") else body) + "]")
                i = end
        elif c == "\\" and i + 1 < len(pattern):
            out.append(re.escape(pattern[i + 1]))
            i += 1
        else:
            out.append(re.escape(c))
        i += 1
    return "".join(out) + r"\Z"


def is_ignored(relpath: str, patterns: list[tuple[bool, re.Pattern[str]]]) -> bool:
    """Docker's rule: the last pattern matching the path, or one of its parent folders, decides."""
    parts = relpath.split("/")
    prefixes = ["/".join(parts[: i + 1]) for i in range(len(parts))]
    ignored = False
    for negate, regex in patterns:
        if any(regex.match(p) for p in prefixes):
            ignored = not negate
    return ignored


def copy_sources(context: Path, sources: tuple[str, ...], line: int) -> list[tuple[Path, Path, str]]:
    """Each file, folder and symlink a COPY takes: (path in the context, the source it came from,
    its path relative to that source ('' for the source itself)), sorted. A source outside the
    context, or matching nothing, is an error naming the line."""
    context = context.resolve()
    patterns = ignore_patterns(context)
    out: list[tuple[Path, Path, str]] = []
    for source in sources:
        clean = posixpath.normpath(source.lstrip("/")) if source.strip("/") else "."
        if clean == ".." or clean.startswith("../"):
            raise DockerfileError(f"COPY source {source!r} is outside the build context", line)
        matches = sorted(glob.glob(glob.escape(clean) if not glob.has_magic(clean) else clean, root_dir=context))
        matches = [m for m in matches if not (m != "." and is_ignored(m, patterns))]
        if not matches:
            raise DockerfileError(f"COPY source {source!r} not found in the build context {context}", line)
        for match in matches:
            top = context / match
            out.append((top, top, ""))
            if top.is_dir() and not top.is_symlink():
                for path in sorted(top.rglob("*")):
                    rel = path.relative_to(context).as_posix()
                    if not is_ignored(rel, patterns):
                        out.append((path, top, path.relative_to(top).as_posix()))
    return out


def digest(entries: list[tuple[Path, Path, str]], context: Path) -> str:
    """sha256 over what the COPYs take: each path, its kind and mode, and the content (or link target)."""
    h = hashlib.sha256()
    context = context.resolve()
    for path, _, _ in entries:
        st = path.lstat()
        h.update(f"{path.relative_to(context).as_posix()}\0{st.st_mode:o}\0".encode())
        if path.is_symlink():
            h.update(str(path.readlink()).encode())
        elif path.is_file():
            with open(path, "rb") as f:
                h.update(hashlib.file_digest(f, "sha256").digest())
        h.update(b"\n")
    return h.hexdigest()
