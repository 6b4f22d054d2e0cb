#!/usr/bin/env bash
# Runs on the controller as gpu-cluster-pool-node-watcher.service, started every minute by
# its timer (installed by watch-pools.sh). Deletes the SSM boot statuses of pool instances
# that are gone and, where the AWS cloud controller manager does not run (KUBECONFIG_FILE
# given: k0s, whose controllers are no nodes), their Node objects, so no NotReady node is
# left counted in every DaemonSet. No credential on a pool instance may delete a node.
#
# Where the cloud controller manager runs (components/aws/cloud_controller.py), its node
# lifecycle controller deletes the Node of an instance EC2 no longer has, by the providerID
# the node registered with; this watcher then has no Kubernetes credential at all.
#
# Otherwise a pool node (label gpu-cluster/pool) is deleted when both hold:
# - no instance of this cluster (tag gpu-cluster/cluster) that EC2 lists as pending,
#   running, stopping or stopped carries its name (ec2-instances.py); a new instance that
#   took over the private address, and so the name, keeps it;
# - its Ready condition is not True: the kubelet stopped reporting (the node lifecycle
#   controller sets Unknown after node-monitor-grace-period, 40 s by default:
#   kubernetes pkg/controller/nodelifecycle, --node-monitor-grace-period).
# Any failure (EC2 or the API unanswered) deletes nothing; the timer tries again.
#
# Then the boot statuses (SSM parameters below BOOT_STATUS_PATH, one per instance id) of
# instances that are gone are deleted (forget-boot-statuses.py), so terminated pool
# instances leave nothing behind in SSM.
#
# Environment (from /etc/gpu-cluster/pool-node-watcher.env): AWS_REGION, CLUSTER_NAME,
# KUBECTL (the distribution's kubectl command), KUBECONFIG_FILE (the watcher's own
# credential, get, list and delete nodes; empty where the cloud controller manager runs),
# AWS_CLIENT (ssm-parameter.py), EC2_CLIENT (ec2-instances.py), POOL_LABEL,
# BOOT_STATUS_CLIENT (forget-boot-statuses.py), BOOT_STATUS_PATH.
set -euo pipefail

# Inputs: AWS_CLIENT AWS_REGION BOOT_STATUS_CLIENT BOOT_STATUS_PATH CLUSTER_NAME EC2_CLIENT KUBECTL POOL_LABEL
# Optional inputs: KUBECONFIG_FILE

HOST="$(hostname)"

log() {
  printf 'gpu-cluster: %s: pool-node-watcher: %s\n' "$HOST" "$*" >&2
}

main() {
  local missing=() name forgotten
  for name in AWS_REGION CLUSTER_NAME KUBECTL AWS_CLIENT EC2_CLIENT POOL_LABEL \
    BOOT_STATUS_CLIENT BOOT_STATUS_PATH; do
    [[ -n "${!name:-}" ]] || missing+=("$name")
  done
  if ((${#missing[@]} > 0)); then
    log "missing required environment variable(s): ${missing[*]}"
    exit 2
  fi
  if [[ -n "${KUBECONFIG_FILE:-}" ]]; then
    delete_gone_nodes
  else
    log "the AWS cloud controller manager deletes the nodes of gone instances"
  fi
  if ! forgotten="$(python3 "$BOOT_STATUS_CLIENT" "$AWS_CLIENT" "$EC2_CLIENT" "$AWS_REGION" \
    "$CLUSTER_NAME" "$BOOT_STATUS_PATH")"; then
    log "could not delete the boot statuses of gone instances below $BOOT_STATUS_PATH"
    exit 1
  fi
  log "$(grep -c . <<<"$forgotten" || true) boot status(es) of gone instances deleted"
}

# delete_gone_nodes: the pool nodes no live instance of the cluster holds, not Ready.
delete_gone_nodes() {
  local live nodes node ready deleted=0
  if ! live="$(python3 "$EC2_CLIENT" "$AWS_CLIENT" "$AWS_REGION" "$CLUSTER_NAME")"; then
    log "could not list this cluster's instances in EC2: deleting nothing"
    exit 1
  fi
  # KUBECTL is a command with arguments (k0s kubectl): split on purpose.
  # shellcheck disable=SC2086
  if ! nodes="$($KUBECTL --kubeconfig "$KUBECONFIG_FILE" get nodes -l "$POOL_LABEL" \
    -o 'jsonpath={range .items[*]}{.metadata.name}{" "}{.status.conditions[?(@.type=="Ready")].status}{"\n"}{end}')"; then
    log "could not list the pool nodes: deleting nothing"
    exit 1
  fi
  while read -r node ready; do
    [[ -n "$node" ]] || continue
    if grep -qxF -- "$node" <<<"$live"; then
      continue
    fi
    if [[ "$ready" == True ]]; then
      log "node $node is Ready but no instance of the cluster holds its name: kept"
      continue
    fi
    log "no instance of cluster $CLUSTER_NAME holds node $node any more: deleting it"
    # shellcheck disable=SC2086
    $KUBECTL --kubeconfig "$KUBECONFIG_FILE" delete node "$node" --ignore-not-found --wait=false
    deleted=$((deleted + 1))
  done <<<"$nodes"
  log "$deleted node(s) deleted"
}

main "$@"
