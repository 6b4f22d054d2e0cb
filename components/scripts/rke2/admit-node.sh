#!/usr/bin/env bash
# Runs on the RKE2 server after a node joined: waits until the node object
# exists and then until it reports Ready, within NODE_READY_TIMEOUT seconds.
set -euo pipefail
# shellcheck source=../lib.sh
[[ -n "${GPU_CLUSTER_LIB_LOADED:-}" ]] || source "$(dirname "${BASH_SOURCE[0]}")/../lib.sh"
# shellcheck source=lib.sh
[[ -n "${GPU_CLUSTER_RKE2_LIB_LOADED:-}" ]] || source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
: "${GPU_CLUSTER_STEP:=admit-node}"

# Inputs: NODE_NAME NODE_READY_TIMEOUT

main() {
  local node remaining
  require_env NODE_NAME NODE_READY_TIMEOUT
  require_uint NODE_READY_TIMEOUT
  # The kubelet registers the lowercased hostname.
  node="${NODE_NAME,,}"
  wait_until "$NODE_READY_TIMEOUT" "node $node to register" rke2_kubectl get node "$node"
  remaining=$((NODE_READY_TIMEOUT - SECONDS))
  if ((remaining < 1)); then
    remaining=1
  fi
  if ! rke2_kubectl wait --for=condition=Ready "node/$node" --timeout="${remaining}s" >&2; then
    die "node $node did not become Ready within ${NODE_READY_TIMEOUT}s"
  fi
  log "node $node is Ready"
}

main "$@"
