"""Every run says how long it took: `make test`, `make test-older` and .ci/run end with
their time, the CPU named (hack/timed.py), and keep it in test-logs/timings.jsonl."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
TIMED = ROOT / "hack" / "timed.py"


def test_the_last_line_is_the_time_and_the_exit_status_is_the_commands(tmp_path: Path) -> None:
    timings = tmp_path / "timings.jsonl"
    run = subprocess.run(
        [sys.executable, str(TIMED), "a check", "--", sys.executable, "-c", "import sys; print('hi'); sys.exit(3)"],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "TIMINGS_FILE": str(timings)},
    )
    assert run.returncode == 3
    lines = run.stdout.strip().splitlines()
    assert lines[0] == "hi"
    assert re.fullmatch(r"a check: \d+m\d\ds \(\d+ s\), exit 3, on \d+ x .+", lines[-1]), lines[-1]
    record = json.loads(timings.read_text().splitlines()[-1])
    assert record["what"] == "a check" and record["exit"] == 3 and record["seconds"] >= 0


def test_make_test_make_test_older_and_ci_print_their_time() -> None:
    makefile = (ROOT / "Makefile").read_text()
    assert re.search(r'^test: .*\n\t@\$\(PY\) hack/timed\.py "make test" -- ', makefile, re.M)
    assert re.search(r'^test-older: .*\n\t@\$\(PY\) hack/timed\.py "make test-older" -- ', makefile, re.M)
    ci = (ROOT / ".ci" / "run").read_text()
    assert "trap finish EXIT" in ci and "CI (.ci/run): %dm%02ds" in ci
