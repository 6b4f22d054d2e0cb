#!/usr/bin/env bash
# Waits on the operator's machine until the Kubernetes API answers /readyz, with a client
# certificate since k0s disables anonymous access. Needs no root and touches nothing but
# its own temporary directory, which holds the PEMs (0600) and goes away on exit.
set -euo pipefail
# shellcheck source=../lib.sh
[[ -n "${GPU_CLUSTER_LIB_LOADED:-}" ]] || source "$(dirname "${BASH_SOURCE[0]}")/../lib.sh"
: "${GPU_CLUSTER_STEP:=wait-for-api}"

# Inputs: API_CA_CERT API_CLIENT_CERT API_CLIENT_KEY API_READY_TIMEOUT API_SERVER
#   API_SERVER         the API's https://HOST:PORT, e.g. https://192.0.2.10:6443.
#   API_CA_CERT        the cluster CA certificate (PEM) the API's certificate must chain to.
#   API_CLIENT_CERT    a client certificate (PEM) the API accepts, and
#   API_CLIENT_KEY     its private key (PEM, secret).
#   API_READY_TIMEOUT  how long to wait, in seconds.

# pem_problem VAR KIND: adds to INPUT_PROBLEMS when VAR (set) holds no PEM block of
# KIND ("CERTIFICATE", or "PRIVATE KEY" for any key type). Names VAR, never its value.
pem_problem() {
  local value=${!1:-}
  if [[ -n "$value" && ( "$value" != *"-----BEGIN "*"$2-----"* || "$value" != *"-----END "*"$2-----"* ) ]]; then
    INPUT_PROBLEMS+=("$1 is not a PEM ${2,,}")
  fi
}

check_inputs() {
  check_missing_env API_SERVER API_CA_CERT API_CLIENT_CERT API_CLIENT_KEY API_READY_TIMEOUT
  if [[ -n "${API_SERVER:-}" && ! "$API_SERVER" =~ ^https://[^/[:space:]]+/?$ ]]; then
    INPUT_PROBLEMS+=("API_SERVER must be https://HOST:PORT (e.g. https://192.0.2.10:6443), got '$API_SERVER'")
  fi
  pem_problem API_CA_CERT CERTIFICATE
  pem_problem API_CLIENT_CERT CERTIFICATE
  pem_problem API_CLIENT_KEY "PRIVATE KEY"
  if [[ -n "${API_READY_TIMEOUT:-}" && ! "$API_READY_TIMEOUT" =~ ^[0-9]+$ ]]; then
    INPUT_PROBLEMS+=("expected a non-negative integer: API_READY_TIMEOUT='$API_READY_TIMEOUT'")
  fi
  if ! command -v curl >/dev/null 2>&1; then
    INPUT_PROBLEMS+=("the curl command is not installed; it is needed to ask the Kubernetes API whether it is ready")
  fi
  die_on_input_problems
}

# write_private FILE TEXT: FILE, readable by this user only from the start, holds TEXT.
# printf is a builtin: TEXT never reaches a command line.
write_private() {
  (umask 077 && printf '%s\n' "$2" >"$1")
}

main() {
  # Keep the secret out of the environment of every command started from here on.
  export -n API_CLIENT_KEY
  check_inputs
  make_temp_dir
  write_private "$TEMP_DIR/ca.crt" "$API_CA_CERT"
  write_private "$TEMP_DIR/client.crt" "$API_CLIENT_CERT"
  write_private "$TEMP_DIR/client.key" "$API_CLIENT_KEY"
  wait_until "$API_READY_TIMEOUT" "the Kubernetes API at ${API_SERVER%/} to be ready" \
    curl --silent --show-error --fail --max-time 10 --cacert "$TEMP_DIR/ca.crt" \
    --cert "$TEMP_DIR/client.crt" --key "$TEMP_DIR/client.key" "${API_SERVER%/}/readyz"
}

main "$@"
