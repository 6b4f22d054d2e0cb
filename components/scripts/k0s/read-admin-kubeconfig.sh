#!/usr/bin/env bash
# Runs on the controller: prints ONLY the cluster admin kubeconfig on stdout
# (`k0s kubeconfig admin`); all logging goes to stderr.
set -euo pipefail
# shellcheck source=../lib.sh
[[ -n "${GPU_CLUSTER_LIB_LOADED:-}" ]] || source "$(dirname "${BASH_SOURCE[0]}")/../lib.sh"
# shellcheck source=lib.sh
[[ -n "${GPU_CLUSTER_K0S_LIB_LOADED:-}" ]] || source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
: "${GPU_CLUSTER_STEP:=read-admin-kubeconfig}"

main() {
  local kubeconfig
  kubeconfig="$(k0s kubeconfig admin)"
  if [[ -z "$kubeconfig" ]]; then
    die "k0s kubeconfig admin printed nothing"
  fi
  log "read the admin kubeconfig"
  printf '%s\n' "$kubeconfig"
}

main "$@"
