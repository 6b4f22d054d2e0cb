#!/usr/bin/env bash
# Runs on the controller when hosts[].maintenance is taken out of the config (or the host
# is removed): uncordons the node, so no cordon outlives the setting that made it. A no-op
# when the node or the controller's kubectl is gone.
set -euo pipefail
# shellcheck source=lib.sh
[[ -n "${GPU_CLUSTER_MAINTENANCE_LIB_LOADED:-}" ]] || source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
: "${GPU_CLUSTER_STEP:=maintenance}"

# Inputs: KUBECTL NODE_NAME
# Optional inputs: MAINTENANCE

main() {
  local node
  maintenance_inputs NODE_NAME
  node="${NODE_NAME,,}"
  if ! kubectl_available; then
    log "no kubectl on this host any more; nothing to uncordon for $node"
    return 0
  fi
  if ! node_exists "$node" || ! node_cordoned "$node"; then
    log "node $node is not cordoned; nothing to undo"
    return 0
  fi
  kube uncordon "$node" >&2
  log "changed: uncordoned node $node"
}

main "$@"
