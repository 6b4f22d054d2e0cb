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
#   K0S_JOIN_TOKEN_SSM_PARAMETER and AWS_REGION
#                      name of an SSM Parameter Store SecureString holding it, read with
#                      the instance's own credentials (cloud instances: the token is not
#                      in their user data). K0S_JOIN_TOKEN wins when both are set. Either
#                      is needed only until the worker has joined.
#   KUBELET_EXTRA_ARGS, NODE_LABELS, NODE_TAINTS, K0S_PROFILE, KUBELET_ROOT_DIR  optional.

SERVICE_ACTIVE_TIMEOUT=300
# The instance role can take a while to be usable after boot: up to
# SSM_READ_ATTEMPTS reads, SSM_READ_RETRY_DELAY seconds apart.
SSM_READ_ATTEMPTS=10
SSM_READ_RETRY_DELAY=6
SSM_PARAMETER_NAME='^(arn:aws[a-z-]*:ssm:[a-z0-9-]+:[0-9]{12}:parameter)?/?[A-Za-z0-9_.-]+(/[A-Za-z0-9_.-]+)*$'
AWS_REGION_NAME='^[a-z]{2}(-[a-z]+)+-[0-9]+$'

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
  : "${KUBELET_ROOT_DIR:=}" "${K0S_JOIN_TOKEN_SSM_PARAMETER:=}" "${AWS_REGION:=}"
  # Empty is a choice (the primary address); unset is a forgotten input.
  if [[ ! -v NODE_IP ]]; then
    required+=(NODE_IP)
  fi
  if token_from_ssm; then
    required+=(AWS_REGION)
  elif ! worker_joined; then
    required+=(K0S_JOIN_TOKEN)
  fi
  check_missing_env "${required[@]}"
  if ! worker_joined && [[ -z "${K0S_JOIN_TOKEN:-}" && -z "$K0S_JOIN_TOKEN_SSM_PARAMETER" ]]; then
    INPUT_PROBLEMS+=("instead of K0S_JOIN_TOKEN, K0S_JOIN_TOKEN_SSM_PARAMETER with AWS_REGION may name an SSM SecureString holding the token")
  fi
  if token_from_ssm; then
    if [[ ! "$K0S_JOIN_TOKEN_SSM_PARAMETER" =~ $SSM_PARAMETER_NAME ]]; then
      INPUT_PROBLEMS+=("K0S_JOIN_TOKEN_SSM_PARAMETER is not an SSM parameter name (e.g. /gpu-cluster/dev/join-token/a100): '$K0S_JOIN_TOKEN_SSM_PARAMETER'")
    fi
    if [[ -n "$AWS_REGION" && ! "$AWS_REGION" =~ $AWS_REGION_NAME ]]; then
      INPUT_PROBLEMS+=("AWS_REGION is not an AWS region (e.g. eu-central-1): '$AWS_REGION'")
    fi
    if ! command -v aws >/dev/null 2>&1; then
      INPUT_PROBLEMS+=("the aws command (AWS CLI) is not installed; it is needed to read the join token from SSM parameter $K0S_JOIN_TOKEN_SSM_PARAMETER")
    fi
  fi
  die_on_input_problems
  k0s_check_kubelet_root_dir
}

# read_token_from_ssm: sets K0S_JOIN_TOKEN (not exported) to the value of the SecureString
# K0S_JOIN_TOKEN_SSM_PARAMETER, retrying while the instance's credentials or permissions
# are not usable yet. Only the aws error output is ever shown, never the value.
read_token_from_ssm() {
  local name=$K0S_JOIN_TOKEN_SSM_PARAMETER attempt value="" error=""
  make_temp_dir
  log "reading the join token from SSM parameter $name in $AWS_REGION"
  for ((attempt = 1; ; attempt++)); do
    if value="$(aws ssm get-parameter --region "$AWS_REGION" --name "$name" \
      --with-decryption --query Parameter.Value --output text 2>"$TEMP_DIR/aws-error")"; then
      if [[ -n "$value" ]]; then
        break
      fi
      error="the parameter value is empty"
    else
      error="$(tr -s '\n' ' ' <"$TEMP_DIR/aws-error")"
      error="${error% }"
    fi
    if ((attempt >= SSM_READ_ATTEMPTS)); then
      die "could not read the join token from SSM parameter $name in $AWS_REGION" \
        "after $attempt attempts; last error: ${error:-<none>}"
    fi
    warn "reading SSM parameter $name failed (attempt $attempt of $SSM_READ_ATTEMPTS)," \
      "retrying in ${SSM_READ_RETRY_DELAY}s: ${error:-<no error output>}"
    sleep "$SSM_READ_RETRY_DELAY"
  done
  K0S_JOIN_TOKEN=$value
  log "read the join token from SSM parameter $name"
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
    read_token_from_ssm
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
