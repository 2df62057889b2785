#!/usr/bin/env bash
# The pinned helm binary, built from the Go module proxy into a cache outside the repo (like
# hack/kube/build.sh): prints the binary's path as the last line of stdout. Reused when present.
#   HELM_BIN=/path/to/helm   use that binary instead (no build)
set -euo pipefail
HELM_VERSION="${HELM_VERSION:-v4.3.1}"
if [[ -n "${HELM_BIN:-}" ]]; then
  [[ -x "$HELM_BIN" ]] || { echo "HELM_BIN=$HELM_BIN is not an executable" >&2; exit 1; }
  echo "$HELM_BIN"; exit 0
fi
cache="${KUBE_BIN_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/placement-extender}/helm-${HELM_VERSION}"
if [[ -x "$cache/helm" ]]; then echo "$cache/helm"; exit 0; fi
mkdir -p "$cache"
exec 9>"$cache/.lock"
flock 9
if [[ ! -x "$cache/helm" ]]; then
  started=$(date +%s)
  tmp="$(mktemp -d "$cache/.build.XXXXXX")"
  echo "[helm-build] building helm ${HELM_VERSION} (cold: a few minutes)" >&2
  major="${HELM_VERSION%%.*}"
  CGO_ENABLED=0 GOBIN="$tmp" nice -n "${KUBE_BUILD_NICE:-10}" \
    go install -trimpath -ldflags "-s -w" "helm.sh/helm/${major}/cmd/helm@${HELM_VERSION}" >&2
  mv "$tmp/helm" "$cache/helm" && rmdir "$tmp"
  echo "[helm-build] done in $(( $(date +%s) - started ))s" >&2
fi
echo "$cache/helm"
