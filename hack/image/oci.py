"""OCI image archives: a gzip'd tar layer made from a folder (or a few files), and the tar of an
OCI image layout holding it (oci-layout, index.json, blobs/sha256/), which `ctr images import`
and `docker load` (25+) read.

    layer = tree_layer(rootfs, blobs)                 # numeric owners, sorted entries
    write_archive(out, [layer], config, ["placement-extender:0.1.0", "placement-extender:dev"])
"""

from __future__ import annotations

import gzip
import hashlib
import io
import json
import os
import platform
import tarfile
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

MANIFEST = "application/vnd.oci.image.manifest.v1+json"
INDEX = "application/vnd.oci.image.index.v1+json"
CONFIG = "application/vnd.oci.image.config.v1+json"
LAYER = "application/vnd.oci.image.layer.v1.tar+gzip"
REF_NAME = "org.opencontainers.image.ref.name"
# containerd names an imported image by this annotation first: the normalized name, the one the
# kubelet asks for, so that a pod's `image: placement-extender:0.1.0` finds it.
CONTAINERD_NAME = "io.containerd.image.name"
# The runtime provides these; only the empty folders belong in an image.
RUNTIME_FOLDERS = ("proc", "sys", "dev")


@dataclass(frozen=True)
class Layer:
    path: Path  # the compressed blob
    digest: str  # sha256:... of the compressed blob
    size: int
    diff_id: str  # sha256:... of the uncompressed tar


class _Hashing(io.RawIOBase):
    def __init__(self, inner) -> None:
        self.inner = inner
        self.sha = hashlib.sha256()
        self.size = 0

    def writable(self) -> bool:
        return True

    def write(self, data) -> int:
        self.sha.update(data)
        self.size += len(data)
        if self.inner is not None:
            self.inner.write(data)
        return len(data)


def architecture() -> str:
    machine = platform.machine().lower()
    return {"x86_64": "amd64", "aarch64": "arm64", "arm64": "arm64", "amd64": "amd64"}.get(machine, machine)


def normalized_name(ref: str) -> str:
    """docker's normalization: placement-extender:0.1.0 -> docker.io/library/placement-extender:0.1.0."""
    first, slash, _ = ref.partition("/")
    if not slash:
        return "docker.io/library/" + ref
    if "." not in first and ":" not in first and first != "localhost":
        return "docker.io/" + ref
    return ref


def write_layer(blobs: Path, fill: Callable[[tarfile.TarFile], None]) -> Layer:
    """A gzip'd tar layer blob in blobs/ (named by its digest), filled by fill(tar)."""
    blobs.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=blobs, prefix=".layer-")
    try:
        with os.fdopen(fd, "wb") as out:
            compressed = _Hashing(out)
            gz = gzip.GzipFile(filename="", mode="wb", fileobj=compressed, compresslevel=6, mtime=0)
            uncompressed = _Hashing(gz)
            with tarfile.open(fileobj=uncompressed, mode="w|", format=tarfile.PAX_FORMAT) as tar:
                fill(tar)
            gz.close()
        digest = compressed.sha.hexdigest()
        path = blobs / digest
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return Layer(path, "sha256:" + digest, compressed.size, "sha256:" + uncompressed.sha.hexdigest())


def tree_layer(root: Path, blobs: Path) -> Layer:
    """The whole tree under root as one layer: entries sorted, owners numeric (no names), hard
    links kept, mtimes whole seconds; /proc, /sys and /dev as empty folders."""

    def fill(tar: tarfile.TarFile) -> None:
        for path, arcname in _walk(root):
            info = tar.gettarinfo(str(path), arcname)
            if info is None:  # a socket: nothing a tar can hold
                continue
            info.uname = info.gname = ""
            info.mtime = int(info.mtime)
            if info.isreg():
                with open(path, "rb") as f:
                    tar.addfile(info, f)
            else:
                tar.addfile(info)

    return write_layer(blobs, fill)


def _walk(root: Path):
    for folder, dirs, files in os.walk(root):
        dirs.sort()
        rel = os.path.relpath(folder, root)
        if rel in RUNTIME_FOLDERS:
            dirs[:] = []
            continue
        names = sorted(dirs + files)  # symlinks to folders are in dirs; they are not walked
        for name in names:
            path = Path(folder) / name
            arcname = name if rel == "." else f"{rel}/{name}"
            yield path, arcname


def files_layer(files: list[tuple[str, Path, int]], blobs: Path, mtime: int = 0) -> Layer:
    """A layer of just these files (image path, host file, mode), owned by 0:0, with their parent
    folders (0755)."""

    def fill(tar: tarfile.TarFile) -> None:
        folders = sorted({"/".join(p.strip("/").split("/")[:i]) for p, _, _ in files for i in
                          range(1, len(p.strip("/").split("/")))})  # fmt: skip
        for folder in folders:
            info = tarfile.TarInfo(folder)
            info.type, info.mode, info.mtime = tarfile.DIRTYPE, 0o755, mtime
            tar.addfile(info)
        for name, host, mode in sorted(files):
            info = tarfile.TarInfo(name.strip("/"))
            info.size, info.mode, info.mtime = host.stat().st_size, mode, mtime
            with open(host, "rb") as f:
                tar.addfile(info, f)

    return write_layer(blobs, fill)


def _canonical(value: dict) -> bytes:
    return json.dumps(value, sort_keys=True, separators=(",", ":")).encode()


def config_blob(config: dict, layers: list[Layer], history: list[dict] | None = None) -> bytes:
    """The image config JSON: `config` is the OCI config object (Entrypoint, Cmd, User, Env, ...)."""
    doc: dict = {
        "architecture": architecture(),
        "os": "linux",
        "config": config,
        "rootfs": {"type": "layers", "diff_ids": [layer.diff_id for layer in layers]},
    }
    if history:
        doc["history"] = history
    epoch = os.environ.get("SOURCE_DATE_EPOCH")
    if epoch and epoch.isdigit():
        import datetime

        doc["created"] = datetime.datetime.fromtimestamp(int(epoch), datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    return _canonical(doc)


def write_archive(
    out: Path, layers: list[Layer], config: dict, refs: list[str], history: list[dict] | None = None
) -> Path:
    """The tar of an OCI image layout holding one image (one manifest, listed once per ref).
    Written beside `out` and renamed into it."""
    config_bytes = config_blob(config, layers, history)
    manifest_bytes = _canonical(
        {
            "schemaVersion": 2,
            "mediaType": MANIFEST,
            "config": {"mediaType": CONFIG, "digest": _sha(config_bytes), "size": len(config_bytes)},
            "layers": [{"mediaType": LAYER, "digest": layer.digest, "size": layer.size} for layer in layers],
        }
    )
    manifest_desc = {"mediaType": MANIFEST, "digest": _sha(manifest_bytes), "size": len(manifest_bytes)}
    index = {
        "schemaVersion": 2,
        "mediaType": INDEX,
        "manifests": [
            dict(
                manifest_desc,
                platform={"architecture": architecture(), "os": "linux"},
                annotations={REF_NAME: ref, CONTAINERD_NAME: normalized_name(ref)},
            )
            for ref in refs
        ],
    }
    small = {
        "oci-layout": _canonical({"imageLayoutVersion": "1.0.0"}),
        "index.json": _canonical(index),
        f"blobs/sha256/{_sha(config_bytes)[7:]}": config_bytes,
        f"blobs/sha256/{_sha(manifest_bytes)[7:]}": manifest_bytes,
    }
    out.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=out.parent, prefix=f".{out.name}.")
    try:
        with os.fdopen(fd, "wb") as raw, tarfile.open(fileobj=raw, mode="w", format=tarfile.PAX_FORMAT) as tar:
            for folder in ("blobs", "blobs/sha256"):
                info = tarfile.TarInfo(folder)
                info.type, info.mode = tarfile.DIRTYPE, 0o755
                tar.addfile(info)
            entries: list[tuple[str, bytes | Path]] = list(small.items())
            entries += [(f"blobs/sha256/{layer.digest[7:]}", layer.path) for layer in layers]
            for name, content in sorted(entries, key=lambda e: e[0]):
                info = tarfile.TarInfo(name)
                info.mode = 0o644
                if isinstance(content, bytes):
                    info.size = len(content)
                    tar.addfile(info, io.BytesIO(content))
                else:
                    info.size = content.stat().st_size
                    with open(content, "rb") as f:
                        tar.addfile(info, f)
        os.chmod(tmp, 0o644)  # mkstemp's 0600 would keep the runtime's other users out
        os.replace(tmp, out)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return out


def _sha(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()
