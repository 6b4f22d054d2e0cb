#!/usr/bin/env bash
# Delete step of configure-time (time.ntpServers unset, or the host left the cluster): the
# clock follows the image's servers again. Puts chrony.conf back as it was and removes
# the systemd-timesyncd drop-in. A chrony installed for time.nts stays installed.
set -euo pipefail
# shellcheck source=lib.sh
[[ -n "${GPU_CLUSTER_LIB_LOADED:-}" ]] || source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
# shellcheck source=time/lib.sh
[[ -n "${GPU_CLUSTER_TIME_LIB_LOADED:-}" ]] || source "$(dirname "${BASH_SOURCE[0]}")/time/lib.sh"
: "${GPU_CLUSTER_STEP:=remove-configure-time}"

# It reads no input (configure-time.sh's come with the step and are not used here).

main() {
  os_do chrony_files
  restore_original "$CHRONY_CONF" "$TIME_BACKUP_DIR" "$TIME_MANAGED_PREFIX"
  if needs_follow_up "$FILE_CHANGED" restart-chrony; then
    systemctl try-restart "$CHRONY_SERVICE"
    follow_up_done restart-chrony
  fi
  remove_file "$TIMESYNCD_DROPIN"
  if needs_follow_up "$FILE_CHANGED" restart-timesyncd; then
    systemctl try-restart systemd-timesyncd.service
    follow_up_done restart-timesyncd
  fi
}

main "$@"
