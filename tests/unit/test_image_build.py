"""hack/image/: the image build driving buildah. The build context and its cache key (.dockerignore),
the pip settings handed to the RUN step, the OCI archive's names, and the CLI contract (the archive
last on stdout, a cached second run) against a fake buildah. Plain data: no root, no network."""

from __future__ import annotations

import importlib.util
import json
import re
import struct
import sys
import tarfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
# The builder's modules import each other by their plain names, as hack/image/build.py runs them.
sys.path.insert(0, str(ROOT / "hack" / "image"))

import build_context  # noqa: E402
import rootfs  # noqa: E402

_spec = importlib.util.spec_from_file_location("hack_image_build", ROOT / "hack" / "image" / "build.py")
assert _spec is not None and _spec.loader is not None
build = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(build)  # the CLI module under a name of its own ("build" is a PyPI package)


# --- the build context -----------------------------------------------------------------------------


def test_the_context_is_what_the_dockerfile_copies() -> None:
    """.dockerignore lets in exactly the COPY sources (a COPY of anything else fails the build), and
    no byte-code: so the cache key moves only with what the image holds."""
    text = (ROOT / "Dockerfile").read_text()
    sources = {s for line in re.findall(r"^COPY\s+(.+)$", text, re.M) for s in line.split()[:-1]}
    files = [p.relative_to(ROOT).as_posix() for p in build_context.context_files(ROOT)]
    assert sources <= set(files), sources - set(files)
    assert not [f for f in files if not any(f == s or f.startswith(s + "/") for s in sources)]
    assert "extender/__init__.py" in files
    assert not [f for f in files if "__pycache__" in f or f.endswith(".pyc")]


def test_the_dockerfile_takes_the_pip_settings_as_a_build_arg() -> None:
    text = (ROOT / "Dockerfile").read_text()
    # one base, by name, wherever it is built: Debian 12 slim, which hack/image/build.py --base
    # debian makes here under exactly that name; python3 comes from Debian's archive in both
    assert build.from_image(ROOT / "Dockerfile") == "docker.io/library/debian:12-slim"
    assert not re.search(r"^ARG BASE", text, re.M)
    assert re.search(r"apt-get install .*python3 python3-venv ca-certificates", text)
    assert re.search(r"^ARG PIP_CONFIG_FILE$", text, re.M)
    assert "python3 -m venv /opt/extender" in text  # no `python`, no system pip on Debian


def test_the_context_digest_follows_the_files(tmp_path: Path) -> None:
    (tmp_path / "pkg/__pycache__").mkdir(parents=True)
    (tmp_path / "pkg/a.py").write_text("a")
    (tmp_path / "docs").mkdir()
    (tmp_path / ".dockerignore").write_text("*\n!pkg\n**/__pycache__\n")
    before = build_context.digest(tmp_path)
    (tmp_path / "pkg/__pycache__/a.pyc").write_text("byte-code")
    (tmp_path / "docs/x.md").write_text("docs")
    assert build_context.digest(tmp_path) == before
    (tmp_path / "pkg/a.py").write_text("b")
    assert build_context.digest(tmp_path) != before
    assert [p.name for p in build_context.context_files(tmp_path)] == ["pkg", "a.py"]


@pytest.mark.parametrize(
    ("patterns", "path", "ignored"),
    [
        ("__pycache__\n", "__pycache__/x.pyc", True),
        ("**/__pycache__\n", "extender/a/__pycache__/x.pyc", True),
        ("*.md\n!README.md\n", "README.md", False),
        ("*.md\n!README.md\n", "BENCHMARKS.md", True),
        ("# comment\n/docs\n", "docs/a/b.md", True),
        ("docs\n", "extender/docs", False),
        ("ext?nder/*.py\n", "extender/cli.py", True),
    ],
)
def test_dockerignore(tmp_path: Path, patterns: str, path: str, ignored: bool) -> None:
    (tmp_path / ".dockerignore").write_text(patterns)
    assert build_context.is_ignored(path, build_context.ignore_patterns(tmp_path)) is ignored


# --- the pip settings for the RUN step --------------------------------------------------------------


def test_pip_config_carries_the_hosts_settings(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    ca = tmp_path / "ca.pem"
    ca.write_text("CERT")
    conf = tmp_path / "host-pip.conf"
    conf.write_text(
        f"[global]\ncert = {ca}\nindex-url = https://index.example/simple\n[install]\nclient-cert = /nope\n"
    )
    monkeypatch.setattr(build, "PIP_CONFIGS", ())
    monkeypatch.setenv("PIP_CONFIG_FILE", str(conf))
    monkeypatch.setenv("PIP_DEFAULT_TIMEOUT", "180")
    monkeypatch.delenv("PIP_INDEX_URL", raising=False)
    monkeypatch.delenv("PIP_CERT", raising=False)
    out = tmp_path / "out"
    out.mkdir()
    text = build.pip_config(out).read_text()
    assert "index-url = https://index.example/simple" in text and "default-timeout = 180" in text
    assert f"cert = {build.PIP_MOUNT}/global-cert.pem" in text  # the host's CA, as the step sees it
    assert (out / "global-cert.pem").read_text() == "CERT"
    assert "client-cert" not in text  # a file the build cannot see is left out


# --- the OCI archive --------------------------------------------------------------------------------


def test_normalized_names() -> None:
    assert build.normalized_name("pause:3.10") == "docker.io/library/pause:3.10"
    assert build.normalized_name("me/app:1") == "docker.io/me/app:1"
    assert build.normalized_name("registry.k8s.io/kube-scheduler:v1") == "registry.k8s.io/kube-scheduler:v1"
    assert build.normalized_name("localhost/app:1") == "localhost/app:1"


def elf(interpreter: bool) -> bytes:
    """A minimal 64-bit little-endian ELF header and program header table (PT_LOAD, maybe PT_INTERP)."""
    phnum = 2 if interpreter else 1
    header = struct.pack(
        "<4sBBBB8sHHIQQQIHHHHHH", b"\x7fELF", 2, 1, 1, 0, b"", 2, 62, 1, 0, 64, 0, 0, 64, 56, phnum, 0, 0, 0
    )
    load = struct.pack("<IIQQQQQQ", 1, 5, 0, 0, 0, 0, 0, 0)
    interp = struct.pack("<IIQQQQQQ", 3, 4, 0, 0, 0, 0, 0, 0)
    return header + load + (interp if interpreter else b"")


FAKE_BUILDAH = r"""#!/usr/bin/env python3
import json, os, sys
from pathlib import Path
argv = sys.argv[1:]
while argv and argv[0] in ("--root", "--runroot", "--storage-driver"):
    argv = argv[2:]
with open(os.environ["FAKE_BUILDAH_LOG"], "a") as log:
    log.write(json.dumps(argv) + "\n")
if argv[0] == "from":
    print("working-container")
elif argv[0] == "push":
    path, _, ref = argv[-1].removeprefix("oci:").partition(":")
    layout = Path(path)
    (layout / "blobs/sha256").mkdir(parents=True)
    (layout / "oci-layout").write_text('{"imageLayoutVersion":"1.0.0"}')
    (layout / "blobs/sha256" / ("0" * 64)).write_text("{}")
    manifest = {"mediaType": "application/vnd.oci.image.manifest.v1+json", "digest": "sha256:" + "0" * 64,
                "size": 2, "annotations": {"org.opencontainers.image.ref.name": ref}}
    (layout / "index.json").write_text(json.dumps({"schemaVersion": 2, "manifests": [manifest]}))
"""


@pytest.fixture
def fake_buildah(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """buildah on PATH as a script logging its arguments (one JSON list a line), as root."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "buildah").write_text(FAKE_BUILDAH)
    (bin_dir / "buildah").chmod(0o755)
    log = tmp_path / "buildah.log"
    monkeypatch.setenv("FAKE_BUILDAH_LOG", str(log))
    monkeypatch.setenv("PATH", f"{bin_dir}:/usr/bin:/bin")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.setattr(build.os, "geteuid", lambda: 0)
    monkeypatch.setattr(build, "BUILDAH_HOST_DIRS", (tmp_path / "var-lib-containers",))
    return log


def calls(log: Path) -> list[list[str]]:
    return [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []


def test_static_binary_image(tmp_path: Path, fake_buildah: Path, capsys) -> None:
    dynamic = tmp_path / "dynamic"
    dynamic.write_bytes(elf(interpreter=True))
    assert "dynamically linked" in (build.static_elf_error(dynamic) or "")
    script = tmp_path / "script"
    script.write_text("#!/bin/sh\n")
    assert build.static_elf_error(script) == "not an ELF executable"

    binary = tmp_path / "pause"
    binary.write_bytes(elf(interpreter=False))
    assert build.static_elf_error(binary) is None
    argv = ["--static-binary", str(binary), "--name", "registry.k8s.io/pause:3.10", "--user", "65535:65535"]
    assert build.main(argv + ["--out", str(tmp_path / "out")]) == 0
    archive = Path(capsys.readouterr().out.strip().splitlines()[-1])
    assert archive == tmp_path / "out" / "registry.k8s.io_pause_3.10.oci.tar"
    made = calls(fake_buildah)
    assert [c[0] for c in made] == ["rm", "from", "copy", "config", "commit", "rm", "push", "rmi"]
    assert made[2][-2:] == [str(binary), "/usr/local/bin/pause"] and "0755" in made[2]
    assert made[3][made[3].index("--entrypoint") + 1] == '["/usr/local/bin/pause"]'
    assert made[3][made[3].index("--user") + 1] == "65535:65535"
    with tarfile.open(archive) as tar:
        index = json.loads(tar.extractfile("index.json").read())  # type: ignore[union-attr]
    assert [m["annotations"] for m in index["manifests"]] == [
        {build.REF_NAME: "registry.k8s.io/pause:3.10", build.CONTAINERD_NAME: "registry.k8s.io/pause:3.10"}
    ]
    # the second run is the cache's: buildah is not called
    fake_buildah.unlink()
    assert build.main(argv) == 0
    assert "cached" in capsys.readouterr().err and not calls(fake_buildah)


def test_dockerfile_build_drives_buildah(tmp_path: Path, fake_buildah: Path, capsys) -> None:
    context = tmp_path / "context"
    (context / "pkg").mkdir(parents=True)
    (context / "pkg/a.py").write_text("a")
    (context / "pyproject.toml").write_text('[project]\nname = "x"\nversion = "9.9"\n')
    (context / "Dockerfile").write_text("FROM docker.io/library/debian:12-slim\nCOPY pkg /pkg\n")
    argv = ["--context", str(context), "--build-arg", "EXTRA=1"]
    assert build.main(argv) == 0
    archive = Path(capsys.readouterr().out.strip().splitlines()[-1])
    assert archive.name == "placement-extender-9.9.oci.tar"
    (bud,) = [c for c in calls(fake_buildah) if c[0] == "bud"]
    args = dict(zip(bud, bud[1:], strict=False))
    assert args["--isolation"] == "chroot" and "--layers=false" in bud and "--pull=never" in bud
    base = f"{build.DEBIAN_BASE}:{rootfs.RELEASE}-{rootfs.rootfs_key()}"
    assert ["tag", base, "docker.io/library/debian:12-slim"] in calls(fake_buildah)  # FROM's name, exactly
    assert [bud[i + 1] for i, a in enumerate(bud) if a == "--build-arg"] == [
        f"PIP_CONFIG_FILE={build.PIP_MOUNT}/pip.conf",
        "EXTRA=1",
    ]
    assert args["--volume"].endswith(f"/pip:{build.PIP_MOUNT}:ro") and bud[-1] == str(context)
    with tarfile.open(archive) as tar:
        index = json.loads(tar.extractfile("index.json").read())  # type: ignore[union-attr]
    # one image, one name: the archive is pushed as it is (docs/install/release.md)
    assert [m["annotations"][build.CONTAINERD_NAME] for m in index["manifests"]] == [
        "docker.io/library/placement-extender:9.9",
    ]
    assert not (tmp_path / "cache/placement-extender/work").exists() or not any(
        (tmp_path / "cache/placement-extender/work").iterdir()
    )
    fake_buildah.unlink()
    assert build.main(argv) == 0 and not calls(fake_buildah)  # unchanged: the cache's
    (context / "pkg/a.py").write_text("b")
    assert build.main(argv) == 0 and [c[0] for c in calls(fake_buildah)].count("bud") == 1
    capsys.readouterr()
    # a release names the image by its tag's version (hack/release.py --tag), a build of its own
    assert build.main([*argv, "--tag", "1.0.0-rc.1"]) == 0
    tagged = Path(capsys.readouterr().out.strip().splitlines()[-1])
    assert tagged.name == "placement-extender-1.0.0-rc.1.oci.tar" and tagged.parent != archive.parent
    with tarfile.open(tagged) as tar:
        index = json.loads(tar.extractfile("index.json").read())  # type: ignore[union-attr]
    assert [m["annotations"][build.REF_NAME] for m in index["manifests"]] == ["placement-extender:1.0.0-rc.1"]


def test_building_needs_root_and_buildah(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.setattr(build.os, "geteuid", lambda: 1000)
    assert build.main(["--force"]) == 1
    assert "needs root" in capsys.readouterr().err
    monkeypatch.setattr(build.os, "geteuid", lambda: 0)
    monkeypatch.setenv("PATH", "/nonexistent")
    assert build.main(["--force"]) == 1
    assert "apt-get install buildah" in capsys.readouterr().err


def test_load_without_ctr_is_a_clear_error(monkeypatch: pytest.MonkeyPatch, capsys) -> None:
    monkeypatch.setenv("PATH", "/nonexistent")
    assert build.main(["--load"]) == 2
    assert "ctr" in capsys.readouterr().err


# --- the base rootfs -------------------------------------------------------------------------------

DEB822 = """Types: deb
# http://snapshot.example/archive/debian/20250520T000000Z
URIs: http://mirror.example/debian
Suites: bookworm bookworm-updates
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg

Types: deb
URIs: http://mirror.example/debian-security
Suites: bookworm-security
Components: main
"""


@pytest.mark.parametrize(
    ("texts", "mirror"),
    [
        pytest.param([("debian.sources", DEB822)], "http://mirror.example/debian", id="deb822"),
        pytest.param(
            [
                ("debian.sources", "Enabled: no\n" + DEB822.split("\n\n")[0]),
                ("x.list", "deb http://b.example/d bookworm main"),
            ],
            "http://b.example/d",
            id="deb822-disabled",
        ),
        pytest.param(
            [("sources.list", "# deb http://c.example/ bookworm main\ndeb-src http://s.example/ bookworm main\n"
              "deb [arch=amd64 signed-by=/k.gpg] http://a.example/debian bookworm main contrib\n")],
            "http://a.example/debian",
            id="one-line-with-options",
        ),
        pytest.param([("sources.list", "deb http://a.example/debian bullseye main\n")], None, id="other-release"),
    ],
)  # fmt: skip
def test_mirror_from_the_machines_sources(texts: list, mirror: str | None) -> None:
    assert rootfs.mirror_from_sources("bookworm", texts) == mirror


def test_rootfs_key_depends_on_release_and_packages_only() -> None:
    assert rootfs.rootfs_key() == rootfs.rootfs_key(packages=tuple(reversed(rootfs.PACKAGES)))
    assert rootfs.rootfs_key() != rootfs.rootfs_key(release="trixie")
    assert rootfs.rootfs_key() != rootfs.rootfs_key(packages=rootfs.PACKAGES + ("curl",))


def test_the_base_gets_the_machines_sources_for_the_release_and_its_updates(tmp_path: Path) -> None:
    """debootstrap writes the release alone; the image's apt (the Dockerfile installs python3) also
    needs its updates and security suites, as debian:12-slim has them."""
    texts = [
        ("sources.list", "deb [signed-by=/k.gpg] http://a.example/debian bookworm main\n"
         "deb http://a.example/debian-security bookworm-security main\ndeb http://a.example/debian trixie main\n"),
        ("x.sources", "Types: deb\nURIs: http://b.example/d\nSuites: bookworm-updates\nComponents: main\n\n"
         "Types: deb\nURIs: http://b.example/off\nSuites: bookworm\nComponents: main\nEnabled: no\n"),
    ]  # fmt: skip
    stanzas = rootfs.sources_for("bookworm", texts)
    assert [(s["uris"], s["suites"], s.get("signed-by")) for s in stanzas] == [
        ("http://a.example/debian", "bookworm", "/k.gpg"),
        ("http://a.example/debian-security", "bookworm-security", None),
        ("http://b.example/d", "bookworm-updates", None),
    ]
    (tmp_path / "etc/apt").mkdir(parents=True)
    (tmp_path / "etc/apt/sources.list").write_text("deb http://a.example/debian bookworm main\n")
    rootfs._apt_sources(tmp_path, stanzas)
    assert not (tmp_path / "etc/apt/sources.list").exists()
    written = (tmp_path / rootfs.SOURCES_FILE).read_text()
    assert "URIs: http://a.example/debian\nSuites: bookworm\nComponents: main\nSigned-By: /k.gpg\n" in written


def test_a_from_that_is_not_debian_12_is_not_made_from_the_debootstrap(tmp_path: Path) -> None:
    dockerfile = tmp_path / "Dockerfile"
    dockerfile.write_text("FROM docker.io/library/alpine:3\n")
    with pytest.raises(build.BuildError, match="alpine"):
        build.tag_debian_base(lambda *a: "", "base", build.from_image(dockerfile))  # type: ignore[arg-type]
    dockerfile.write_text("ARG BASE\nFROM ${BASE}\n")
    with pytest.raises(build.BuildError, match="one FROM"):
        build.from_image(dockerfile)
