#!/usr/bin/env bash
# Removes the Kubeflow UI's port-forward unit from the controller (the step's delete).
set -euo pipefail
# shellcheck source=../lib.sh
[[ -n "${GPU_CLUSTER_LIB_LOADED:-}" ]] || source "$(dirname "${BASH_SOURCE[0]}")/../lib.sh"
: "${GPU_CLUSTER_STEP:=kubeflow-port-forward}"

main() {
  remove_unit gpu-cluster-kubeflow-port-forward restart-gpu-cluster-kubeflow-port-forward
}

main "$@"
