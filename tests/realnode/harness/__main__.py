"""The host state by hand:

python -m tests.realnode.harness --restore     # after a crashed run (or to check: nothing to do)
python -m tests.realnode.harness --snapshot F  # the host state the restore must give back, as JSON
python -m tests.realnode.harness --compare F   # differences from such a snapshot (exit 1 if any)
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
from pathlib import Path

from .host import compare, restore_by_hand, snapshot


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="restore, record or compare the host state a real node changes")
    action = parser.add_mutually_exclusive_group(required=True)
    action.add_argument("--restore", action="store_true", help="restore the host state a crashed run left")
    action.add_argument("--snapshot", metavar="FILE", help="write the host state a run may change as JSON")
    action.add_argument("--compare", metavar="FILE", help="print the differences from a --snapshot (exit 1 if any)")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    if args.restore:
        return restore_by_hand()
    if args.snapshot:
        Path(args.snapshot).write_text(json.dumps(snapshot(), indent=1, sort_keys=True))
        return 0
    differences = compare(json.loads(Path(args.compare).read_text()), snapshot())
    for line in differences:
        print(line)
    print(f"{len(differences)} differences")
    return 1 if differences else 0


if __name__ == "__main__":
    sys.exit(main())
