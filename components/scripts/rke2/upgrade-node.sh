#!/usr/bin/env bash
# Installs the wanted RKE2 on an agent before its join, or upgrades it after drain-node:
# installs the new release from its tarball and restarts rke2-agent (upgrade/lib.sh
# upgrade_worker).
set -euo pipefail
# shellcheck source=lib.sh
[[ -n "${GPU_CLUSTER_RKE2_LIB_LOADED:-}" ]] || source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
# shellcheck source=../upgrade/lib.sh
[[ -n "${GPU_CLUSTER_UPGRADE_LIB_LOADED:-}" ]] || source "$(dirname "${BASH_SOURCE[0]}")/../upgrade/lib.sh"
: "${GPU_CLUSTER_STEP:=upgrade-node}"

# How RKE2 is upgraded: install the new release, restart rke2-server, then rke2-agent
# (RKE2 docs, "Manual Upgrades": https://docs.rke2.io/upgrades/manual_upgrade). A new
# host's join then uses this installation.

# Inputs: NODE_NAME RKE2_VERSION
# Optional inputs: RKE2_RELEASE_URL RKE2_SHA256_AMD64 RKE2_SHA256_ARM64 RKE2_AIRGAP_SHA256_AMD64 RKE2_AIRGAP_SHA256_ARM64
#   RKE2_VERSION   the RKE2 release to run, e.g. v1.36.3+rke2r1.
#   NODE_NAME      this host's node: marked as failed when an upgrade fails here.

release_version() { rke2_current_version; }
install_release() { rke2_install "$1"; }
worker_installed() { systemctl is-enabled --quiet rke2-agent; }
# rke2-agent's start returns only once the node has joined.
RESTART_OPTIONS=(--no-block)

main() {
  require_env RKE2_VERSION NODE_NAME
  upgrade_worker RKE2 "$RKE2_VERSION" rke2-agent "$RKE2_KUBELET_KUBECONFIG" "$ROOT$RKE2_KUBECTL"
}

main "$@"
