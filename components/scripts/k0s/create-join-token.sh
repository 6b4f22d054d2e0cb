#!/usr/bin/env bash
# Runs on the controller: creates a worker join token and prints ONLY the token
# on stdout (the program reads it from there); all logging goes to stderr.
set -euo pipefail
# shellcheck source=lib.sh
[[ -n "${GPU_CLUSTER_K0S_LIB_LOADED:-}" ]] || source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
: "${GPU_CLUSTER_STEP:=create-join-token}"

# Inputs: TOKEN_EXPIRY

API_READY_TIMEOUT=120

main() {
  local token
  require_env TOKEN_EXPIRY
  if [[ ! "$TOKEN_EXPIRY" =~ ^([0-9]+(ns|us|ms|s|m|h))+$ ]]; then
    die "TOKEN_EXPIRY must be a duration such as 2h or 90m, got '$TOKEN_EXPIRY'"
  fi
  wait_until "$API_READY_TIMEOUT" "the Kubernetes API to be ready" k0s kubectl get --raw=/readyz
  token="$(k0s token create --role=worker --expiry="$TOKEN_EXPIRY")"
  if [[ -z "$token" ]]; then
    die "k0s token create printed no token"
  fi
  log "created a worker join token (expires in $TOKEN_EXPIRY)"
  printf '%s\n' "$token"
}

main "$@"
