"""A real node for the local control plane, and the host state it changes.

kwok's nodes never run a container, so what users install (deploy/: the image, the probes, the
sidecar on loopback, the projected token) can only be proven on a real node: a real kubelet and
kube-proxy (the pinned binaries of the newest minor, `hack/kube/build.sh --node`) running real pods
through a containerd of our own, on a bridge whose addresses exist only on this machine (pods
POD_RANGE, services SERVICE_RANGE; pods get no default route, and an iptables guard drops anything
they send elsewhere).

All of that changes host-wide state: sysctls (the kubelet's own and IP forwarding), iptables rules,
links, mounts, cgroups, a few well-known paths. It is recorded in STATE_FILE before anything is
touched, and restored by `stop()`, by the next start after a crashed run, or by hand:

    python -m tests.realnode.harness --restore     # after a crashed run (or to check: nothing to do)
    python -m tests.realnode.harness --snapshot F  # the host state the restore must give back, as JSON
    python -m tests.realnode.harness --compare F   # differences from such a snapshot (exit 1 if any)

One real node per machine at a time (LOCK_FILE): the bridge, cgroups and rules are host-wide.
Needs root, and hack/realnode/install.sh's packages.

It lives with the tests, outside the extender package: what `pip install placement-extender`
installs should not carry code that rewrites a host's network as root, and only these tests (and
the restore by hand, above, run from the repository's root) use it. LocalCluster takes the node
it is handed (tests/realnode/conftest.py makes it).

The package: config.py renders what the node's daemons read (pure), host.py records, checks and
restores the host state, node.py starts and stops the node, `__main__` the restore by hand.
"""

from .config import (
    BRIDGE,
    BRIDGE_IP,
    KUBERNETES_SERVICE_IP,
    PAUSE_IMAGE,
    POD_RANGE,
    SERVICE_RANGE,
    STATE_FILE,
    RealNodeError,
)
from .host import compare, restore_by_hand, snapshot
from .node import RealNode, unavailable

__all__ = [
    "BRIDGE",
    "BRIDGE_IP",
    "KUBERNETES_SERVICE_IP",
    "PAUSE_IMAGE",
    "POD_RANGE",
    "SERVICE_RANGE",
    "STATE_FILE",
    "RealNode",
    "RealNodeError",
    "compare",
    "restore_by_hand",
    "snapshot",
    "unavailable",
]
