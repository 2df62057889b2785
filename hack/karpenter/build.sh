#!/usr/bin/env bash
# Build Karpenter's kwok provider (sigs.k8s.io/karpenter/kwok, pinned by go.mod/go.sum here) from
# the Go module proxy into a versioned cache directory outside the repo, with the CRDs it needs at
# run time, and print that directory as the LAST line of stdout. Progress goes to stderr.
#
#   KARPENTER_DIR="$(hack/karpenter/build.sh | tail -n1)"
#   -> ${KARPENTER_DIR}/karpenter-kwok  and  ${KARPENTER_DIR}/crds/*.yaml
#
# Environment:
#   KARPENTER_DIR      use this dir as-is if it holds the binary and the CRDs (no build)
#   KUBE_BIN_CACHE     cache root (default ${XDG_CACHE_HOME:-$HOME/.cache}/placement-extender),
#                      shared with hack/kube/build.sh
#   KUBE_BUILD_NICE    nice level for the go build (default 10)
#
# Cold, about 12 minutes on 2 cores; then reused while go.sum is unchanged. Used only by the
# autoscaling e2e scenario (tests/e2e/test_autoscaling.py), on the newest supported minor.
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
log() { printf '[karpenter-build %s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }
die() { log "ERROR: $*"; exit 1; }
complete_in() { [[ -x "$1/karpenter-kwok" && -f "$1/crds/karpenter.sh_nodepools.yaml" ]]; }

if [[ -n "${KARPENTER_DIR:-}" ]]; then
  complete_in "${KARPENTER_DIR}" || die "KARPENTER_DIR=${KARPENTER_DIR} lacks karpenter-kwok or crds/"
  printf '%s\n' "${KARPENTER_DIR}"
  exit 0
fi

PIN="$(awk '{ sub(/^require[ \t]+/, "") } $1 == "sigs.k8s.io/karpenter" && $2 ~ /^v/ { print $2; exit }' "${HERE}/go.mod")"
[[ -n "${PIN}" ]] || die "no sigs.k8s.io/karpenter version in ${HERE}/go.mod"
BUILD_RECIPE=1
SUM_HASH="$( { echo "recipe=${BUILD_RECIPE}"; cat "${HERE}/go.sum"; } | sha256sum | cut -c1-12)"
CACHE_ROOT="${KUBE_BIN_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/placement-extender}"
KEY_DIR="${CACHE_ROOT}/karpenter-${PIN}-${SUM_HASH}"
OUT="${KEY_DIR}/out"

if complete_in "${OUT}"; then
  log "reusing cached Karpenter ${PIN}"
  printf '%s\n' "${OUT}"
  exit 0
fi

mkdir -p "${KEY_DIR}"
exec 9>"${KEY_DIR}/.lock"
if ! flock -n 9; then
  log "another build of ${KEY_DIR} is running; waiting for it"
  flock 9
fi
if complete_in "${OUT}"; then
  printf '%s\n' "${OUT}"
  exit 0
fi
rm -rf "${KEY_DIR}"/.build.*
command -v go >/dev/null || die "go not found in PATH"
STAGE="$(mktemp -d "${KEY_DIR}/.build.XXXXXX")"
trap 'rm -rf "${STAGE}"' EXIT
export CGO_ENABLED=0

log "go: $(go version); building sigs.k8s.io/karpenter/kwok ${PIN} (key ${SUM_HASH})"
T0=${SECONDS}
(cd "${HERE}" && nice -n "${KUBE_BUILD_NICE:-10}" go build -mod=readonly -trimpath -ldflags "-s -w" \
  -o "${STAGE}/karpenter-kwok" sigs.k8s.io/karpenter/kwok) >&2
# The CRDs ship in the module (kwok/charts/crds): NodePool, NodeClaim, KWOKNodeClass, ...
SRC="$(cd "${HERE}" && go list -m -f '{{.Dir}}' sigs.k8s.io/karpenter)"
[[ -d "${SRC}/kwok/charts/crds" ]] || die "no kwok/charts/crds in ${SRC}"
mkdir -p "${STAGE}/crds"
cp "${SRC}"/kwok/charts/crds/*.yaml "${SRC}"/kwok/apis/crds/*.yaml "${STAGE}/crds/"
chmod -R u+w "${STAGE}/crds"
[[ -e "${OUT}" ]] && mv "${OUT}" "${STAGE}/stale-out"
mkdir -p "${STAGE}/out"
mv "${STAGE}/karpenter-kwok" "${STAGE}/crds" "${STAGE}/out/"
mv -T "${STAGE}/out" "${OUT}"
log "built in $((SECONDS - T0))s; $(du -sh "${OUT}" | cut -f1) in ${OUT}"
printf '%s\n' "${OUT}"
