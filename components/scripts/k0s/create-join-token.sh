#!/usr/bin/env bash
# Runs on the controller: creates a worker join token and prints ONLY the token
# on stdout (the program reads it from there); all logging goes to stderr.
set -euo pipefail
# shellcheck source=lib.sh
[[ -n "${GPU_CLUSTER_K0S_LIB_LOADED:-}" ]] || source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
: "${GPU_CLUSTER_STEP:=create-join-token}"

# Inputs: TOKEN_EXPIRY

main() {
  k0s_print_token worker
}

main "$@"
