#!/usr/bin/env bash
# Build pinned upstream Kubernetes control-plane binaries (etcd, kube-apiserver,
# kube-controller-manager, kube-scheduler, kubectl, kwok) from Go modules into
# a versioned cache directory outside the repo, and print that bin dir as the
# LAST line of stdout. Progress goes to stderr.
#
#   BIN_DIR="$(hack/kube/build.sh | tail -n1)"                   # newest supported minor
#   BIN_DIR="$(KUBE_VERSION=1.34 hack/kube/build.sh | tail -n1)"  # any supported minor
#   hack/kube/build.sh --list                                     # supported minors, newest first
#   NODE_BIN="$(hack/kube/build.sh --node | tail -n1)"            # kubelet + kube-proxy instead, into
#                                                                 # <key dir>/node-bin (the real-node mode)
#   hack/kube/build.sh --print-toolchain [GO_MOD]                 # the Go toolchain the build selects for
#                                                                 # KUBE_VERSION's module (or GO_MOD): goX.Y.Z,
#                                                                 # or "local" for the go on PATH
#
# The Go toolchain, per minor: a v<minor>/go.mod with a `toolchain goX.Y.Z` line (add_minor.py writes one
# when the release needs a newer Go than the local one), or a `go` line newer than the local go, is built
# with GOTOOLCHAIN set to that toolchain (go downloads it from GOPROXY once), for that module's go commands
# only; nobody sets GOTOOLCHAIN by hand. Otherwise the go on PATH builds it, as ever.
#
# Environment:
#   KUBE_VERSION    the minor to build, e.g. 1.34 (default: the newest). The supported minors are
#                   SUPPORTED_MINORS in extender/kube/versions.py; v<minor>/ here pins each.
#   KUBE_BIN_DIR    use this dir as-is if it holds all binaries (no build);
#                   fails if it is set but incomplete.
#   KUBE_NODE_BIN_DIR  the same for --node (kubelet, kube-proxy).
#   KUBE_BIN_CACHE  cache root (default ${XDG_CACHE_HOME:-$HOME/.cache}/placement-extender)
#   KUBE_BUILD_NICE nice level for the go build (default 10)
#
# See README.md in this directory.
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
VERSIONS_PY="${HERE}/../../extender/kube/versions.py"
BINARIES=(etcd kube-apiserver kube-controller-manager kube-scheduler kubectl kwok)
# --node: the binaries of a real node instead, only for the real-node mode (tests/realnode/harness/);
# the default call builds exactly the control plane, as ever.
NODE=0
if [[ "${1:-}" == "--node" ]]; then
  NODE=1
  BINARIES=(kubelet kube-proxy)
fi

log() { printf '[kube-build %s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }
die() { log "ERROR: $*"; exit 1; }

# toolchain_line GO_MOD -> the `toolchain` line's goX.Y.Z (empty without one)
toolchain_line() { awk '$1 == "toolchain" && NF == 2 { print $2; exit }' "$1"; }

# toolchain_of GO_MOD -> the GOTOOLCHAIN a build in that module needs, or nothing when the go on PATH will
# do: its toolchain line, else its go line (goX.Y -> goX.Y.0) when that is newer than the local go.
toolchain_of() {
  local gomod="$1" pinned go_line local_go
  pinned="$(toolchain_line "${gomod}")"
  if [[ -n "${pinned}" ]]; then
    printf '%s\n' "${pinned}"
    return 0
  fi
  go_line="$(awk '$1 == "go" && NF == 2 { print $2; exit }' "${gomod}")"
  local_go="$(cd / && GOTOOLCHAIN=local go env GOVERSION 2>/dev/null || true)"
  local_go="${local_go#go}"
  [[ -n "${go_line}" && "${local_go}" =~ ^[0-9]+\.[0-9]+ ]] || return 0
  [[ ! "${go_line}" =~ ^[0-9]+\.[0-9]+$ ]] || go_line+=".0"
  [[ "${go_line}" != "${local_go}" ]] || return 0
  if [[ "$(printf '%s\n' "${go_line}" "${local_go}" | sort -V | tail -n1)" == "${go_line}" ]]; then
    printf 'go%s\n' "${go_line}"
  fi
}

if [[ "${1:-}" == "--print-toolchain" && -n "${2:-}" ]]; then
  [[ -f "$2" ]] || die "--print-toolchain: no such go.mod: $2"
  TC="$(toolchain_of "$2")"
  printf '%s\n' "${TC:-local}"
  exit 0
fi

# missing_in DIR -> prints the binaries absent from DIR (empty if complete)
missing_in() {
  local dir="$1" b
  for b in "${BINARIES[@]}"; do
    [[ -x "${dir}/${b}" ]] || printf '%s ' "${b}"
  done
}

# 0. Which minor. SUPPORTED_MINORS = ("1.36", "1.34", ...) in extender/kube/versions.py, newest first.
read -r -a SUPPORTED <<<"$(sed -n 's/^SUPPORTED_MINORS = (\(.*\))$/\1/p' "${VERSIONS_PY}" | tr -d '",')"
[[ ${#SUPPORTED[@]} -gt 0 ]] || die "no SUPPORTED_MINORS line in ${VERSIONS_PY}"
if [[ "${1:-}" == "--list" ]]; then
  printf '%s\n' "${SUPPORTED[@]}"
  exit 0
fi
WANT="${KUBE_VERSION:-${SUPPORTED[0]}}"
WANT="${WANT#v}"
[[ " ${SUPPORTED[*]} " == *" ${WANT} "* ]] ||
  die "KUBE_VERSION=${KUBE_VERSION:-} is not a supported minor (${SUPPORTED[*]}); see extender/kube/versions.py"
MOD_DIR="${HERE}/v${WANT}"
[[ -f "${MOD_DIR}/go.mod" ]] || die "${MOD_DIR}/go.mod is missing for supported minor ${WANT}"
[[ ${NODE} == 0 ]] || grep -q '"k8s.io/kubernetes/cmd/kubelet"' "${MOD_DIR}/tools.go" ||
  die "--node: v${WANT}/tools.go lists no kubelet (only the newest minor's module pins the node binaries)"
# The Go toolchain for this minor's module (toolchain_of; empty: the go on PATH).
GO_TOOLCHAIN="$(toolchain_of "${MOD_DIR}/go.mod")"
if [[ "${1:-}" == "--print-toolchain" ]]; then
  printf '%s\n' "${GO_TOOLCHAIN:-local}"
  exit 0
fi
# MOD_GO: go for the commands run in this minor's module (kwok's own module keeps the go on PATH).
MOD_GO=(go)
[[ -z "${GO_TOOLCHAIN}" ]] || MOD_GO=(env "GOTOOLCHAIN=${GO_TOOLCHAIN}" go)

# 1. Explicit override.
OVERRIDE_VAR=KUBE_BIN_DIR
[[ ${NODE} == 0 ]] || OVERRIDE_VAR=KUBE_NODE_BIN_DIR
if [[ -n "${!OVERRIDE_VAR:-}" ]]; then
  missing="$(missing_in "${!OVERRIDE_VAR}")"
  [[ -z "${missing}" ]] || die "${OVERRIDE_VAR}=${!OVERRIDE_VAR} lacks: ${missing}"
  log "using ${OVERRIDE_VAR} override"
  printf '%s\n' "${!OVERRIDE_VAR}"
  exit 0
fi

# 2. Cache key: pinned k8s version + hash of the module checksums.
KUBE_PIN="$(awk '$1 == "k8s.io/kubernetes" && $2 ~ /^v/ { print $2; exit }' "${MOD_DIR}/go.mod")"
# A release (v1.38.0) or a pre-release (v1.38.0-rc.1, -beta.0, -alpha.2) pin.
[[ "${KUBE_PIN}" =~ ^v([0-9]+)\.([0-9]+)\.([0-9]+)(-(alpha|beta|rc)\.[0-9]+)?$ ]] ||
  die "cannot parse k8s.io/kubernetes version from ${MOD_DIR}/go.mod (got '${KUBE_PIN}')"
KUBE_MAJOR="${BASH_REMATCH[1]}"
KUBE_MINOR="${BASH_REMATCH[2]}"
[[ "${KUBE_MAJOR}.${KUBE_MINOR}" == "${WANT}" ]] || die "${MOD_DIR}/go.mod pins ${KUBE_PIN}, not ${WANT}"
# Bump BUILD_RECIPE when the build flags below change, to invalidate caches.
BUILD_RECIPE=2
# A module's toolchain line pins the compiler, so it is part of the key; a module without one hashes exactly
# as before (its cached builds stay valid).
PINNED_TOOLCHAIN="$(toolchain_line "${MOD_DIR}/go.mod")"
SUM_HASH="$( {
  echo "recipe=${BUILD_RECIPE}"
  [[ -z "${PINNED_TOOLCHAIN}" ]] || echo "toolchain=${PINNED_TOOLCHAIN}"
  cat "${MOD_DIR}/go.sum" "${HERE}/kwok/go.sum"
} | sha256sum | cut -c1-12)"

CACHE_ROOT="${KUBE_BIN_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/placement-extender}"
KEY_DIR="${CACHE_ROOT}/kube-${KUBE_PIN}-${SUM_HASH}"
BIN_DIR="${KEY_DIR}/bin"
[[ ${NODE} == 0 ]] || BIN_DIR="${KEY_DIR}/node-bin"

if [[ -z "$(missing_in "${BIN_DIR}")" ]]; then
  log "reusing cached binaries"
  printf '%s\n' "${BIN_DIR}"
  exit 0
fi

# 3. Cold build. Serialise concurrent builders of the same key.
mkdir -p "${KEY_DIR}"
exec 9>"${KEY_DIR}/.lock"
if ! flock -n 9; then
  log "another build of ${KEY_DIR} is running; waiting for it"
  flock 9
fi
if [[ -z "$(missing_in "${BIN_DIR}")" ]]; then
  log "reusing binaries built by a concurrent run"
  printf '%s\n' "${BIN_DIR}"
  exit 0
fi

# Leftovers of a SIGKILLed build (we hold the lock, so none is live).
rm -rf "${KEY_DIR}"/.build.*

command -v go >/dev/null || die "go not found in PATH"
STAGE="$(mktemp -d "${KEY_DIR}/.build.XXXXXX")"
trap 'rm -rf "${STAGE}"' EXIT

export CGO_ENABLED=0
NICE=(nice -n "${KUBE_BUILD_NICE:-10}")

# Reproducible build date: the publish time of the pinned k8s.io/kubernetes
# module version (not wall-clock time), like SOURCE_DATE_EPOCH upstream.
BUILD_DATE="$(cd "${MOD_DIR}" && "${MOD_GO[@]}" list -m -f '{{if .Time}}{{.Time.UTC.Format "2006-01-02T15:04:05Z"}}{{end}}' k8s.io/kubernetes 2>/dev/null || true)"
BUILD_DATE="${BUILD_DATE:-1970-01-01T00:00:00Z}"

# Same -X flags as upstream hack/lib/version.sh, for both version packages.
VERSION_LDFLAGS=""
for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
  VERSION_LDFLAGS+=" -X ${pkg}.gitVersion=${KUBE_PIN}"
  VERSION_LDFLAGS+=" -X ${pkg}.gitMajor=${KUBE_MAJOR}"
  VERSION_LDFLAGS+=" -X ${pkg}.gitMinor=${KUBE_MINOR}"
  VERSION_LDFLAGS+=" -X ${pkg}.gitTreeState=clean"
  VERSION_LDFLAGS+=" -X ${pkg}.gitCommit=" # unknown offline; avoid '$Format:%H$'
  VERSION_LDFLAGS+=" -X ${pkg}.buildDate=${BUILD_DATE}"
done

log "go: $(go version)"
[[ -z "${GO_TOOLCHAIN}" ]] ||
  log "go for v${WANT}'s module: GOTOOLCHAIN=${GO_TOOLCHAIN} (its go.mod asks for it; kwok keeps the go on PATH)"
log "building k8s ${KUBE_PIN} (key ${SUM_HASH}) into ${BIN_DIR}"
log "staging in ${STAGE}"
T0=${SECONDS}

step() { # step NAME MODULE_DIR LDFLAGS PKG...
  local name="$1" dir="$2" ldflags="$3" t=${SECONDS}
  shift 3
  log "[${name}] go build $*"
  log "[${name}] a cold build compiles for 5-14 minutes on 2 cores; a line every minute until it is done"
  # go prints nothing while it compiles: a heartbeat, so a first `make demo` never looks hung.
  local ticker rc=0
  # (1 s sleeps: a killed ticker leaves no sleep holding its caller's pipes open for long)
  (while sleep 1; do (((SECONDS - t) % 60)) || log "[${name}] still compiling: $(((SECONDS - t) / 60)) min so far"; done) &
  ticker=$!
  local gocmd=(go)
  [[ "${dir}" != "${MOD_DIR}" ]] || gocmd=("${MOD_GO[@]}")
  (cd "${dir}" && "${NICE[@]}" "${gocmd[@]}" build -mod=readonly -trimpath \
    -ldflags "-s -w${ldflags}" -o "${STAGE}/bin/" "$@") >&2 || rc=$?
  kill "${ticker}" 2>/dev/null || true
  wait "${ticker}" 2>/dev/null || true
  ((rc == 0)) || die "[${name}] go build failed (exit ${rc})"
  log "[${name}] done in $((SECONDS - t))s"
}

mkdir -p "${STAGE}/bin"
if [[ ${NODE} == 1 ]]; then
  # The same module (its tools.go keeps both commands in go.mod), so the same dependency set and version.
  step node "${MOD_DIR}" "${VERSION_LDFLAGS}" \
    k8s.io/kubernetes/cmd/kubelet \
    k8s.io/kubernetes/cmd/kube-proxy
else
  # etcd + the k8s binaries share one module graph, so one go build invocation
  # compiles the shared packages once.
  step kube "${MOD_DIR}" "${VERSION_LDFLAGS}" \
    ./cmd/etcd \
    k8s.io/kubernetes/cmd/kube-apiserver \
    k8s.io/kubernetes/cmd/kube-controller-manager \
    k8s.io/kubernetes/cmd/kube-scheduler \
    k8s.io/kubernetes/cmd/kubectl
  step kwok "${HERE}/kwok" "" sigs.k8s.io/kwok/cmd/kwok
fi

missing="$(missing_in "${STAGE}/bin")"
[[ -z "${missing}" ]] || die "build produced no: ${missing}"

# Atomic publish: rename(2) of a complete dir. A stale partial bin (should not
# happen) is moved aside first.
if [[ -e "${BIN_DIR}" ]]; then
  mv "${BIN_DIR}" "${STAGE}/stale-bin"
fi
mv -T "${STAGE}/bin" "${BIN_DIR}"
log "built in $((SECONDS - T0))s; $(du -sh "${BIN_DIR}" | cut -f1) in ${BIN_DIR}"
printf '%s\n' "${BIN_DIR}"
