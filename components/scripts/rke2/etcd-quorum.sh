#!/usr/bin/env bash
# Before a server's upgrade, on that server: refuses unless every expected etcd member is
# listed and healthy, so that taking this one down keeps etcd's quorum (etcd/lib.sh
# etcd_require_all_healthy). Reads only: a second run changes nothing.
set -euo pipefail
# shellcheck source=lib.sh
[[ -n "${GPU_CLUSTER_RKE2_LIB_LOADED:-}" ]] || source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
# shellcheck source=etcd/lib.sh
[[ -n "${GPU_CLUSTER_RKE2_ETCD_LIB_LOADED:-}" ]] || source "$(dirname "${BASH_SOURCE[0]}")/etcd/lib.sh"
: "${GPU_CLUSTER_STEP:=etcd-quorum}"

# Inputs: NODE_NAME NODE_ADDRESS EXPECTED_MEMBERS
# Optional inputs: KUBERNETES_VERSION
#   KUBERNETES_VERSION  the release the install step after this one runs: the check runs
#                       again before each upgrade.

main() {
  etcd_quorum_step rke2_etcd_members "$RKE2_ADMIN_KUBECONFIG"
}

main "$@"
