#!/usr/bin/env bash
# Runs on the controller after a worker was upgraded: waits until the node is Ready and
# uncordons it when drain-node cordoned it. A node not registered yet is left to its
# join and admit-node steps; one an admin cordoned stays cordoned.
set -euo pipefail
# shellcheck source=../lib.sh
[[ -n "${GPU_CLUSTER_LIB_LOADED:-}" ]] || source "$(dirname "${BASH_SOURCE[0]}")/../lib.sh"
# shellcheck source=lib.sh
[[ -n "${GPU_CLUSTER_UPGRADE_LIB_LOADED:-}" ]] || source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
: "${GPU_CLUSTER_STEP:=uncordon-node}"

# Inputs (environment):
#   NODE_NAME, NODE_READY_TIMEOUT (seconds), KUBECTL.

main() {
  local node marked
  check_missing_env NODE_NAME NODE_READY_TIMEOUT
  check_kubectl_input
  die_on_input_problems
  require_uint NODE_READY_TIMEOUT
  node="${NODE_NAME,,}"
  if [[ -z "$(node_field "$node" '{.metadata.name}')" ]]; then
    log "node $node is not registered yet: its join and admit-node steps wait for it"
    return 0
  fi
  if ! admin_kubectl wait --for=condition=Ready "node/$node" --timeout="${NODE_READY_TIMEOUT}s" >&2; then
    die "node $node did not become Ready within ${NODE_READY_TIMEOUT}s after its upgrade;" \
      "it stays cordoned and the upgrade stops here"
  fi
  marked="$(node_field "$node" "{.metadata.annotations.${UPGRADE_ANNOTATION//./\\.}}")"
  if [[ -z "$marked" ]]; then
    log "unchanged: node $node is Ready and was not cordoned for an upgrade"
    return 0
  fi
  admin_kubectl uncordon "$node" >&2
  admin_kubectl annotate node "$node" "$UPGRADE_ANNOTATION-" >&2
  log "changed: node $node is Ready at $marked and uncordoned"
}

main "$@"
