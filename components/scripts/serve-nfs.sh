#!/usr/bin/env bash
# Makes this host the NFS server of the cluster's shared storage: nfs-kernel-server,
# the export folder and one exports.d entry for the cluster networks. It has no delete
# step on purpose: the shared data outlives the cluster, so nothing here is removed.
set -euo pipefail
# shellcheck source=lib.sh
[[ -n "${GPU_CLUSTER_LIB_LOADED:-}" ]] || source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
: "${GPU_CLUSTER_STEP:=serve-nfs}"

# Inputs (environment), all required:
#   NFS_EXPORT_PATH     absolute folder to export, e.g. /srv/nfs/gpu-cluster; created
#                       (0755) when missing, an existing one is left exactly as it is
#   NFS_CLIENT_CIDRS    blank-separated IPv4 CIDRs allowed to mount, e.g. the cluster LAN
#   NFS_EXPORT_OPTIONS  export options for every client, e.g.
#                       rw,sync,no_subtree_check,no_root_squash (databases such as MySQL
#                       chown their data directory, which needs root not squashed)
EXPORTS_FILE=/etc/exports.d/gpu-cluster.exports
NFS_PACKAGE=nfs-kernel-server
NFS_SERVICE=nfs-server
CLIENT_CIDRS=()

# check_inputs: dies naming every missing or invalid input at once. Sets CLIENT_CIDRS.
check_inputs() {
  local cidr text cidrs=()
  # The path is written double-quoted into the exports file: no quotes, backslashes
  # or control characters. Exporting / (root not squashed) would hand out the host.
  local path_re='^(/[A-Za-z0-9_.+@:~ -]+)+$' path=${NFS_EXPORT_PATH:-}
  check_missing_env NFS_EXPORT_PATH NFS_CLIENT_CIDRS NFS_EXPORT_OPTIONS

  if [[ -n "$path" ]] && [[ ! "$path" =~ $path_re || "$path/" == */./* || "$path/" == */../* ]]; then
    text="NFS_EXPORT_PATH must be an absolute folder path below / without '.', '..', '//',"
    text+=" a trailing slash or characters other than letters, digits, blanks and _.+@:~-"
    INPUT_PROBLEMS+=("$text, got '$path'")
  fi

  read -r -a cidrs <<<"${NFS_CLIENT_CIDRS:-}"
  if [[ -n "${NFS_CLIENT_CIDRS:-}" ]] && ((${#cidrs[@]} == 0)); then
    INPUT_PROBLEMS+=("NFS_CLIENT_CIDRS lists no CIDR")
  fi
  CLIENT_CIDRS=()
  for cidr in "${cidrs[@]}"; do
    if ! valid_ipv4_cidr "$cidr"; then
      INPUT_PROBLEMS+=("NFS_CLIENT_CIDRS has '$cidr', which is not an IPv4 CIDR such as 192.0.2.0/24")
    elif [[ " ${CLIENT_CIDRS[*]} " != *" $cidr "* ]]; then
      CLIENT_CIDRS+=("$cidr")
    fi
  done

  if [[ -n "${NFS_EXPORT_OPTIONS:-}" && ! "$NFS_EXPORT_OPTIONS" =~ ^[A-Za-z0-9_,=.-]+$ ]]; then
    INPUT_PROBLEMS+=("NFS_EXPORT_OPTIONS may only contain letters, digits and _,=.-, got '$NFS_EXPORT_OPTIONS'")
  fi

  die_on_input_problems
}

install_server() {
  if package_installed "$NFS_PACKAGE"; then
    log "$NFS_PACKAGE is already installed"
    return 0
  fi
  apt_update_once
  apt_get install -y "$NFS_PACKAGE"
  log "changed: installed $NFS_PACKAGE"
}

# create_export_folder: creates the folder when missing. An existing folder, its
# mode, owner and content are never touched: they hold the cluster's data.
create_export_folder() {
  local target="$ROOT$NFS_EXPORT_PATH"
  if [[ -d "$target" ]]; then
    log "export folder $NFS_EXPORT_PATH already exists; leaving it as it is"
    return 0
  fi
  if [[ -e "$target" || -L "$target" ]]; then
    die "cannot export $NFS_EXPORT_PATH: it exists but is not a directory"
  fi
  # Missing parents get the usual mode (0755 under umask 022); the folder itself 0755.
  mkdir -p -- "${target%/*}/"
  mkdir -m 0755 -- "$target"
  log "changed: created export folder $NFS_EXPORT_PATH (mode 0755)"
}

# write_exports: one exports(5) line for the folder, the same options for every client.
write_exports() {
  local cidr clients=""
  for cidr in "${CLIENT_CIDRS[@]}"; do
    clients+=" $cidr($NFS_EXPORT_OPTIONS)"
  done
  write_file "$EXPORTS_FILE" 0644 <<EOF
# Managed by gpu-cluster (serve-nfs); changes are overwritten.
# Shared storage of the cluster, exported to the cluster networks.
"$NFS_EXPORT_PATH"$clients
EOF
  if needs_follow_up "$FILE_CHANGED" exportfs; then
    exportfs -ra
    follow_up_done exportfs
    log "changed: re-exported the NFS shares (exportfs -ra)"
  fi
}

# ensure_server_running: enables and starts nfs-server unless it already is both.
ensure_server_running() {
  if systemctl is-enabled --quiet "$NFS_SERVICE" && systemctl is-active --quiet "$NFS_SERVICE"; then
    log "$NFS_SERVICE is already enabled and running"
    return 0
  fi
  systemd_enable --now "$NFS_SERVICE"
  log "changed: enabled and started $NFS_SERVICE"
}

main() {
  check_inputs
  install_server
  create_export_folder
  write_exports
  ensure_server_running
  log "serving $NFS_EXPORT_PATH over NFS to ${CLIENT_CIDRS[*]}"
}

main "$@"
