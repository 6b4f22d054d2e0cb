#!/usr/bin/env bash
# Runs on a cloud pool instance as gpu-cluster-node-cleanup.service (installed by
# watch-termination.sh). Waits until the auto scaling group terminates this instance
# (scale-in, instance refresh, health replacement), then deletes the instance's Node
# object, so no NotReady node is left counted in every DaemonSet, and its boot status.
#
# The group's termination lifecycle hook keeps the instance running (Terminating:Wait)
# while this runs; IMDS then answers autoscaling/target-lifecycle-state with Terminated
# (https://docs.aws.amazon.com/autoscaling/ec2/userguide/retrieving-target-lifecycle-state-through-imds.html).
# The kubelet's own credential may not delete its Node (Kubernetes grants nodes create,
# get, list, watch, update and patch on nodes: plugin/pkg/auth/authorizer/rbac/
# bootstrappolicy/policy.go NodeRules), so the kubeconfig of a user allowed only to get
# and delete nodes is read from SSM at that moment.
#
# Environment (from /etc/gpu-cluster/node-cleanup.env): AWS_REGION,
# NODE_CLEANUP_KUBECONFIG_PARAMETER, BOOT_STATUS_PARAMETER, KUBECTL (the distribution's
# kubectl command), SSM_CLIENT (path of ssm-parameter.py), POLL_SECONDS.
# GPU_CLUSTER_ROOT and IMDS_ENDPOINT_URL are for tests.
set -euo pipefail

ROOT="${GPU_CLUSTER_ROOT:-}"
IMDS="${IMDS_ENDPOINT_URL:-http://169.254.169.254}"
HOST="$(hostname)"
# The credential, only while it is needed (mktemp: mode 0600).
KUBECONFIG_FILE=""
trap 'rm -f -- "${KUBECONFIG_FILE:-}"' EXIT

log() {
  printf 'gpu-cluster: %s: node-cleanup: %s\n' "$HOST" "$*" >&2
}

# imds PATH: a metadata value, with an IMDSv2 session token.
imds() {
  local token
  token="$(curl -sSf -m 5 -X PUT -H 'X-aws-ec2-metadata-token-ttl-seconds: 60' \
    "$IMDS/latest/api/token")" &&
    curl -sSf -m 5 -H "X-aws-ec2-metadata-token: $token" "$IMDS/latest/meta-data/$1"
}

ssm() {
  python3 - "$@" <"$ROOT$SSM_CLIENT"
}

main() {
  local missing=() name node id
  for name in AWS_REGION NODE_CLEANUP_KUBECONFIG_PARAMETER BOOT_STATUS_PARAMETER KUBECTL \
    SSM_CLIENT POLL_SECONDS; do
    [[ -n "${!name:-}" ]] || missing+=("$name")
  done
  if ((${#missing[@]} > 0)); then
    log "missing required environment variable(s): ${missing[*]}"
    exit 2
  fi
  log "watching for this instance's termination by its auto scaling group"
  until [[ "$(imds autoscaling/target-lifecycle-state 2>/dev/null || true)" == Terminated ]]; do
    sleep "$POLL_SECONDS"
  done
  # The kubelet registers the node under the host name, lower-cased
  # (k8s.io/component-helpers/node/util GetHostname).
  node="$(tr '[:upper:]' '[:lower:]' <<<"$HOST")"
  log "the auto scaling group is terminating this instance: deleting node $node"
  KUBECONFIG_FILE="$(mktemp)"
  ssm get "$AWS_REGION" "$NODE_CLEANUP_KUBECONFIG_PARAMETER" >"$KUBECONFIG_FILE"
  # KUBECTL is a command with arguments (k0s kubectl): split on purpose.
  # shellcheck disable=SC2086
  $KUBECTL --kubeconfig "$KUBECONFIG_FILE" delete node "$node" --ignore-not-found --wait=false
  if id="$(ssm instance-id)"; then
    ssm delete "$AWS_REGION" "$BOOT_STATUS_PARAMETER/$id" || log "could not delete the boot status"
  fi
  log "node $node deleted"
}

main "$@"
