#!/usr/bin/env bash
# Runs on the server: prints ONLY the public key of the key the API server signs
# service-account tokens with (PEM); the program publishes it as the issuer's key set.
set -euo pipefail
# RKE2 signs with server/tls/service.current.key (k3s --service-account-signing-key-file;
# service.key holds every key it verifies with); the private key never leaves the host:
# openssl derives the public one here. components/aws/service_account_issuer.py.
# Inputs:
# shellcheck source=lib.sh
[[ -n "${GPU_CLUSTER_RKE2_LIB_LOADED:-}" ]] || source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
: "${GPU_CLUSTER_STEP:=service-account-key}"

main() {
  local key="$ROOT$RKE2_DATA_DIR/server/tls/service.current.key" public
  [[ -s "$key" ]] || die "no service-account key at $RKE2_DATA_DIR/server/tls/service.current.key: is the server installed?"
  public="$(openssl pkey -in "$key" -pubout)" \
    || die "openssl could not read $RKE2_DATA_DIR/server/tls/service.current.key"
  log "read the service-account public key"
  printf '%s\n' "$public"
}

main "$@"
