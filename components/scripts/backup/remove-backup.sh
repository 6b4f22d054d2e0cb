#!/usr/bin/env bash
# Undoes install-backup: no more scheduled snapshots. The snapshots already kept stay.
set -euo pipefail
# shellcheck source=lib.sh
[[ -n "${GPU_CLUSTER_BACKUP_LIB_LOADED:-}" ]] || source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
: "${GPU_CLUSTER_STEP:=install-backup}"

UNIT=gpu-cluster-backup

main() {
  local path changed=0
  if [[ -f "$ROOT/etc/systemd/system/$UNIT.timer" ]]; then
    systemd_disable --now "$UNIT.timer" >&2 || warn "could not stop $UNIT.timer"
  fi
  for path in "/etc/systemd/system/$UNIT.timer" "/etc/systemd/system/$UNIT.service" \
    "$BACKUP_LIB_DIR/backup.sh" "$BACKUP_LIB_DIR/restore.sh" "$BACKUP_LIB_DIR/lib.sh" \
    "$BACKUP_LIB_DIR/cluster-state.sh" "$BACKUP_LIB_DIR/s3-object.py" "$BACKUP_SHARED_LIB" "$RESTORE_COMMAND" \
    "$BACKUP_ENV_FILE" "$BACKUP_RECIPIENTS_FILE"; do
    remove_file "$path"
    changed=$((changed | FILE_CHANGED))
  done
  if ((changed)); then
    systemd_reload
    log "changed: removed the scheduled snapshots (the kept ones stay)"
  else
    log "unchanged: no scheduled snapshots"
  fi
}

main "$@"
