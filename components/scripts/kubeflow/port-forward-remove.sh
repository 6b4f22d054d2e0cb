#!/usr/bin/env bash
# Removes the Kubeflow UI's port-forward unit from the controller (the step's delete).
set -euo pipefail
# shellcheck source=../lib.sh
[[ -n "${GPU_CLUSTER_LIB_LOADED:-}" ]] || source "$(dirname "${BASH_SOURCE[0]}")/../lib.sh"
: "${GPU_CLUSTER_STEP:=kubeflow-port-forward}"

UNIT=gpu-cluster-kubeflow-port-forward
UNIT_FILE="/etc/systemd/system/$UNIT.service"

main() {
  if [[ -f "$ROOT$UNIT_FILE" ]]; then
    systemd_disable --now "$UNIT" >&2 || warn "could not stop $UNIT"
  fi
  remove_file "$UNIT_FILE"
  if ((FILE_CHANGED)); then
    systemd_reload
  fi
}

main "$@"
