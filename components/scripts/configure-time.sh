#!/usr/bin/env bash
# time.ntpServers: the clock follows the site's NTP servers only, through the host's daemon:
# chrony (its whole chrony.conf) or systemd-timesyncd (a drop-in). With NTS, chrony checks
# them; it is installed if missing (it replaces systemd-timesyncd: the packages conflict).
set -euo pipefail
# shellcheck source=lib.sh
[[ -n "${GPU_CLUSTER_LIB_LOADED:-}" ]] || source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
: "${GPU_CLUSTER_STEP:=configure-time}"

# Inputs: NTP_SERVERS
# Optional inputs: NTS
# chrony.conf as it was is kept once under TIME_BACKUP_DIR; configure-time-remove.sh puts
# it back and removes the drop-in.

# Ubuntu 22.04 and 24.04 run systemd-timesyncd (chrony from 25.10:
# https://documentation.ubuntu.com/server/explanation/networking/about-time-synchronisation).
# A drop-in overrides /etc/systemd/timesyncd.conf (timesyncd.conf(5)); with NTP= set, the
# compiled-in fallback list (Ubuntu's ntp.ubuntu.com) is not tried: it is used only when
# every other list is empty (systemd src/timesync/timesyncd-manager.c, manager_connect).
TIMESYNCD_DROPIN=/etc/systemd/timesyncd.conf.d/90-gpu-cluster.conf
CHRONY_CONF=/etc/chrony/chrony.conf
TIME_BACKUP_DIR=/var/lib/gpu-cluster/time
MANAGED="# Managed by gpu-cluster (time.ntpServers); the original is in $TIME_BACKUP_DIR."

check_inputs() {
  local server
  require_env NTP_SERVERS
  : "${NTS:=false}"
  require_bool NTS
  # config/types.py HostOrIp validated them; a word that is not a name or an address
  # would end up in a config file's directive.
  for server in $NTP_SERVERS; do
    [[ "$server" =~ ^[A-Za-z0-9]([A-Za-z0-9.:-]{0,251}[A-Za-z0-9])?$ ]] ||
      INPUT_PROBLEMS+=("NTP_SERVERS: '$server' is not a host name or an address")
  done
  die_on_input_problems
}

# chrony_text: Debian/Ubuntu's chrony.conf (chrony 4.3-2 /usr/share/chrony/chrony.conf,
# the same directives in Ubuntu's 4.5) with the servers in place of its pools, and without
# its `sourcedir`s: /run/chrony-dhcp would take servers from whoever answers DHCP.
chrony_text() {
  local server option=""
  is_true "$NTS" && option=" nts"
  printf '%s\n' "$MANAGED" "confdir /etc/chrony/conf.d"
  for server in $NTP_SERVERS; do
    printf 'server %s iburst%s\n' "$server" "$option"
  done
  printf '%s\n' "keyfile /etc/chrony/chrony.keys" "driftfile /var/lib/chrony/chrony.drift" \
    "ntsdumpdir /var/lib/chrony" "logdir /var/log/chrony" "maxupdateskew 100.0" "rtcsync" \
    "makestep 1 3" "leapsectz right/UTC"
}

configure_chrony() {
  local backup=$TIME_BACKUP_DIR/chrony.conf
  if [[ -f "$ROOT$CHRONY_CONF" && ! -e "$ROOT$backup" ]] &&
    [[ "$(head -n 1 -- "$ROOT$CHRONY_CONF")" != "$MANAGED" ]]; then
    write_file "$backup" 0644 <"$ROOT$CHRONY_CONF"
  fi
  write_file "$CHRONY_CONF" 0644 < <(chrony_text)
  if needs_follow_up "$FILE_CHANGED" restart-chrony; then
    systemctl try-restart chrony.service
    follow_up_done restart-chrony
    log "changed: chrony follows $NTP_SERVERS"
  fi
}

configure_timesyncd() {
  write_file "$TIMESYNCD_DROPIN" 0644 < <(printf '%s\n' "$MANAGED" "[Time]" \
    "NTP=$NTP_SERVERS")
  if needs_follow_up "$FILE_CHANGED" restart-timesyncd; then
    # Only if it runs: a host whose clock another daemon keeps is left to it.
    systemctl try-restart systemd-timesyncd.service
    follow_up_done restart-timesyncd
    log "changed: systemd-timesyncd follows $NTP_SERVERS"
  fi
}

main() {
  check_inputs
  if ! package_installed chrony && is_true "$NTS"; then
    log "installing chrony: time.nts needs it (systemd-timesyncd has no NTS)"
    apt_update_once
    apt_get install -y chrony
  fi
  if package_installed chrony; then
    configure_chrony
  elif package_installed systemd-timesyncd; then
    configure_timesyncd
  else
    die "neither chrony nor systemd-timesyncd is installed: install one, or leave time.ntpServers unset"
  fi
}

main "$@"
