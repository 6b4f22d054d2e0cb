#!/usr/bin/env bash
# OpenVPN client end of the bridge (the on-prem gateway, or the EC2 instance of an existing
# server): package, config and keys under /etc/openvpn/client, IP forwarding, the
# openvpn-client@gpu-cluster unit, and a bounded wait until the far side answers.
set -euo pipefail
# shellcheck source=lib.sh
[[ -n "${GPU_CLUSTER_LIB_LOADED:-}" ]] || source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
: "${GPU_CLUSTER_STEP:=install-openvpn-client}"

# Inputs (environment):
#   OPENVPN_CONFIG        the client config (gpu-cluster.conf), secret when it is a profile
#                         with its keys inline; otherwise it names its files relative to
#                         its folder: gpu-cluster/ca.crt, client.crt, client.key,
#                         tls-crypt.key
#   OPENVPN_CA            CA certificate (PEM)                  \  all four, or none for
#   OPENVPN_CERT          this client's certificate (PEM)        | a profile with its
#   OPENVPN_KEY           this client's private key (PEM), secret | keys inline
#   OPENVPN_TLS_CRYPT     the tls-crypt key, secret             /
#   REMOTE_CIDR           the network on the far side; the server pushes a route to it
#   TUNNEL_CHECK_ADDRESS  an address on the far side, pinged until it answers
# Secrets are written 0600 and never logged or put on a command line.
CONFIG_DIR=/etc/openvpn/client
CONFIG_NAME=gpu-cluster
FILES_DIR="$CONFIG_DIR/$CONFIG_NAME"
UNIT="openvpn-client@$CONFIG_NAME"
DROPIN_FILE="/etc/systemd/system/$UNIT.service.d/gpu-cluster.conf"
SYSCTL_FILE=/etc/sysctl.d/90-gpu-cluster-vpn.conf
OPENVPN_PACKAGE=openvpn
PING_PACKAGE=iputils-ping
# Later steps (workers joining the control plane) need the tunnel: wait this long for it.
TUNNEL_UP_TIMEOUT=180
ROUTE_TIMEOUT=30
FILES_CHANGED=0
RESTART_PENDING=0

# valid_ipv4 ADDRESS and valid_ipv4_cidr CIDR: dotted quads without leading zeros.
valid_ipv4() {
  local part='(0|[1-9][0-9]{0,2})' octet
  [[ "$1" =~ ^$part\.$part\.$part\.$part$ ]] || return 1
  for octet in "${BASH_REMATCH[@]:1:4}"; do
    ((octet <= 255)) || return 1
  done
}

valid_ipv4_cidr() {
  [[ "$1" == */* ]] && valid_ipv4 "${1%/*}" && [[ "${1#*/}" =~ ^(0|[1-9][0-9]?)$ ]] &&
    ((${1#*/} <= 32))
}

# separate_key_files: the keys come as their own inputs (a config the program made), not
# inline in OPENVPN_CONFIG (a profile exported from an existing server).
separate_key_files() {
  [[ -n "${OPENVPN_CA:-}${OPENVPN_CERT:-}${OPENVPN_KEY:-}${OPENVPN_TLS_CRYPT:-}" ]]
}

check_inputs() {
  local name text missing=() problems=()
  local required=(OPENVPN_CONFIG REMOTE_CIDR TUNNEL_CHECK_ADDRESS)
  if separate_key_files; then
    required+=(OPENVPN_CA OPENVPN_CERT OPENVPN_KEY OPENVPN_TLS_CRYPT)
  fi
  for name in "${required[@]}"; do
    if [[ -z "${!name:-}" ]]; then
      missing+=("$name")
    fi
  done
  if ((${#missing[@]} > 0)); then
    problems+=("missing required environment variable(s): ${missing[*]}")
  fi
  if [[ -n "${REMOTE_CIDR:-}" ]] && ! valid_ipv4_cidr "$REMOTE_CIDR"; then
    problems+=("REMOTE_CIDR must be an IPv4 CIDR such as 10.20.0.0/16, got '$REMOTE_CIDR'")
  fi
  if [[ -n "${TUNNEL_CHECK_ADDRESS:-}" ]] && ! valid_ipv4 "$TUNNEL_CHECK_ADDRESS"; then
    problems+=("TUNNEL_CHECK_ADDRESS must be an IPv4 address such as 10.8.0.1, got '$TUNNEL_CHECK_ADDRESS'")
  fi
  # Shape checks only; the values themselves are never shown.
  for name in OPENVPN_CA OPENVPN_CERT; do
    if [[ -n "${!name:-}" && "${!name}" != *"-----BEGIN CERTIFICATE-----"* ]]; then
      problems+=("$name is not a PEM certificate")
    fi
  done
  if [[ -n "${OPENVPN_KEY:-}" && "$OPENVPN_KEY" != *"PRIVATE KEY-----"* ]]; then
    problems+=("OPENVPN_KEY is not a PEM private key")
  fi
  if [[ -n "${OPENVPN_TLS_CRYPT:-}" && "$OPENVPN_TLS_CRYPT" != *"-----BEGIN OpenVPN Static key V1-----"* ]]; then
    problems+=("OPENVPN_TLS_CRYPT is not an OpenVPN static key")
  fi
  if ((${#problems[@]} > 0)); then
    printf -v text '; %s' "${problems[@]}"
    die "${text#; }"
  fi
}

# install_packages: openvpn, and ping for the tunnel check (minimal images lack it).
install_packages() {
  local package wanted=()
  if package_installed "$OPENVPN_PACKAGE"; then
    log "$OPENVPN_PACKAGE is already installed"
  else
    wanted+=("$OPENVPN_PACKAGE")
  fi
  if ! command -v ping >/dev/null 2>&1; then
    wanted+=("$PING_PACKAGE")
  fi
  if ((${#wanted[@]} == 0)); then
    return 0
  fi
  apt_update_once
  apt_get install -y "${wanted[@]}"
  for package in "${wanted[@]}"; do
    log "changed: installed $package"
  done
}

# write_files: sets FILES_CHANGED=1 when any file the client reads changed.
write_files() {
  local changed=0
  # 0600: an exported profile carries its private key inline.
  write_text "$CONFIG_DIR/$CONFIG_NAME.conf" 0600 "$OPENVPN_CONFIG"
  changed=$((changed | FILE_CHANGED))
  if ! separate_key_files; then
    FILES_CHANGED=$changed
    return 0
  fi
  write_text "$FILES_DIR/ca.crt" 0644 "$OPENVPN_CA"
  changed=$((changed | FILE_CHANGED))
  write_text "$FILES_DIR/client.crt" 0644 "$OPENVPN_CERT"
  changed=$((changed | FILE_CHANGED))
  write_text "$FILES_DIR/client.key" 0600 "$OPENVPN_KEY"
  changed=$((changed | FILE_CHANGED))
  write_text "$FILES_DIR/tls-crypt.key" 0600 "$OPENVPN_TLS_CRYPT"
  changed=$((changed | FILE_CHANGED))
  FILES_CHANGED=$changed
}

# enable_forwarding: the gateway routes between the LAN and the tunnel.
enable_forwarding() {
  write_file "$SYSCTL_FILE" 0644 <<'EOF'
# Managed by gpu-cluster (openvpn): this host routes between its network and the VPN.
net.ipv4.ip_forward = 1
EOF
  if needs_follow_up "$FILE_CHANGED" sysctl-vpn; then
    sysctl --system >/dev/null
    follow_up_done sysctl-vpn
    log "changed: applied sysctls (sysctl --system)"
  fi
}

# write_dropin: the packaged client unit gives up when not connected within its start
# timeout and never restarts; a site-to-site link must come back by itself (the server
# may be unreachable at boot for longer than that).
write_dropin() {
  write_file "$DROPIN_FILE" 0644 <<'EOF'
# Managed by gpu-cluster (install-openvpn-client); changes are overwritten.
# The tunnel comes back by itself after a failed start or a crash.
[Service]
Restart=on-failure
RestartSec=10s
EOF
  if needs_follow_up "$FILE_CHANGED" daemon-reload-vpn; then
    systemctl daemon-reload
    follow_up_done daemon-reload-vpn
    log "changed: reloaded systemd units (daemon-reload)"
  fi
}

# ensure_service: enabled and running; restarted when a file it reads changed, in this
# run or in an earlier one that did not get to restart it (RESTART_PENDING).
# Starts do not block: the unit reports ready only once connected, and the tunnel check
# below waits for that with its own bound.
ensure_service() {
  local enabled=0 active=0
  if systemctl is-enabled --quiet "$UNIT"; then enabled=1; fi
  if systemctl is-active --quiet "$UNIT"; then active=1; fi
  if ((!enabled)); then
    systemctl enable "$UNIT"
    log "changed: enabled $UNIT"
  fi
  if ((!active)); then
    systemctl start --no-block "$UNIT"
    follow_up_done "restart-$UNIT"
    log "changed: started $UNIT"
  elif ((RESTART_PENDING)); then
    systemctl restart --no-block "$UNIT"
    follow_up_done "restart-$UNIT"
    log "changed: restarted $UNIT to apply the changes"
  else
    log "$UNIT is already running"
  fi
}

# tunnel_answers: the unit is connected (active) and the server answers through it.
tunnel_answers() {
  systemctl is-active --quiet "$UNIT" && ping -c 1 -W 2 "$TUNNEL_CHECK_ADDRESS"
}

remote_route_present() {
  [[ -n "$(ip -4 route show exact "$REMOTE_CIDR")" ]]
}

wait_for_tunnel() {
  wait_until "$TUNNEL_UP_TIMEOUT" \
    "$TUNNEL_CHECK_ADDRESS to answer through the tunnel (see journalctl -u $UNIT)" \
    tunnel_answers
  wait_until "$ROUTE_TIMEOUT" "the route to $REMOTE_CIDR the VPN server pushes" \
    remote_route_present
}

main() {
  # Keep the secrets out of the environment of every command started from here on.
  export -n OPENVPN_KEY OPENVPN_TLS_CRYPT OPENVPN_CONFIG
  check_inputs
  install_packages
  write_files
  # Remembered at once, so a later failure (sysctl, systemd) cannot lose the restart.
  if needs_follow_up "$FILES_CHANGED" "restart-$UNIT"; then
    RESTART_PENDING=1
  fi
  enable_forwarding
  write_dropin
  ensure_service
  wait_for_tunnel
  log "the tunnel to $REMOTE_CIDR is up"
}

main "$@"
