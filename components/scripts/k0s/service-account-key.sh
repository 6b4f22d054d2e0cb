#!/usr/bin/env bash
# Runs on the controller: prints ONLY the public key the API server signs service-account
# tokens with (PEM); the program publishes it as the issuer's key set.
set -euo pipefail
# k0s writes it as pki/sa.pub next to the signing key pki/sa.key (k0s v1.36.3+k0s.2
# pkg/component/controller/apiserver.go:109,114); components/aws/service_account_issuer.py.
# Inputs:
# shellcheck source=lib.sh
[[ -n "${GPU_CLUSTER_K0S_LIB_LOADED:-}" ]] || source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
: "${GPU_CLUSTER_STEP:=service-account-key}"

main() {
  local key="$ROOT$K0S_DATA_DIR/pki/sa.pub"
  [[ -s "$key" ]] || die "no service-account key at $K0S_DATA_DIR/pki/sa.pub: is the controller installed?"
  grep -q '^-----BEGIN PUBLIC KEY-----$' "$key" \
    || die "$K0S_DATA_DIR/pki/sa.pub is not a PEM public key"
  log "read the service-account public key"
  cat "$key"
}

main "$@"
