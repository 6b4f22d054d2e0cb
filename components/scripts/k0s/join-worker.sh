#!/usr/bin/env bash
# Joins this host to the cluster as a k0s worker with its node IP, labels, taints
# and worker profile, and waits until the k0sworker service is active. The join
# token is only written (0600, never on a command line) until the worker joined.
set -euo pipefail
# shellcheck source=../lib.sh
[[ -n "${GPU_CLUSTER_LIB_LOADED:-}" ]] || source "$(dirname "${BASH_SOURCE[0]}")/../lib.sh"
# shellcheck source=lib.sh
[[ -n "${GPU_CLUSTER_K0S_LIB_LOADED:-}" ]] || source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
: "${GPU_CLUSTER_STEP:=join-worker}"

SERVICE_ACTIVE_TIMEOUT=300

worker_joined() {
  [[ -f "$ROOT$K0S_KUBELET_KUBECONFIG" ]]
}

check_inputs() {
  local required=(K0S_VERSION NODE_IP)
  : "${KUBELET_EXTRA_ARGS:=}" "${NODE_LABELS:=}" "${NODE_TAINTS:=}" "${K0S_PROFILE:=}"
  : "${KUBELET_ROOT_DIR:=}"
  if ! worker_joined; then
    required+=(K0S_JOIN_TOKEN)
  fi
  require_env "${required[@]}"
  k0s_check_kubelet_root_dir
}

# worker_args: sets ARGS to the `k0s install worker` arguments.
worker_args() {
  ARGS=(--token-file "$K0S_TOKEN_FILE")
  k0s_add_kubelet_args
}

main() {
  local restart=0
  # Keep the secret out of the environment of every command started from here on.
  export -n K0S_JOIN_TOKEN
  check_inputs
  k0s_install_binary "$K0S_VERSION"
  if ((K0S_BINARY_CHANGED)); then
    restart=1
  fi
  if worker_joined; then
    log "the worker has already joined; the join token is not needed"
  else
    write_text "$K0S_TOKEN_FILE" 0600 "$K0S_JOIN_TOKEN"
    if ((FILE_CHANGED)); then
      restart=1
    fi
  fi
  worker_args
  k0s_ensure_service worker "$restart" "${ARGS[@]}"
  wait_until "$SERVICE_ACTIVE_TIMEOUT" "the k0sworker service to be active" \
    systemctl is-active --quiet k0sworker
}

main "$@"
