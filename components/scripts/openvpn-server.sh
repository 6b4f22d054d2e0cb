#!/usr/bin/env bash
# OpenVPN server of the VPC <-> on-prem bridge: the package, its config, keys and the
# gateway's client-config-dir entry under /etc/openvpn/server, IP forwarding, and the
# openvpn-server@gpu-cluster service, restarted when any of its files changed.
set -euo pipefail
# shellcheck source=lib.sh
[[ -n "${GPU_CLUSTER_LIB_LOADED:-}" ]] || source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
: "${GPU_CLUSTER_STEP:=install-openvpn-server}"

# Inputs (environment), all required:
#   OPENVPN_CONFIG     the server config (gpu-cluster.conf); names its files relative to
#                      its folder: gpu-cluster/ca.crt, server.crt, server.key, tls-crypt.key
#                      and the client-config-dir gpu-cluster/ccd
#   OPENVPN_CA         CA certificate (PEM)
#   OPENVPN_CERT       the server's certificate (PEM)
#   OPENVPN_KEY        the server's private key (PEM), secret
#   OPENVPN_TLS_CRYPT  the tls-crypt key (OpenVPN static key), secret
#   OPENVPN_CCD_NAME   the on-prem gateway's certificate CN: its client-config-dir file
#   OPENVPN_CCD        that file's content (iroute of the LAN)
# Secrets are written 0600 and never logged or put on a command line.
CONFIG_DIR=/etc/openvpn/server
CONFIG_NAME=gpu-cluster
FILES_DIR="$CONFIG_DIR/$CONFIG_NAME"
CCD_DIR="$FILES_DIR/ccd"
UNIT="openvpn-server@$CONFIG_NAME"
SYSCTL_FILE=/etc/sysctl.d/90-gpu-cluster-vpn.conf
OPENVPN_PACKAGE=openvpn
MANAGED_MARKER="# Managed by gpu-cluster"
FILES_CHANGED=0
RESTART_PENDING=0
STALE_REMOVED=0

check_inputs() {
  local name text missing=() problems=()
  for name in OPENVPN_CONFIG OPENVPN_CA OPENVPN_CERT OPENVPN_KEY OPENVPN_TLS_CRYPT \
    OPENVPN_CCD_NAME OPENVPN_CCD; do
    if [[ -z "${!name:-}" ]]; then
      missing+=("$name")
    fi
  done
  if ((${#missing[@]} > 0)); then
    problems+=("missing required environment variable(s): ${missing[*]}")
  fi
  # The name becomes a file name in the client-config-dir: a certificate CN, no paths.
  if [[ -n "${OPENVPN_CCD_NAME:-}" && ! "$OPENVPN_CCD_NAME" =~ ^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$ ]]; then
    problems+=("OPENVPN_CCD_NAME must be a certificate common name of letters, digits and _.-, got '$OPENVPN_CCD_NAME'")
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

install_openvpn() {
  if package_installed "$OPENVPN_PACKAGE"; then
    log "$OPENVPN_PACKAGE is already installed"
    return 0
  fi
  apt_update_once
  apt_get install -y "$OPENVPN_PACKAGE"
  log "changed: installed $OPENVPN_PACKAGE"
}

# remove_stale_ccd_entries: entries this program wrote for another name (a renamed
# cluster or gateway certificate); files of anyone else are left alone.
remove_stale_ccd_entries() {
  local file first_line
  STALE_REMOVED=0
  for file in "$ROOT$CCD_DIR"/*; do
    [[ -f "$file" && "${file##*/}" != "$OPENVPN_CCD_NAME" ]] || continue
    first_line="$(head -n 1 -- "$file")"
    if [[ "$first_line" == "$MANAGED_MARKER"* ]]; then
      remove_file "$CCD_DIR/${file##*/}"
      STALE_REMOVED=1
    fi
  done
}

# write_files: sets FILES_CHANGED=1 when any file the server reads changed.
write_files() {
  local changed=0
  # The server reads the client-config-dir after dropping root: world-readable folders.
  mkdir -p -- "$ROOT$CCD_DIR"
  chmod 0755 -- "$ROOT$FILES_DIR" "$ROOT$CCD_DIR"
  write_text "$CONFIG_DIR/$CONFIG_NAME.conf" 0644 "$OPENVPN_CONFIG"
  changed=$((changed | FILE_CHANGED))
  write_text "$FILES_DIR/ca.crt" 0644 "$OPENVPN_CA"
  changed=$((changed | FILE_CHANGED))
  write_text "$FILES_DIR/server.crt" 0644 "$OPENVPN_CERT"
  changed=$((changed | FILE_CHANGED))
  write_text "$FILES_DIR/server.key" 0600 "$OPENVPN_KEY"
  changed=$((changed | FILE_CHANGED))
  write_text "$FILES_DIR/tls-crypt.key" 0600 "$OPENVPN_TLS_CRYPT"
  changed=$((changed | FILE_CHANGED))
  write_text "$CCD_DIR/$OPENVPN_CCD_NAME" 0644 "$OPENVPN_CCD"
  changed=$((changed | FILE_CHANGED))
  remove_stale_ccd_entries
  FILES_CHANGED=$((changed | STALE_REMOVED))
}

# enable_forwarding: the server routes between the VPC and the tunnel.
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

# ensure_service: enabled and running; restarted when a file it reads changed, in this
# run or in an earlier one that did not get to restart it (RESTART_PENDING).
ensure_service() {
  local enabled=0 active=0
  if systemctl is-enabled --quiet "$UNIT"; then enabled=1; fi
  if systemctl is-active --quiet "$UNIT"; then active=1; fi
  if ((!enabled)); then
    systemctl enable "$UNIT"
    log "changed: enabled $UNIT"
  fi
  if ((!active)); then
    systemctl start "$UNIT"
    follow_up_done "restart-$UNIT"
    log "changed: started $UNIT"
  elif ((RESTART_PENDING)); then
    systemctl restart "$UNIT"
    follow_up_done "restart-$UNIT"
    log "changed: restarted $UNIT to apply the changes"
  else
    log "$UNIT is already running"
  fi
}

main() {
  # Keep the secrets out of the environment of every command started from here on.
  export -n OPENVPN_KEY OPENVPN_TLS_CRYPT
  check_inputs
  install_openvpn
  write_files
  # Remembered at once, so a later failure (sysctl, systemd) cannot lose the restart.
  if needs_follow_up "$FILES_CHANGED" "restart-$UNIT"; then
    RESTART_PENDING=1
  fi
  enable_forwarding
  ensure_service
  log "OpenVPN server $UNIT is running"
}

main "$@"
