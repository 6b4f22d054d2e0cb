#!/usr/bin/env bash
# Makes this host the NFS server of the cluster's shared storage: its package (os/lib.sh), the
# export folder, one exports.d entry for the nodes' own addresses, root squashed. No delete
# step on purpose: the shared data outlives the cluster, so nothing here is removed.
set -euo pipefail
# shellcheck source=lib.sh
[[ -n "${GPU_CLUSTER_LIB_LOADED:-}" ]] || source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
# shellcheck source=os/lib.sh
[[ -n "${GPU_CLUSTER_OS_LIB_LOADED:-}" ]] || source "$(dirname "${BASH_SOURCE[0]}")/os/lib.sh"
: "${GPU_CLUSTER_STEP:=serve-nfs}"

# Inputs: NFS_CLIENT_CIDRS NFS_EXPORT_OPTIONS NFS_EXPORT_PATH
# Optional inputs: NFS_OWNED_FOLDERS
# What they hold, required but the last:
#   NFS_EXPORT_PATH     absolute folder to export, e.g. /srv/nfs/gpu-cluster; created
#                       when missing; of an existing one only the folder's owner changes
#   NFS_CLIENT_CIDRS    blank-separated addresses allowed to mount, each a single IPv4
#                       address as a /32 (the nodes'), never a network
#   NFS_EXPORT_OPTIONS  export options for every client, with root_squash, e.g.
#                       rw,sync,no_subtree_check,root_squash,anonuid=65534,anongid=65534
#   NFS_OWNED_FOLDERS   blank-separated folders of the export (relative) whose folders,
#                       when they exist, belong to the anonymous user too: those that
#                       clients' root made before root was squashed (the snapshots')
#
# A client's root is the anonymous user (anonuid:anongid, 65534 by default, exports(5)):
# the export's folder belongs to that user, so that clients' root can make the folders
# of new claims and snapshots in it, and own nothing else.
EXPORTS_FILE=/etc/exports.d/gpu-cluster.exports
NFS_SERVICE=nfs-server
CLIENT_CIDRS=()
ANON_UID=65534
ANON_GID=65534
OWNED_FOLDERS=()

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
    if ! valid_ipv4_cidr "$cidr" || [[ "$cidr" != */32 ]]; then
      INPUT_PROBLEMS+=("NFS_CLIENT_CIDRS has '$cidr', which is not one node's address such as 192.0.2.7/32 (a network would let every machine in it mount the export)")
    elif [[ " ${CLIENT_CIDRS[*]} " != *" $cidr "* ]]; then
      CLIENT_CIDRS+=("$cidr")
    fi
  done

  if [[ -n "${NFS_EXPORT_OPTIONS:-}" && ! "$NFS_EXPORT_OPTIONS" =~ ^[A-Za-z0-9_,=.-]+$ ]]; then
    INPUT_PROBLEMS+=("NFS_EXPORT_OPTIONS may only contain letters, digits and _,=.-, got '$NFS_EXPORT_OPTIONS'")
  elif [[ -n "${NFS_EXPORT_OPTIONS:-}" ]]; then
    check_export_options
  fi

  local folder
  read -r -a OWNED_FOLDERS <<<"${NFS_OWNED_FOLDERS:-}"
  for folder in "${OWNED_FOLDERS[@]}"; do
    [[ "$folder" =~ ^[A-Za-z0-9_.-]+$ && "$folder" != . && "$folder" != .. ]] ||
      INPUT_PROBLEMS+=("NFS_OWNED_FOLDERS has '$folder', which is not a folder name of the export")
  done

  die_on_input_problems
}

# check_export_options: root squashed for every client, and the anonymous user it becomes
# (ANON_UID, ANON_GID) read from the options.
check_export_options() {
  local option
  local -a options=()
  IFS=, read -r -a options <<<"$NFS_EXPORT_OPTIONS"
  [[ ",$NFS_EXPORT_OPTIONS," == *,root_squash,* ]] ||
    INPUT_PROBLEMS+=("NFS_EXPORT_OPTIONS must squash root (root_squash), got '$NFS_EXPORT_OPTIONS'")
  for option in "${options[@]}"; do
    case "$option" in
      no_root_squash | insecure | insecure_locks | no_auth_nlm | crossmnt | nohide)
        INPUT_PROBLEMS+=("NFS_EXPORT_OPTIONS has '$option', which gives clients more than the export") ;;
      anonuid=*) ANON_UID=${option#anonuid=} ;;
      anongid=*) ANON_GID=${option#anongid=} ;;
    esac
  done
  [[ "$ANON_UID" =~ ^[1-9][0-9]{0,9}$ && "$ANON_GID" =~ ^[1-9][0-9]{0,9}$ ]] ||
    INPUT_PROBLEMS+=("NFS_EXPORT_OPTIONS must map root to a user other than root (anonuid, anongid), got '$NFS_EXPORT_OPTIONS'")
}

install_server() {
  os_install_packages nfs-server
}

# create_export_folder: creates the folder when missing, owned by the anonymous user.
# Of an existing folder only the owner of the folder itself changes: its mode and
# content are never touched, they hold the cluster's data.
create_export_folder() {
  local target="$ROOT$NFS_EXPORT_PATH" folder sub
  if [[ -d "$target" ]]; then
    log "export folder $NFS_EXPORT_PATH already exists; leaving its mode and content as they are"
  elif [[ -e "$target" || -L "$target" ]]; then
    die "cannot export $NFS_EXPORT_PATH: it exists but is not a directory"
  else
    # Missing parents get the usual mode (0755 under umask 022); the folder itself 0755.
    mkdir -p -- "${target%/*}/"
    mkdir -m 0755 -- "$target"
    log "changed: created export folder $NFS_EXPORT_PATH (mode 0755)"
  fi
  own_folder "$NFS_EXPORT_PATH"
  for folder in "${OWNED_FOLDERS[@]}"; do
    [[ -d "$target/$folder" && ! -L "$target/$folder" ]] || continue
    own_folder "$NFS_EXPORT_PATH/$folder"
    while IFS= read -r -d '' sub; do
      own_folder "${sub#"$ROOT"}"
    done < <(find "$target/$folder" -mindepth 1 -maxdepth 1 -type d -print0)
  done
}

# own_folder PATH: host folder PATH (not what it holds) owned by the anonymous user.
own_folder() {
  if [[ "$(stat -c %u:%g -- "$ROOT$1")" != "$ANON_UID:$ANON_GID" ]]; then
    chown --no-dereference -- "$ANON_UID:$ANON_GID" "$ROOT$1"
    log "changed: $1 belongs to $ANON_UID:$ANON_GID, what root on a client becomes"
  fi
}

# write_exports: one exports(5) line for the folder, the same options for every client.
write_exports() {
  local cidr clients=""
  for cidr in "${CLIENT_CIDRS[@]}"; do
    clients+=" $cidr($NFS_EXPORT_OPTIONS)"
  done
  write_file "$EXPORTS_FILE" 0644 <<EOF
# Managed by gpu-cluster (serve-nfs); changes are overwritten.
# Shared storage of the cluster, exported to its nodes' addresses, root squashed.
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
  log "serving $NFS_EXPORT_PATH over NFS to ${CLIENT_CIDRS[*]}, root squashed to $ANON_UID:$ANON_GID"
}

main "$@"
