#!/usr/bin/env bash
# Runs on the controller after a worker joined: waits until the node object exists and
# then until it reports Ready, within NODE_READY_TIMEOUT seconds. The same for every
# distribution: KUBECTL is its kubectl with the admin credential.
set -euo pipefail
# shellcheck source=lib.sh
[[ -n "${GPU_CLUSTER_NODE_LIB_LOADED:-}" ]] || source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
: "${GPU_CLUSTER_STEP:=admit-node}"

# Inputs: NODE_NAME NODE_READY_TIMEOUT KUBECTL

main() {
  local node remaining
  check_missing_env NODE_NAME NODE_READY_TIMEOUT
  check_kubectl_input
  die_on_input_problems
  require_uint NODE_READY_TIMEOUT
  # The kubelet registers the lowercased hostname.
  node="${NODE_NAME,,}"
  wait_until "$NODE_READY_TIMEOUT" "node $node to register" admin_kubectl get node "$node"
  remaining=$((NODE_READY_TIMEOUT - SECONDS))
  if ((remaining < 1)); then
    remaining=1
  fi
  if ! admin_kubectl wait --for=condition=Ready "node/$node" --timeout="${remaining}s" >&2; then
    die "node $node did not become Ready within ${NODE_READY_TIMEOUT}s"
  fi
  log "node $node is Ready"
}

main "$@"
