#!/usr/bin/env bash
# Delete step of control-plane-vip: stops and disables keepalived and removes the program's
# keepalived.conf. The package stays; a keepalived.conf that is not the program's is left
# alone, and so is its service.
set -euo pipefail
# shellcheck source=lib.sh
[[ -n "${GPU_CLUSTER_VIP_LIB_LOADED:-}" ]] || source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
: "${GPU_CLUSTER_STEP:=remove-control-plane-vip}"

# It runs with keepalived.sh's inputs and reads none.

main() {
  if ! keepalived_file_is_ours; then
    log "unchanged: $KEEPALIVED_FILE is not the program's; keepalived is left as it is"
    return 0
  fi
  # `disable --now` stops it too (systemctl(1), --now), also when it runs without being enabled.
  if systemctl is-enabled --quiet "$KEEPALIVED_UNIT" || systemctl is-active --quiet "$KEEPALIVED_UNIT"; then
    systemd_disable --now "$KEEPALIVED_UNIT"
    log "changed: stopped and disabled $KEEPALIVED_UNIT"
  fi
  remove_file "$KEEPALIVED_FILE"
  follow_up_done "reload-$KEEPALIVED_UNIT"
  follow_up_done "restart-$KEEPALIVED_UNIT"
}

main "$@"
