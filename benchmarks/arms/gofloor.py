"""The Go floor (benchmarks/gofloor): a do-nothing extender in Go, encoding/json into kube-scheduler's
extenderv1.ExtenderArgs, answers of realistic size (filter: every candidate passes; prioritize: score
0 each). Built with `go build` into ${XDG_CACHE_HOME:-~/.cache}/placement-extender/gofloor-<hash>/ on
first use, then reused; checked with one filter and one prioritize before it is measured."""

from __future__ import annotations

import json

from benchmarks.arms import ArmUnavailable, Endpoint, Session
from benchmarks.arms.server import Client, GoFloorServer, free_port
from benchmarks.common import build_go_floor

DESCRIPTION = "the Go do-nothing extender (benchmarks/gofloor, built and cached): /filter, /prioritize"


def start(session: Session) -> Endpoint:
    if session.go is None:
        session.go = build_go_floor(log=session.log)
    go = session.go
    if go.path is None:
        raise ArmUnavailable(go.reason)
    port = free_port()
    try:
        server = GoFloorServer(go.path, port, session.workdir / f"gofloor-{session.name}.log")
    except OSError as exc:
        raise ArmUnavailable(f"cannot start {go.path}: {exc}") from exc
    client: Client | None = None
    try:
        ready_s = server.wait_ready(timeout=30)
        client = Client(port)
        client.conn.request("GET", "/readyz")
        go_version = client.conn.getresponse().read().decode().strip()
        _, filter_answer = client.post("/filter", session.filter_body)
        _, prio_answer = client.post("/prioritize", session.prioritize_body)
        candidates = json.loads(session.filter_body)
        passed = json.loads(filter_answer)
        if candidates.get("Nodes"):
            want, got = len(candidates["Nodes"]["items"]), len(passed["Nodes"]["items"])
        else:
            want, got = len(candidates["NodeNames"]), len(passed["NodeNames"])
        if want != got:
            raise RuntimeError(f"the Go floor passed {got} of {want} candidates")
    except (OSError, RuntimeError, TimeoutError, KeyError, TypeError, ValueError) as exc:
        if client is not None:
            client.close()
        server.stop()
        raise ArmUnavailable(f"server: {exc}") from exc
    info = {
        "go_version": go_version,
        "server_ready_seconds": round(ready_s, 2),
        "filter_answer_bytes": len(filter_answer),
        "prioritize_answer_bytes": len(prio_answer),
        "build": go.describe(),
    }
    session.log(
        f"[{session.name}] Go floor ready in {ready_s:.2f}s ({go_version}); filter answer "
        f"{len(filter_answer):,} bytes, prioritize answer {len(prio_answer):,} bytes"
    )

    def stop() -> None:
        client.close()
        server.stop()

    return Endpoint("gofloor", client, "/filter", "/prioritize", info=info, stop=stop)
