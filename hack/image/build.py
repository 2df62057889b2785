"""Build the extender image from the Dockerfile without Docker, as an OCI image archive.

    .venv/bin/python hack/image/build.py [--base debian|ROOTFS] [--out DIR] [--load] [--force] [--build-arg K=V]
    .venv/bin/python hack/image/build.py --static-binary PATH --name NAME:TAG [--entrypoint JSON|PATH] [--load]

It interprets the Dockerfile itself (hack/image/dockerfile.py), so the image is what the Dockerfile
describes: FROM is a root filesystem (--base debian: a debootstrapped Debian 12, made once and
cached, hack/image/rootfs.py; or a folder you give), each build works on a fresh copy of it; COPY
takes files from the repo; RUN runs in a chroot with /proc, /sys and /dev mounted and the host's
resolv.conf, CA bundle and pip configuration present for that step only. The result is one gzip'd
layer of the whole tree in an OCI layout tar (hack/image/oci.py) named placement-extender:<version>
and placement-extender:dev, cached under ${XDG_CACHE_HOME:-~/.cache}/placement-extender/images/
by a digest of the Dockerfile, the COPY'd files, constraints.txt, the base and this builder.
--load imports it into containerd's k8s.io namespace (ctr). The archive's path is the last line
on stdout; progress and timings go to stderr.

--static-binary writes a one-layer image holding only that (static) binary at
/usr/local/bin/<basename>, for kube-scheduler or a pause image.

A Dockerfile build needs root (debootstrap, chroot, mount); a cached build and --static-binary do not.
"""

from __future__ import annotations

import argparse
import configparser
import hashlib
import json
import os
import shutil
import signal
import subprocess
import sys
import time
import tomllib
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
sys.path.insert(0, str(HERE))

import build_context  # noqa: E402
import dockerfile as df  # noqa: E402
import oci  # noqa: E402
import rootfs as base_rootfs  # noqa: E402

IMAGE = "placement-extender"
# The host's settings pip needs to reach its index, passed into RUN steps; those naming a file
# have the file copied in for the step (the chroot's own CA bundle lacks the host's extra CAs).
PASS_THROUGH = (
    "PIP_INDEX_URL",
    "PIP_EXTRA_INDEX_URL",
    "PIP_TRUSTED_HOST",
    "PIP_DEFAULT_TIMEOUT",
    "PIP_CERT",
    "PIP_CLIENT_CERT",
    "REQUESTS_CA_BUNDLE",
    "SSL_CERT_FILE",
    "HTTP_PROXY",
    "HTTPS_PROXY",
    "NO_PROXY",
    "http_proxy",
    "https_proxy",
    "no_proxy",
)
FILE_VARS = ("PIP_CERT", "PIP_CLIENT_CERT", "REQUESTS_CA_BUNDLE", "SSL_CERT_FILE")
PIP_CONFIGS = ("/etc/xdg/pip/pip.conf", "/etc/pip.conf", "~/.pip/pip.conf", "~/.config/pip/pip.conf")
BUILD_DIR = "/.image-build"  # in the chroot, for one RUN step: copied CA files and pip.conf

_STARTED = time.monotonic()


class BuildError(RuntimeError):
    pass


def log(message: str) -> None:
    print(f"[{time.monotonic() - _STARTED:7.1f}s] {message}", file=sys.stderr, flush=True)


# --- paths and users inside the root filesystem -------------------------------------------------


def inside(root: Path, path: str, follow_last: bool = True) -> Path:
    """path as the chroot would see it, on the host: symlinks resolved against root, never above it."""
    parts = [p for p in path.split("/") if p not in ("", ".")]
    resolved: list[str] = []
    hops = 0
    while parts:
        part = parts.pop(0)
        if part == "..":
            if resolved:
                resolved.pop()
            continue
        candidate = root.joinpath(*resolved, part)
        if candidate.is_symlink() and (parts or follow_last):
            hops += 1
            if hops > 40:
                raise BuildError(f"too many symlinks resolving {path} in {root}")
            target = os.readlink(candidate)
            if target.startswith("/"):
                resolved = []
            parts = [p for p in target.split("/") if p not in ("", ".")] + parts
            continue
        resolved.append(part)
    return root.joinpath(*resolved)


def _db(root: Path, name: str) -> list[list[str]]:
    path = inside(root, f"/etc/{name}")
    if not path.is_file():
        return []
    return [line.split(":") for line in path.read_text().splitlines() if line and not line.startswith("#")]


def resolve_user(root: Path, spec: str, gid_defaults_to_uid: bool = False) -> tuple[int, int, str]:
    """(uid, gid, home) for a USER or --chown spec, names looked up in the rootfs's /etc/passwd and /etc/group."""
    user, _, group = spec.partition(":")
    passwd = _db(root, "passwd")
    entry = next((e for e in passwd if len(e) >= 6 and (e[2] == user if user.isdigit() else e[0] == user)), None)
    if entry is None and not user.isdigit():
        raise BuildError(f"user {user!r} is not in the image's /etc/passwd")
    uid = int(user) if user.isdigit() else int(entry[2])  # type: ignore[index]
    home = entry[5] if entry else "/"
    gid = uid if gid_defaults_to_uid else (int(entry[3]) if entry else 0)
    if group:
        if group.isdigit():
            gid = int(group)
        else:
            found = next((e for e in _db(root, "group") if len(e) >= 3 and e[0] == group), None)
            if found is None:
                raise BuildError(f"group {group!r} is not in the image's /etc/group")
            gid = int(found[2])
    return uid, gid, home


# --- COPY ----------------------------------------------------------------------------------------


def copy_step(root: Path, ins: df.Copy, entries: list[tuple[Path, Path, str]]) -> int:
    """COPY as docker does it: a folder source's contents go into the destination; files keep their
    mode (or --chmod) and are owned by 0:0 (or --chown). Returns the number of entries copied."""
    dest = ins.dest if ins.dest.startswith("/") else f"{ins.workdir.rstrip('/')}/{ins.dest}"
    tops = [e for e in entries if e[2] == ""]
    into_folder = ins.dest.endswith("/") or ins.dest.endswith("/.") or len(tops) > 1
    if len(tops) > 1 and not (ins.dest.endswith("/") or ins.dest.endswith("/.")):
        raise BuildError(f"Dockerfile line {ins.line}: COPY with several sources needs a destination ending in /")
    uid, gid = (0, 0)
    if ins.chown:
        uid, gid, _ = resolve_user(root, ins.chown, gid_defaults_to_uid=True)
    mode = int(ins.chmod, 8) if ins.chmod else None
    target_dir = inside(root, dest)
    if not into_folder and target_dir.is_dir() and not any(t[0].is_dir() for t in tops):
        into_folder = True
    for path, top, rel in entries:
        if rel == "":
            if top.is_dir():  # its contents go into dest; dest keeps its owner and mode if it exists
                target = inside(root, dest)
                if not target.is_dir():
                    _make_folders(root, target.parent)
                    _place(path, target, uid, gid, mode, follow=True)
                continue
            target = target_dir / path.name if into_folder else inside(root, dest, follow_last=False)
            _make_folders(root, target.parent)
            _place(path, target, uid, gid, mode, follow=True)
        else:
            base = inside(root, dest)
            _place(path, base / rel, uid, gid, mode, follow=False)
    return len(entries)


def _make_folders(root: Path, folder: Path) -> None:
    if not folder.is_relative_to(root):
        raise BuildError(f"{folder} is outside {root}")
    missing = []
    while not folder.exists() and folder != root:
        missing.append(folder)
        folder = folder.parent
    for path in reversed(missing):
        path.mkdir(mode=0o755)
        os.chmod(path, 0o755)


def _place(source: Path, target: Path, uid: int, gid: int, mode: int | None, follow: bool) -> None:
    if source.is_symlink() and not follow:
        if target.is_symlink() or target.is_file():
            target.unlink()
        os.symlink(os.readlink(source), target)
        os.lchown(target, uid, gid)
        return
    st = source.stat()
    if source.is_dir():
        if target.is_symlink() or (target.exists() and not target.is_dir()):
            target.unlink()
        target.mkdir(exist_ok=True)
    else:
        if target.is_symlink() or target.is_file():
            target.unlink()  # never write through a symlink: it could point out of the rootfs
        elif target.is_dir():
            raise BuildError(f"cannot copy the file {source} over the folder {target}")
        shutil.copyfile(source, target, follow_symlinks=True)
        os.utime(target, ns=(st.st_atime_ns, st.st_mtime_ns))
    os.chown(target, uid, gid)
    os.chmod(target, mode if mode is not None else st.st_mode & 0o7777)


# --- RUN -----------------------------------------------------------------------------------------


@contextmanager
def host_mounts(root: Path) -> Iterator[None]:
    """/proc, /sys and /dev mounted in the rootfs for the block; always unmounted after."""
    mounted: list[Path] = []
    try:
        for name, argv in (
            ("proc", ["mount", "-t", "proc", "proc"]),
            ("sys", ["mount", "--bind", "/sys"]),
            ("dev", ["mount", "--bind", "/dev"]),
        ):
            target = root / name
            if target.is_symlink():
                raise BuildError(f"{target} is a symlink: refusing to mount over it")
            target.mkdir(exist_ok=True)
            run = subprocess.run([*argv, str(target)], capture_output=True, text=True)
            if run.returncode != 0:
                raise BuildError(f"{' '.join(argv)} {target}: {run.stderr.strip()}")
            mounted.append(target)
        yield
    finally:
        for target in reversed(mounted):
            if subprocess.run(["umount", str(target)], capture_output=True).returncode != 0:
                subprocess.run(["umount", "-l", str(target)], capture_output=True)
        left = base_rootfs.mounts_under(root)
        if left:
            raise BuildError(f"could not unmount {left}: unmount them by hand before deleting {root}")


def pip_config(build_dir: Path) -> Path | None:
    """The host's pip configuration files merged into build_dir/pip.conf, its cert files copied in."""
    files = [Path(p).expanduser() for p in PIP_CONFIGS]
    if os.environ.get("PIP_CONFIG_FILE"):
        files.append(Path(os.environ["PIP_CONFIG_FILE"]))
    parser = configparser.ConfigParser(interpolation=None, strict=False)
    if not parser.read([f for f in files if f.is_file()]):
        return None
    for section in parser.sections():
        for option in ("cert", "client-cert"):
            value = parser.get(section, option, fallback="")
            if value.startswith("/") and Path(value).is_file():
                copied = build_dir / f"pip-{section}-{option}.pem"
                shutil.copyfile(value, copied)
                parser.set(section, option, f"{BUILD_DIR}/{copied.name}")
    out = build_dir / "pip.conf"
    with open(out, "w") as f:
        parser.write(f)
    return out


@contextmanager
def host_network(root: Path) -> Iterator[dict[str, str]]:
    """For one RUN step: the host's resolv.conf in the rootfs, and the environment that gives pip the
    host's index, proxy and CAs (files copied into BUILD_DIR). All of it removed after."""
    etc = inside(root, "/etc")
    resolv, backup = etc / "resolv.conf", etc / ".resolv.conf.image-build"
    build_dir = root / BUILD_DIR.lstrip("/")
    moved = False
    try:
        if resolv.is_symlink() or resolv.exists():
            os.replace(resolv, backup)
            moved = True
        shutil.copyfile("/etc/resolv.conf", resolv)
        os.chmod(resolv, 0o644)
        base_rootfs.remove_tree(build_dir)
        build_dir.mkdir(mode=0o755)
        extra = {k: os.environ[k] for k in PASS_THROUGH if k in os.environ}
        for var in FILE_VARS:
            if var in extra:
                if Path(extra[var]).is_file():
                    shutil.copyfile(extra[var], build_dir / f"{var.lower()}.pem")
                    extra[var] = f"{BUILD_DIR}/{var.lower()}.pem"
                else:
                    del extra[var]
        if pip_config(build_dir):
            extra["PIP_CONFIG_FILE"] = f"{BUILD_DIR}/pip.conf"
        for path in build_dir.iterdir():
            os.chmod(path, 0o644)  # readable by a RUN step's non-root USER
        yield extra
    finally:
        base_rootfs.remove_tree(build_dir)
        if resolv.is_symlink() or resolv.exists():
            resolv.unlink()
        if moved:
            os.replace(backup, resolv)


def run_step(root: Path, ins: df.Run, env: dict[str, str], workdir: str, user: str | None) -> None:
    uid, gid, home = resolve_user(root, user) if user else (0, 0, "/root")
    run_env = {"HOME": home} | dict(ins.args) | env
    folder = inside(root, workdir)
    _make_folders(root, folder)

    def enter() -> None:  # in the child, before exec
        os.chroot(root)
        os.chdir(workdir)
        if (uid, gid) != (0, 0):
            os.setgroups([])
            os.setgid(gid)
            os.setuid(uid)

    with host_mounts(root), host_network(root) as extra:
        proc = subprocess.run(list(ins.argv), env=run_env | extra, preexec_fn=enter, stdout=sys.stderr)
    if proc.returncode != 0:
        raise BuildError(f"Dockerfile line {ins.line}: RUN exited with {proc.returncode}: {ins.argv[-1]}")


# --- the build -----------------------------------------------------------------------------------


def execute(root: Path, instructions: list[df.Instruction], copies: dict[int, list]) -> None:
    env = dict(df.DEFAULT_ENV)
    workdir, user = "/", None
    for ins in instructions:
        started = time.monotonic()
        if isinstance(ins, df.Env):
            env.update(ins.pairs)
        elif isinstance(ins, df.Workdir):
            workdir = ins.path
            _make_folders(root, inside(root, workdir))
        elif isinstance(ins, df.User):
            user = ins.user
        elif isinstance(ins, df.Copy):
            count = copy_step(root, ins, copies[ins.line])
            log(f"line {ins.line}: COPY {' '.join(ins.sources)} {ins.dest}: {count} entries")
        elif isinstance(ins, df.Run):
            log(f"line {ins.line}: RUN {ins.argv[-1] if ins.shell_form else ins.argv}")
            run_step(root, ins, env, workdir, user)
            log(f"line {ins.line}: RUN done in {time.monotonic() - started:.1f}s")


def project_version(context: Path) -> str:
    with open(context / "pyproject.toml", "rb") as f:
        return tomllib.load(f)["project"]["version"]


def builder_digest() -> str:
    h = hashlib.sha256()
    for path in sorted(HERE.glob("*.py")):
        h.update(path.name.encode() + b"\0" + path.read_bytes())
    return h.hexdigest()


def tree_fingerprint(root: Path) -> str:
    """A cheap digest of a rootfs folder given as --base: each entry's path, mode, size, mtime."""
    h = hashlib.sha256(str(root.resolve()).encode())
    for folder, dirs, files in os.walk(root):
        dirs.sort()
        for name in sorted(dirs + files):
            st = os.lstat(os.path.join(folder, name))
            h.update(f"{os.path.relpath(folder, root)}/{name}\0{st.st_mode}\0{st.st_size}\0{st.st_mtime_ns}\n".encode())
    return h.hexdigest()


def _need_root(what: str) -> None:
    if os.geteuid() != 0:
        raise BuildError(f"{what} needs root (debootstrap, chroot and mount): run it with sudo")


def build_dockerfile(args: argparse.Namespace, cache: Path) -> Path:
    context = Path(args.context).resolve()
    dockerfile_path = Path(args.file) if args.file else context / "Dockerfile"
    text = dockerfile_path.read_text()
    debian = args.base == "debian"
    if not debian and not Path(args.base, "bin").exists():
        raise BuildError(f"--base {args.base}: not 'debian' nor a root filesystem folder (no bin/ in it)")
    build_args = {"BASE": "debian:bookworm" if debian else f"rootfs:{Path(args.base).resolve()}"}
    build_args |= dict(_pair(a) for a in args.build_arg)
    instructions = df.parse(text, build_args)
    copies = {
        i.line: build_context.copy_sources(context, i.sources, i.line) for i in instructions if isinstance(i, df.Copy)
    }
    base_key = "debian-" + base_rootfs.rootfs_key() if debian else "rootfs-" + tree_fingerprint(Path(args.base))
    constraints = context / "constraints.txt"
    key_doc = {
        "builder": builder_digest(),
        "dockerfile": text,
        "build_args": sorted(build_args.items()),
        "base": base_key,
        "copied": build_context.digest([e for entries in copies.values() for e in entries], context),
        "constraints": hashlib.sha256(constraints.read_bytes()).hexdigest() if constraints.exists() else None,
        "architecture": oci.architecture(),
    }
    key = hashlib.sha256(json.dumps(key_doc, sort_keys=True).encode()).hexdigest()[:24]
    version = project_version(REPO)
    archive = cache / "images" / key / f"{IMAGE}-{version}.oci.tar"
    if archive.exists() and not args.force:
        log(f"cached image {key} (the Dockerfile, COPY'd files, constraints and base are unchanged): {archive}")
        return archive
    with base_rootfs.locked(cache / "images" / f"{key}.lock"):
        if archive.exists() and not args.force:
            log(f"made by a concurrent run: {archive}")
            return archive
        _need_root("building from the Dockerfile")
        started = time.monotonic()
        base = base_rootfs.debian_rootfs(cache, log) if debian else Path(args.base).resolve()
        log(f"base ready in {time.monotonic() - started:.1f}s")
        for stale in (cache / "work").glob(f"build-{key[:12]}-*"):  # a killed run's; we hold the lock
            base_rootfs.remove_tree(stale)
        work = cache / "work" / f"build-{key[:12]}-{os.getpid()}"
        try:
            work.mkdir(parents=True)
            root = work / "rootfs"
            step = time.monotonic()
            subprocess.run(["cp", "-a", "--reflink=auto", str(base), str(root)], check=True)
            log(f"copied the base rootfs in {time.monotonic() - step:.1f}s")
            execute(root, instructions, copies)
            leftovers = base_rootfs.mounts_under(root)
            if leftovers:
                raise BuildError(f"still mounted after the build: {leftovers}")
            step = time.monotonic()
            layer = oci.tree_layer(root, work / "blobs")
            log(f"layer {layer.digest[:19]} ({layer.size / 1e6:.1f} MB gzip'd) in {time.monotonic() - step:.1f}s")
            history = [{"created_by": f"hack/image/build.py --base {args.base}: {dockerfile_path.name}"}]
            refs = [f"{IMAGE}:{version}", f"{IMAGE}:dev"]
            oci.write_archive(archive, [layer], df.image_config(instructions), refs, history)
        finally:
            base_rootfs.remove_tree(work)
        size = archive.stat().st_size / 1e6
        log(f"built {', '.join(refs)} in {time.monotonic() - started:.1f}s: {archive} ({size:.1f} MB)")
        return archive


def static_elf_error(path: Path) -> str | None:
    """Why path is not a static ELF executable (None if it is): the image has no libc or loader."""
    with open(path, "rb") as f:
        head = f.read(64)
        if head[:4] != b"\x7fELF":
            return "not an ELF executable"
        if head[4] != 2:
            return "not a 64-bit ELF executable"
        order = "little" if head[5] == 1 else "big"
        phoff = int.from_bytes(head[0x20:0x28], order)
        phentsize = int.from_bytes(head[0x36:0x38], order)
        phnum = int.from_bytes(head[0x38:0x3A], order)
        f.seek(phoff)
        table = f.read(phentsize * phnum)
    for i in range(phnum):
        if int.from_bytes(table[i * phentsize : i * phentsize + 4], order) == 3:  # PT_INTERP
            return "dynamically linked (it names an ELF interpreter); build it static (Go: CGO_ENABLED=0)"
    return None


def build_static(args: argparse.Namespace, cache: Path) -> Path:
    binary = Path(args.static_binary)
    if not binary.is_file():
        raise BuildError(f"--static-binary {binary}: no such file")
    why = static_elf_error(binary)
    if why:
        raise BuildError(f"--static-binary {binary}: {why}")
    name = args.name if ":" in args.name.rsplit("/", 1)[-1] else args.name + ":latest"
    if args.entrypoint is None:
        entrypoint = [f"/usr/local/bin/{binary.name}"]
    elif args.entrypoint.startswith("["):
        entrypoint = json.loads(args.entrypoint)
        if not (isinstance(entrypoint, list) and entrypoint and all(isinstance(a, str) for a in entrypoint)):
            raise BuildError("--entrypoint: a JSON array of strings, or one path")
    else:
        entrypoint = [args.entrypoint]
    config: dict = {"Entrypoint": entrypoint, "Env": [f"PATH={df.DEFAULT_PATH}"]}
    if args.user:
        config["User"] = args.user
    h = hashlib.sha256(json.dumps([builder_digest(), name, config, binary.name]).encode())
    with open(binary, "rb") as f:
        h.update(hashlib.file_digest(f, "sha256").digest())
    key = h.hexdigest()[:24]
    archive = cache / "images" / f"static-{key}" / f"{name.replace('/', '_').replace(':', '_')}.oci.tar"
    if archive.exists() and not args.force:
        log(f"cached: {archive}")
        return archive
    work = cache / "work" / f"static-{key[:12]}-{os.getpid()}"
    try:
        layer = oci.files_layer([(f"usr/local/bin/{binary.name}", binary, 0o755)], work)
        oci.write_archive(
            archive, [layer], config, [name], [{"created_by": f"hack/image/build.py --static-binary {binary.name}"}]
        )
    finally:
        shutil.rmtree(work, ignore_errors=True)
    log(f"built {name}: {archive} ({archive.stat().st_size / 1e6:.1f} MB)")
    return archive


def load(archive: Path) -> None:
    ctr = shutil.which("ctr")
    assert ctr is not None  # checked before the build
    started = time.monotonic()
    argv = [ctr, "-n", "k8s.io", "images", "import", "--all-platforms", str(archive)]
    log(" ".join(argv))
    run = subprocess.run(argv, stdout=sys.stderr)
    if run.returncode != 0:
        raise BuildError(f"ctr images import failed (exit {run.returncode}); is containerd running?")
    log(f"loaded into containerd (k8s.io) in {time.monotonic() - started:.1f}s")


def _pair(text: str) -> tuple[str, str]:
    key, eq, value = text.partition("=")
    if not eq:
        value = os.environ.get(key, "")  # docker's --build-arg NAME takes it from the environment
    return key, value


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=argparse.RawTextHelpFormatter
    )
    parser.add_argument("--base", default="debian", help="debian (debootstrapped, cached) or a root filesystem folder")
    parser.add_argument("--out", help="also copy the archive into this folder (else it stays in the cache)")
    parser.add_argument("--load", action="store_true", help="import into containerd: ctr -n k8s.io images import")
    parser.add_argument("--force", action="store_true", help="rebuild even if the cache has this image")
    parser.add_argument("--build-arg", action="append", default=[], metavar="K=V")
    parser.add_argument("--context", default=str(REPO), help="the build context (default: the repo)")
    parser.add_argument("--file", "-f", help="the Dockerfile (default: CONTEXT/Dockerfile)")
    parser.add_argument("--static-binary", metavar="PATH", help="a one-layer image of this static binary")
    parser.add_argument("--name", help="with --static-binary: the image name, NAME:TAG")
    parser.add_argument("--entrypoint", help="with --static-binary: JSON array or one path (default: the binary)")
    parser.add_argument("--user", help="with --static-binary: the image's USER, e.g. 65535:65535")
    args = parser.parse_args(argv)
    if args.static_binary and not args.name:
        parser.error("--static-binary needs --name NAME:TAG")
    if not args.static_binary and (args.name or args.entrypoint or args.user):
        parser.error("--name, --entrypoint and --user go with --static-binary")
    if args.load and not shutil.which("ctr"):
        print(
            "error: --load needs containerd's `ctr` on PATH, and it is not installed: install containerd "
            "(Debian: apt-get install containerd), or import the archive elsewhere with "
            "`ctr -n k8s.io images import --all-platforms ARCHIVE`",
            file=sys.stderr,
        )
        return 2
    # SIGTERM as an exception, so the finally blocks unmount and clean up
    previous = signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    cache = base_rootfs.cache_root()
    try:
        archive = build_static(args, cache) if args.static_binary else build_dockerfile(args, cache)
        if args.out:
            out = Path(args.out)
            out.mkdir(parents=True, exist_ok=True)
            target = out / archive.name
            tmp = out / f".{archive.name}.{os.getpid()}"
            shutil.copyfile(archive, tmp)
            os.replace(tmp, target)
            archive = target
        if args.load:
            load(archive)
    except (BuildError, base_rootfs.RootfsError, df.DockerfileError, subprocess.CalledProcessError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    finally:
        signal.signal(signal.SIGTERM, previous)
    print(archive)
    return 0


if __name__ == "__main__":
    sys.exit(main())
