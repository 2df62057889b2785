"""`python -m extender.server.probe URL`: exit 0 when URL answers 200 (exec probes for a loopback-only server)."""

from __future__ import annotations

import sys
import urllib.request


def main(url: str) -> int:
    try:
        with urllib.request.urlopen(url, timeout=1.5) as response:  # noqa: S310 - loopback URL; within the probe's 2 s
            return 0 if response.status == 200 else 1
    except Exception as err:  # any failure is "not healthy"
        print(f"{url}: {err}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1] if len(sys.argv) > 1 else "http://127.0.0.1:8888/healthz"))
