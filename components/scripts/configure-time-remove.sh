#!/usr/bin/env bash
# Delete step of configure-time (time.ntpServers unset, or the host left the cluster): the
# clock follows the image's servers again. Puts chrony.conf back as it was and removes
# the systemd-timesyncd drop-in. A chrony installed for time.nts stays installed.
set -euo pipefail
# shellcheck source=lib.sh
[[ -n "${GPU_CLUSTER_LIB_LOADED:-}" ]] || source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
: "${GPU_CLUSTER_STEP:=remove-configure-time}"

# It reads no input (configure-time.sh's come with the step and are not used here).

TIMESYNCD_DROPIN=/etc/systemd/timesyncd.conf.d/90-gpu-cluster.conf
CHRONY_CONF=/etc/chrony/chrony.conf
TIME_BACKUP_DIR=/var/lib/gpu-cluster/time
MANAGED_PREFIX="# Managed by gpu-cluster (time.ntpServers)"

main() {
  local changed=0
  if [[ -f "$ROOT$TIME_BACKUP_DIR/chrony.conf" ]]; then
    write_file "$CHRONY_CONF" 0644 <"$ROOT$TIME_BACKUP_DIR/chrony.conf"
    changed=$FILE_CHANGED
    remove_file "$TIME_BACKUP_DIR/chrony.conf"
  elif [[ -f "$ROOT$CHRONY_CONF" && "$(head -n 1 -- "$ROOT$CHRONY_CONF")" == "$MANAGED_PREFIX"* ]]; then
    # Nothing was there before configure-time wrote it.
    remove_file "$CHRONY_CONF"
    changed=$FILE_CHANGED
  fi
  if needs_follow_up "$changed" restart-chrony; then
    systemctl try-restart chrony.service
    follow_up_done restart-chrony
  fi
  remove_file "$TIMESYNCD_DROPIN"
  if needs_follow_up "$FILE_CHANGED" restart-timesyncd; then
    systemctl try-restart systemd-timesyncd.service
    follow_up_done restart-timesyncd
  fi
}

main "$@"
