#!/usr/bin/env bash
# Runs on the controller before a replaced machine (hosts[].generation raised) joins under
# its old name: removes the old machine's node object unless it has this generation's label.
# A drain that cannot finish (a dead machine's pods never stop) does not stop it.
set -euo pipefail
# shellcheck source=lib.sh
[[ -n "${GPU_CLUSTER_MAINTENANCE_LIB_LOADED:-}" ]] || source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
# shellcheck source=../drain/lib.sh
[[ -n "${GPU_CLUSTER_DRAIN_LIB_LOADED:-}" ]] || source "$(dirname "${BASH_SOURCE[0]}")/../drain/lib.sh"
: "${GPU_CLUSTER_STEP:=retire-node}"

# Inputs: DRAIN_TIMEOUT GENERATION_LABEL KUBECTL MACHINE_GENERATION NODE_NAME
# Optional inputs: DRAIN_FORCE MAINTENANCE

# Without it a new RKE2 agent is refused ("Node password rejected, duplicate hostname": the
# old node's password secret, k3s pkg/nodepassword), and the new kubelet would take over the
# old node's pods and annotations.
main() {
  local node current
  maintenance_inputs MACHINE_GENERATION DRAIN_TIMEOUT GENERATION_LABEL
  node="${NODE_NAME,,}"
  if ! node_exists "$node"; then
    log "node $node does not exist; nothing to retire"
    return 0
  fi
  current="$(kube get node "$node" -o "jsonpath={.metadata.labels.${GENERATION_LABEL//./\\.}}")"
  if [[ "$current" == "$MACHINE_GENERATION" ]]; then
    log "node $node is already machine generation $MACHINE_GENERATION"
    return 0
  fi
  log "node $node is machine generation ${current:-0}; retiring it for generation $MACHINE_GENERATION"
  if ! drain_node_with "$node" "$DRAIN_TIMEOUT" kube; then
    warn "node $node was not drained ($(drain_blockers_text)); a machine that is gone" \
      "cannot stop its pods: deleting it anyway"
  fi
  kube delete node "$node" >&2
  log "changed: deleted node $node of machine generation ${current:-0}"
}

main "$@"
