#!/usr/bin/env bash
# Runs on the controller before a worker is upgraded (KUBERNETES_VERSION) or its host
# settings change (HOST_SETTINGS): drains the node unless it runs them already, once it
# holds one of the MAX_UNAVAILABLE upgrade slots and no node is marked as failed.
set -euo pipefail
# shellcheck source=lib.sh
[[ -n "${GPU_CLUSTER_UPGRADE_LIB_LOADED:-}" ]] || source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
# shellcheck source=../drain/lib.sh
[[ -n "${GPU_CLUSTER_DRAIN_LIB_LOADED:-}" ]] || source "$(dirname "${BASH_SOURCE[0]}")/../drain/lib.sh"
: "${GPU_CLUSTER_STEP:=drain-node}"

# kubectl drain evicts pods through the Eviction API, which respects
# PodDisruptionBudgets (https://kubernetes.io/docs/tasks/administer-cluster/safely-drain-node/);
# evictions still refused after DRAIN_TIMEOUT seconds, or a pod no controller manages
# without DRAIN_FORCE (drain/lib.sh), fail this step, naming the pods, and the rollout
# stops here.
#
# The slots: every worker's drain-node may run at once (Pulumi runs independent steps
# concurrently, each over its own SSH session), so counting the nodes that carry
# UPGRADE_ANNOTATION and setting it on this one happen under an exclusive flock(1) on
# SLOT_LOCK (util-linux flock(1): "flock -w seconds fd" waits for the lock on an open file
# descriptor, released by "flock -u fd" or when the process exits). /run is emptied at
# boot, so a lock never outlives a crash.

# Inputs: DRAIN_TIMEOUT KUBECTL MAX_UNAVAILABLE NODE_NAME SLOT_WAIT_TIMEOUT
# Optional inputs: DRAIN_FORCE HOST_SETTINGS KUBERNETES_VERSION REBOOT_WHEN_NEEDED
#   NODE_NAME, DRAIN_TIMEOUT (seconds), MAX_UNAVAILABLE (nodes upgraded at once, 1 or
#   more), SLOT_WAIT_TIMEOUT (seconds without any slot freeing before this step gives up),
#   KUBECTL (the controller's kubectl with its admin credential), DRAIN_FORCE (optional,
#   kubernetes.drainForce: true deletes pods no controller manages), and one of:
#   KUBERNETES_VERSION  the release to upgrade to (after the controller's upgrade);
#   HOST_SETTINGS       what the host is to be prepared with (HOST_SETTINGS_ANNOTATION),
#                       with REBOOT_WHEN_NEEDED (tuning.rebootWhenNeeded, true or false).
#
# HOST_SETTINGS: a new driver branch needs the GPUs idle and a reboot to load its kernel
# module (the loaded module and the new user-space libraries disagree until then: "Failed
# to initialize NVML: Driver/library version mismatch"; NVIDIA GPU Operator, "GPU Driver
# Upgrades": https://docs.nvidia.com/datacenter/cloud-native/gpu-operator/latest/gpu-driver-upgrades.html
# drains each node before its driver changes), so the node is drained before its
# install-nvidia step and rebooted by reboot-if-needed. A node without the annotation
# joined before it was recorded: it is taken as running the wanted settings (recorded, not
# drained), so the first run of this program drains nothing.

SLOT_LOCK=/run/gpu-cluster/upgrade-slots.lock
LOCK_TIMEOUT=120
SLOT_POLL_SECONDS=10
# How long a drain for HOST_SETTINGS waits for the API of a controller being installed or
# restarted in the same run.
API_WAIT_TIMEOUT=300

# take_slot NODE WHAT: returns once NODE carries UPGRADE_ANNOTATION (WHAT: what it is
# upgraded to), set while fewer than
# MAX_UNAVAILABLE other nodes did; waits while they do; dies while a node is marked as
# failed (NODE's own mark is its retry, and is cleared).
take_slot() {
  local node=$1 what=$2 lock name upgrading failure mine holders failed held last="" attempts=0
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
      admin_kubectl annotate node "$node" --overwrite "$UPGRADE_ANNOTATION=$what" \
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

# drain NODE WHY: cordons and drains NODE, which holds its slot; a drain that fails marks
# NODE as failed, naming the pods that kept it, and stops the rollout.
drain() {
  local node=$1 why=$2 blockers
  log "draining node $node $why"
  if ! drain_node_with "$node" "$DRAIN_TIMEOUT" admin_kubectl; then
    blockers="$(drain_blockers_text)"
    mark_failed "$node" "could not drain node $node: $blockers"
    die "could not drain node $node: $blockers. The upgrade stops here, before $node is" \
      "changed, and $node is marked as failed ($UPGRADE_FAILED_ANNOTATION). The node stays" \
      "cordoned: free those pods and run pulumi up again, or \`kubectl uncordon $node\` and" \
      "clear the mark to give up"
  fi
  log "changed: drained node $node"
}

# drain_for_kubernetes NODE: drains NODE unless its kubelet runs KUBERNETES_VERSION.
drain_for_kubernetes() {
  local node=$1 running
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
  take_slot "$node" "$KUBERNETES_VERSION"
  drain "$node" "(runs $running) for the upgrade to $KUBERNETES_VERSION"
}

# drain_for_host_settings NODE: drains NODE when it was prepared with other host settings
# than HOST_SETTINGS, before its host steps change them.
drain_for_host_settings() {
  local node=$1 recorded
  if ! controller_installed; then
    # Runs beside the controller's own preparation on a new cluster.
    log "the controller is not installed yet: no node $node to drain"
    return 0
  fi
  wait_until "$API_WAIT_TIMEOUT" "the Kubernetes API" admin_kubectl get --raw=/readyz
  if [[ -z "$(node_field "$node" '{.metadata.name}')" ]]; then
    log "node $node is not registered yet: nothing to drain (it joins with the wanted" \
      "host settings)"
    return 0
  fi
  recorded="$(node_field "$node" "$(annotation_path "$HOST_SETTINGS_ANNOTATION")")"
  if [[ -z "$recorded" ]]; then
    admin_kubectl annotate node "$node" --overwrite \
      "$HOST_SETTINGS_ANNOTATION=$HOST_SETTINGS" >&2
    log "node $node has no $HOST_SETTINGS_ANNOTATION yet (it joined before it was" \
      "recorded): taken as prepared with $HOST_SETTINGS, recorded, not drained"
    return 0
  fi
  if [[ "$recorded" == "$HOST_SETTINGS" ]]; then
    log "unchanged: node $node was prepared with $HOST_SETTINGS; not drained"
    return 0
  fi
  if ! is_true "$REBOOT_WHEN_NEEDED"; then
    die "node $node was prepared with $recorded; the config wants $HOST_SETTINGS, which" \
      "needs a drain and may need a reboot, and tuning.rebootWhenNeeded is false; nothing" \
      "was changed. Set tuning.rebootWhenNeeded: true for the rollout, or drain, update" \
      "and reboot $node yourself, then record it: kubectl annotate node $node --overwrite" \
      "$HOST_SETTINGS_ANNOTATION='$HOST_SETTINGS'"
  fi
  take_slot "$node" "$HOST_SETTINGS"
  drain "$node" "(prepared with $recorded) for its host settings $HOST_SETTINGS"
}

main() {
  check_missing_env NODE_NAME DRAIN_TIMEOUT MAX_UNAVAILABLE SLOT_WAIT_TIMEOUT
  : "${KUBERNETES_VERSION:=}" "${HOST_SETTINGS:=}" "${REBOOT_WHEN_NEEDED:=true}"
  if [[ -z "$KUBERNETES_VERSION" && -z "$HOST_SETTINGS" ]]; then
    INPUT_PROBLEMS+=("KUBERNETES_VERSION or HOST_SETTINGS must be set")
  elif [[ -n "$KUBERNETES_VERSION" && -n "$HOST_SETTINGS" ]]; then
    INPUT_PROBLEMS+=("KUBERNETES_VERSION and HOST_SETTINGS are one step each, not both")
  fi
  check_host_settings_input
  check_kubectl_input
  check_drain_inputs
  die_on_input_problems
  require_uint DRAIN_TIMEOUT MAX_UNAVAILABLE SLOT_WAIT_TIMEOUT
  require_bool REBOOT_WHEN_NEEDED
  MAX_UNAVAILABLE=$((10#$MAX_UNAVAILABLE))
  ((MAX_UNAVAILABLE >= 1)) || die "MAX_UNAVAILABLE must be 1 or more, got $MAX_UNAVAILABLE"
  # The kubelet registers the lowercased hostname.
  if [[ -n "$HOST_SETTINGS" ]]; then
    drain_for_host_settings "${NODE_NAME,,}"
  else
    drain_for_kubernetes "${NODE_NAME,,}"
  fi
}

main "$@"
