#!/usr/bin/env bash
# Delete step of install-controller and join-worker: stops k0s and runs `k0s reset`.
# Safe to re-run (a no-op once k0s is gone). Never touches NFS or other shared data:
# mounts below the k0s data dir and kubelet root are detached before k0s deletes them.
set -euo pipefail
# shellcheck source=../lib.sh
[[ -n "${GPU_CLUSTER_LIB_LOADED:-}" ]] || source "$(dirname "${BASH_SOURCE[0]}")/../lib.sh"
# shellcheck source=lib.sh
[[ -n "${GPU_CLUSTER_K0S_LIB_LOADED:-}" ]] || source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
: "${GPU_CLUSTER_STEP:=reset-node}"

# Optional inputs: KUBELET_ROOT_DIR

SERVICES=(k0scontroller k0sworker)
# Directories `k0s reset` deletes, and the same for messages; set by check_inputs.
RESET_DIRS=()
RESET_DIRS_TEXT=""
MOUNTS=()

# check_inputs: KUBELET_ROOT_DIR (optional) is the kubelet root the services were
# installed with; `k0s reset` gets it too, or it would look below its data dir.
check_inputs() {
  : "${KUBELET_ROOT_DIR:=}"
  k0s_check_kubelet_root_dir
  RESET_DIRS=("$K0S_DATA_DIR")
  RESET_DIRS_TEXT=$K0S_DATA_DIR
  if [[ -n "$KUBELET_ROOT_DIR" ]]; then
    RESET_DIRS+=("$KUBELET_ROOT_DIR")
    RESET_DIRS_TEXT+=" or $KUBELET_ROOT_DIR"
  fi
}

# find_mounts_to_detach: sets MOUNTS to the mount points strictly below any of
# RESET_DIRS, deepest first. /proc/mounts escapes blanks as \040; %b decodes.
find_mounts_to_detach() {
  local _device mount_point _rest dir found=()
  MOUNTS=()
  if [[ ! -r "$ROOT/proc/mounts" ]]; then
    die "cannot read /proc/mounts to check what is mounted below $RESET_DIRS_TEXT"
  fi
  while read -r _device mount_point _rest; do
    printf -v mount_point '%b' "$mount_point"
    for dir in "${RESET_DIRS[@]}"; do
      if [[ "$mount_point" == "$dir"/* ]]; then
        found+=("$mount_point")
        break
      fi
    done
  done <"$ROOT/proc/mounts"
  if ((${#found[@]} > 0)); then
    # Byte order, so a mount point always sorts after everything below it. A point
    # mounted twice (stacked) stays listed twice: each umount detaches one layer.
    mapfile -t MOUNTS < <(printf '%s\n' "${found[@]}" | LC_ALL=C sort -r)
  fi
}

# detach_mounts: `k0s reset` deletes its data dir and the kubelet root after
# unmounting what is below them. Pod volumes (NFS shares, local volumes) are
# mounted there; if one stayed mounted, deleting the directory would delete shared
# data. Detach them first (lazily when busy) and refuse to reset while any remains.
detach_mounts() {
  local mount_point
  find_mounts_to_detach
  for mount_point in "${MOUNTS[@]}"; do
    if umount "$mount_point" 2>/dev/null || umount -l "$mount_point"; then
      log "changed: unmounted $mount_point"
    else
      warn "could not unmount $mount_point"
    fi
  done
  find_mounts_to_detach
  if ((${#MOUNTS[@]} > 0)); then
    die "refusing to run k0s reset while these are still mounted below $RESET_DIRS_TEXT" \
      "(k0s would delete their contents): ${MOUNTS[*]}"
  fi
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
  detach_mounts
  if [[ -n "$KUBELET_ROOT_DIR" ]]; then
    reset_args+=("--kubelet-root-dir=$KUBELET_ROOT_DIR")
  fi
  k0s reset "${reset_args[@]}" >&2
  log "changed: reset k0s (${installed[*]:-no service installed})"
  remove_leftovers
  mark_reboot_required "k0s reset leaves network interfaces and iptables rules until a reboot"
}

main "$@"
