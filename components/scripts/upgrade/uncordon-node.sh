#!/usr/bin/env bash
# On the controller after a worker's upgrade (and its join): waits until the node is
# Ready, uncordons it if drain-node cordoned it (freeing its slot, clearing a failed mark)
# and records its host settings; a node that does not get Ready is marked as failed.
set -euo pipefail
# shellcheck source=lib.sh
[[ -n "${GPU_CLUSTER_UPGRADE_LIB_LOADED:-}" ]] || source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
: "${GPU_CLUSTER_STEP:=uncordon-node}"

# A node not registered yet is left to its join and admit-node steps; one an admin
# cordoned stays cordoned.

# Inputs: KUBECTL NODE_NAME NODE_READY_TIMEOUT
# Optional inputs: HOST_SETTINGS KUBERNETES_VERSION
#   NODE_NAME, NODE_READY_TIMEOUT (seconds), KUBECTL; HOST_SETTINGS (optional): the host
#   settings the node was prepared with, recorded in HOST_SETTINGS_ANNOTATION.

main() {
  local node marked
  check_missing_env NODE_NAME NODE_READY_TIMEOUT
  : "${HOST_SETTINGS:=}"
  # Only there to run this step again after each upgrade.
  : "${KUBERNETES_VERSION:=}"
  check_host_settings_input
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
    record_host_settings "$node"
    log "unchanged: node $node is Ready and was not cordoned for an upgrade"
    return 0
  fi
  admin_kubectl uncordon "$node" >&2
  admin_kubectl annotate node "$node" "$UPGRADE_ANNOTATION-" "$UPGRADE_FAILED_ANNOTATION-" >&2
  record_host_settings "$node"
  log "changed: node $node is Ready at $marked and uncordoned"
}

# record_host_settings NODE: NODE carries HOST_SETTINGS (when given) in
# HOST_SETTINGS_ANNOTATION, which drain-node compares with the wanted settings.
record_host_settings() {
  [[ -n "$HOST_SETTINGS" ]] || return 0
  if [[ "$(node_field "$1" "$(annotation_path "$HOST_SETTINGS_ANNOTATION")")" != "$HOST_SETTINGS" ]]; then
    admin_kubectl annotate node "$1" --overwrite "$HOST_SETTINGS_ANNOTATION=$HOST_SETTINGS" >&2
    log "changed: recorded node $1's host settings: $HOST_SETTINGS"
  fi
}

main "$@"
