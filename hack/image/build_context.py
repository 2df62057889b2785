"""The build context buildah reads (the folder minus what .dockerignore keeps out), and a digest of
it for the image cache key: an unchanged context, Dockerfile and base is a cached image.

    key_part = digest(context)
"""

from __future__ import annotations

import hashlib
import os
import posixpath
import re
from collections.abc import Iterator
from pathlib import Path


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


def exception_texts(context: Path) -> list[str]:
    """The '!' patterns of .dockerignore, as written (normalized): what may re-include a path."""
    path = context / ".dockerignore"
    lines = [line.strip() for line in path.read_text().splitlines()] if path.is_file() else []
    return [posixpath.normpath(line[1:].strip().lstrip("/")) for line in lines if line.startswith("!")]


def context_files(context: Path) -> Iterator[Path]:
    """Each file, folder and symlink of the context that .dockerignore lets in, sorted. A folder left
    out is not walked unless an exception ('!') pattern could reach inside it."""
    context = context.resolve()
    patterns = ignore_patterns(context)
    exceptions = exception_texts(context)
    for folder, dirs, files in os.walk(context):
        dirs.sort()
        rel_folder = Path(folder).relative_to(context).as_posix()
        keep = []
        for name in sorted(dirs + files):
            rel = name if rel_folder == "." else f"{rel_folder}/{name}"
            ignored = is_ignored(rel, patterns)
            if name in dirs and ignored and not any(e == rel or e.startswith(rel + "/") for e in exceptions):
                continue
            if name in dirs:
                keep.append(name)
            if not ignored:
                yield Path(folder) / name
        dirs[:] = keep


def digest(context: Path) -> str:
    """sha256 over the context: each path, its kind and mode, and the content (or link target)."""
    h = hashlib.sha256()
    context = context.resolve()
    for path in context_files(context):
        st = path.lstat()
        h.update(f"{path.relative_to(context).as_posix()}\0{st.st_mode:o}\0".encode())
        if path.is_symlink():
            h.update(str(path.readlink()).encode())
        elif path.is_file():
            with open(path, "rb") as f:
                h.update(hashlib.file_digest(f, "sha256").digest())
        h.update(b"\n")
    return h.hexdigest()
