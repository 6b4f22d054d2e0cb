#!/usr/bin/env bash
# Joins this host to the cluster as a k0s worker with its node IP, labels, taints and
# worker profile, and waits until the k0sworker service is active. The join token (given,
# or read from SSM) is only written (0600, never on a command line) until the worker joined.
set -euo pipefail
# shellcheck source=lib.sh
[[ -n "${GPU_CLUSTER_K0S_LIB_LOADED:-}" ]] || source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
: "${GPU_CLUSTER_STEP:=join-worker}"

# Inputs: K0S_JOIN_TOKEN NODE_IP
# Optional inputs: AWS_REGION K0S_JOIN_ISSUER_URN K0S_JOIN_TOKEN_SSM_PARAMETER K0S_PROFILE K0S_RELEASE_URL K0S_SHA256_AMD64 K0S_SHA256_ARM64 K0S_VERSION KUBELET_EXTRA_ARGS KUBELET_ROOT_DIR NODE_LABELS NODE_TAINTS SSM_READER WORKER_PROFILE_VALUES K0S_AIRGAP_SHA256_AMD64 K0S_AIRGAP_SHA256_ARM64 K0S_CLOUD_PROVIDER
#   K0S_VERSION        k0s release to install, e.g. v1.34.1+k0s.0; empty: the one an
#                      earlier step installed (upgrade-node, on hosts over SSH).
#   NODE_IP            address the kubelet registers; must be set, may be empty: then no
#                      --node-ip is passed and the kubelet picks the primary address.
#   K0S_JOIN_TOKEN     the worker join token, or
#   K0S_JOIN_TOKEN_SSM_PARAMETER, AWS_REGION and SSM_READER
#                      name of an SSM Parameter Store SecureString holding it, read by
#                      SSM_READER (the text of ssm-parameter.py, run by python3) with
#                      the instance's own credentials (cloud instances: the token is not
#                      in their user data). K0S_JOIN_TOKEN wins when both are set. Either
#                      is needed only until the worker has joined.
#   K0S_JOIN_ISSUER_URN  optional: the Pulumi URN of the resource that issued the token,
#                      named in the cure when the API refuses the token.
#   KUBELET_EXTRA_ARGS, NODE_LABELS, NODE_TAINTS, K0S_PROFILE, KUBELET_ROOT_DIR  optional.
#   K0S_AIRGAP_SHA256_AMD64, K0S_AIRGAP_SHA256_ARM64  optional: the image bundle's sha256
#                      (versions.airgapBundleSha256; k0s_install).
#   K0S_CLOUD_PROVIDER  optional: empty, or aws (with SSM_READER) on an EC2 node: its kubelet
#                      runs with the external cloud provider and this instance's providerID
#                      from IMDSv2 (k0s_add_kubelet_args).

SERVICE_ACTIVE_TIMEOUT=300
# How long the API named in the token may take to answer at all.
API_ANSWER_TIMEOUT=120
PULUMI_URN='^urn:pulumi:[A-Za-z0-9:._$/-]+$'
# An https URL of host (name, IPv4 or [IPv6]) and port, as k0s writes into a token.
API_SERVER_URL='^https://[][A-Za-z0-9.:-]+$'
BOOTSTRAP_TOKEN_FORMAT='^[a-z0-9]{6}\.[a-z0-9]{16}$'

worker_joined() {
  [[ -f "$ROOT$K0S_KUBELET_KUBECONFIG" ]]
}

# token_from_ssm: success when the join token is still needed and must be read from SSM.
token_from_ssm() {
  ! worker_joined && [[ -z "${K0S_JOIN_TOKEN:-}" && -n "${K0S_JOIN_TOKEN_SSM_PARAMETER:-}" ]]
}

check_inputs() {
  local required=()
  : "${K0S_VERSION:=}" "${KUBELET_EXTRA_ARGS:=}" "${NODE_LABELS:=}" "${NODE_TAINTS:=}" "${K0S_PROFILE:=}"
  : "${KUBELET_ROOT_DIR:=}" "${K0S_JOIN_TOKEN_SSM_PARAMETER:=}" "${K0S_JOIN_ISSUER_URN:=}"
  # Only in a pool's boot data, where new kubelet settings roll the pool.
  : "${WORKER_PROFILE_VALUES:=}"
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
  if [[ -n "$K0S_JOIN_ISSUER_URN" && ! "$K0S_JOIN_ISSUER_URN" =~ $PULUMI_URN ]]; then
    INPUT_PROBLEMS+=("K0S_JOIN_ISSUER_URN must be a Pulumi URN (urn:pulumi:...), got '$K0S_JOIN_ISSUER_URN'")
  fi
  if token_from_ssm; then
    check_ssm_inputs K0S_JOIN_TOKEN_SSM_PARAMETER "the join token" /gpu-cluster/dev/join-token/a100
  fi
  check_cloud_provider_input K0S_CLOUD_PROVIDER
  die_on_input_problems
  k0s_check_kubelet_root_dir
}

# token_field NAME: the value of NAME in the kubeconfig on stdin, the one k0s puts in a
# join token (k0s pkg/token/kubeconfig.go, kubeconfigTemplate), without YAML quotes.
token_field() {
  sed -n "s/^ *$1: *['\"]\{0,1\}\([^'\"]*\)['\"]\{0,1\} *\$/\1/p" | head -n 1
}

# api_answers SERVER: success when the API answered a request made with the token's
# bootstrap token; its HTTP status is left in $TEMP_DIR/status.
api_answers() {
  curl --silent --show-error --max-time 10 --output /dev/null --write-out '%{http_code}' \
    --cacert "$TEMP_DIR/ca.crt" --header "@$TEMP_DIR/authorization" "$1/version" \
    >"$TEMP_DIR/status"
}

# check_join_token: asks the API named in the token whether it accepts the token, so
# an expired or deleted token fails here, naming the cure, rather than as a kubelet
# that never registers. /version may be read anonymously, but a bearer token the
# API does not accept gets 401 (kubernetes pkg/kubeapiserver/authenticator/config.go:
# "don't consider a bad bearer token ... anonymous"); an expired bootstrap token is
# not accepted (plugin/pkg/auth/authenticator/token/bootstrap/bootstrap.go).
check_join_token() {
  local kubeconfig server ca bearer status cure
  # k0s pkg/token/joinencode.go: a join token is the kubeconfig, gzipped, in base64.
  if ! kubeconfig="$(printf '%s' "$K0S_JOIN_TOKEN" | base64 -d 2>/dev/null | gzip -dc 2>/dev/null)"; then
    die "the join token is not a k0s join token (base64 of a gzipped kubeconfig)"
  fi
  server="$(token_field server <<<"$kubeconfig")"
  ca="$(token_field certificate-authority-data <<<"$kubeconfig")"
  bearer="$(token_field token <<<"$kubeconfig")"
  if [[ ! "$server" =~ $API_SERVER_URL || -z "$ca" || ! "$bearer" =~ $BOOTSTRAP_TOKEN_FORMAT ]]; then
    die "the join token's kubeconfig lacks an https server, a CA or a bootstrap token"
  fi
  make_temp_dir
  if ! base64 -d <<<"$ca" >"$TEMP_DIR/ca.crt" 2>/dev/null; then
    die "the join token's CA is not base64"
  fi
  (umask 077 && printf 'Authorization: Bearer %s\n' "$bearer" >"$TEMP_DIR/authorization")
  wait_until "$API_ANSWER_TIMEOUT" "the API at $server to answer" api_answers "$server"
  status="$(<"$TEMP_DIR/status")"
  case "$status" in
    2??) log "the API at $server accepts the join token" ;;
    401)
      cure="issue a new one: pulumi up --replace on the resource that made it (docs/layouts.md: Join tokens)"
      if [[ -n "$K0S_JOIN_ISSUER_URN" ]]; then
        cure="issue a new one: pulumi up --replace '$K0S_JOIN_ISSUER_URN'"
      fi
      die "the API at $server refuses the join token (HTTP 401): it has expired or was deleted; $cure"
      ;;
    *) die "the API at $server answered HTTP $status to the join token" ;;
  esac
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
  # This EC2 instance's identity, before anything changes (k0s/lib.sh).
  k0s_read_provider_id
  if token_from_ssm; then
    read_ssm_parameter K0S_JOIN_TOKEN "$K0S_JOIN_TOKEN_SSM_PARAMETER" "the join token"
  fi
  if ! worker_joined; then
    check_join_token
  fi
  # Empty on hosts: upgrade-node installed it.
  [[ -z "$K0S_VERSION" ]] || k0s_install "$K0S_VERSION"
  if ((K0S_BINARY_CHANGED)); then
    restart=1
  fi
  k0s_configure_selinux
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
