"""The base root filesystem for FROM: a Debian bookworm made with debootstrap, cached.

    path = debian_rootfs(cache_root, log)   # built once per (release, variant, package list), then reused

The rootfs is built in a temporary directory beside its final place and renamed into it, under
an flock, so concurrent builds wait for one debootstrap and never see a half-made tree. The mirror
is the machine's own: the first enabled `deb` source for the release in /etc/apt/sources.list or
/etc/apt/sources.list.d/ (one-line or deb822 format).
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import shutil
import subprocess
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

RELEASE = "bookworm"
VARIANT = "minbase"
# Nothing beyond minbase (Priority: required, and apt): what Debian's own debian:12-slim image holds,
# which the Dockerfile's FROM names; the Dockerfile installs python3 itself, from Debian's archive,
# wherever it is built.
PACKAGES: tuple[str, ...] = ()
# The image's apt sources: the machine's own for this release, its updates and security suites,
# as debian:12-slim has them for the official archive (debootstrap writes the release alone).
SOURCES_FILE = "etc/apt/sources.list.d/debian.sources"
SOURCES = Path("/etc/apt")
DONE = "var/lib/dpkg/status"  # present once debootstrap has finished and the tree was renamed


class RootfsError(RuntimeError):
    pass


def cache_root() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "placement-extender"


def rootfs_key(release: str = RELEASE, variant: str = VARIANT, packages: tuple[str, ...] = PACKAGES) -> str:
    text = json.dumps({"release": release, "variant": variant, "packages": sorted(packages)}, sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


@contextmanager
def locked(path: Path) -> Iterator[None]:
    """An exclusive flock on path (created if missing), held for the block: a concurrent run waits."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def mirror_from_sources(release: str, texts: list[tuple[str, str]]) -> str | None:
    """The URI of the first enabled binary (`deb`) source carrying `release` with component main.
    texts: (file name, content) pairs; names ending .sources are deb822, the others one-line."""
    for name, text in texts:
        if name.endswith(".sources"):
            for stanza in _deb822_stanzas(text):
                if stanza.get("enabled", "yes").lower() == "no":
                    continue
                if "deb" not in stanza.get("types", "").split():
                    continue
                if release in stanza.get("suites", "").split() and "main" in stanza.get("components", "").split():
                    uris = stanza.get("uris", "").split()
                    if uris:
                        return uris[0]
        else:
            for line in text.splitlines():
                words = line.split("#", 1)[0].split()
                if not words or words[0] != "deb":
                    continue
                words = words[1:]
                if words and words[0].startswith("["):  # options: [arch=amd64 signed-by=...]
                    while words and not words[0].endswith("]"):
                        words = words[1:]
                    words = words[1:]
                if len(words) >= 3 and words[1] == release and "main" in words[2:]:
                    return words[0]
    return None


def _deb822_stanzas(text: str) -> Iterator[dict[str, str]]:
    stanza: dict[str, str] = {}
    key = None
    for line in text.splitlines() + [""]:
        if line.startswith("#"):
            continue
        if not line.strip():
            if stanza:
                yield stanza
            stanza, key = {}, None
        elif line[0] in " \t" and key:
            stanza[key] += " " + line.strip()
        elif ":" in line:
            key, value = line.split(":", 1)
            key = key.strip().lower()
            stanza[key] = value.strip()


def machine_mirror(release: str = RELEASE, sources: Path = SOURCES) -> str:
    files = [sources / "sources.list"] + sorted((sources / "sources.list.d").glob("*.list"))
    files += sorted((sources / "sources.list.d").glob("*.sources"))
    texts = [(f.name, f.read_text()) for f in files if f.is_file()]
    mirror = mirror_from_sources(release, texts)
    if not mirror:
        raise RootfsError(
            f"no enabled 'deb' source for {release} (main) in {sources}/sources.list(.d): cannot debootstrap"
        )
    return mirror


def sources_for(release: str, texts: list[tuple[str, str]]) -> list[dict[str, str]]:
    """The enabled binary sources of `release` and its suites (release-updates, release-security),
    as deb822 stanzas (types, uris, suites, components, signed-by), from one-line or deb822 texts."""
    found: list[dict[str, str]] = []
    for name, text in texts:
        if name.endswith(".sources"):
            for stanza in _deb822_stanzas(text):
                if stanza.get("enabled", "yes").lower() == "no" or "deb" not in stanza.get("types", "").split():
                    continue
                suites = [s for s in stanza.get("suites", "").split() if s.split("-")[0] == release]
                if suites and stanza.get("uris"):
                    entry = {"types": "deb", "uris": stanza["uris"], "suites": " ".join(suites)}
                    entry["components"] = stanza.get("components", "main")
                    if stanza.get("signed-by"):
                        entry["signed-by"] = stanza["signed-by"]
                    found.append(entry)
        else:
            for line in text.splitlines():
                words = line.split("#", 1)[0].split()
                if not words or words[0] != "deb":
                    continue
                options = ""
                words = words[1:]
                if words and words[0].startswith("["):
                    while words and not words[0].endswith("]"):
                        options += " " + words.pop(0)
                    options += " " + words.pop(0) if words else ""
                if len(words) >= 3 and words[1].split("-")[0] == release:
                    entry = {"types": "deb", "uris": words[0], "suites": words[1], "components": " ".join(words[2:])}
                    signed = [o.split("=", 1)[1] for o in options.strip(" []").split() if o.startswith("signed-by=")]
                    if signed:
                        entry["signed-by"] = signed[0]
                    found.append(entry)
    return found


def machine_sources(release: str = RELEASE, sources: Path = SOURCES) -> list[dict[str, str]]:
    files = [sources / "sources.list"] + sorted((sources / "sources.list.d").glob("*.list"))
    files += sorted((sources / "sources.list.d").glob("*.sources"))
    return sources_for(release, [(f.name, f.read_text()) for f in files if f.is_file()])


def _apt_sources(rootfs: Path, stanzas: list[dict[str, str]]) -> None:
    """The rootfs's apt sources: these stanzas in one deb822 file, in place of debootstrap's
    sources.list (which names the release alone, without its updates and security suites)."""
    if not stanzas:
        return  # debootstrap's own line stays: the release is still reachable
    text = "\n".join(
        "".join(f"{key.title().replace('Uris', 'URIs')}: {value}\n" for key, value in stanza.items())
        for stanza in stanzas
    )
    (rootfs / "etc/apt/sources.list").unlink(missing_ok=True)
    target = rootfs / SOURCES_FILE
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(text)


def mounts_under(path: Path) -> list[str]:
    """Mount points at or below path (from /proc/self/mountinfo): a tree with any must not be deleted."""
    prefix = str(path.resolve()).rstrip("/") + "/"
    found = []
    with open("/proc/self/mountinfo") as info:
        for line in info:
            point = line.split()[4].replace("\\040", " ")
            if (point + "/").startswith(prefix):
                found.append(point)
    return found


def remove_tree(path: Path) -> None:
    """rm -rf, refusing if anything is still mounted inside (it would delete the host's /dev or /sys)."""
    if not path.exists():
        return
    left = mounts_under(path)
    if left:
        raise RootfsError(f"refusing to delete {path}: still mounted inside it: {left}")
    shutil.rmtree(path)


def ensure_debootstrap(log: Callable[[str], None]) -> str:
    found = shutil.which("debootstrap") or ("/usr/sbin/debootstrap" if Path("/usr/sbin/debootstrap").exists() else None)
    if found:
        return found
    if not shutil.which("apt-get"):
        raise RootfsError("debootstrap is not installed and there is no apt-get to install it")
    log("debootstrap missing: apt-get install -y debootstrap")
    env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
    run = subprocess.run(["apt-get", "install", "-y", "debootstrap"], env=env, capture_output=True, text=True)
    if run.returncode != 0:
        update = subprocess.run(["apt-get", "update"], env=env, capture_output=True, text=True)
        run = subprocess.run(["apt-get", "install", "-y", "debootstrap"], env=env, capture_output=True, text=True)
        if run.returncode != 0:
            raise RootfsError("apt-get install -y debootstrap failed:\n" + (update.stderr + run.stderr)[-2000:])
    return shutil.which("debootstrap") or "/usr/sbin/debootstrap"


def debian_rootfs(root: Path, log: Callable[[str], None]) -> Path:
    """The cached Debian rootfs (built now if missing). Needs root (debootstrap chroots and mounts)."""
    key = rootfs_key()
    final = root / f"rootfs-{key}"
    if (final / DONE).exists():
        log(f"base rootfs: cached {final}")
        return final
    with locked(root / f"rootfs-{key}.lock"):
        if (final / DONE).exists():  # another run made it while we waited
            log(f"base rootfs: made by a concurrent run, {final}")
            return final
        if os.geteuid() != 0:
            raise RootfsError("making the Debian rootfs needs root (debootstrap)")
        debootstrap = ensure_debootstrap(log)
        mirror = machine_mirror()
        for stale in root.glob(f"rootfs-{key}.tmp-*"):  # a killed run's; we hold the lock, so nobody's now
            remove_tree(stale)
        tmp = root / f"rootfs-{key}.tmp-{os.getpid()}"
        logfile = root / f"rootfs-{key}.debootstrap.log"
        include = ["--include=" + ",".join(PACKAGES)] if PACKAGES else []
        argv = [debootstrap, f"--variant={VARIANT}", *include, RELEASE, str(tmp), mirror]
        log(f"base rootfs: {' '.join(argv)} (log: {logfile})")
        started = time.monotonic()
        try:
            with open(logfile, "w") as out:
                run = subprocess.run(argv, stdout=out, stderr=subprocess.STDOUT)
            if run.returncode != 0:
                tail = logfile.read_text(errors="replace")[-3000:]
                raise RootfsError(f"debootstrap failed (exit {run.returncode}); end of {logfile}:\n{tail}")
            left = mounts_under(tmp)
            if left:
                raise RootfsError(f"debootstrap left mounts behind: {left}")
            _scrub(tmp)
            _apt_sources(tmp, machine_sources())
            os.rename(tmp, final)
        finally:
            if tmp.exists() and not mounts_under(tmp):
                shutil.rmtree(tmp)
        log(f"base rootfs: made in {time.monotonic() - started:.1f}s: {final}")
        return final


def _scrub(rootfs: Path) -> None:
    """What debootstrap leaves that belongs to the build host or to a running system, not to an
    image: the host's resolv.conf and hostname, device nodes (the runtime provides /dev), apt's
    package caches."""
    for name in ("etc/resolv.conf", "etc/hostname"):
        target = rootfs / name
        if target.is_symlink() or target.exists():
            target.unlink()
    for folder in ("dev", "var/cache/apt/archives", "var/lib/apt/lists"):
        path = rootfs / folder
        if not path.is_dir():
            continue
        for child in path.iterdir():
            if child.is_dir() and not child.is_symlink():
                if child.name == "partial":
                    continue
                shutil.rmtree(child)
            else:
                child.unlink()
    for cache in (rootfs / "var/cache/apt").glob("*.bin"):
        cache.unlink()
