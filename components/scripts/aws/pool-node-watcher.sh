#!/usr/bin/env bash
# Runs on the controller as gpu-cluster-pool-node-watcher.service, started every minute by
# its timer (installed by watch-pools.sh): deletes the SSM boot statuses of pool instances
# that are gone, so terminated pool instances leave nothing behind in SSM.
#
# The boot statuses are SSM parameters below BOOT_STATUS_PATH, one per instance id, written
# by each instance's boot; those whose instance EC2 no longer lists as pending, running,
# stopping or stopped (tag gpu-cluster/cluster) are deleted (forget-boot-statuses.py, with
# the controller role's grant). Any failure deletes nothing more; the timer tries again.
#
# It holds no Kubernetes credential: the Node of an instance EC2 no longer has is deleted
# by the node lifecycle controller of the AWS cloud controller manager on the controllers
# (components/aws/cloud_controller.py), by the providerID the node registered with
# (k8s.io/cloud-provider v0.35.0
# controllers/nodelifecycle/node_lifecycle_controller.go:129-178).
#
# Environment (from /etc/gpu-cluster/pool-node-watcher.env): AWS_REGION, CLUSTER_NAME,
# AWS_CLIENT (ssm-parameter.py), EC2_CLIENT (ec2-instances.py), BOOT_STATUS_CLIENT
# (forget-boot-statuses.py), BOOT_STATUS_PATH.
set -euo pipefail

# Inputs: AWS_CLIENT AWS_REGION BOOT_STATUS_CLIENT BOOT_STATUS_PATH CLUSTER_NAME EC2_CLIENT

HOST="$(hostname)"

log() {
  printf 'gpu-cluster: %s: pool-node-watcher: %s\n' "$HOST" "$*" >&2
}

main() {
  local missing=() name forgotten
  for name in AWS_REGION CLUSTER_NAME AWS_CLIENT EC2_CLIENT BOOT_STATUS_CLIENT \
    BOOT_STATUS_PATH; do
    [[ -n "${!name:-}" ]] || missing+=("$name")
  done
  if ((${#missing[@]} > 0)); then
    log "missing required environment variable(s): ${missing[*]}"
    exit 2
  fi
  if ! forgotten="$(python3 "$BOOT_STATUS_CLIENT" "$AWS_CLIENT" "$EC2_CLIENT" "$AWS_REGION" \
    "$CLUSTER_NAME" "$BOOT_STATUS_PATH")"; then
    log "could not delete the boot statuses of gone instances below $BOOT_STATUS_PATH"
    exit 1
  fi
  log "$(grep -c . <<<"$forgotten" || true) boot status(es) of gone instances deleted"
}

main "$@"
