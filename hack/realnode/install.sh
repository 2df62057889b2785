#!/usr/bin/env bash
# Install the host packages the real-node mode (tests/realnode/harness/) needs, from the
# distribution's own package index, only those missing. Idempotent: a second run installs nothing.
#
#   sudo hack/realnode/install.sh
#
#   containerd                   the container runtime the kubelet drives (started by the harness,
#                                with its own config, sockets and dirs: never the package's service)
#   runc                         the OCI runtime containerd runs containers with
#   containernetworking-plugins  bridge, host-local and loopback (in /usr/lib/cni) for the pods' network
#   iptables                     kube-proxy's and the kubelet's rules, and the harness's own FORWARD guard
#   conntrack                    kube-proxy clears stale UDP conntrack entries with it
#   nftables                     `nft`: Debian's iptables is the nf_tables backend, and only `nft` can
#                                delete a table that did not exist before the run (iptables-restore
#                                can only empty it), so the host is left as it was found
#   iproute2                     `ip`: the bridge, its address, and the ranges checked free
#   debootstrap                  the image's Debian base root filesystem (hack/image/rootfs.py)
#   buildah                      builds the image from the Dockerfile, daemonless (hack/image/build.py):
#                                chroot isolation, its storage in the harness's cache, not the machine's
#   skopeo                       pushes the release's OCI archive to a registry, as docs/install/release.md does
#   prometheus                   a real Prometheus (and promtool) scrapes the extender's /metrics and checks the
#                                shipped alert rules
#   docker-registry              the distribution registry: a platform team's own registry, serving TLS
#                                with a test CA, that the release is pushed to (tests/realnode/registry.py
#                                starts the binary itself, on loopback; never the package's service)
#
# Package services are kept from starting while installing (a policy-rc.d that refuses them, only
# if the host has none), since the harness runs containerd itself.
set -euo pipefail

PACKAGES=(containerd runc containernetworking-plugins iptables conntrack nftables iproute2 debootstrap buildah skopeo prometheus docker-registry)

log() { printf '[realnode-install] %s\n' "$*" >&2; }

[[ ${EUID} -eq 0 ]] || {
  log "needs root (apt-get install): run it with sudo"
  exit 1
}
command -v apt-get >/dev/null || {
  log "no apt-get: install ${PACKAGES[*]} with your distribution's tools"
  exit 1
}

missing=()
for p in "${PACKAGES[@]}"; do
  status="$(dpkg-query -W -f='${db:Status-Status}' "${p}" 2>/dev/null || true)"
  if [[ "${status}" == "installed" ]]; then
    log "present: ${p} $(dpkg-query -W -f='${Version}' "${p}")"
  else
    missing+=("${p}")
  fi
done

if [[ ${#missing[@]} -eq 0 ]]; then
  log "nothing to do: all of ${PACKAGES[*]} are installed"
  exit 0
fi

POLICY=/usr/sbin/policy-rc.d
if [[ ! -e "${POLICY}" ]]; then
  printf '#!/bin/sh\n# hack/realnode/install.sh: no service starts while it installs\nexit 101\n' >"${POLICY}"
  chmod 755 "${POLICY}"
  trap 'rm -f "${POLICY}"' EXIT
fi

started=${SECONDS}
log "installing: ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
if ! apt-get install -y --no-install-recommends "${missing[@]}" >&2; then
  log "apt-get install failed; refreshing the package lists once and retrying"
  apt-get update >&2
  apt-get install -y --no-install-recommends "${missing[@]}" >&2
fi
for p in "${missing[@]}"; do
  log "installed: ${p} $(dpkg-query -W -f='${Version}' "${p}")"
done
log "done in $((SECONDS - started))s"
