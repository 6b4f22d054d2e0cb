#!/usr/bin/env bash
# Runs on the RKE2 server when a node is removed: drains the node and deletes its
# object. A no-op (with a log line) when the node or the server is gone.
set -euo pipefail
# shellcheck source=../lib.sh
[[ -n "${GPU_CLUSTER_LIB_LOADED:-}" ]] || source "$(dirname "${BASH_SOURCE[0]}")/../lib.sh"
# shellcheck source=lib.sh
[[ -n "${GPU_CLUSTER_RKE2_LIB_LOADED:-}" ]] || source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
# shellcheck source=../drain/lib.sh
[[ -n "${GPU_CLUSTER_DRAIN_LIB_LOADED:-}" ]] || source "$(dirname "${BASH_SOURCE[0]}")/../drain/lib.sh"
: "${GPU_CLUSTER_STEP:=remove-node}"

# Inputs: NODE_NAME
# Optional inputs: DRAIN_FORCE

main() {
  local node found
  require_env NODE_NAME
  check_drain_inputs
  die_on_input_problems
  node="${NODE_NAME,,}"
  # The admin kubeconfig RKE2 writes on a server (write-kubeconfig, default
  # /etc/rancher/rke2/rke2.yaml); rke2-uninstall.sh removes it with /etc/rancher/rke2.
  if [[ ! -x "$ROOT$RKE2_KUBECTL" || ! -f "$ROOT$RKE2_ADMIN_KUBECONFIG" ]]; then
    log "no RKE2 server on this host any more; nothing to drain or delete for $node"
    return 0
  fi
  found="$(rke2_kubectl get node "$node" --ignore-not-found -o name)"
  if [[ -z "$found" ]]; then
    log "node $node does not exist; nothing to drain or delete"
    return 0
  fi
  if ! drain_node_with "$node" 300 rke2_kubectl; then
    die "could not drain node $node, so it stays: $(drain_blockers_text). Free those pods," \
      "then run pulumi up again"
  fi
  log "changed: drained node $node"
  rke2_kubectl delete node "$node" >&2
  log "changed: deleted node $node"
}

main "$@"
