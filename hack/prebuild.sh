#!/usr/bin/env bash
# Build, at the lowest CPU priority, every binary the e2e matrix will ask for, in the order it asks:
# the newest minor's control plane, Karpenter's kwok provider and helm (the newest minor's suite uses
# them), the real node's binaries and the extender image (tests/realnode, last in make test),
# then each older minor's control plane, and last upstream's scheduler benchmark (hack/schedperf/build.sh:
# one e2e test runs it; with the newest minor's packages in go's build cache it mostly links). .ci/run starts it in the background first thing, so
# on a cold machine the builds (about 9 minutes a minor on 2 cores) overlap the venv, the lint, the
# unit suite and the earlier minors' scenarios instead of adding to them. Each build holds a lock
# per version: a step that needs a binary still being built waits for it, one already built finds
# it cached, and with warm caches every call returns at once. A build that fails here is simply
# tried again, and reported, by the step that needs it. Progress goes to stderr.
set -uo pipefail
cd "$(dirname "$0")/.."

step() {
  local started=$SECONDS
  if nice -n 19 "$@" >/dev/null; then
    printf '[prebuild %s] %s: %ss\n' "$(date +%H:%M:%S)" "$*" "$((SECONDS - started))" >&2
  else
    printf '[prebuild %s] %s: failed after %ss (the step that needs it will try again)\n' \
      "$(date +%H:%M:%S)" "$*" "$((SECONDS - started))" >&2
  fi
}

minors=$(bash hack/kube/build.sh --list)
newest=${minors%%$'\n'*}
step env KUBE_VERSION="$newest" bash hack/kube/build.sh
step bash hack/karpenter/build.sh
step bash hack/helm/build.sh
step env KUBE_VERSION="$newest" bash hack/kube/build.sh --node   # the real node's kubelet + kube-proxy
step python3 hack/image/build.py --base debian                   # the image the real node runs
for minor in $minors; do
  [[ "$minor" == "$newest" ]] || step env KUBE_VERSION="$minor" bash hack/kube/build.sh
done
step bash hack/schedperf/build.sh                                  # tests/e2e/test_scheduler_perf.py
