"""Run a command and say, as its last line, how long it took: `make test`, `make test-older` and
.ci/run end with it, so every run shows its time (docs/contributing/ci.md keeps the figures).

    python hack/timed.py "make test" -- CMD ARGS...

Also appended, one JSON line per run, to test-logs/timings.jsonl (or TIMINGS_FILE): what, seconds,
exit, when, CPU.
The command's exit status is this script's; a SIGTERM or SIGINT is passed on to it.
"""

from __future__ import annotations

import json
import os
import platform
import signal
import subprocess
import sys
import time
from datetime import UTC, datetime
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
TIMINGS = Path(os.environ.get("TIMINGS_FILE") or REPO / "test-logs" / "timings.jsonl")


def clock(seconds: float) -> str:
    minutes, secs = divmod(int(round(seconds)), 60)
    return f"{minutes}m{secs:02d}s"


def cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def main(argv: list[str]) -> int:
    if len(argv) < 3 or argv[1] != "--":
        print('usage: hack/timed.py "WHAT" -- COMMAND [ARGS...]', file=sys.stderr)
        return 2
    what, command = argv[0], argv[2:]
    started = time.monotonic()
    child = subprocess.Popen(command)
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda signum, _frame: child.send_signal(signum))
    while True:
        try:
            code = child.wait()
            code = 128 - code if code < 0 else code  # killed by a signal: the shell's convention
            break
        except InterruptedError:  # pragma: no cover (PEP 475 retries; kept for clarity)
            continue
    seconds = time.monotonic() - started
    cpus = f"{os.cpu_count()} x {cpu_model()}"
    print(f"\n{what}: {clock(seconds)} ({seconds:.0f} s), exit {code}, on {cpus}", flush=True)
    TIMINGS.parent.mkdir(parents=True, exist_ok=True)
    record = {
        "what": what,
        "seconds": round(seconds, 1),
        "exit": code,
        "finished": datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "cpus": cpus,
    }
    with TIMINGS.open("a") as out:
        out.write(json.dumps(record) + "\n")
    return code


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
