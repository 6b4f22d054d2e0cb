#!/usr/bin/env bash
# Delete step of install-server and join-agent: stops RKE2 and runs its uninstall script.
# Safe to re-run (a no-op once RKE2 is gone). Never touches NFS or other shared data:
# nothing may stay mounted below the folders the uninstall script deletes.
set -euo pipefail
# shellcheck source=../lib.sh
[[ -n "${GPU_CLUSTER_LIB_LOADED:-}" ]] || source "$(dirname "${BASH_SOURCE[0]}")/../lib.sh"
# shellcheck source=lib.sh
[[ -n "${GPU_CLUSTER_RKE2_LIB_LOADED:-}" ]] || source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
: "${GPU_CLUSTER_STEP:=reset-node}"

# rke2-uninstall.sh deletes these (bundle/bin/rke2-uninstall.sh, uninstall_remove_files:
# `rm --one-file-system -rf /var/lib/kubelet`, `rm -rf -- "${RKE2_DATA_DIR}"`): the data dir
# is removed across file systems, so a share still mounted below it would be emptied.
RESET_DIRS=("$RKE2_DATA_DIR" "$RKE2_KUBELET_ROOT_DIR")
MOUNTS=()

# find_mounts_to_detach: sets MOUNTS to the mount points strictly below any of
# RESET_DIRS, deepest first. /proc/mounts escapes blanks as \040; %b decodes.
find_mounts_to_detach() {
  local _device mount_point _rest dir found=()
  MOUNTS=()
  if [[ ! -r "$ROOT/proc/mounts" ]]; then
    die "cannot read /proc/mounts to check what is mounted below ${RESET_DIRS[*]}"
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
    mapfile -t MOUNTS < <(printf '%s\n' "${found[@]}" | LC_ALL=C sort -r)
  fi
}

# detach_mounts: pod volumes (NFS shares, local volumes) are mounted below the kubelet
# root; rke2-killall.sh unmounts /var/lib/kubelet/pods but goes on when that fails
# (bundle/bin/rke2-killall.sh, do_unmount_and_remove). Detach what is left (lazily when
# busy) and refuse to uninstall while anything remains.
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
    die "refusing to run rke2-uninstall.sh while these are still mounted below" \
      "${RESET_DIRS[*]} (it would delete their contents): ${MOUNTS[*]}"
  fi
}

main() {
  if [[ ! -f "$ROOT$RKE2_UNINSTALL" ]]; then
    if [[ -d "$ROOT$RKE2_DATA_DIR" ]]; then
      die "$RKE2_DATA_DIR exists but $RKE2_UNINSTALL does not; remove RKE2 by hand" \
        "(docs: install/uninstall.md)"
    fi
    log "RKE2 is not installed; nothing to reset"
    return 0
  fi
  # Stops both services, kills the pods' processes, unmounts what it can.
  rke2-killall.sh >&2
  log "changed: stopped RKE2"
  detach_mounts
  # The uninstall script disables the units and reloads systemd.
  ensure_nvidia_dev_char_links
  rke2-uninstall.sh >&2
  log "changed: uninstalled RKE2"
}

main "$@"
