"""The real-node scenarios are not part of `make test` (yet): they need root and the host packages of
hack/realnode/install.sh, take the machine's one real-node slot, and change host-wide state (restored
after). `REALNODE=1 .venv/bin/python -m pytest tests/realnode -s` runs them."""

import os

collect_ignore_glob = [] if os.environ.get("REALNODE") == "1" else ["*"]
