"""hack/image/: the daemonless image builder. Its Dockerfile parser (table-driven, and a property
that arbitrary text only ever raises its own error), the OCI archive writer (every digest and size
recomputed), and the repo's real Dockerfile. Plain data: no root, no network, no chroot."""

from __future__ import annotations

import gzip
import hashlib
import importlib.util
import io
import json
import os
import struct
import sys
import tarfile
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

ROOT = Path(__file__).resolve().parents[2]
# The builder's modules import each other by their plain names, as hack/image/build.py runs them.
sys.path.insert(0, str(ROOT / "hack" / "image"))

import build_context  # noqa: E402
import dockerfile as df  # noqa: E402
import oci  # noqa: E402
import rootfs  # noqa: E402

_spec = importlib.util.spec_from_file_location("hack_image_build", ROOT / "hack" / "image" / "build.py")
assert _spec is not None and _spec.loader is not None
build = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(build)  # the CLI module under a name of its own ("build" is a PyPI package)

SH = "/bin/sh"


def parse(text: str, **build_args: str) -> list:
    return df.parse(text, build_args)


def only(text: str, kind: type, **build_args: str):
    found = [i for i in parse(text, **build_args) if isinstance(i, kind)]
    assert len(found) == 1, found
    return found[0]


# --- the parser ----------------------------------------------------------------------------------

CASES = [
    pytest.param("FROM x\nRUN a \\\n  b\n", df.Run, {}, df.Run(2, (SH, "-c", "a   b"), True), id="continuation"),
    pytest.param(
        "FROM x\nRUN a \\   \n# a comment inside\n\n  && b\n",
        df.Run,
        {},
        df.Run(2, (SH, "-c", "a   && b"), True),
        id="continuation-skips-comment-and-blank-lines",
    ),
    pytest.param(
        "FROM x\nRUN ends with \\", df.Run, {}, df.Run(2, (SH, "-c", "ends with"), True), id="eof-continuation"
    ),
    pytest.param(
        '# a comment\n\n  from  x\nentrypoint ["python", "-m", "extender"]\n',
        df.Entrypoint,
        {},
        df.Entrypoint(4, ("python", "-m", "extender"), False),
        id="json-entrypoint-lowercase-keyword",
    ),
    pytest.param(
        "FROM x\nENTRYPOINT exec python -m extender\n",
        df.Entrypoint,
        {},
        df.Entrypoint(2, (SH, "-c", "exec python -m extender"), True),
        id="shell-entrypoint",
    ),
    pytest.param('FROM x\nCMD ["serve"]', df.Cmd, {}, df.Cmd(2, ("serve",), False), id="json-cmd"),
    pytest.param(
        "FROM x\nCMD [not json\n", df.Cmd, {}, df.Cmd(2, (SH, "-c", "[not json"), True), id="bad-json-is-shell-form"
    ),
    pytest.param(
        'FROM x\nCMD ["a", 1]\n', df.Cmd, {}, df.Cmd(2, (SH, "-c", '["a", 1]'), True), id="non-string-json-is-shell"
    ),
    pytest.param(
        "FROM x\nRUN echo $HOME ${A}\n",
        df.Run,
        {},
        df.Run(2, (SH, "-c", "echo $HOME ${A}"), True),
        id="run-is-not-substituted",
    ),
    pytest.param(
        'FROM x\nENV A=0\nENV A=1 B=$A C="two words" D=\'single $A\' E=\\$A F=${A}x G="q\\"$A"\n',
        df.Env,
        {},
        None,
        id="env-pairs",
    ),
    pytest.param("FROM x\nENV K some  value\n", df.Env, {}, df.Env(2, (("K", "some  value"),)), id="env-legacy"),
    pytest.param(
        "FROM x\nENV PATH=/opt/v/bin:$PATH\n",
        df.Env,
        {},
        df.Env(2, (("PATH", "/opt/v/bin:" + df.DEFAULT_PATH),)),
        id="env-path-from-base",
    ),
    pytest.param(
        "ARG BASE=python:slim\nFROM ${BASE}\n", df.From, {}, df.From(2, "python:slim"), id="arg-default-in-from"
    ),
    pytest.param(
        "ARG BASE=python:slim\nFROM ${BASE}\n",
        df.From,
        {"BASE": "debian:bookworm"},
        df.From(2, "debian:bookworm"),
        id="build-arg-overrides-default",
    ),
    pytest.param(
        "ARG BASE\nFROM ${BASE:-fallback} AS build\n", df.From, {}, df.From(2, "fallback"), id="unset-arg-default-word"
    ),
    pytest.param(
        "ARG BASE\nFROM --platform=linux/amd64 $BASE\n",
        df.From,
        {"BASE": "img"},
        df.From(2, "img", "linux/amd64"),
        id="from-platform",
    ),
    pytest.param(
        "ARG V=1\nFROM x\nARG V\nARG W=${V}2\nRUN true\n",
        df.Run,
        {},
        df.Run(5, (SH, "-c", "true"), True, (("V", "1"), ("W", "12"))),
        id="stage-arg-takes-global-default",
    ),
    pytest.param(
        "ARG V=1\nFROM x\nARG V\nRUN true\n",
        df.Run,
        {"V": "9"},
        df.Run(4, (SH, "-c", "true"), True, (("V", "9"),)),
        id="stage-arg-build-arg",
    ),
    pytest.param(
        "FROM x\nARG V=1\nENV V=2\nRUN true\n",
        df.Run,
        {},
        df.Run(4, (SH, "-c", "true"), True, ()),
        id="env-shadows-arg",
    ),
    pytest.param(
        "FROM x\nENV S=set E=\nLABEL a=${S:+alt} b=${E:+alt} c=${E-unset} d=${E:-empty} e=${N-none}\n",
        df.Label,
        {},
        df.Label(3, (("a", "alt"), ("b", ""), ("c", ""), ("d", "empty"), ("e", "none"))),
        id="modifiers",
    ),
    pytest.param(
        'FROM x\nLABEL "org.x y"="a b" k=v\n', df.Label, {}, df.Label(2, (("org.x y", "a b"), ("k", "v"))), id="label"
    ),
    pytest.param("FROM x\nWORKDIR /app\nWORKDIR sub/../src\n", df.Workdir, {}, None, id="workdir-relative"),
    pytest.param(
        "FROM x\nWORKDIR /app\nCOPY --chown=65532:65532 --chmod=0755 a b ./\n",
        df.Copy,
        {},
        df.Copy(3, ("a", "b"), "./", "/app", "65532:65532", "0755"),
        id="copy-flags",
    ),
    pytest.param(
        'FROM x\nENV D=/opt\nCOPY ["a b", "$D/"]\n',
        df.Copy,
        {},
        df.Copy(3, ("a b",), "/opt/", "/"),
        id="copy-json-form",
    ),
    pytest.param(
        "FROM x\nEXPOSE 8443 9090/UDP 1000-1002\n",
        df.Expose,
        {},
        df.Expose(2, ("8443/tcp", "9090/udp", "1000-1002/tcp")),
        id="expose",
    ),
    pytest.param("FROM x\nUSER ${U:-65532}:65532\n", df.User, {}, df.User(2, "65532:65532"), id="user"),
]


@pytest.mark.parametrize(("text", "kind", "build_args", "expected"), CASES)
def test_parser_cases(text: str, kind: type, build_args: dict, expected) -> None:
    got = [i for i in parse(text, **build_args) if isinstance(i, kind)][-1]
    if expected is not None:
        assert got == expected
    elif kind is df.Env:
        assert dict(got.pairs) == {
            "A": "1",
            "B": "0",
            "C": "two words",
            "D": "single $A",
            "E": "$A",
            "F": "0x",
            "G": 'q"0',
        }
    elif kind is df.Workdir:
        assert got.path == "/app/src"


ERRORS = [
    pytest.param("FROM x\n\nADD a b\n", 3, "unsupported instruction 'ADD'", id="add"),
    pytest.param("FROM x\nHEALTHCHECK NONE\n", 2, "unsupported instruction", id="healthcheck"),
    pytest.param(
        'FROM x\nRUN a \\\n b\nSHELL ["bash"]\n', 4, "unsupported instruction 'SHELL'", id="after-continuation"
    ),
    pytest.param("FROM a\nFROM b\n", 2, "multi-stage", id="second-from"),
    pytest.param("ENV A=1\nFROM x\n", 1, "ENV before FROM", id="env-before-from"),
    pytest.param("ARG A=1\n", None, "no FROM", id="no-from"),
    pytest.param("", None, "no FROM", id="empty"),
    pytest.param('FROM x\nENV A="open\n', 2, "unterminated", id="unterminated-quote"),
    pytest.param("FROM x\nRUN --mount=type=cache,target=/c true\n", 2, "not supported", id="run-mount"),
    pytest.param("FROM x\nCOPY --from=build /a /b\n", 2, "multi-stage", id="copy-from"),
    pytest.param("FROM x\nCOPY a\n", 2, "source and a destination", id="copy-one-arg"),
    pytest.param("FROM x\nUSER ${NOPE:?must be set}\n", 2, "must be set", id="required-var"),
    pytest.param("FROM x\nENV A=${B\n", 2, "missing '}'", id="unclosed-brace"),
    pytest.param("FROM x\nENV A=${B/x/y}\n", 2, "unsupported substitution", id="pattern-substitution"),
    pytest.param("FROM x\nEXPOSE http\n", 2, "invalid port", id="bad-port"),
    pytest.param("FROM x\nRUN\n", 2, "needs arguments", id="empty-run"),
    pytest.param("# escape=`\nFROM x\n", 1, "escape", id="escape-directive"),
    pytest.param("FROM x\nARG 1A=2\n", 2, "invalid name", id="bad-arg-name"),
]


@pytest.mark.parametrize(("text", "line", "message"), ERRORS)
def test_parser_errors_name_the_line(text: str, line: int | None, message: str) -> None:
    with pytest.raises(df.DockerfileError) as raised:
        df.parse(text)
    assert raised.value.line == line
    assert message in str(raised.value)
    if line:
        assert f"line {line}:" in str(raised.value)


def test_image_config_follows_docker() -> None:
    text = 'FROM x\nCMD ["a"]\nENTRYPOINT ["e"]\nEXPOSE 80\nLABEL k=v\nENV A=1\nUSER 1:2\nWORKDIR /w\n'
    config = df.image_config(df.parse(text))
    assert config == {
        "Cmd": ["a"],  # set in this stage before ENTRYPOINT: kept
        "Entrypoint": ["e"],
        "ExposedPorts": {"80/tcp": {}},
        "Labels": {"k": "v"},
        "Env": [f"PATH={df.DEFAULT_PATH}", "A=1"],
        "User": "1:2",
        "WorkingDir": "/w",
    }
    assert "Cmd" not in df.image_config(df.parse("FROM x\nENTRYPOINT e\n"))


KEYWORDS = list(df.SUPPORTED) + ["ADD", "SHELL", "from", "run", "#", "", "\\"]
PIECES = st.text(alphabet=st.sampled_from(list(" \t\\\"'$={}[]:-+?/#,.aZ09_\n")), max_size=30)


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=200))
def test_parser_raises_only_its_own_error_on_any_text(text: str) -> None:
    try:
        df.parse(text)
    except df.DockerfileError:
        pass


@settings(max_examples=300, deadline=None)
@given(
    st.lists(st.tuples(st.sampled_from(KEYWORDS), PIECES), max_size=8),
    st.dictionaries(st.sampled_from(["A", "BASE"]), PIECES),
)
def test_parser_raises_only_its_own_error_on_dockerfile_like_text(lines, build_args) -> None:
    text = "\n".join(f"{k} {rest}" for k, rest in [("FROM", "x")] + lines)
    try:
        df.parse(text, build_args)
    except df.DockerfileError:
        pass


# --- the repo's Dockerfile -------------------------------------------------------------------------


def test_the_repo_dockerfile_uses_only_supported_instructions() -> None:
    text = (ROOT / "Dockerfile").read_text()
    keywords = {line.split()[0].upper() for _, line in df.logical_lines(text)}
    assert keywords <= set(df.SUPPORTED), keywords - set(df.SUPPORTED)
    default = df.parse(text)
    assert [i.image for i in default if isinstance(i, df.From)] == ["python:3.11.14-slim-bookworm"]
    debian = df.parse(text, {"BASE": "debian:bookworm"})
    assert [i.image for i in debian if isinstance(i, df.From)] == ["debian:bookworm"]
    config = df.image_config(debian)
    assert config["Entrypoint"] == ["python", "-m", "extender"] and config["Cmd"] == ["serve"]
    assert config["User"] == "65532:65532"
    path = next(e for e in config["Env"] if e.startswith("PATH="))
    assert path.startswith("PATH=/opt/extender/bin:")  # the venv's python is the ENTRYPOINT's
    (run,) = [i for i in debian if isinstance(i, df.Run)]
    assert run.argv[-1].startswith("python3 -m venv /opt/extender")  # no `python`, no system pip on Debian
    for copy in (i for i in debian if isinstance(i, df.Copy)):
        assert build_context.copy_sources(ROOT, copy.sources, copy.line)


# --- the OCI archive --------------------------------------------------------------------------------


def read_archive(path: Path) -> tuple[dict, dict, dict, bytes]:
    """index, manifest, config and the uncompressed layer, after checking every digest and size."""
    with tarfile.open(path) as tar:
        files = {m.name: tar.extractfile(m).read() for m in tar.getmembers() if m.isfile()}  # type: ignore[union-attr]

    def blob(descriptor: dict) -> bytes:
        data = files[f"blobs/sha256/{descriptor['digest'].removeprefix('sha256:')}"]
        assert "sha256:" + hashlib.sha256(data).hexdigest() == descriptor["digest"]
        assert len(data) == descriptor["size"]
        return data

    assert json.loads(files["oci-layout"]) == {"imageLayoutVersion": "1.0.0"}
    index = json.loads(files["index.json"])
    assert index["schemaVersion"] == 2 and index["mediaType"] == oci.INDEX
    manifests = {d["digest"] for d in index["manifests"]}
    assert len(manifests) == 1
    manifest = json.loads(blob(index["manifests"][0]))
    assert manifest["mediaType"] == oci.MANIFEST and manifest["config"]["mediaType"] == oci.CONFIG
    config = json.loads(blob(manifest["config"]))
    (layer_desc,) = manifest["layers"]
    assert layer_desc["mediaType"] == oci.LAYER
    layer = gzip.decompress(blob(layer_desc))
    assert config["rootfs"] == {"type": "layers", "diff_ids": ["sha256:" + hashlib.sha256(layer).hexdigest()]}
    assert config["os"] == "linux" and config["architecture"] == oci.architecture()
    return index, manifest, config, layer


def test_oci_archive_of_a_tiny_rootfs(tmp_path: Path) -> None:
    root = tmp_path / "rootfs"
    (root / "usr/bin").mkdir(parents=True)
    (root / "usr/bin/tool").write_text("#!/bin/sh\n")
    os.chmod(root / "usr/bin/tool", 0o755)
    (root / "etc").mkdir()
    (root / "etc/passwd").write_text("root:x:0:0::/root:/bin/sh\n")
    (root / "bin").symlink_to("usr/bin")
    os.link(root / "etc/passwd", root / "etc/passwd-")
    for runtime in ("proc", "dev", "sys"):
        (root / runtime).mkdir()
    (root / "proc/leftover").write_text("not in the image")
    (root / "data").write_text("owned by the extender")
    chowned = os.geteuid() == 0
    if chowned:
        os.chown(root / "data", 65532, 65532)

    text = (ROOT / "Dockerfile").read_text()
    instructions = df.parse(text, {"BASE": "debian:bookworm"})
    layer = oci.tree_layer(root, tmp_path / "blobs")
    refs = ["placement-extender:0.1.0", "placement-extender:dev"]
    archive = oci.write_archive(tmp_path / "out/image.oci.tar", [layer], df.image_config(instructions), refs)

    index, manifest, config, layer_bytes = read_archive(archive)
    assert [d["annotations"][oci.REF_NAME] for d in index["manifests"]] == refs
    assert [d["annotations"][oci.CONTAINERD_NAME] for d in index["manifests"]] == [
        "docker.io/library/placement-extender:0.1.0",
        "docker.io/library/placement-extender:dev",
    ]
    assert manifest["layers"][0]["digest"] == layer.digest and config["rootfs"]["diff_ids"] == [layer.diff_id]
    parsed = df.image_config(instructions)
    for key in ("Entrypoint", "Cmd", "User", "Env", "WorkingDir"):
        assert config["config"][key] == parsed[key]

    with tarfile.open(fileobj=io.BytesIO(layer_bytes)) as tar:
        members = {m.name: m for m in tar.getmembers()}
    names = list(members)
    assert set(names) >= {"usr", "usr/bin", "usr/bin/tool", "etc/passwd", "bin", "proc", "dev", "sys", "data"}
    assert "proc/leftover" not in names  # the runtime's folders are empty in an image
    assert names.index("usr") < names.index("usr/bin") < names.index("usr/bin/tool")
    assert members["bin"].issym() and members["bin"].linkname == "usr/bin"
    assert members["etc/passwd-"].islnk() and members["etc/passwd-"].linkname == "etc/passwd"
    assert members["usr/bin/tool"].mode & 0o777 == 0o755
    assert all(m.uname == "" and m.gname == "" for m in members.values())  # numeric owners only
    if chowned:
        assert (members["data"].uid, members["data"].gid) == (65532, 65532)
        assert (members["usr/bin/tool"].uid, members["usr/bin/tool"].gid) == (0, 0)


def test_normalized_names() -> None:
    assert oci.normalized_name("pause:3.10") == "docker.io/library/pause:3.10"
    assert oci.normalized_name("me/app:1") == "docker.io/me/app:1"
    assert oci.normalized_name("registry.k8s.io/kube-scheduler:v1") == "registry.k8s.io/kube-scheduler:v1"
    assert oci.normalized_name("localhost/app:1") == "localhost/app:1"


def elf(interpreter: bool) -> bytes:
    """A minimal 64-bit little-endian ELF header and program header table (PT_LOAD, maybe PT_INTERP)."""
    phnum = 2 if interpreter else 1
    header = struct.pack(
        "<4sBBBB8sHHIQQQIHHHHHH", b"\x7fELF", 2, 1, 1, 0, b"", 2, 62, 1, 0, 64, 0, 0, 64, 56, phnum, 0, 0, 0
    )
    load = struct.pack("<IIQQQQQQ", 1, 5, 0, 0, 0, 0, 0, 0)
    interp = struct.pack("<IIQQQQQQ", 3, 4, 0, 0, 0, 0, 0, 0)
    return header + load + (interp if interpreter else b"")


def test_static_binary_image(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys) -> None:
    dynamic = tmp_path / "dynamic"
    dynamic.write_bytes(elf(interpreter=True))
    assert "dynamically linked" in (build.static_elf_error(dynamic) or "")
    script = tmp_path / "script"
    script.write_text("#!/bin/sh\n")
    assert build.static_elf_error(script) == "not an ELF executable"

    binary = tmp_path / "pause"
    binary.write_bytes(elf(interpreter=False))
    assert build.static_elf_error(binary) is None
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    argv = ["--static-binary", str(binary), "--name", "registry.k8s.io/pause:3.10", "--user", "65535:65535"]
    assert build.main(argv + ["--out", str(tmp_path / "out")]) == 0
    archive = Path(capsys.readouterr().out.strip().splitlines()[-1])
    assert archive == tmp_path / "out" / "registry.k8s.io_pause_3.10.oci.tar"
    index, _, config, layer = read_archive(archive)
    assert index["manifests"][0]["annotations"][oci.CONTAINERD_NAME] == "registry.k8s.io/pause:3.10"
    assert config["config"]["Entrypoint"] == ["/usr/local/bin/pause"] and config["config"]["User"] == "65535:65535"
    with tarfile.open(fileobj=io.BytesIO(layer)) as tar:
        members = {m.name: m for m in tar.getmembers()}
        assert tar.extractfile("usr/local/bin/pause").read() == binary.read_bytes()  # type: ignore[union-attr]
    assert list(members) == ["usr", "usr/local", "usr/local/bin", "usr/local/bin/pause"]
    assert members["usr/local/bin/pause"].mode == 0o755 and members["usr/local/bin/pause"].uid == 0
    # the second run is the cache's
    assert build.main(argv) == 0
    assert "cached" in capsys.readouterr().err


def test_load_without_ctr_is_a_clear_error(monkeypatch: pytest.MonkeyPatch, capsys) -> None:
    monkeypatch.setenv("PATH", "/nonexistent")
    assert build.main(["--load"]) == 2
    assert "ctr" in capsys.readouterr().err


# --- the base rootfs, the build context, paths in the chroot ------------------------------------------

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


def test_copy_sources_stay_in_the_context(tmp_path: Path) -> None:
    (tmp_path / "pkg/sub").mkdir(parents=True)
    (tmp_path / "pkg/sub/a.py").write_text("a")
    (tmp_path / "pkg/skip.pyc").write_text("b")
    (tmp_path / ".dockerignore").write_text("*/*.pyc\n")
    entries = build_context.copy_sources(tmp_path, ("pkg",), 3)
    assert [rel for _, _, rel in entries] == ["", "sub", "sub/a.py"]
    with pytest.raises(df.DockerfileError, match="line 3: .*outside the build context"):
        build_context.copy_sources(tmp_path, ("../etc",), 3)
    with pytest.raises(df.DockerfileError, match="not found"):
        build_context.copy_sources(tmp_path, ("missing",), 3)


def test_paths_resolve_inside_the_rootfs(tmp_path: Path) -> None:
    (tmp_path / "etc").mkdir()
    (tmp_path / "link").symlink_to("/etc")
    (tmp_path / "etc/up").symlink_to("../../../..")
    assert build.inside(tmp_path, "/link/passwd") == tmp_path / "etc/passwd"
    assert build.inside(tmp_path, "/etc/up/etc") == tmp_path / "etc"
    assert build.inside(tmp_path, "/../../x") == tmp_path / "x"
    assert build.inside(tmp_path, "/link", follow_last=False) == tmp_path / "link"


def test_users_resolve_from_the_rootfs(tmp_path: Path) -> None:
    (tmp_path / "etc").mkdir()
    (tmp_path / "etc/passwd").write_text(
        "root:x:0:0::/root:/bin/sh\nextender:x:65532:1000::/home/e:/usr/sbin/nologin\n"
    )
    (tmp_path / "etc/group").write_text("root:x:0:\nextender:x:1000:\n")
    assert build.resolve_user(tmp_path, "extender") == (65532, 1000, "/home/e")
    assert build.resolve_user(tmp_path, "65532:65532") == (65532, 65532, "/home/e")
    assert build.resolve_user(tmp_path, "123") == (123, 0, "/")
    assert build.resolve_user(tmp_path, "123", gid_defaults_to_uid=True) == (123, 123, "/")
    assert build.resolve_user(tmp_path, "0:extender") == (0, 1000, "/root")
    with pytest.raises(build.BuildError, match="nobody"):
        build.resolve_user(tmp_path, "nobody")


@pytest.mark.skipif(os.geteuid() != 0, reason="COPY sets owners (chown): needs root")
def test_copy_step_places_files_like_docker(tmp_path: Path) -> None:
    context, root = tmp_path / "context", tmp_path / "rootfs"
    (context / "pkg/sub").mkdir(parents=True)
    (context / "pkg/sub/a.py").write_text("a")
    (context / "pkg/link").symlink_to("sub/a.py")
    (context / "one.txt").write_text("1")
    (root / "etc").mkdir(parents=True)
    (root / "etc/passwd").write_text("root:x:0:0::/root:/bin/sh\n")
    (root / "app").mkdir()
    outside = tmp_path / "outside.txt"
    outside.write_text("host file")
    (root / "app/one.txt").symlink_to(outside)  # a COPY must replace it, never write through it

    text = "FROM x\nWORKDIR /app\nCOPY one.txt pkg ./\nCOPY --chown=7 pkg /opt/new\nCOPY one.txt /opt/renamed\n"
    for ins in df.parse(text):
        if isinstance(ins, df.Copy):
            build.copy_step(root, ins, build_context.copy_sources(context, ins.sources, ins.line))
    assert outside.read_text() == "host file"
    assert (root / "app/one.txt").read_text() == "1" and not (root / "app/one.txt").is_symlink()
    assert (root / "app/sub/a.py").read_text() == "a" and os.readlink(root / "app/link") == "sub/a.py"
    assert (root / "app").stat().st_uid == 0  # an existing destination keeps its owner
    assert (root / "opt/new").stat().st_uid == 7 and (root / "opt/new/sub/a.py").stat().st_gid == 7
    assert (root / "opt").stat().st_uid == 0  # parents made on the way are root's
    assert (root / "opt/renamed").read_text() == "1"
