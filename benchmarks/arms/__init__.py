"""The arms of a benchmark: what the same requests are sent to, side by side, in one run.

Each arm is a module here with `DESCRIPTION` and `start(session) -> Endpoint` (raising
`ArmUnavailable` with a reason when it cannot run, e.g. no Go toolchain):

- `extender`: the extender served by gunicorn as deployed (benchmarks/extender_app.py).
- `noop`: the Python floor, `/noop` on the same server (same parse path, fixed small answer), plus
  `/noop-raw` (body read, no JSON: the HTTP floor) once per iteration.
- `gofloor`: the Go do-nothing extender (benchmarks/gofloor), built and cached on first use.

A kind (benchmarks/kinds/) opens a `Session`, starts the arms the workload names, and sends every
arm the same payloads, rotating the arms' order between iterations.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from benchmarks.arms.server import Client, Server, free_port
from benchmarks.common import REPO, GoFloorBuild

NAMES = ("extender", "noop", "gofloor")


class ArmUnavailable(Exception):
    """An arm that cannot run here; its message is the reason, reported instead of its figures."""


@dataclass
class Endpoint:
    """A started arm: its client and the paths that take the filter and the prioritize payloads;
    `extra` are (figure, path) requests sent the filter payload once per iteration."""

    arm: str
    client: Client
    filter_path: str = "/filter"
    prioritize_path: str = "/prioritize"
    extra: tuple[tuple[str, str], ...] = ()
    info: dict[str, Any] = field(default_factory=dict)
    stop: Callable[[], None] = lambda: None


@dataclass
class Session:
    """What one run of a workload shares among its arms: the workdir, the tree served, the extender's
    server (started once, shared by the extender and noop arms) and the Go floor build."""

    name: str
    workdir: Path
    nodes: int
    pods: int
    server_extra: list[str] = field(default_factory=list)
    tree: Path = REPO
    go: GoFloorBuild | None = None
    filter_body: bytes = b""
    prioritize_body: bytes = b""
    log: Callable[[str], None] = print
    server: Server | None = None
    client: Client | None = None
    ready_seconds: float = 0.0
    _stops: list[Callable[[], None]] = field(default_factory=list)

    def extender(self) -> tuple[Server, Client]:
        if self.server is None:
            port = free_port()
            self.server = Server(
                self.nodes, self.pods, port, self.workdir / f"server-{self.name}.log", self.server_extra, tree=self.tree
            )
            self._stops.append(self.server.stop)
            self.ready_seconds = self.server.wait_ready()
            self.client = Client(port)
            self._stops.append(self.client.close)
        assert self.client is not None
        return self.server, self.client

    def on_close(self, stop: Callable[[], None]) -> None:
        self._stops.append(stop)

    def close(self) -> None:
        for stop in reversed(self._stops):
            stop()
        self._stops.clear()


def start(name: str, session: Session) -> Endpoint:
    if name not in NAMES:
        raise ArmUnavailable(f"no arm {name!r} (arms: {', '.join(NAMES)})")
    return importlib.import_module(f"benchmarks.arms.{name}").start(session)


def describe() -> dict[str, str]:
    return {name: importlib.import_module(f"benchmarks.arms.{name}").DESCRIPTION for name in NAMES}
