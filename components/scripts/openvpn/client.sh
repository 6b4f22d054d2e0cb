#!/usr/bin/env bash
# OpenVPN client end of the bridge (the on-prem gateway, or the EC2 instance of an existing
# server): package, config and keys under /etc/openvpn/client, IP forwarding, the
# openvpn-client@gpu-cluster unit, and a bounded wait until the far side answers.
set -euo pipefail
# shellcheck source=lib.sh
[[ -n "${GPU_CLUSTER_OPENVPN_LIB_LOADED:-}" ]] || source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
: "${GPU_CLUSTER_STEP:=install-openvpn-client}"

# Inputs: OPENVPN_CONFIG REMOTE_CIDR TUNNEL_CHECK_ADDRESS
# Optional inputs: OPENVPN_CA OPENVPN_CERT OPENVPN_KEY OPENVPN_TLS_CRYPT
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
openvpn_select client
# Later steps (workers joining the control plane) need the tunnel: wait this long for it.
TUNNEL_UP_TIMEOUT=180
ROUTE_TIMEOUT=30

# separate_key_files: the keys come as their own inputs (a config the program made), not
# inline in OPENVPN_CONFIG (a profile exported from an existing server).
separate_key_files() {
  [[ -n "${OPENVPN_CA:-}${OPENVPN_CERT:-}${OPENVPN_KEY:-}${OPENVPN_TLS_CRYPT:-}" ]]
}

check_inputs() {
  local required=(OPENVPN_CONFIG REMOTE_CIDR TUNNEL_CHECK_ADDRESS)
  if separate_key_files; then
    required+=(OPENVPN_CA OPENVPN_CERT OPENVPN_KEY OPENVPN_TLS_CRYPT)
  fi
  check_missing_env "${required[@]}"
  if [[ -n "${REMOTE_CIDR:-}" ]] && ! valid_ipv4_cidr "$REMOTE_CIDR"; then
    INPUT_PROBLEMS+=("REMOTE_CIDR must be an IPv4 CIDR such as 10.20.0.0/16, got '$REMOTE_CIDR'")
  fi
  if [[ -n "${TUNNEL_CHECK_ADDRESS:-}" ]] && ! valid_ipv4 "$TUNNEL_CHECK_ADDRESS"; then
    INPUT_PROBLEMS+=("TUNNEL_CHECK_ADDRESS must be an IPv4 address such as 10.8.0.1, got '$TUNNEL_CHECK_ADDRESS'")
  fi
  openvpn_check_key_inputs
  die_on_input_problems
}

# write_files: sets VPN_FILES_CHANGED=1 when any file the client reads changed.
write_files() {
  # 0600: an exported profile carries its private key inline.
  openvpn_write "$VPN_CONFIG_FILE" 0600 "$OPENVPN_CONFIG"
  if separate_key_files; then
    openvpn_write_keys client
  fi
}

# write_dropin: the packaged client unit gives up when not connected within its start
# timeout and never restarts; a site-to-site link must come back by itself (the server
# may be unreachable at boot for longer than that).
write_dropin() {
  write_file "$VPN_DROPIN_FILE" 0644 <<'EOF'
# Managed by gpu-cluster (install-openvpn-client); changes are overwritten.
# The tunnel comes back by itself after a failed start or a crash.
[Service]
Restart=on-failure
RestartSec=10s
EOF
  if needs_follow_up "$FILE_CHANGED" daemon-reload-vpn; then
    systemd_reload
    follow_up_done daemon-reload-vpn
    log "changed: reloaded systemd units (daemon-reload)"
  fi
}

# tunnel_answers: the unit is connected (active) and the server answers through it.
tunnel_answers() {
  systemctl is-active --quiet "$VPN_UNIT" && ping -c 1 -W 2 "$TUNNEL_CHECK_ADDRESS"
}

remote_route_present() {
  [[ -n "$(ip -4 route show exact "$REMOTE_CIDR")" ]]
}

wait_for_tunnel() {
  wait_until "$TUNNEL_UP_TIMEOUT" \
    "$TUNNEL_CHECK_ADDRESS to answer through the tunnel (see journalctl -u $VPN_UNIT)" \
    tunnel_answers
  wait_until "$ROUTE_TIMEOUT" "the route to $REMOTE_CIDR the VPN server pushes" \
    remote_route_present
}

main() {
  # Keep the secrets out of the environment of every command started from here on.
  export -n OPENVPN_KEY OPENVPN_TLS_CRYPT OPENVPN_CONFIG
  check_inputs
  openvpn_install_packages
  write_files
  openvpn_remember_restart
  openvpn_enable_forwarding
  write_dropin
  # Starts do not block: the unit reports ready only once connected, and the tunnel
  # check waits for that with its own bound.
  openvpn_ensure_service no-block
  wait_for_tunnel
  log "the tunnel to $REMOTE_CIDR is up"
}

main "$@"
