#!/usr/bin/env bash
# Runs on the controller for a host with hosts[].maintenance set: true cordons and drains
# its node (the node stays in the cluster), false uncordons it. Each run reads the wanted
# state, so a second run changes nothing.
set -euo pipefail
# shellcheck source=lib.sh
[[ -n "${GPU_CLUSTER_MAINTENANCE_LIB_LOADED:-}" ]] || source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
# shellcheck source=../drain/lib.sh
[[ -n "${GPU_CLUSTER_DRAIN_LIB_LOADED:-}" ]] || source "$(dirname "${BASH_SOURCE[0]}")/../drain/lib.sh"
: "${GPU_CLUSTER_STEP:=maintenance}"

# Inputs: DRAIN_TIMEOUT KUBECTL MAINTENANCE NODE_NAME
# Optional inputs: DRAIN_FORCE

main() {
  local node was_cordoned=0
  maintenance_inputs MAINTENANCE DRAIN_TIMEOUT
  # The kubelet registers the lowercased hostname.
  node="${NODE_NAME,,}"
  if ! node_exists "$node"; then
    if is_true "$MAINTENANCE"; then
      die "node $node does not exist; there is nothing to cordon and drain"
    fi
    log "node $node does not exist; nothing to uncordon"
    return 0
  fi
  if node_cordoned "$node"; then
    was_cordoned=1
  fi
  if is_true "$MAINTENANCE"; then
    drain_node "$node" "$DRAIN_TIMEOUT"
    if ((was_cordoned)); then
      log "node $node is cordoned and drained"
    else
      log "changed: cordoned and drained node $node"
    fi
  elif ((was_cordoned)); then
    kube uncordon "$node" >&2
    log "changed: uncordoned node $node"
  else
    log "node $node is not cordoned"
  fi
}

main "$@"
