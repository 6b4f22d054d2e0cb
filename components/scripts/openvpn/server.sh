#!/usr/bin/env bash
# OpenVPN server of the VPC <-> on-prem bridge: package, config, keys, CRL, per-client
# entries, the filter of what arrives from the tunnel (applied by the unit before it
# starts), IP forwarding; openvpn-server@gpu-cluster restarted when a file changed.
set -euo pipefail
# shellcheck source=lib.sh
[[ -n "${GPU_CLUSTER_OPENVPN_LIB_LOADED:-}" ]] || source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
: "${GPU_CLUSTER_STEP:=install-openvpn-server}"

# Inputs: OPENVPN_CA OPENVPN_CCD OPENVPN_CERT OPENVPN_CONFIG OPENVPN_CRL OPENVPN_FILTER OPENVPN_KEY OPENVPN_TLS_CRYPT
# What they hold, all required:
#   OPENVPN_CONFIG     the server config (gpu-cluster.conf); names its files relative to
#                      its folder: gpu-cluster/ca.crt, server.crt, server.key, tls-crypt.key,
#                      crl.pem and the client-config-dir gpu-cluster/ccd
#   OPENVPN_CA         CA certificate (PEM)
#   OPENVPN_CERT       the server's certificate (PEM)
#   OPENVPN_KEY        the server's private key (PEM), secret
#   OPENVPN_TLS_CRYPT  the tls-crypt key (OpenVPN static key), secret
#   OPENVPN_CCD        every client's client-config-dir entry, one after the other; each
#                      starts with the line CCD_HEADER followed by its CN (its file name)
#   OPENVPN_CRL        the CRLs the server checks client certificates against (PEM)
#   OPENVPN_FILTER     iptables-restore input (--noflush): the chain GPU-CLUSTER-VPN and
#                      the jumps to it from INPUT and FORWARD for the server's device
# Secrets are written 0600 and never logged or put on a command line.
openvpn_select server
CCD_DIR="$VPN_FILES_DIR/ccd"
FILTER_FILE="$VPN_FILES_DIR/filter.rules"
MANAGED_MARKER="# Managed by gpu-cluster"
CCD_HEADER="# Managed by gpu-cluster (install-openvpn-server): client-config-dir entry of "
# The server's tun device and the chain the filter fills (vpn_clients.py).
FILTER_DEVICE=gpu-cluster
FILTER_CHAIN=GPU-CLUSTER-VPN
CCD_NAMES=()
CCD_TEXTS=()

# split_ccd_entries: OPENVPN_CCD into CCD_NAMES and CCD_TEXTS (each keeps its header).
split_ccd_entries() {
  local line
  while IFS= read -r line; do
    if [[ "$line" == "$CCD_HEADER"* ]]; then
      CCD_NAMES+=("${line#"$CCD_HEADER"}")
      CCD_TEXTS+=("")
    elif ((${#CCD_NAMES[@]} == 0)); then
      INPUT_PROBLEMS+=("OPENVPN_CCD must start with a client-config-dir entry header")
      return 0
    fi
    CCD_TEXTS[${#CCD_TEXTS[@]} - 1]+="$line"$'\n'
  done <<<"${OPENVPN_CCD:-}"
}

check_inputs() {
  local name
  check_missing_env OPENVPN_CONFIG OPENVPN_CA OPENVPN_CERT OPENVPN_KEY OPENVPN_TLS_CRYPT \
    OPENVPN_CCD OPENVPN_CRL OPENVPN_FILTER
  if [[ -n "${OPENVPN_CCD:-}" ]]; then
    split_ccd_entries
  fi
  # A name becomes a file name in the client-config-dir: a certificate CN, no paths.
  for name in "${CCD_NAMES[@]}"; do
    if [[ ! "$name" =~ ^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$ ]]; then
      INPUT_PROBLEMS+=("OPENVPN_CCD names a client '$name': a certificate common name is letters, digits and _.-")
    fi
  done
  if [[ -n "${OPENVPN_CRL:-}" && "$OPENVPN_CRL" != *"-----BEGIN X509 CRL-----"* ]]; then
    INPUT_PROBLEMS+=("OPENVPN_CRL is not a PEM CRL")
  fi
  if [[ -n "${OPENVPN_FILTER:-}" && "$OPENVPN_FILTER" != *"*filter"*"COMMIT"* ]]; then
    INPUT_PROBLEMS+=("OPENVPN_FILTER is not iptables-restore input of the filter table")
  fi
  openvpn_check_key_inputs
  die_on_input_problems
}

# is_current_client NAME: NAME has an entry in OPENVPN_CCD.
is_current_client() {
  local name
  for name in "${CCD_NAMES[@]}"; do
    [[ "$name" == "$1" ]] && return 0
  done
  return 1
}

# remove_stale_ccd_entries: entries this program wrote for a client it no longer has (a
# removed user, a renamed cluster); files of anyone else are left alone.
remove_stale_ccd_entries() {
  local file first_line
  for file in "$ROOT$CCD_DIR"/*; do
    [[ -f "$file" ]] || continue
    ! is_current_client "${file##*/}" || continue
    first_line="$(head -n 1 -- "$file")"
    if [[ "$first_line" == "$MANAGED_MARKER"* ]]; then
      remove_file "$CCD_DIR/${file##*/}"
      VPN_FILES_CHANGED=1
    fi
  done
}

# write_files: sets VPN_FILES_CHANGED=1 when any file the server reads changed.
write_files() {
  local index
  # The server reads the client-config-dir and the CRL after dropping root:
  # world-readable folders and files (a CRL is public).
  mkdir -p -- "$ROOT$CCD_DIR"
  chmod 0755 -- "$ROOT$VPN_FILES_DIR" "$ROOT$CCD_DIR"
  openvpn_write "$VPN_CONFIG_FILE" 0644 "$OPENVPN_CONFIG"
  openvpn_write_keys server
  openvpn_write "$VPN_FILES_DIR/crl.pem" 0644 "$OPENVPN_CRL"
  openvpn_write "$FILTER_FILE" 0644 "$OPENVPN_FILTER"
  for index in "${!CCD_NAMES[@]}"; do
    openvpn_write "$CCD_DIR/${CCD_NAMES[$index]}" 0644 "${CCD_TEXTS[$index]}"
  done
  remove_stale_ccd_entries
}

# write_dropin: the unit applies the filter each time it starts (at boot, and after every
# change): the earlier jumps deleted ("-": absent at the first start), then the chain
# declared anew (iptables-restore empties a chain it declares) with its jumps.
write_dropin() {
  write_file "$VPN_DROPIN_FILE" 0644 <<DROPIN
# Managed by gpu-cluster (install-openvpn-server); changes are overwritten.
# What arrives from the VPN is filtered before the server starts.
[Service]
ExecStartPre=-/usr/sbin/iptables -w -D INPUT -i $FILTER_DEVICE -j $FILTER_CHAIN
ExecStartPre=-/usr/sbin/iptables -w -D FORWARD -i $FILTER_DEVICE -j $FILTER_CHAIN
ExecStartPre=/usr/sbin/iptables-restore -w --noflush $FILTER_FILE
DROPIN
  VPN_FILES_CHANGED=$((VPN_FILES_CHANGED | FILE_CHANGED))
  if needs_follow_up "$FILE_CHANGED" daemon-reload-vpn; then
    systemd_reload
    follow_up_done daemon-reload-vpn
    log "changed: reloaded systemd units (daemon-reload)"
  fi
}

main() {
  # Keep the secrets out of the environment of every command started from here on.
  export -n OPENVPN_KEY OPENVPN_TLS_CRYPT
  check_inputs
  openvpn_install_packages
  write_files
  write_dropin
  openvpn_remember_restart
  openvpn_enable_forwarding
  openvpn_ensure_service block
  log "OpenVPN server $VPN_UNIT is running"
}

main "$@"
