"""The host state a real node changes: recorded before anything is touched (STATE_FILE), compared,
and restored on stop, on the next start after a crash, or by hand; and the machine's one
real-node slot (LOCK_FILE)."""

from __future__ import annotations

import fcntl
import json
import logging
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from extender.devcluster.cluster import WORKDIR_PREFIX

from .config import (
    BRIDGE,
    FIXED_PATHS,
    IPTABLES_TABLES,
    LOCK_FILE,
    NFT_FAMILIES,
    RUN_DIR,
    STATE_DIR,
    STATE_FILE,
    SYSCTLS,
    NodePaths,
    RealNodeError,
    normalize_rules,
    restore_input,
)

log = logging.getLogger(__name__)


# ------------------------------------------------------------------ commands


def run_command(*argv: str, check: bool = True, input: str | None = None) -> subprocess.CompletedProcess[str]:
    result = subprocess.run(argv, input=input, capture_output=True, text=True, check=False)
    if check and result.returncode != 0:
        raise RealNodeError(f"{' '.join(argv)} exited {result.returncode}: {result.stderr.strip()}")
    return result


def ip_json(*args: str) -> list[dict[str, Any]]:
    return json.loads(run_command("ip", "-j", *args).stdout or "[]")


# ------------------------------------------------------------------ host state


def _read_sysctl(key: str) -> str | None:
    try:
        return (Path("/proc/sys") / key).read_text().strip()
    except OSError:
        return None


def sysctl_keys() -> list[str]:
    keys = list(SYSCTLS)
    for conf in sorted(Path("/proc/sys/net/ipv4/conf").iterdir()):
        keys += [f"net/ipv4/conf/{conf.name}/{f.name}" for f in sorted(conf.iterdir()) if f.is_file()]
    return keys


def read_sysctls(keys: list[str]) -> dict[str, str]:
    return {k: v for k in keys if (v := _read_sysctl(k)) is not None}


def _nft_tables() -> list[str]:
    if not shutil.which("nft"):
        return []
    listed = run_command("nft", "list", "tables", check=False).stdout
    return sorted(line.strip() for line in listed.splitlines() if line)


def _rules() -> dict[str, str]:
    tools = [tool for tool in NFT_FAMILIES if shutil.which(f"{tool}-save")]
    return {tool: run_command(f"{tool}-save", check=False).stdout for tool in tools}


def mountpoints() -> list[str]:
    out = []
    for line in Path("/proc/self/mountinfo").read_text().splitlines():
        point = line.split()[4]
        out.append(re.sub(r"\\([0-7]{3})", lambda m: chr(int(m.group(1), 8)), point))
    return out


def cgroup_roots() -> list[Path]:
    """The kubelet's kubepods cgroup in each cgroup v1 hierarchy (or the v2 root)."""
    base = Path("/sys/fs/cgroup")
    return [base / "kubepods"] + sorted(p / "kubepods" for p in base.iterdir() if p.is_dir() and not p.is_symlink())


def snapshot() -> dict[str, Any]:
    """The host state a run may change, as comparable JSON (before vs after a run)."""
    return {
        "sysctls": read_sysctls(sysctl_keys()),
        "iptables": {tool: normalize_rules(text) for tool, text in _rules().items()},
        "nft_tables": _nft_tables(),
        "links": sorted(link["ifname"] for link in ip_json("link", "show")),
        "mounts_named_placement": sorted(p for p in mountpoints() if "placement" in p),
        "kubepods_cgroups": sorted(str(p) for p in cgroup_roots() if p.exists()),
        "paths": {p: os.path.lexists(p) for p in (*FIXED_PATHS, str(RUN_DIR), str(STATE_DIR))},
    }


def compare(before: dict[str, Any], after: dict[str, Any]) -> list[str]:
    """What differs between two snapshots, one line each (empty: the host is as it was)."""
    out = []
    for key in sorted(set(before) | set(after)):
        a, b = before.get(key), after.get(key)
        if isinstance(a, dict) and isinstance(b, dict):
            out += [f"{key}.{k}: {a.get(k)!r} -> {b.get(k)!r}" for k in sorted(set(a) | set(b)) if a.get(k) != b.get(k)]
        elif a != b:
            out.append(f"{key}: {a!r} -> {b!r}")
    return out


@dataclass
class HostState:
    """What the host looked like before the run, and what the run started: STATE_FILE's content."""

    run_dir: str
    owner_pid: int
    sysctls: dict[str, str]
    rules: dict[str, str]
    nft_tables: list[str]
    links: list[str]
    mounts: list[str]
    absent_paths: list[str]
    absent_cgroups: list[str]
    processes: dict[str, dict[str, Any]] = field(default_factory=dict)
    # The control plane's own temp work directory (pki, etcd, kubeconfigs): a harness killed
    # mid-run never reaches LocalCluster.stop's removal, so the restore removes it (each crashed
    # run left ~100 MB in the temp dir before).
    workdirs: list[str] = field(default_factory=list)

    @classmethod
    def record(cls, run_dir: Path) -> HostState:
        return cls(
            run_dir=str(run_dir),
            owner_pid=os.getpid(),
            sysctls=read_sysctls(sysctl_keys()),
            rules=_rules(),
            nft_tables=_nft_tables(),
            links=sorted(link["ifname"] for link in ip_json("link", "show")),
            mounts=mountpoints(),
            absent_paths=[p for p in FIXED_PATHS if not os.path.lexists(p)],
            absent_cgroups=[str(p) for p in cgroup_roots() if p.parent.exists() and not p.exists()],
        )

    def save(self) -> None:
        STATE_DIR.mkdir(parents=True, exist_ok=True)
        tmp = STATE_FILE.with_suffix(".tmp")
        tmp.write_text(json.dumps(asdict(self), indent=1))
        os.replace(tmp, STATE_FILE)

    @classmethod
    def load(cls) -> HostState | None:
        try:
            return cls(**json.loads(STATE_FILE.read_text()))
        except FileNotFoundError:
            return None

    def started(self, name: str, pid: int) -> None:
        """Note a process we started (pid and start time, so a restore after a crash kills it and
        never a later process that reused the pid)."""
        self.processes[name] = {"pid": pid, "start": _start_time(pid)}
        self.save()

    def owns(self, workdir: Path) -> None:
        """Note a work directory the run created and removes on a clean stop."""
        self.workdirs.append(str(workdir))
        self.save()

    # -------------------------------------------------------------- restore
    def restore(self) -> list[str]:
        """Give the host back as recorded; every step runs even if an earlier one failed. Returns
        the problems (empty: restored)."""
        problems: list[str] = []
        run_dir = Path(self.run_dir)
        for step in (
            self._kill_processes,
            self._unmount,
            self._delete_links,
            self._restore_rules,
            self._restore_sysctls,
            self._remove_cgroups,
            self._remove_paths,
            self._remove_workdirs,
        ):
            try:
                step()
            except Exception as err:  # noqa: BLE001 - restore the rest regardless, then report
                problems.append(f"{step.__name__}: {err}")
        left = [p for p in mountpoints() if is_under(p, run_dir)]
        if left:
            problems.append(f"still mounted under {run_dir}: {left}")
        elif run_dir.exists():
            shutil.rmtree(run_dir, ignore_errors=True)
        if not problems:
            STATE_FILE.unlink(missing_ok=True)
        return problems

    def _kill_processes(self) -> None:
        ours = [Path(p) for p in self.absent_cgroups]  # kubepods hierarchies our kubelet made
        # Frozen (cgroup v1 freezer) tasks take no signal until thawed.
        for root in ours:
            for freezer in root.rglob("freezer.state") if root.exists() else ():
                try:
                    freezer.write_text("THAWED")
                except OSError:
                    pass
        victims = {p["pid"] for p in self.processes.values() if _start_time(p["pid"]) == p["start"]}
        victims |= set(_pods_processes(ours)) | set(_shims(Path(self.run_dir)))
        victims.discard(os.getpid())
        for pid in victims:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline and any(_alive(p) for p in victims):
            time.sleep(0.1)

    def _unmount(self) -> None:
        before = set(self.mounts)
        roots = [Path(self.run_dir)] + [Path(p) for p in self.absent_paths]
        points = [p for p in mountpoints() if p not in before and any(is_under(p, r) for r in roots)]
        points += [p for p in mountpoints() if p.startswith("/run/netns/cni-") and p not in before]
        for point in sorted(set(points), key=lambda p: p.count("/"), reverse=True):
            if run_command("umount", point, check=False).returncode != 0:
                run_command("umount", "-l", point, check=False)

    def _delete_links(self) -> None:
        names = {link["ifname"] for link in ip_json("link", "show")}
        if BRIDGE in names and BRIDGE not in self.links:
            for port in ip_json("link", "show", "master", BRIDGE):
                run_command("ip", "link", "delete", port["ifname"], check=False)
            run_command("ip", "link", "delete", BRIDGE)

    def _restore_rules(self) -> None:
        for tool, baseline in self.rules.items():
            text, created = restore_input(baseline, run_command(f"{tool}-save").stdout)
            run_command(f"{tool}-restore", input=text)
            if created and "nf_tables" in run_command(tool, "-V").stdout and shutil.which("nft"):
                family = NFT_FAMILIES[tool]
                for table in created:
                    if f"table {family} {table}" not in self.nft_tables:
                        run_command("nft", "delete", "table", family, table, check=False)
        # nftables tables a component made itself (kube-proxy's own, were it ever in nftables mode)
        for line in _nft_tables():
            family, _, name = line.removeprefix("table ").partition(" ")
            if line not in self.nft_tables and name in ("kube-proxy", *IPTABLES_TABLES):
                run_command("nft", "delete", "table", family, name, check=False)

    def _restore_sysctls(self) -> None:
        order = sorted(self.sysctls, key=lambda k: k != "net/ipv4/ip_forward")  # it resets the others
        failed = []
        for key in order:
            now = _read_sysctl(key)
            if now is None or now == self.sysctls[key]:
                continue
            try:
                (Path("/proc/sys") / key).write_text(self.sysctls[key] + "\n")
            except OSError as err:
                failed.append(f"{key}: {err}")
        if failed:
            raise RealNodeError(f"could not restore {failed}")

    def _remove_cgroups(self) -> None:
        left = []
        deadline = time.monotonic() + 20
        for root in map(Path, self.absent_cgroups):
            while root.exists():
                for folder, _, _ in os.walk(root, topdown=False):
                    try:
                        os.rmdir(folder)
                    except OSError:
                        pass
                if not root.exists() or time.monotonic() > deadline:
                    break
                time.sleep(0.2)
            if root.exists():
                left.append(str(root))
        if left:
            raise RealNodeError(f"cgroups still there (processes left in them?): {left}")

    def _remove_paths(self) -> None:
        for path in map(Path, self.absent_paths):
            if path.is_symlink() or path.is_file():
                path.unlink()
            elif path.exists() and not any(is_under(p, path) for p in mountpoints()):
                shutil.rmtree(path, ignore_errors=True)

    def _remove_workdirs(self) -> None:
        """Only a temp directory named as LocalCluster names its own: never whatever path a state
        file happens to hold."""
        temp = Path(tempfile.gettempdir())
        for path in map(Path, self.workdirs):
            if path.parent == temp and path.name.startswith(WORKDIR_PREFIX) and not path.is_symlink():
                shutil.rmtree(path, ignore_errors=True)


def is_under(path: str, root: Path) -> bool:
    return path == str(root) or path.startswith(str(root).rstrip("/") + "/")


def _start_time(pid: int) -> int | None:
    try:
        return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[19])
    except (OSError, IndexError, ValueError):
        return None


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state != "Z"


def _pods_processes(roots: list[Path]) -> list[int]:
    """Every process in these kubepods cgroups: the pods our kubelet started (the hierarchies are
    ours: they did not exist before the run)."""
    pids: set[int] = set()
    for root in roots:
        for procs in root.rglob("cgroup.procs") if root.exists() else ():
            try:
                pids |= {int(p) for p in procs.read_text().split()}
            except OSError:
                pass
    return sorted(pids)


def _shims(run_dir: Path) -> list[int]:
    """containerd's shims of our containerd (their command line names its socket, in the run dir)."""
    socket = str(NodePaths(run_dir).containerd_socket)
    out = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            argv = (proc / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if argv and b"containerd-shim" in argv[0] and socket.encode() in argv:
            out.append(int(proc.name))
    return out


# ------------------------------------------------------------------ the machine's one slot


def take_lock() -> int:
    """The machine's one real-node slot: an flock on LOCK_FILE, holding our pid. The file is removed
    on release (no trace left), so a lock taken on a file already unlinked is taken again."""
    while True:
        STATE_DIR.mkdir(parents=True, exist_ok=True)
        fd = os.open(LOCK_FILE, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.read(fd, 64).decode(errors="replace").strip()
            os.close(fd)
            raise RealNodeError(
                f"a real node already runs on this machine (pid {holder or '?'}): one at a time"
            ) from None
        try:
            current = os.stat(LOCK_FILE).st_ino
        except FileNotFoundError:
            current = None
        if current == os.fstat(fd).st_ino:
            os.ftruncate(fd, 0)
            os.write(fd, str(os.getpid()).encode())
            return fd
        os.close(fd)  # released and removed by its holder meanwhile: take the new file


def release_lock(fd: int) -> None:
    """Remove LOCK_FILE (and STATE_DIR, once no state is kept in it) while still holding it."""
    LOCK_FILE.unlink(missing_ok=True)
    try:
        STATE_DIR.rmdir()
    except OSError:
        pass  # a state file kept for a later restore
    fcntl.flock(fd, fcntl.LOCK_UN)
    os.close(fd)


# ------------------------------------------------------------------ by hand


def restore_by_hand() -> int:
    """Restore what a crashed run left (refusing while a run holds the lock)."""
    try:
        fd = take_lock()
    except RealNodeError as err:
        print(f"{err}; stop it instead", file=sys.stderr)
        return 1
    try:
        state = HostState.load()
        if state is None:
            print(f"nothing to restore: no {STATE_FILE}")
            return 0
        problems = state.restore()
        for problem in problems:
            print(f"not restored: {problem}", file=sys.stderr)
        print("restored" if not problems else f"state kept in {STATE_FILE}")
        return 1 if problems else 0
    finally:
        release_lock(fd)
