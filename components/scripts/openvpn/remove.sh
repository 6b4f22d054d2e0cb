#!/usr/bin/env bash
# Delete step of install-openvpn-server and install-openvpn-client: stops and disables the
# unit and removes what the create step wrote. IP forwarding stays on (Kubernetes needs it).
set -euo pipefail
# shellcheck source=lib.sh
[[ -n "${GPU_CLUSTER_OPENVPN_LIB_LOADED:-}" ]] || source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
: "${GPU_CLUSTER_STEP:=remove-openvpn}"

# Inputs: OPENVPN_UNIT
# What they hold, required:
#   OPENVPN_UNIT  openvpn-server@gpu-cluster or openvpn-client@gpu-cluster

# check_inputs: selects the end OPENVPN_UNIT names (see openvpn_select).
check_inputs() {
  require_env OPENVPN_UNIT
  if [[ ! "$OPENVPN_UNIT" =~ ^openvpn-(server|client)@([a-z0-9][a-z0-9-]{0,62})$ ]]; then
    die "OPENVPN_UNIT must be openvpn-server@NAME or openvpn-client@NAME, got '$OPENVPN_UNIT'"
  fi
  openvpn_select "${BASH_REMATCH[1]}" "${BASH_REMATCH[2]}"
}

stop_unit() {
  if systemctl is-active --quiet "$VPN_UNIT"; then
    systemctl stop "$VPN_UNIT"
    log "changed: stopped $VPN_UNIT"
  else
    log "$VPN_UNIT is not running"
  fi
  if systemctl is-enabled --quiet "$VPN_UNIT"; then
    systemd_disable "$VPN_UNIT"
    log "changed: disabled $VPN_UNIT"
  fi
}

# remove_folder PATH: removes host folder PATH (below ROOT) and everything in it.
remove_folder() {
  if [[ -d "$ROOT$1" ]]; then
    rm -rf -- "${ROOT:?}$1"
    log "changed: removed $1"
  else
    log "unchanged: $1 is absent"
  fi
}

remove_dropin() {
  remove_file "$VPN_DROPIN_FILE"
  if ((FILE_CHANGED)); then
    rmdir -- "$ROOT${VPN_DROPIN_FILE%/*}" 2>/dev/null || true
    systemd_reload
    log "changed: reloaded systemd units (daemon-reload)"
  fi
}

main() {
  check_inputs
  stop_unit
  remove_file "$VPN_CONFIG_FILE"
  remove_folder "$VPN_FILES_DIR"
  remove_dropin
  # Forwarding is left on: prepare-host enables it too, and pods need it.
  remove_file "$VPN_SYSCTL_FILE"
  follow_up_done "restart-$VPN_UNIT"
  follow_up_done sysctl-vpn
  follow_up_done daemon-reload-vpn
  log "removed the OpenVPN $VPN_ROLE $VPN_NAME"
}

main "$@"
