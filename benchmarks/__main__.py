"""`python -m benchmarks run WORKLOAD` / `python -m benchmarks list`: see benchmarks/runner.py."""

import sys

from benchmarks.runner import main

sys.exit(main())
