"""`make test`'s pytest runs: the tests that measure time first, then the rest on several workers.

    python hack/run_phases.py WORKERS [PYTEST ARGS...]

1. **alone** (`--machine-phase alone`, 2 workers): the units with a test marked `alone` or a
   timed stretch (`machine_alone`), first, then the unit tests: the timed tests run with nothing
   beside them, with nothing long and idle running for them to wait on, and the unit tests fill
   the gaps (the in-scheduler freeze's 150 idle seconds, `machine_idle`, above all).
2. **shared** (`--machine-phase shared`, WORKERS workers): every other e2e module and the real
   node, longest first.

Why two runs and not one (tests/parallel.py): pytest-xdist hands a worker its next module before
the last is done, so in one run a long, mostly idle test (a real node waiting on its kubelet, the
soak) could start before a test that must run alone, and that test, and every worker behind it,
would wait minutes. WORKERS=0: one run in pytest's own process, in the same order.

Both phases run whatever the first gave; the exit status is the worse of the two. E2E_RESULTS
holds both (the second merges into the first's, tests/scenario_report.py).
"""

from __future__ import annotations

import os
import subprocess
import sys


def main(argv: list[str]) -> int:
    if not argv or not argv[0].isdigit():
        print("usage: hack/run_phases.py WORKERS [PYTEST ARGS...]", file=sys.stderr)
        return 2
    workers, args = int(argv[0]), argv[1:]
    pytest = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider"]
    if workers == 0:
        return subprocess.call([*pytest, *args])
    results = os.environ.get("E2E_RESULTS")
    if results and os.path.exists(results):
        os.unlink(results)  # this run's, not an earlier one's
    print("=== make test, phase 1 of 2: the tests that measure time (tests/parallel.py) ===", flush=True)
    first = subprocess.call([*pytest, "-n", str(min(2, workers)), "--machine-phase", "alone", *args])
    print(f"=== make test, phase 2 of 2: the rest, on {workers} workers ===", flush=True)
    second = subprocess.call(
        [*pytest, "-n", str(workers), "--machine-phase", "shared", *args], env={**os.environ, "E2E_RESULTS_MERGE": "1"}
    )
    # pytest's 5 (no tests collected) is no failure in a phase: a selection may hold none.
    codes = [code for code in (first, second) if code not in (0, 5)]
    return max(codes, default=0)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
