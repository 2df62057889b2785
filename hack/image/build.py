"""Build the extender image from the Dockerfile with buildah, as an OCI image archive.

    .venv/bin/python hack/image/build.py [--base debian|pull] [--tag TAG] [--out DIR] [--load] [--force]
                                         [--build-arg K=V]
    .venv/bin/python hack/image/build.py --static-binary PATH --name NAME:TAG [--entrypoint JSON|PATH] [--load]

buildah (Debian: apt-get install buildah) builds the Dockerfile, daemonless, as root:
`buildah bud --isolation chroot` with its storage (driver vfs) under
${XDG_CACHE_HOME:-~/.cache}/placement-extender/buildah/, never the machine's. The base is the image
the Dockerfile's FROM names (Debian 12 slim), one name wherever the file is built: --base debian (the
default) makes it here, since no image registry is reachable: a debootstrapped Debian 12 minbase
(made once and cached, hack/image/rootfs.py) committed into that storage as
localhost/debian-debootstrap:bookworm-<key> and tagged with exactly FROM's name; --base pull lets
buildah pull FROM's image from its registry instead. The RUN step sees the host's pip
settings (index, CA bundle, timeout) as one pip.conf mounted read-only at /mnt for that step, named
by the Dockerfile's PIP_CONFIG_FILE build arg; none of it is in the image.

The result is an OCI layout tar holding one image, named placement-extender:<TAG> (--tag; default
pyproject.toml's version), cached under ${XDG_CACHE_HOME:-~/.cache}/placement-extender/images/ by a
digest of the Dockerfile, the build context (what .dockerignore lets in), the build args, the tag,
the base and this script; a cached build needs neither root nor buildah. --load imports it into
containerd's k8s.io namespace (ctr).
The archive's path is the last line on stdout; progress and timings go to stderr.

--static-binary makes a one-layer image (buildah from scratch) holding only that static binary at
/usr/local/bin/<basename>, for kube-scheduler or a pause image.
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
import tarfile
import tempfile
import time
import tomllib
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
sys.path.insert(0, str(HERE))

import build_context  # noqa: E402
import rootfs as base_rootfs  # noqa: E402

IMAGE = "placement-extender"
DEBIAN_BASE = "localhost/debian-debootstrap"  # tagged <release>-<rootfs key>
DEFAULT_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
# The host's pip settings that reach its index, as pip.conf options; those naming a file have the
# file copied in (the base's own CA bundle lacks the host's extra CAs).
PIP_ENV = {
    "PIP_INDEX_URL": "index-url",
    "PIP_EXTRA_INDEX_URL": "extra-index-url",
    "PIP_TRUSTED_HOST": "trusted-host",
    "PIP_DEFAULT_TIMEOUT": "default-timeout",
    "PIP_CERT": "cert",
    "PIP_CLIENT_CERT": "client-cert",
}
PIP_FILE_OPTIONS = ("cert", "client-cert")
PIP_CONFIGS = ("/etc/xdg/pip/pip.conf", "/etc/pip.conf", "~/.pip/pip.conf", "~/.config/pip/pip.conf")
PIP_MOUNT = "/mnt"  # an empty folder in Debian: mounted over for the RUN step, it leaves no trace
REF_NAME = "org.opencontainers.image.ref.name"
# containerd names an imported image by this annotation first: the normalized name, the one the
# kubelet asks for, so that a pod's `image: placement-extender:0.1.0` finds it.
CONTAINERD_NAME = "io.containerd.image.name"
# What buildah creates on the machine whatever --root says (its blob-info cache, its network
# folder); removed after a build when they were not there before it.
BUILDAH_HOST_DIRS = (Path("/var/lib/containers"), Path("/run/containers"))

_STARTED = time.monotonic()


class BuildError(RuntimeError):
    pass


def log(message: str) -> None:
    print(f"[{time.monotonic() - _STARTED:7.1f}s] {message}", file=sys.stderr, flush=True)


# --- buildah -------------------------------------------------------------------------------------


class Buildah:
    """buildah on our own storage, one build at a time (an flock): the machine's is never used."""

    def __init__(self, cache: Path) -> None:
        self.home = cache / "buildah"
        self.argv = [
            "buildah",
            "--root",
            str(self.home / "storage"),
            "--runroot",
            str(self.home / "run"),
            "--storage-driver",
            "vfs",
        ]

    def __call__(self, *args: str, capture: bool = True, check: bool = True) -> str:
        argv = [*self.argv, *args]
        env = dict(os.environ, BUILDAH_ISOLATION="chroot", BUILDAH_LAYERS="false")
        # not captured: buildah's progress goes to our stderr (fd 2), stdout stays the archive's path
        run = subprocess.run(argv, env=env, stdout=subprocess.PIPE if capture else 2, text=True)
        if run.returncode != 0 and check:
            raise BuildError(f"buildah {' '.join(args[:2])} failed (exit {run.returncode})")
        return (run.stdout or "").strip()

    def has_image(self, ref: str) -> bool:
        argv = [*self.argv, "inspect", "--type", "image", ref]
        return subprocess.run(argv, capture_output=True).returncode == 0

    @contextmanager
    def session(self) -> Iterator[Buildah]:
        if os.geteuid() != 0:
            raise BuildError("building the image needs root (buildah's chroot isolation): run it with sudo")
        if not shutil.which("buildah"):
            raise BuildError("buildah is not installed (Debian: apt-get install buildah; hack/realnode/install.sh)")
        with base_rootfs.locked(self.home / "lock"):
            absent = [d for d in BUILDAH_HOST_DIRS if not d.exists()]
            try:
                self("rm", "--all")  # a killed run's working containers: nobody else uses this storage
                yield self
            finally:
                for folder in absent:
                    shutil.rmtree(folder, ignore_errors=True)


def debian_base(buildah: Buildah, cache: Path) -> str:
    """The debootstrapped Debian rootfs as an image in our storage (committed once), its name."""
    ref = f"{DEBIAN_BASE}:{base_rootfs.RELEASE}-{base_rootfs.rootfs_key()}"
    if buildah.has_image(ref):
        return ref
    started = time.monotonic()
    tree = base_rootfs.debian_rootfs(cache, log)
    container = buildah("from", "scratch")
    try:
        mountpoint = buildah("mount", container)  # vfs: a plain folder, no mount is made
        subprocess.run(["cp", "-a", "--reflink=auto", f"{tree}/.", mountpoint], check=True)
        buildah("umount", container)
        buildah("config", "--env", f"PATH={DEFAULT_PATH}", "--cmd", '["bash"]', container)
        buildah("commit", "--quiet", container, ref)
    finally:
        buildah("rm", container, check=False)
    log(f"base image {ref} committed from {tree} in {time.monotonic() - started:.1f}s")
    return ref


def from_image(dockerfile: Path) -> str:
    """The image the Dockerfile's (one) FROM names."""
    names = [line.split()[1] for line in dockerfile.read_text().splitlines() if line.upper().startswith("FROM ")]
    if len(names) != 1 or "$" in names[0]:
        raise BuildError(f"{dockerfile}: expected one FROM naming an image, found {names}")
    return names[0]


def tag_debian_base(buildah: Buildah, base: str, name: str) -> None:
    """Our debootstrapped Debian 12 under the name FROM gives, when that name is a Debian 12 image
    (its build is then the same steps, from the same release, as anywhere else)."""
    repository, _, tag = name.rpartition(":")
    if repository.rsplit("/", 1)[-1] != "debian" or not (tag.startswith("12") or tag.startswith("bookworm")):
        raise BuildError(f"--base debian makes Debian 12 (bookworm); the Dockerfile's FROM names {name}")
    buildah("tag", base, name)


def pip_config(folder: Path) -> Path:
    """The host's pip configuration files and PIP_* settings merged into folder/pip.conf, the files
    they name copied beside it, all as the RUN step sees them under PIP_MOUNT."""
    files = [Path(p).expanduser() for p in PIP_CONFIGS]
    if os.environ.get("PIP_CONFIG_FILE"):
        files.append(Path(os.environ["PIP_CONFIG_FILE"]))
    parser = configparser.ConfigParser(interpolation=None, strict=False)
    parser.read([f for f in files if f.is_file()])
    if not parser.has_section("global"):
        parser.add_section("global")
    for var, option in PIP_ENV.items():
        if os.environ.get(var):
            parser.set("global", option, os.environ[var])
    if not parser.has_option("global", "cert"):
        bundle = os.environ.get("REQUESTS_CA_BUNDLE") or os.environ.get("SSL_CERT_FILE")
        if bundle:
            parser.set("global", "cert", bundle)
    for section in parser.sections():
        for option in PIP_FILE_OPTIONS:
            value = parser.get(section, option, fallback="")
            if not value:
                continue
            if value.startswith("/") and Path(value).is_file():
                copied = folder / f"{section}-{option}.pem"
                shutil.copyfile(value, copied)
                parser.set(section, option, f"{PIP_MOUNT}/{copied.name}")
            else:
                parser.remove_option(section, option)  # not a file the build could see
    out = folder / "pip.conf"
    with open(out, "w") as f:
        parser.write(f)
    for path in folder.iterdir():
        os.chmod(path, 0o644)  # readable by a RUN step's non-root USER
    return out


# --- OCI archives --------------------------------------------------------------------------------


def normalized_name(ref: str) -> str:
    """docker's normalization: placement-extender:0.1.0 -> docker.io/library/placement-extender:0.1.0."""
    first, slash, _ = ref.partition("/")
    if not slash:
        return "docker.io/library/" + ref
    if "." not in first and ":" not in first and first != "localhost":
        return "docker.io/" + ref
    return ref


def name_refs(layout: Path, refs: list[str]) -> None:
    """The layout's one image listed once per ref, each with the name containerd imports it as."""
    index = json.loads((layout / "index.json").read_text())
    manifest = {k: v for k, v in index["manifests"][0].items() if k != "annotations"}
    index["manifests"] = [dict(manifest, annotations={REF_NAME: r, CONTAINERD_NAME: normalized_name(r)}) for r in refs]
    index["mediaType"] = "application/vnd.oci.image.index.v1+json"
    (layout / "index.json").write_text(json.dumps(index, sort_keys=True, separators=(",", ":")))


def write_archive(buildah: Buildah, image: str, refs: list[str], out: Path, work: Path) -> Path:
    """buildah push of `image` to an OCI layout, named by refs, tarred into out (renamed into place)."""
    layout = work / "layout"
    buildah("push", "--quiet", image, f"oci:{layout}:{refs[0]}")
    name_refs(layout, refs)
    out.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=out.parent, prefix=f".{out.name}.")
    try:
        with os.fdopen(fd, "wb") as raw, tarfile.open(fileobj=raw, mode="w", format=tarfile.PAX_FORMAT) as tar:
            for path in sorted(layout.rglob("*")):
                info = tar.gettarinfo(str(path), path.relative_to(layout).as_posix())
                info.uid = info.gid = 0
                info.uname = info.gname = ""
                if info.isreg():
                    with open(path, "rb") as f:
                        tar.addfile(info, f)
                else:
                    tar.addfile(info)
        os.chmod(tmp, 0o644)  # mkstemp's 0600 would keep the runtime's other users out
        os.replace(tmp, out)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return out


# --- the builds ----------------------------------------------------------------------------------


def project_version(context: Path) -> str:
    with open(context / "pyproject.toml", "rb") as f:
        return tomllib.load(f)["project"]["version"]


def builder_digest() -> str:
    h = hashlib.sha256()
    for path in sorted(HERE.glob("*.py")):
        h.update(path.name.encode() + b"\0" + path.read_bytes())
    return h.hexdigest()


@contextmanager
def workdir(cache: Path, name: str) -> Iterator[Path]:
    work = cache / "work" / f"{name}-{os.getpid()}"
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    try:
        yield work
    finally:
        shutil.rmtree(work, ignore_errors=True)


def build_dockerfile(args: argparse.Namespace, cache: Path) -> Path:
    context = Path(args.context).resolve()
    dockerfile = Path(args.file).resolve() if args.file else context / "Dockerfile"
    debian = args.base == "debian"
    wanted = from_image(dockerfile)
    base_key = f"debian-{base_rootfs.RELEASE}-{base_rootfs.rootfs_key()}" if debian else f"pulled {wanted}"
    build_args = dict(_pair(a) for a in args.build_arg)
    version = args.tag or project_version(context)
    key_doc = {
        "tag": version,
        "builder": builder_digest(),
        "dockerfile": dockerfile.read_text(),
        "build_args": sorted(build_args.items()),
        "base": base_key,
        "context": build_context.digest(context),
        "architecture": os.uname().machine,
    }
    key = hashlib.sha256(json.dumps(key_doc, sort_keys=True).encode()).hexdigest()[:24]
    archive = cache / "images" / key / f"{IMAGE}-{version}.oci.tar"
    if archive.exists() and not args.force:
        log(f"cached image {key} (the Dockerfile, build context and base are unchanged): {archive}")
        return archive
    with Buildah(cache).session() as buildah:
        if archive.exists() and not args.force:
            log(f"made by a concurrent run: {archive}")
            return archive
        started = time.monotonic()
        if debian:
            tag_debian_base(buildah, debian_base(buildah, cache), wanted)
        tag = f"localhost/{IMAGE}:build-{key}"
        with workdir(cache, f"build-{key[:12]}") as work:
            pip = work / "pip"
            pip.mkdir()
            pip_config(pip)
            argv = ["bud", "--isolation", "chroot", "--layers=false", "--force-rm", "--file", str(dockerfile)]
            argv += ["--pull=never" if debian else "--pull=missing"]
            argv += ["--build-arg", f"PIP_CONFIG_FILE={PIP_MOUNT}/pip.conf", "--volume", f"{pip}:{PIP_MOUNT}:ro"]
            for name, value in build_args.items():
                argv += ["--build-arg", f"{name}={value}"]
            log(f"buildah {' '.join(argv)} --tag {tag} {context}")
            buildah(*argv, "--tag", tag, str(context), capture=False)
            log(f"built in {time.monotonic() - started:.1f}s")
            try:
                # one name: a release archive is pushed as it is (skopeo copy oci-archive:...), so
                # each name in it would be one more image a platform team has to account for
                write_archive(buildah, tag, [f"{IMAGE}:{version}"], archive, work)
            finally:
                buildah("rmi", tag, check=False)  # vfs keeps whole copies: our storage holds only the base
        size = archive.stat().st_size / 1e6
        log(f"built {IMAGE}:{version} in {time.monotonic() - started:.1f}s: {archive} ({size:.1f} MB)")
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
    h = hashlib.sha256(json.dumps([builder_digest(), name, entrypoint, args.user, binary.name]).encode())
    with open(binary, "rb") as f:
        h.update(hashlib.file_digest(f, "sha256").digest())
    key = h.hexdigest()[:24]
    archive = cache / "images" / f"static-{key}" / f"{name.replace('/', '_').replace(':', '_')}.oci.tar"
    if archive.exists() and not args.force:
        log(f"cached: {archive}")
        return archive
    with Buildah(cache).session() as buildah, workdir(cache, f"static-{key[:12]}") as work:
        tag = f"localhost/static:{key}"
        container = buildah("from", "scratch")
        try:
            buildah("copy", "--quiet", "--chmod", "0755", container, str(binary), f"/usr/local/bin/{binary.name}")
            config = ["--entrypoint", json.dumps(entrypoint), "--env", f"PATH={DEFAULT_PATH}"]
            buildah("config", *config, *(["--user", args.user] if args.user else []), container)
            buildah("commit", "--quiet", container, tag)
        finally:
            buildah("rm", container, check=False)
        try:
            write_archive(buildah, tag, [name], archive, work)
        finally:
            buildah("rmi", tag, check=False)
    log(f"built {name}: {archive} ({archive.stat().st_size / 1e6:.1f} MB)")
    return archive


def load(archive: Path) -> None:
    ctr = shutil.which("ctr")
    assert ctr is not None  # checked before the build
    started = time.monotonic()
    argv = [ctr, "-n", "k8s.io", "images", "import", "--all-platforms", str(archive)]
    log(" ".join(argv))
    run = subprocess.run(argv, stdout=2)
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
    parser.add_argument(
        "--base",
        default="debian",
        choices=("debian", "pull"),
        help="FROM's image: debian (debootstrapped here, cached, tagged as FROM's name) or pull it",
    )
    parser.add_argument("--tag", help="the image's tag (default: pyproject.toml's version)")
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
    # SIGTERM as an exception, so the finally blocks clean up
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
    except (BuildError, base_rootfs.RootfsError, subprocess.CalledProcessError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    finally:
        signal.signal(signal.SIGTERM, previous)
    print(archive)
    return 0


if __name__ == "__main__":
    sys.exit(main())
