#!/usr/bin/env bash
# Delete step of install-server and join-agent: stops RKE2 and runs its uninstall script.
# Safe to re-run (a no-op once RKE2 is gone). Never touches NFS or other shared data:
# nothing may stay mounted below the folders the uninstall script deletes.
set -euo pipefail
# shellcheck source=lib.sh
[[ -n "${GPU_CLUSTER_RKE2_LIB_LOADED:-}" ]] || source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
: "${GPU_CLUSTER_STEP:=reset-node}"

# rke2-uninstall.sh deletes the data dir and the kubelet root (bundle/bin/rke2-uninstall.sh,
# uninstall_remove_files: `rm --one-file-system -rf /var/lib/kubelet`, `rm -rf --
# "${RKE2_DATA_DIR}"`): the data dir is removed across file systems, so a share still
# mounted below it would be emptied. rke2-killall.sh unmounts /var/lib/kubelet/pods but goes
# on when that fails (bundle/bin/rke2-killall.sh, do_unmount_and_remove): what is left is
# detached before the uninstall (node/lib.sh detach_mounts_below).

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
  detach_mounts_below rke2-uninstall.sh "$RKE2_DATA_DIR" "$RKE2_KUBELET_ROOT_DIR"
  # The uninstall script disables the units and reloads systemd.
  ensure_nvidia_dev_char_links
  rke2-uninstall.sh >&2
  log "changed: uninstalled RKE2"
}

main "$@"
