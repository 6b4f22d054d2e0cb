#!/usr/bin/env bash
# Delete step of install-controller and join-worker: stops k0s and runs `k0s reset`.
# Safe to re-run (a no-op once k0s is gone). Never touches NFS or other shared data:
# mounts below the k0s data dir and kubelet root are detached before k0s deletes them.
set -euo pipefail
# shellcheck source=lib.sh
[[ -n "${GPU_CLUSTER_K0S_LIB_LOADED:-}" ]] || source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
: "${GPU_CLUSTER_STEP:=reset-node}"

# Optional inputs: KUBELET_ROOT_DIR

SERVICES=(k0scontroller k0sworker)
# Directories `k0s reset` deletes (after unmounting what is below them); set by check_inputs.
RESET_DIRS=()

# check_inputs: KUBELET_ROOT_DIR (optional) is the kubelet root the services were
# installed with; `k0s reset` gets it too, or it would look below its data dir.
check_inputs() {
  : "${KUBELET_ROOT_DIR:=}"
  k0s_check_kubelet_root_dir
  RESET_DIRS=("$K0S_DATA_DIR" ${KUBELET_ROOT_DIR:+"$KUBELET_ROOT_DIR"})
}

stop_k0s() {
  local output service
  if output="$(k0s stop 2>&1)"; then
    log "changed: stopped k0s"
    return 0
  fi
  for service in "${SERVICES[@]}"; do
    if k0s_service_active "$service"; then
      die "k0s stop failed while $service is running: $output"
    fi
  done
  log "k0s was not running"
}

remove_leftovers() {
  local service
  remove_file "$K0S_TOKEN_FILE"
  remove_file "$K0S_CONFIG_FILE"
  for service in "${SERVICES[@]}"; do
    remove_file "$(k0s_args_file "$service")"
  done
}

main() {
  local service installed=() reset_args=()
  check_inputs
  if ! command -v k0s >/dev/null 2>&1; then
    log "k0s is not installed; nothing to reset"
    return 0
  fi
  for service in "${SERVICES[@]}"; do
    if k0s_service_installed "$service"; then
      installed+=("$service")
    fi
  done
  if ((${#installed[@]} == 0)) && [[ ! -d "$ROOT$K0S_DATA_DIR" ]]; then
    log "no k0s service and no $K0S_DATA_DIR; nothing to reset"
    remove_leftovers
    return 0
  fi
  if ((${#installed[@]} > 0)); then
    stop_k0s
  fi
  detach_mounts_below "k0s reset" "${RESET_DIRS[@]}"
  if [[ -n "$KUBELET_ROOT_DIR" ]]; then
    reset_args+=("--kubelet-root-dir=$KUBELET_ROOT_DIR")
  fi
  k0s reset "${reset_args[@]}" >&2
  log "changed: reset k0s (${installed[*]:-no service installed})"
  remove_leftovers
  mark_reboot_required "k0s reset leaves network interfaces and iptables rules until a reboot"
}

main "$@"
