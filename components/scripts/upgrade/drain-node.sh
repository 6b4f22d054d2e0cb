#!/usr/bin/env bash
# Runs on the controller before a worker is upgraded: cordons and drains the node unless
# its kubelet already runs the wanted Kubernetes version.
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

# Inputs (environment):
#   NODE_NAME, KUBERNETES_VERSION (the release to upgrade to), DRAIN_TIMEOUT (seconds),
#   KUBECTL (the controller's kubectl with its admin credential).

main() {
  local node running
  check_missing_env NODE_NAME KUBERNETES_VERSION DRAIN_TIMEOUT
  check_kubectl_input
  die_on_input_problems
  require_uint DRAIN_TIMEOUT
  # The kubelet registers the lowercased hostname.
  node="${NODE_NAME,,}"
  running="$(node_field "$node" '{.status.nodeInfo.kubeletVersion}')"
  if [[ -z "$running" ]]; then
    log "node $node is not registered yet: nothing to drain (it joins at the wanted version)"
    return 0
  fi
  if [[ "$(kube_version "$running")" == "$(kube_version "$KUBERNETES_VERSION")" ]]; then
    log "unchanged: node $node already runs $running; not drained"
    return 0
  fi
  admin_kubectl annotate node "$node" --overwrite "$UPGRADE_ANNOTATION=$KUBERNETES_VERSION" >&2
  log "draining node $node (runs $running) for the upgrade to $KUBERNETES_VERSION"
  if ! admin_kubectl drain "$node" --ignore-daemonsets --delete-emptydir-data \
    --timeout="${DRAIN_TIMEOUT}s" >&2; then
    die "could not drain node $node within ${DRAIN_TIMEOUT}s (pods a PodDisruptionBudget" \
      "protects, or that do not stop); the upgrade stops here, before $node is changed." \
      "The node stays cordoned: free the pods and run pulumi up again, or" \
      "\`kubectl uncordon $node\` to give up"
  fi
  log "changed: drained node $node"
}

main "$@"
