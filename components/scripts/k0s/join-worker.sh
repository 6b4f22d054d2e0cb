#!/usr/bin/env bash
# Joins this host to the cluster as a k0s worker with its node IP, labels, taints and
# worker profile, and waits until the k0sworker service is active. The join token (given,
# or read from SSM) is only written (0600, never on a command line) until the worker joined.
set -euo pipefail
# shellcheck source=../lib.sh
[[ -n "${GPU_CLUSTER_LIB_LOADED:-}" ]] || source "$(dirname "${BASH_SOURCE[0]}")/../lib.sh"
# shellcheck source=lib.sh
[[ -n "${GPU_CLUSTER_K0S_LIB_LOADED:-}" ]] || source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
: "${GPU_CLUSTER_STEP:=join-worker}"

# Inputs (environment):
#   K0S_VERSION        k0s release to install, e.g. v1.34.1+k0s.0.
#   NODE_IP            address the kubelet registers; must be set, may be empty: then no
#                      --node-ip is passed and the kubelet picks the primary address.
#   K0S_JOIN_TOKEN     the worker join token, or
#   K0S_JOIN_TOKEN_SSM_PARAMETER, AWS_REGION and SSM_READER
#                      name of an SSM Parameter Store SecureString holding it, read by
#                      SSM_READER (the text of ssm-parameter.py, run by python3) with
#                      the instance's own credentials (cloud instances: the token is not
#                      in their user data). K0S_JOIN_TOKEN wins when both are set. Either
#                      is needed only until the worker has joined.
#   KUBELET_EXTRA_ARGS, NODE_LABELS, NODE_TAINTS, K0S_PROFILE, KUBELET_ROOT_DIR  optional.

SERVICE_ACTIVE_TIMEOUT=300

worker_joined() {
  [[ -f "$ROOT$K0S_KUBELET_KUBECONFIG" ]]
}

# token_from_ssm: success when the join token is still needed and must be read from SSM.
token_from_ssm() {
  ! worker_joined && [[ -z "${K0S_JOIN_TOKEN:-}" && -n "${K0S_JOIN_TOKEN_SSM_PARAMETER:-}" ]]
}

check_inputs() {
  local required=(K0S_VERSION)
  : "${KUBELET_EXTRA_ARGS:=}" "${NODE_LABELS:=}" "${NODE_TAINTS:=}" "${K0S_PROFILE:=}"
  : "${KUBELET_ROOT_DIR:=}" "${K0S_JOIN_TOKEN_SSM_PARAMETER:=}"
  # Empty is a choice (the primary address); unset is a forgotten input.
  if [[ ! -v NODE_IP ]]; then
    required+=(NODE_IP)
  fi
  if ! worker_joined && ! token_from_ssm; then
    required+=(K0S_JOIN_TOKEN)
  fi
  check_missing_env "${required[@]}"
  if ! worker_joined && [[ -z "${K0S_JOIN_TOKEN:-}" && -z "$K0S_JOIN_TOKEN_SSM_PARAMETER" ]]; then
    INPUT_PROBLEMS+=("instead of K0S_JOIN_TOKEN, K0S_JOIN_TOKEN_SSM_PARAMETER with AWS_REGION and SSM_READER may name an SSM SecureString holding the token")
  fi
  if token_from_ssm; then
    check_ssm_inputs K0S_JOIN_TOKEN_SSM_PARAMETER "the join token" /gpu-cluster/dev/join-token/a100
  fi
  die_on_input_problems
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
  if token_from_ssm; then
    read_ssm_parameter K0S_JOIN_TOKEN "$K0S_JOIN_TOKEN_SSM_PARAMETER" "the join token"
  fi
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
