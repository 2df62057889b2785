"""Ports of the local control plane are unique across every process that runs one on the machine.

`make test` runs several pytest workers, each starting control planes; a port that one worker's bind
test found free must not be handed to another before its component binds it."""

from __future__ import annotations

import multiprocessing
import os
import subprocess
import sys
from pathlib import Path

from extender.devcluster.processes import _remove_claims, claim_port


def _claim_all(claims: str, ports: list[int], out) -> None:  # noqa: ANN001
    out.put([port for port in ports if claim_port(port, Path(claims))])


def test_two_processes_claiming_the_same_ports_get_each_port_once(tmp_path: Path) -> None:
    ports = list(range(20000, 20200))
    out: multiprocessing.Queue = multiprocessing.get_context("fork").Queue()
    workers = [
        multiprocessing.get_context("fork").Process(target=_claim_all, args=(str(tmp_path), ports, out))
        for _ in range(3)
    ]
    for worker in workers:
        worker.start()
    won = [out.get(timeout=30) for _ in workers]
    for worker in workers:
        worker.join(timeout=30)
    everyone = [port for ports_won in won for port in ports_won]
    assert sorted(everyone) == ports  # each port to exactly one process


def test_a_claim_held_by_a_live_process_is_refused(tmp_path: Path) -> None:
    (tmp_path / "20001").write_text(str(os.getppid()))  # a live process: pytest's parent
    assert not claim_port(20001, tmp_path)


def test_a_dead_process_claim_is_taken_over(tmp_path: Path) -> None:
    ended = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    (tmp_path / "20002").write_text(ended.stdout.strip())
    assert claim_port(20002, tmp_path)
    assert (tmp_path / "20002").read_text() == str(os.getpid())


def test_a_claim_being_written_is_respected(tmp_path: Path) -> None:
    (tmp_path / "20003").write_text("")  # created, its pid not yet written
    assert not claim_port(20003, tmp_path)


def test_the_last_claimant_out_removes_dead_claimants_files_and_the_directory(tmp_path: Path) -> None:
    claims = tmp_path / "claims"
    ended = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    claims.mkdir()
    (claims / "20004").write_text(ended.stdout.strip())  # killed: it ran no exit handler
    _remove_claims(claims)
    assert not claims.exists()
    claims.mkdir()
    (claims / "20005").write_text(str(os.getppid()))  # a live claimant: its file and the directory stay
    _remove_claims(claims)
    assert sorted(p.name for p in claims.iterdir()) == ["20005"]
