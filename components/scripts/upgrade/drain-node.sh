#!/usr/bin/env bash
# Runs on the controller before a worker is upgraded: cordons and drains the node unless
# its kubelet already runs the wanted Kubernetes version, once it holds one of the
# MAX_UNAVAILABLE upgrade slots and no node is marked as failed.
set -euo pipefail
# shellcheck source=../lib.sh
[[ -n "${GPU_CLUSTER_LIB_LOADED:-}" ]] || source "$(dirname "${BASH_SOURCE[0]}")/../lib.sh"
# shellcheck source=lib.sh
[[ -n "${GPU_CLUSTER_UPGRADE_LIB_LOADED:-}" ]] || source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
: "${GPU_CLUSTER_STEP:=drain-node}"

# kubectl drain evicts pods through the Eviction API, which respects
# PodDisruptionBudgets (https://kubernetes.io/docs/tasks/administer-cluster/safely-drain-node/);
# evictions still refused after DRAIN_TIMEOUT seconds fail this step, and the rollout
# stops here.
#
# The slots: every worker's drain-node may run at once (Pulumi runs independent steps
# concurrently, each over its own SSH session), so counting the nodes that carry
# UPGRADE_ANNOTATION and setting it on this one happen under an exclusive flock(1) on
# SLOT_LOCK (util-linux flock(1): "flock -w seconds fd" waits for the lock on an open file
# descriptor, released by "flock -u fd" or when the process exits). /run is emptied at
# boot, so a lock never outlives a crash.

# Inputs (environment):
#   NODE_NAME, KUBERNETES_VERSION (the release to upgrade to), DRAIN_TIMEOUT (seconds),
#   MAX_UNAVAILABLE (nodes upgraded at once, 1 or more), SLOT_WAIT_TIMEOUT (seconds
#   without any slot freeing before this step gives up),
#   KUBECTL (the controller's kubectl with its admin credential).

SLOT_LOCK=/run/gpu-cluster/upgrade-slots.lock
LOCK_TIMEOUT=120
SLOT_POLL_SECONDS=10

# take_slot NODE: returns once NODE carries UPGRADE_ANNOTATION, set while fewer than
# MAX_UNAVAILABLE other nodes did; waits while they do; dies while a node is marked as
# failed (NODE's own mark is its retry, and is cleared).
take_slot() {
  local node=$1 lock name upgrading failure mine holders failed held last="" attempts=0
  local max_attempts=$((SLOT_WAIT_TIMEOUT / SLOT_POLL_SECONDS + 1))
  mkdir -p "$ROOT${SLOT_LOCK%/*}"
  exec {lock}>"$ROOT$SLOT_LOCK"
  while true; do
    if ! flock -w "$LOCK_TIMEOUT" "$lock"; then
      die "could not take the upgrade lock $SLOT_LOCK within ${LOCK_TIMEOUT}s; nothing was" \
        "changed. Another step holds it: run pulumi up again once it has ended"
    fi
    mine="" holders=() failed=()
    while IFS=$'\t' read -r name upgrading failure; do
      [[ -n "$name" ]] || continue
      if [[ "$name" == "$node" ]]; then
        mine=$upgrading
      else
        [[ -z "$upgrading" ]] || holders+=("$name")
        [[ -z "$failure" ]] || failed+=("$name ($failure)")
      fi
    done < <(upgrade_marks)
    if ((${#failed[@]} > 0)); then
      flock -u "$lock"
      printf -v held '; %s' "${failed[@]}"
      die "refusing to start the upgrade of node $node: node(s) failed theirs: ${held#; }." \
        "The rollout stops here; nodes already being upgraded finish. Fix the node, then" \
        "run pulumi up again, which retries its failed step; to let the other nodes go on" \
        "in the same run, first clear the mark:" \
        "kubectl annotate node NODE $UPGRADE_FAILED_ANNOTATION-"
    fi
    if [[ -n "$mine" || ${#holders[@]} -lt $MAX_UNAVAILABLE ]]; then
      # A retry of this node's own failed step clears its mark with the slot it keeps.
      admin_kubectl annotate node "$node" --overwrite "$UPGRADE_ANNOTATION=$KUBERNETES_VERSION" \
        "$UPGRADE_FAILED_ANNOTATION-" >&2
      flock -u "$lock"
      log "took an upgrade slot for node $node (${#holders[@]} other node(s) being" \
        "upgraded, at most $MAX_UNAVAILABLE at once)"
      return 0
    fi
    flock -u "$lock"
    held="${holders[*]}"
    if [[ "$held" != "$last" ]]; then
      # A slot changed hands: the rollout moves, so the wait starts over.
      attempts=0
      last=$held
      log "waiting for an upgrade slot for node $node: $MAX_UNAVAILABLE node(s) at once," \
        "being upgraded: $held (up to ${SLOT_WAIT_TIMEOUT}s without progress)"
    fi
    attempts=$((attempts + 1))
    if ((attempts >= max_attempts)); then
      die "no upgrade slot freed within ${SLOT_WAIT_TIMEOUT}s for node $node; being" \
        "upgraded: $held. Nothing was changed on $node. Check those nodes' steps (pulumi up" \
        "--parallel below the number of workers can keep them from running), then run" \
        "pulumi up again"
    fi
    sleep "$SLOT_POLL_SECONDS"
  done
}

main() {
  local node running
  check_missing_env NODE_NAME KUBERNETES_VERSION DRAIN_TIMEOUT MAX_UNAVAILABLE \
    SLOT_WAIT_TIMEOUT
  check_kubectl_input
  die_on_input_problems
  require_uint DRAIN_TIMEOUT MAX_UNAVAILABLE SLOT_WAIT_TIMEOUT
  MAX_UNAVAILABLE=$((10#$MAX_UNAVAILABLE))
  ((MAX_UNAVAILABLE >= 1)) || die "MAX_UNAVAILABLE must be 1 or more, got $MAX_UNAVAILABLE"
  # The kubelet registers the lowercased hostname.
  node="${NODE_NAME,,}"
  running="$(node_field "$node" '{.status.nodeInfo.kubeletVersion}')"
  # Neither a new host nor a node at the wanted version takes a slot or waits for one.
  if [[ -z "$running" ]]; then
    log "node $node is not registered yet: nothing to drain (it joins at the wanted version)"
    return 0
  fi
  if [[ "$(kube_version "$running")" == "$(kube_version "$KUBERNETES_VERSION")" ]]; then
    log "unchanged: node $node already runs $running; not drained"
    return 0
  fi
  take_slot "$node"
  log "draining node $node (runs $running) for the upgrade to $KUBERNETES_VERSION"
  if ! admin_kubectl drain "$node" --ignore-daemonsets --delete-emptydir-data \
    --timeout="${DRAIN_TIMEOUT}s" >&2; then
    mark_failed "$node" "could not drain node $node within ${DRAIN_TIMEOUT}s"
    die "could not drain node $node within ${DRAIN_TIMEOUT}s (pods a PodDisruptionBudget" \
      "protects, or that do not stop); the upgrade stops here, before $node is changed," \
      "and $node is marked as failed ($UPGRADE_FAILED_ANNOTATION). The node stays" \
      "cordoned: free the pods and run pulumi up again, or \`kubectl uncordon $node\` and" \
      "clear the mark to give up"
  fi
  log "changed: drained node $node"
}

main "$@"
