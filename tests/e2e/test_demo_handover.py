"""The demo hands over a working shell: `make demo`'s own command runs, and every line it
prints to paste and to try works as printed, in a fresh shell that has only those exports.

The demo is started as a user starts it (`python -m extender dev up`, smaller than the default so
it is quick), its output read until it says it is running; then each printed command runs in
`bash` with nothing on PATH but the system's directories and the printed exports, and must exit 0
(`kubectl placement audit` answers with the placement table, `explain` with each node's verdict).
SIGTERM then stops the demo, which must clean up and exit 0.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import pytest

from extender.devcluster.demo import TRY

pytestmark = pytest.mark.e2e

STARTUP_SECONDS = 600  # a cold first start builds nothing here (make test built the binaries); 1-2 min


def test_every_line_the_demo_prints_works_as_printed(tmp_path) -> None:  # noqa: ANN001
    demo = subprocess.Popen(
        [sys.executable, "-m", "extender", "dev", "up", "--zones", "3", "--nodes-per-zone", "1", "--replicas", "3"],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
        start_new_session=True,
    )
    lines: list[str] = []
    try:
        deadline = time.monotonic() + STARTUP_SECONDS
        assert demo.stdout is not None
        while time.monotonic() < deadline:
            line = demo.stdout.readline()
            if not line:
                break
            lines.append(line.rstrip("\n"))
            if line.startswith("Running until"):
                break
        output = "\n".join(lines)
        assert lines and lines[-1].startswith("Running until"), output
        exports = [line.strip() for line in lines if line.strip().startswith("export ")]
        assert [e.split("=")[0] for e in exports] == ["export KUBECONFIG", "export PATH"], output
        printed = [line.strip() for line in lines if line.strip() in TRY]
        assert printed == list(TRY), output
        clean = {"HOME": str(tmp_path), "PATH": "/usr/local/bin:/usr/bin:/bin", "LANG": "C.UTF-8"}
        answers = {}
        for command in printed:
            script = "\n".join([*exports, command])
            done = subprocess.run(["bash", "-c", script], env=clean, capture_output=True, text=True, timeout=120)
            answers[command] = done
            # plan exits 1 here, as documented: 9 pods at 1 per node need more than the demo's 3 nodes
            expected = 1 if command.startswith("kubectl placement plan") else 0
            assert done.returncode == expected, (command, done.stdout, done.stderr)
            assert "Traceback" not in done.stderr, (command, done.stderr)
        assert "crdb" in answers["kubectl placement audit -n demo"].stdout
        assert "crdb-0" in answers["kubectl placement explain crdb-0 -n demo"].stdout
        plan = answers["kubectl placement plan statefulset/crdb --replicas 9 -n demo"].stdout
        assert "NOT feasible" in plan and "add" in plan, plan
    finally:
        demo.send_signal(signal.SIGTERM)  # the demo's own handler stops its control plane
        try:
            rest, _ = demo.communicate(timeout=120)
        except subprocess.TimeoutExpired:
            demo.kill()
            rest, _ = demo.communicate()
    assert demo.returncode == 0, "\n".join(lines) + (rest or "")
