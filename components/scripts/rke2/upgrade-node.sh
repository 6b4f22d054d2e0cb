#!/usr/bin/env bash
# Installs the wanted RKE2 on an agent before its join, or upgrades it after drain-node:
# installs the new release from its tarball and restarts rke2-agent (upgrade/lib.sh
# upgrade_worker).
set -euo pipefail
# shellcheck source=../lib.sh
[[ -n "${GPU_CLUSTER_LIB_LOADED:-}" ]] || source "$(dirname "${BASH_SOURCE[0]}")/../lib.sh"
# shellcheck source=lib.sh
[[ -n "${GPU_CLUSTER_RKE2_LIB_LOADED:-}" ]] || source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
# shellcheck source=../upgrade/lib.sh
[[ -n "${GPU_CLUSTER_UPGRADE_LIB_LOADED:-}" ]] || source "$(dirname "${BASH_SOURCE[0]}")/../upgrade/lib.sh"
: "${GPU_CLUSTER_STEP:=upgrade-node}"

# How RKE2 is upgraded: install the new release, restart rke2-server, then rke2-agent
# (RKE2 docs, "Manual Upgrades": https://docs.rke2.io/upgrades/manual_upgrade). A new
# host's join then uses this installation.

# Inputs: RKE2_VERSION NODE_NAME
# Optional inputs: RKE2_SHA256_AMD64 RKE2_SHA256_ARM64 RKE2_RELEASE_URL

release_version() { rke2_current_version; }
install_release() {
  rke2_install "$1"
  RELEASE_CHANGED=$RKE2_BINARY_CHANGED
}
worker_installed() { systemctl is-enabled --quiet rke2-agent; }
# rke2-agent's start returns only once the node has joined.
RESTART_OPTIONS=(--no-block)

main() {
  require_env RKE2_VERSION NODE_NAME
  upgrade_worker RKE2 "$RKE2_VERSION" rke2-agent "$RKE2_KUBELET_KUBECONFIG" "$ROOT$RKE2_KUBECTL"
}

main "$@"
