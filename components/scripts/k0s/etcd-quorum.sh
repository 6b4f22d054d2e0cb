#!/usr/bin/env bash
# Before a controller's upgrade, on that controller: refuses unless every expected etcd
# member is listed and healthy, so that taking this one down keeps etcd's quorum
# (etcd/lib.sh etcd_require_all_healthy). Reads only: a second run changes nothing.
set -euo pipefail
# shellcheck source=lib.sh
[[ -n "${GPU_CLUSTER_K0S_LIB_LOADED:-}" ]] || source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
# shellcheck source=etcd/lib.sh
[[ -n "${GPU_CLUSTER_K0S_ETCD_LIB_LOADED:-}" ]] || source "$(dirname "${BASH_SOURCE[0]}")/etcd/lib.sh"
: "${GPU_CLUSTER_STEP:=etcd-quorum}"

# Inputs: NODE_NAME NODE_ADDRESS EXPECTED_MEMBERS
# Optional inputs: KUBERNETES_VERSION
#   KUBERNETES_VERSION  the release the install step after this one runs: the check runs
#                       again before each upgrade.

main() {
  etcd_quorum_step k0s_etcd_members "$K0S_CONTROLLER_UNIT"
}

main "$@"
