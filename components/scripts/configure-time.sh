#!/usr/bin/env bash
# time.ntpServers: the clock follows the site's NTP servers only, through the host's daemon:
# chrony (its whole chrony.conf) or systemd-timesyncd (a drop-in). With NTS, chrony checks
# them; it is installed if missing (it replaces systemd-timesyncd: the packages conflict).
set -euo pipefail
# shellcheck source=lib.sh
[[ -n "${GPU_CLUSTER_LIB_LOADED:-}" ]] || source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
# shellcheck source=os/lib.sh
[[ -n "${GPU_CLUSTER_OS_LIB_LOADED:-}" ]] || source "$(dirname "${BASH_SOURCE[0]}")/os/lib.sh"
# shellcheck source=time/lib.sh
[[ -n "${GPU_CLUSTER_TIME_LIB_LOADED:-}" ]] || source "$(dirname "${BASH_SOURCE[0]}")/time/lib.sh"
: "${GPU_CLUSTER_STEP:=configure-time}"

# Inputs: NTP_SERVERS
# Optional inputs: NTS
# chrony.conf as it was is kept once under TIME_BACKUP_DIR; configure-time-remove.sh puts
# it back and removes the drop-in.

# The paths and the first line of the files it writes: time/lib.sh.
MANAGED="$TIME_MANAGED_PREFIX; the original is in $TIME_BACKUP_DIR."

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

# chrony_servers: a `server` line for each of NTP_SERVERS.
chrony_servers() {
  local server option=""
  is_true "$NTS" && option=" nts"
  for server in $NTP_SERVERS; do
    printf 'server %s iburst%s\n' "$server" "$option"
  done
}

# ubuntu_chrony_text: Debian/Ubuntu's chrony.conf (chrony 4.3-2 /usr/share/chrony/chrony.conf,
# the same directives in Ubuntu's 4.5) with the servers in place of its pools, and without
# its `sourcedir`s: /run/chrony-dhcp would take servers from whoever answers DHCP.
ubuntu_chrony_text() {
  printf '%s\n' "$MANAGED" "confdir /etc/chrony/conf.d"
  chrony_servers
  printf '%s\n' "keyfile /etc/chrony/chrony.keys" "driftfile /var/lib/chrony/chrony.drift" \
    "ntsdumpdir /var/lib/chrony" "logdir /var/log/chrony" "maxupdateskew 100.0" "rtcsync" \
    "makestep 1 3" "leapsectz right/UTC"
}

# el9_chrony_text: the chrony.conf RHEL 9's package is made from, upstream's
# examples/chrony.conf.example2 (chrony 4.5, the release RHEL 9.4 ships), with the servers in
# place of its pool and, as on Ubuntu, without its `sourcedir` for DHCP's servers.
el9_chrony_text() {
  printf '%s\n' "$MANAGED"
  chrony_servers
  printf '%s\n' "driftfile /var/lib/chrony/drift" "makestep 1.0 3" "rtcsync" \
    "ntsdumpdir /var/lib/chrony" "logdir /var/log/chrony"
}

configure_chrony() {
  keep_original "$CHRONY_CONF" "$TIME_BACKUP_DIR" "$TIME_MANAGED_PREFIX"
  write_file "$CHRONY_CONF" 0644 < <(os_do chrony_text)
  if needs_follow_up "$FILE_CHANGED" restart-chrony; then
    systemctl try-restart "$CHRONY_SERVICE"
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
  os_do chrony_files
  if ! os_package_installed chrony && is_true "$NTS"; then
    log "installing chrony: time.nts needs it (systemd-timesyncd has no NTS)"
    os_install_packages chrony
  fi
  if os_package_installed chrony; then
    configure_chrony
  elif os_package_installed systemd-timesyncd; then
    configure_timesyncd
  else
    die "neither chrony nor systemd-timesyncd is installed: install one, or leave time.ntpServers unset"
  fi
}

main "$@"
