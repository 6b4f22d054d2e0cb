#!/usr/bin/env bash
# OpenVPN helpers for the step scripts of both ends of the bridge (server and client):
# where an end's config, keys and unit are, checks of the key inputs, and the package,
# file, forwarding and service steps both ends take.
# shellcheck shell=bash disable=SC2034 # its globals are read by the scripts that source it

# shellcheck source=../lib.sh
[[ -n "${GPU_CLUSTER_LIB_LOADED:-}" ]] || source "$(dirname "${BASH_SOURCE[0]}")/../lib.sh"
# shellcheck source=../os/lib.sh
[[ -n "${GPU_CLUSTER_OS_LIB_LOADED:-}" ]] || source "$(dirname "${BASH_SOURCE[0]}")/../os/lib.sh"

# Globals it defines (VPN_*: OPENVPN_* are the scripts' inputs):
#   VPN_ROLE, VPN_NAME   the end (server or client) and its config name, set with
#                        VPN_CONFIG_FILE, VPN_FILES_DIR, VPN_UNIT and VPN_DROPIN_FILE
#                        by openvpn_select
#   VPN_FILES_CHANGED    1 when openvpn_write changed a file the end reads
#   VPN_RESTART_PENDING  1 when the unit must be restarted; see openvpn_remember_restart
GPU_CLUSTER_OPENVPN_LIB_LOADED=1
VPN_SYSCTL_FILE=/etc/sysctl.d/90-gpu-cluster-vpn.conf
VPN_ROLE=""
VPN_NAME=""
VPN_CONFIG_FILE=""
VPN_FILES_DIR=""
VPN_UNIT=""
VPN_DROPIN_FILE=""
VPN_FILES_CHANGED=0
VPN_RESTART_PENDING=0

# openvpn_select ROLE [NAME]: the end to work on: ROLE is server or client, NAME the
# config's name (default gpu-cluster). Sets its paths and unit:
#   VPN_CONFIG_FILE  /etc/openvpn/ROLE/NAME.conf
#   VPN_FILES_DIR    /etc/openvpn/ROLE/NAME, the files the config names
#   VPN_UNIT         openvpn-ROLE@NAME, the packaged unit that runs that config
#   VPN_DROPIN_FILE  the program's systemd drop-in for VPN_UNIT
openvpn_select() {
  VPN_ROLE=$1
  VPN_NAME=${2:-gpu-cluster}
  VPN_CONFIG_FILE="/etc/openvpn/$VPN_ROLE/$VPN_NAME.conf"
  VPN_FILES_DIR="/etc/openvpn/$VPN_ROLE/$VPN_NAME"
  VPN_UNIT="openvpn-$VPN_ROLE@$VPN_NAME"
  VPN_DROPIN_FILE="/etc/systemd/system/$VPN_UNIT.service.d/gpu-cluster.conf"
}

# openvpn_check_key_inputs: adds to INPUT_PROBLEMS what is wrong with the shape of the
# key inputs that are set (OPENVPN_CA, OPENVPN_CERT, OPENVPN_KEY, OPENVPN_TLS_CRYPT).
# Shape checks only; the values themselves are never shown.
openvpn_check_key_inputs() {
  local name
  for name in OPENVPN_CA OPENVPN_CERT; do
    if [[ -n "${!name:-}" && "${!name}" != *"-----BEGIN CERTIFICATE-----"* ]]; then
      INPUT_PROBLEMS+=("$name is not a PEM certificate")
    fi
  done
  if [[ -n "${OPENVPN_KEY:-}" && "$OPENVPN_KEY" != *"PRIVATE KEY-----"* ]]; then
    INPUT_PROBLEMS+=("OPENVPN_KEY is not a PEM private key")
  fi
  if [[ -n "${OPENVPN_TLS_CRYPT:-}" && "$OPENVPN_TLS_CRYPT" != *"-----BEGIN OpenVPN Static key V1-----"* ]]; then
    INPUT_PROBLEMS+=("OPENVPN_TLS_CRYPT is not an OpenVPN static key")
  fi
}

# openvpn_install_packages: installs openvpn when it is missing (EL9: EPEL's,
# os/lib.sh) and, on a client without the ping command, ping for its tunnel check
# (minimal images lack it), on the server iptables, in one transaction.
openvpn_install_packages() {
  local wanted=(openvpn)
  if [[ "$VPN_ROLE" == client ]] && ! command -v ping >/dev/null 2>&1; then
    wanted+=(ping)
  fi
  # The server filters what arrives from the tunnel (server.sh).
  if [[ "$VPN_ROLE" == server ]]; then
    wanted+=(iptables)
  fi
  os_install_packages "${wanted[@]}"
}

# openvpn_write PATH MODE TEXT: write_text, and VPN_FILES_CHANGED=1 when it changed
# the file.
openvpn_write() {
  write_text "$@"
  VPN_FILES_CHANGED=$((VPN_FILES_CHANGED | FILE_CHANGED))
}

# openvpn_write_keys CERT_NAME: writes OPENVPN_CA, OPENVPN_CERT, OPENVPN_KEY and
# OPENVPN_TLS_CRYPT to the files the config names: ca.crt, CERT_NAME.crt, CERT_NAME.key
# and tls-crypt.key in VPN_FILES_DIR. Secrets are written 0600.
openvpn_write_keys() {
  openvpn_write "$VPN_FILES_DIR/ca.crt" 0644 "$OPENVPN_CA"
  openvpn_write "$VPN_FILES_DIR/$1.crt" 0644 "$OPENVPN_CERT"
  openvpn_write "$VPN_FILES_DIR/$1.key" 0600 "$OPENVPN_KEY"
  openvpn_write "$VPN_FILES_DIR/tls-crypt.key" 0600 "$OPENVPN_TLS_CRYPT"
}

# openvpn_remember_restart: VPN_RESTART_PENDING=1 when a file the end reads changed, in
# this run or in an earlier one that did not get to restart the unit. Called once the
# files are written, so a later failure (sysctl, systemd) cannot lose the restart.
openvpn_remember_restart() {
  if needs_follow_up "$VPN_FILES_CHANGED" "restart-$VPN_UNIT"; then
    VPN_RESTART_PENDING=1
  fi
}

# openvpn_enable_forwarding: both ends route between their network and the tunnel.
openvpn_enable_forwarding() {
  write_file "$VPN_SYSCTL_FILE" 0644 <<'EOF'
# Managed by gpu-cluster (openvpn): this host routes between its network and the VPN.
net.ipv4.ip_forward = 1
EOF
  if needs_follow_up "$FILE_CHANGED" sysctl-vpn; then
    sysctl --system >/dev/null
    follow_up_done sysctl-vpn
    log "changed: applied sysctls (sysctl --system)"
  fi
}

# openvpn_ensure_service block|no-block: VPN_UNIT enabled and running; restarted when
# VPN_RESTART_PENDING. With no-block, starting and restarting do not wait for the unit
# to report ready (systemctl --no-block).
openvpn_ensure_service() {
  local enabled=0 active=0 flags=()
  case "$1" in
    block) ;;
    no-block) flags=(--no-block) ;;
    *) die "openvpn_ensure_service: expected block or no-block, got '$1'" ;;
  esac
  if systemctl is-enabled --quiet "$VPN_UNIT"; then enabled=1; fi
  if systemctl is-active --quiet "$VPN_UNIT"; then active=1; fi
  if ((!enabled)); then
    systemd_enable "$VPN_UNIT"
    log "changed: enabled $VPN_UNIT"
  fi
  if ((!active)); then
    systemctl start "${flags[@]}" "$VPN_UNIT"
    follow_up_done "restart-$VPN_UNIT"
    log "changed: started $VPN_UNIT"
  elif ((VPN_RESTART_PENDING)); then
    systemctl restart "${flags[@]}" "$VPN_UNIT"
    follow_up_done "restart-$VPN_UNIT"
    log "changed: restarted $VPN_UNIT to apply the changes"
  else
    log "$VPN_UNIT is already running"
  fi
}
