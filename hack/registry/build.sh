#!/usr/bin/env bash
# The pinned crane binary (go-containerregistry), built from the Go module proxy into a cache
# outside the repo (like hack/helm/build.sh): prints its path as the last line of stdout.
# The real-node tests use it twice, as a platform team's own registry would be used:
# `crane registry serve` is the registry (loopback only), `crane push` puts the image in it.
#   CRANE_BIN=/path/to/crane   use that binary instead (no build)
set -euo pipefail
CRANE_VERSION="${CRANE_VERSION:-v0.22.1}"
if [[ -n "${CRANE_BIN:-}" ]]; then
  [[ -x "$CRANE_BIN" ]] || { echo "CRANE_BIN=$CRANE_BIN is not an executable" >&2; exit 1; }
  echo "$CRANE_BIN"; exit 0
fi
cache="${KUBE_BIN_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/placement-extender}/crane-${CRANE_VERSION}"
if [[ -x "$cache/crane" ]]; then echo "$cache/crane"; exit 0; fi
mkdir -p "$cache"
exec 9>"$cache/.lock"
flock 9
if [[ ! -x "$cache/crane" ]]; then
  started=$(date +%s)
  tmp="$(mktemp -d "$cache/.build.XXXXXX")"
  echo "[crane-build] building crane ${CRANE_VERSION} (cold: a minute or two)" >&2
  CGO_ENABLED=0 GOBIN="$tmp" nice -n "${KUBE_BUILD_NICE:-10}" \
    go install -trimpath -ldflags "-s -w" "github.com/google/go-containerregistry/cmd/crane@${CRANE_VERSION}" >&2
  mv "$tmp/crane" "$cache/crane" && rmdir "$tmp"
  echo "[crane-build] done in $(( $(date +%s) - started ))s" >&2
fi
echo "$cache/crane"
