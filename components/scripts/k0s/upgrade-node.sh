#!/usr/bin/env bash
# Installs the wanted k0s on a worker before its join, or upgrades it after drain-node:
# replaces the binary and restarts the service (upgrade/lib.sh upgrade_worker).
set -euo pipefail
# shellcheck source=lib.sh
[[ -n "${GPU_CLUSTER_K0S_LIB_LOADED:-}" ]] || source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
# shellcheck source=../upgrade/lib.sh
[[ -n "${GPU_CLUSTER_UPGRADE_LIB_LOADED:-}" ]] || source "$(dirname "${BASH_SOURCE[0]}")/../upgrade/lib.sh"
: "${GPU_CLUSTER_STEP:=upgrade-node}"

# How k0s is upgraded: replace the binary, restart the service (k0s docs, "Upgrade":
# https://docs.k0sproject.io/stable/upgrade/; k0sctl's upgrade phase does the same, on
# controllers first). A new host's join then uses this binary.

# Inputs: K0S_VERSION NODE_NAME
# Optional inputs: K0S_RELEASE_URL K0S_SHA256_AMD64 K0S_SHA256_ARM64 K0S_AIRGAP_SHA256_AMD64 K0S_AIRGAP_SHA256_ARM64
#   K0S_VERSION   the k0s release to run, e.g. v1.36.3+k0s.2.
#   NODE_NAME     this host's node: marked as failed when an upgrade fails here.

release_version() { k0s_current_version; }
install_release() { k0s_install "$1"; }
worker_installed() { k0s_service_installed k0sworker; }

main() {
  require_env K0S_VERSION NODE_NAME
  upgrade_worker k0s "$K0S_VERSION" k0sworker "$K0S_KUBELET_KUBECONFIG" k0s kubectl
}

main "$@"
