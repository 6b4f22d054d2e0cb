#!/usr/bin/env bash
# Runs on the controller after a worker was upgraded: waits until the node is Ready and
# uncordons it when drain-node cordoned it, which frees its upgrade slot (and clears a
# failed mark of an earlier try); a node that does not get Ready is marked as failed.
set -euo pipefail
# shellcheck source=../lib.sh
[[ -n "${GPU_CLUSTER_LIB_LOADED:-}" ]] || source "$(dirname "${BASH_SOURCE[0]}")/../lib.sh"
# shellcheck source=lib.sh
[[ -n "${GPU_CLUSTER_UPGRADE_LIB_LOADED:-}" ]] || source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
: "${GPU_CLUSTER_STEP:=uncordon-node}"

# A node not registered yet is left to its join and admit-node steps; one an admin
# cordoned stays cordoned.

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
  marked="$(node_field "$node" "$(annotation_path "$UPGRADE_ANNOTATION")")"
  if ! admin_kubectl wait --for=condition=Ready "node/$node" --timeout="${NODE_READY_TIMEOUT}s" >&2; then
    if [[ -n "$marked" ]]; then
      mark_failed "$node" "node $node did not become Ready within ${NODE_READY_TIMEOUT}s" \
        "after its upgrade"
    fi
    die "node $node did not become Ready within ${NODE_READY_TIMEOUT}s after its upgrade;" \
      "it stays cordoned and the upgrade stops here${marked:+ (the node is marked as failed)}"
  fi
  if [[ -z "$marked" ]]; then
    log "unchanged: node $node is Ready and was not cordoned for an upgrade"
    return 0
  fi
  admin_kubectl uncordon "$node" >&2
  admin_kubectl annotate node "$node" "$UPGRADE_ANNOTATION-" "$UPGRADE_FAILED_ANNOTATION-" >&2
  log "changed: node $node is Ready at $marked and uncordoned"
}

main "$@"
