#!/usr/bin/env bash
# Delete step of admit-node, on the controller when a worker is removed: drains the node
# and deletes its object; a no-op when the node or the controller is gone. The same for
# every distribution: KUBECTL its admin kubectl, CONTROLLER_FILE its controller's file.
set -euo pipefail
# shellcheck source=lib.sh
[[ -n "${GPU_CLUSTER_NODE_LIB_LOADED:-}" ]] || source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
# shellcheck source=../drain/lib.sh
[[ -n "${GPU_CLUSTER_DRAIN_LIB_LOADED:-}" ]] || source "$(dirname "${BASH_SOURCE[0]}")/../drain/lib.sh"
: "${GPU_CLUSTER_STEP:=remove-node}"

# Inputs: NODE_NAME KUBECTL CONTROLLER_FILE
# Optional inputs: DRAIN_FORCE

# How long the drain may take before the node stays and the step fails.
DRAIN_SECONDS=300

main() {
  local node
  check_missing_env NODE_NAME CONTROLLER_FILE
  check_kubectl_input
  if [[ -n "${CONTROLLER_FILE:-}" && ! "$CONTROLLER_FILE" =~ ^(/[A-Za-z0-9_.-]+)+$ ]]; then
    INPUT_PROBLEMS+=("CONTROLLER_FILE must be an absolute path, got '$CONTROLLER_FILE'")
  fi
  check_drain_inputs
  die_on_input_problems
  node="${NODE_NAME,,}"
  if ! controller_installed || [[ ! -f "$ROOT$CONTROLLER_FILE" ]]; then
    log "no controller on this host any more ($CONTROLLER_FILE is gone); nothing to drain" \
      "or delete for $node"
    return 0
  fi
  if [[ -z "$(node_field "$node" '{.metadata.name}')" ]]; then
    log "node $node does not exist; nothing to drain or delete"
    return 0
  fi
  if ! drain_node_with "$node" "$DRAIN_SECONDS" admin_kubectl; then
    die "could not drain node $node, so it stays: $(drain_blockers_text). Free those pods," \
      "then run pulumi up again"
  fi
  log "changed: drained node $node"
  admin_kubectl delete node "$node" >&2
  log "changed: deleted node $node"
}

main "$@"
