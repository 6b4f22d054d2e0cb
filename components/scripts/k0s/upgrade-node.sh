#!/usr/bin/env bash
# Installs the wanted k0s on a worker before its join, or upgrades it after drain-node:
# replaces the binary and restarts the service.
set -euo pipefail
# shellcheck source=../lib.sh
[[ -n "${GPU_CLUSTER_LIB_LOADED:-}" ]] || source "$(dirname "${BASH_SOURCE[0]}")/../lib.sh"
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

SERVICE_ACTIVE_TIMEOUT=300

main() {
  local current
  # Read by the exit handler mark_own_node_failed_on_exit sets (upgrade/lib.sh).
  UPGRADE_PHASE=""
  require_env K0S_VERSION NODE_NAME
  if [[ -f "$ROOT$K0S_KUBELET_KUBECONFIG" ]]; then
    mark_own_node_failed_on_exit "${NODE_NAME,,}" k0s kubectl --kubeconfig \
      "$ROOT$K0S_KUBELET_KUBECONFIG"
  fi
  UPGRADE_PHASE="installing k0s $K0S_VERSION"
  current="$(k0s_current_version)"
  refuse_version_skew k0s "$current" "$K0S_VERSION"
  k0s_install_binary "$K0S_VERSION"
  k0s_install_airgap_bundle "$K0S_VERSION"
  if ! k0s_service_installed k0sworker; then
    log "k0s $K0S_VERSION is installed; the join step starts the worker"
    return 0
  fi
  restart_at_version "$K0S_BINARY_CHANGED" k0sworker k0s "$K0S_VERSION"
}

main "$@"
