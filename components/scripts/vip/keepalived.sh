#!/usr/bin/env bash
# control-plane-vip: the control plane's virtual IP on an on-prem controller by host keepalived
# (unicast VRRP between the controllers, held while the local API server accepts connections):
# the OS's package, the program's keepalived.conf once keepalived accepts it, the service on.
set -euo pipefail
# shellcheck source=lib.sh
[[ -n "${GPU_CLUSTER_VIP_LIB_LOADED:-}" ]] || source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
# shellcheck source=../os/lib.sh
[[ -n "${GPU_CLUSTER_OS_LIB_LOADED:-}" ]] || source "$(dirname "${BASH_SOURCE[0]}")/../os/lib.sh"
: "${GPU_CLUSTER_STEP:=control-plane-vip}"

# Inputs: KEEPALIVED_CONF
#   KEEPALIVED_CONF  required: the file components/hosts/vip.py renders (its header first);
#                    without an interface it names @INTERFACE_OF_UNICAST_SRC_IP@, which
#                    becomes the interface that holds its unicast_src_ip here.

check_inputs() {
  check_missing_env KEEPALIVED_CONF
  if [[ -n "${KEEPALIVED_CONF:-}" && "${KEEPALIVED_CONF%%$'\n'*}" != "$KEEPALIVED_HEADER" ]]; then
    INPUT_PROBLEMS+=("KEEPALIVED_CONF does not start with the line '$KEEPALIVED_HEADER'")
  fi
  die_on_input_problems
}

# interface_holding ADDRESS: the interface that holds IPv4 ADDRESS (`ip -o` prints one
# address a line: "2: eth0    inet 192.0.2.10/24 brd ..."), or nothing.
interface_holding() {
  local _index name family address _rest
  while read -r _index name family address _rest; do
    if [[ "$family" == inet && "${address%/*}" == "$1" ]]; then
      printf '%s\n' "$name"
      return 0
    fi
  done < <(ip -4 -o address show)
}

# wanted_text: KEEPALIVED_CONF, its placeholder replaced by the interface that holds the
# address it sends VRRP from.
wanted_text() {
  local text=${KEEPALIVED_CONF%$'\n'} source interface
  if [[ "$text" == *"$KEEPALIVED_INTERFACE_PLACEHOLDER"* ]]; then
    source="$(sed -n 's/^[[:space:]]*unicast_src_ip \([0-9.]*\)$/\1/p' <<<"$text")"
    valid_ipv4 "$source" || die "KEEPALIVED_CONF has no unicast_src_ip address to find its interface by"
    interface="$(interface_holding "$source")"
    [[ -n "$interface" ]] || die "no interface holds $source (unicast_src_ip); set the host's" \
      "interface in the config, or give it that address"
    # A name the kernel accepts (net/core/dev.c dev_valid_name: no '/', ':' or blank, under 16).
    [[ "$interface" =~ ^[A-Za-z0-9_.@-]{1,15}$ ]] ||
      die "interface '$interface' of $source is not a name keepalived.conf can hold"
    log "VRRP goes out on $interface, which holds $source"
    text=${text//"$KEEPALIVED_INTERFACE_PLACEHOLDER"/$interface}
  fi
  printf '%s\n' "$text"
}

main() {
  local wanted report
  check_inputs
  keepalived_file_is_ours || die "$KEEPALIVED_FILE exists and is not the program's (its first" \
    "line is not '$KEEPALIVED_HEADER'): the control plane's VIP needs keepalived for itself;" \
    "move that file away"
  if ! os_package_installed keepalived; then
    log "installing keepalived for the control plane's virtual IP"
    os_install_packages --no-recommends keepalived
  fi
  make_temp_dir
  wanted="$TEMP_DIR/keepalived.conf"
  wanted_text >"$wanted"
  if ! cmp -s -- "$wanted" "$ROOT$KEEPALIVED_FILE"; then
    if ! report="$(keepalived --config-test -f "$wanted" 2>&1)"; then
      die "keepalived refuses the new configuration (keepalived --config-test):" \
        "${report//$'\n'/; }; $KEEPALIVED_FILE is unchanged"
    fi
  fi
  write_file "$KEEPALIVED_FILE" 0640 <"$wanted"
  # SIGHUP (systemctl reload) rereads the file; a restart would drop the address for a while.
  if needs_follow_up "$FILE_CHANGED" "reload-$KEEPALIVED_UNIT"; then
    if systemctl is-active --quiet "$KEEPALIVED_UNIT"; then
      systemctl reload "$KEEPALIVED_UNIT"
      log "changed: reloaded $KEEPALIVED_UNIT"
    fi
    follow_up_done "reload-$KEEPALIVED_UNIT"
  fi
  ensure_unit_running "$KEEPALIVED_UNIT" 0
}

main "$@"
