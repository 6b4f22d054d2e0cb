#!/usr/bin/env bash
# OpenVPN server of the VPC <-> on-prem bridge: the package, its config, keys and the
# gateway's client-config-dir entry under /etc/openvpn/server, IP forwarding, and the
# openvpn-server@gpu-cluster service, restarted when any of its files changed.
set -euo pipefail
# shellcheck source=../lib.sh
[[ -n "${GPU_CLUSTER_LIB_LOADED:-}" ]] || source "$(dirname "${BASH_SOURCE[0]}")/../lib.sh"
# shellcheck source=lib.sh
[[ -n "${GPU_CLUSTER_OPENVPN_LIB_LOADED:-}" ]] || source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
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
openvpn_select server
CCD_DIR="$VPN_FILES_DIR/ccd"
MANAGED_MARKER="# Managed by gpu-cluster"

check_inputs() {
  check_missing_env OPENVPN_CONFIG OPENVPN_CA OPENVPN_CERT OPENVPN_KEY OPENVPN_TLS_CRYPT \
    OPENVPN_CCD_NAME OPENVPN_CCD
  # The name becomes a file name in the client-config-dir: a certificate CN, no paths.
  if [[ -n "${OPENVPN_CCD_NAME:-}" && ! "$OPENVPN_CCD_NAME" =~ ^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$ ]]; then
    INPUT_PROBLEMS+=("OPENVPN_CCD_NAME must be a certificate common name of letters, digits and _.-, got '$OPENVPN_CCD_NAME'")
  fi
  openvpn_check_key_inputs
  die_on_input_problems
}

# remove_stale_ccd_entries: entries this program wrote for another name (a renamed
# cluster or gateway certificate); files of anyone else are left alone.
remove_stale_ccd_entries() {
  local file first_line
  for file in "$ROOT$CCD_DIR"/*; do
    [[ -f "$file" && "${file##*/}" != "$OPENVPN_CCD_NAME" ]] || continue
    first_line="$(head -n 1 -- "$file")"
    if [[ "$first_line" == "$MANAGED_MARKER"* ]]; then
      remove_file "$CCD_DIR/${file##*/}"
      VPN_FILES_CHANGED=1
    fi
  done
}

# write_files: sets VPN_FILES_CHANGED=1 when any file the server reads changed.
write_files() {
  # The server reads the client-config-dir after dropping root: world-readable folders.
  mkdir -p -- "$ROOT$CCD_DIR"
  chmod 0755 -- "$ROOT$VPN_FILES_DIR" "$ROOT$CCD_DIR"
  openvpn_write "$VPN_CONFIG_FILE" 0644 "$OPENVPN_CONFIG"
  openvpn_write_keys server
  openvpn_write "$CCD_DIR/$OPENVPN_CCD_NAME" 0644 "$OPENVPN_CCD"
  remove_stale_ccd_entries
}

main() {
  # Keep the secrets out of the environment of every command started from here on.
  export -n OPENVPN_KEY OPENVPN_TLS_CRYPT
  check_inputs
  openvpn_install_packages
  write_files
  openvpn_remember_restart
  openvpn_enable_forwarding
  openvpn_ensure_service block
  log "OpenVPN server $VPN_UNIT is running"
}

main "$@"
