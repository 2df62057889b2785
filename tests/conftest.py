import os
import sys
from pathlib import Path

from hypothesis import HealthCheck, settings

sys.path.insert(0, str(Path(__file__).parent))

# The e2e closing table and results file (from the reports, so whole under pytest-xdist), and how
# modules share the machine when `make test` runs them on several workers.
pytest_plugins = ["scenario_report", "parallel"]

# Hypothesis profiles. Ordinary property tests set their own example counts and are the same in
# both; the profiles differ in the long-running fuzzers, which take their settings from
# "<profile>-fuzz" (see tests/unit/test_fuzz_http.py).
#
# default: a developer's run. Random examples, so every run explores new inputs, and a failure
#   is saved to the local example database (.hypothesis/) and replayed first next time.
# ci: `CI=true bash .ci/run`. 10,000 mutated requests in the main fuzzer (about 40 s more on two
#   cores). derandomize: the same examples on every run, so a red CI was caused by the change
#   under test, never by a newly drawn example, and a re-run reproduces it; a clean clone has no
#   example database to learn from anyway. print_blob: the failing example, ready to paste.
settings.register_profile("ci", derandomize=True, database=None, print_blob=True)
_FUZZ = {"deadline": None, "suppress_health_check": [HealthCheck.too_slow, HealthCheck.data_too_large]}
settings.register_profile("default-fuzz", max_examples=300, **_FUZZ)
settings.register_profile("ci-fuzz", settings.get_profile("ci"), max_examples=10_000, **_FUZZ)

_profile = os.environ.get("HYPOTHESIS_PROFILE") or ("ci" if os.environ.get("CI", "").lower() == "true" else "default")
settings.load_profile(_profile)
