#!/usr/bin/env bash
# Build upstream's scheduler benchmark (k8s.io/kubernetes/test/integration/scheduler_perf) as one test
# binary, `go test -c` of benchmarks/schedperf (upstream's runner with a hook for an extender outside the
# process), into a cache dir outside the repo keyed by the pinned Kubernetes version, like the control
# plane (hack/kube/build.sh), and print the binary's path as the LAST line of stdout. Beside it,
# upstream/ holds the harness's data files of that version (every family's performance-config.yaml and
# the templates/ they name), which the runner reads and rewrites per arm. Progress goes to stderr.
#
#   SCHEDPERF_BIN="$(hack/schedperf/build.sh | tail -n1)"
#
# The module pins the newest supported minor only: upstream's harness changes its Go API from minor to
# minor, and the figures it gives are the newest kube-scheduler's.
#
# Environment:
#   SCHEDPERF_BIN   use this binary as-is (no build); fails if it is not executable.
#   KUBE_BIN_CACHE  cache root (default ${XDG_CACHE_HOME:-$HOME/.cache}/placement-extender)
#   KUBE_BUILD_NICE nice level for the go build (default 10)
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
MOD_DIR="${HERE}/../../benchmarks/schedperf"
log() { printf '[schedperf-build %s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }
die() { log "ERROR: $*"; exit 1; }

if [[ -n "${SCHEDPERF_BIN:-}" ]]; then
  [[ -x "${SCHEDPERF_BIN}" ]] || die "SCHEDPERF_BIN=${SCHEDPERF_BIN} is not an executable"
  log "using SCHEDPERF_BIN override"
  printf '%s\n' "${SCHEDPERF_BIN}"
  exit 0
fi

KUBE_PIN="$(awk '$1 == "k8s.io/kubernetes" && $2 ~ /^v/ { print $2; exit }' "${MOD_DIR}/go.mod")"
[[ -n "${KUBE_PIN}" ]] || die "no k8s.io/kubernetes pin in ${MOD_DIR}/go.mod"
# The module and the hook are part of the key; bump BUILD_RECIPE when the flags below change.
BUILD_RECIPE=1
SUM_HASH="$( {
  echo "recipe=${BUILD_RECIPE}"
  cat "${MOD_DIR}/go.mod" "${MOD_DIR}/go.sum" "${MOD_DIR}"/*.go
} | sha256sum | cut -c1-12)"
CACHE_ROOT="${KUBE_BIN_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/placement-extender}"
KEY_DIR="${CACHE_ROOT}/schedperf-${KUBE_PIN}-${SUM_HASH}"
BIN="${KEY_DIR}/schedperf.test"
DATA="${KEY_DIR}/upstream"
GO=(go)

# copy_data: upstream's YAML files of test/integration/scheduler_perf (the module's read-only copy, from
# go's module cache) into ${DATA}, published by one rename.
copy_data() {
  local module src stage fixtures
  module="$(cd "${MOD_DIR}" && "${GO[@]}" list -m -f '{{.Dir}}' k8s.io/kubernetes)"
  src="${module}/test/integration/scheduler_perf"
  [[ -d "${src}" ]] || die "no ${src}: run 'go mod download' in ${MOD_DIR}"
  stage="$(mktemp -d "${KEY_DIR}/.data.XXXXXX")"
  (cd "${src}" && find . -name '*.yaml' -exec cp --parents {} "${stage}/" \;)
  # The test API server reads fixtures from its package's source directory, which -trimpath turns into
  # the module path; the runner points TEST_SRCDIR/TEST_WORKSPACE (upstream's way for trimmed builds) here.
  fixtures="cmd/kube-apiserver/app/testing/testdata"
  mkdir -p "${stage}/src/k8s.io/kubernetes@${KUBE_PIN}/$(dirname "${fixtures}")"
  cp -r "${module}/${fixtures}" "${stage}/src/k8s.io/kubernetes@${KUBE_PIN}/${fixtures}"
  chmod -R u+w "${stage}"
  mv -T "${stage}" "${DATA}"
}

if [[ -x "${BIN}" && -d "${DATA}" ]]; then
  log "reusing cached ${BIN}"
  printf '%s\n' "${BIN}"
  exit 0
fi

mkdir -p "${KEY_DIR}"
exec 9>"${KEY_DIR}/.lock"
if ! flock -n 9; then
  log "another build of ${KEY_DIR} is running; waiting for it"
  flock 9
fi
command -v go >/dev/null || die "go not found in PATH"
TC="$(bash "${HERE}/../kube/build.sh" --print-toolchain "${MOD_DIR}/go.mod")"
[[ "${TC}" == local ]] || GO=(env "GOTOOLCHAIN=${TC}" go)
rm -rf "${KEY_DIR}"/.data.* # leftovers of a killed run (we hold the lock)
[[ -d "${DATA}" ]] || copy_data
if [[ -x "${BIN}" ]]; then
  log "reusing the binary built by a concurrent run"
  printf '%s\n' "${BIN}"
  exit 0
fi

# The same flags as the control plane's build, so the packages both link (kube-apiserver, kube-scheduler)
# come from go's build cache when the control plane was built first.
export CGO_ENABLED=0
log "building scheduler_perf of k8s ${KUBE_PIN} (key ${SUM_HASH}) into ${BIN}"
log "a cold build compiles for 5-15 minutes on 2 cores; a line every minute until it is done"
T0=${SECONDS}
(while sleep 1; do (((SECONDS - T0) % 60)) || log "still compiling: $(((SECONDS - T0) / 60)) min so far"; done) &
TICKER=$!
rc=0
(cd "${MOD_DIR}" && nice -n "${KUBE_BUILD_NICE:-10}" "${GO[@]}" test -c -vet=off -mod=readonly -trimpath \
  -ldflags "-s -w" -o "${BIN}.tmp" .) >&2 || rc=$?
kill "${TICKER}" 2>/dev/null || true
wait "${TICKER}" 2>/dev/null || true
((rc == 0)) || { rm -f "${BIN}.tmp"; die "go test -c failed (exit ${rc})"; }
mv -f "${BIN}.tmp" "${BIN}"
log "built in $((SECONDS - T0))s: ${BIN}"
printf '%s\n' "${BIN}"
