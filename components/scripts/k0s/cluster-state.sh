# shellcheck shell=bash
# The control plane's state as k0s backs it up and restores it, for backup/backup.sh and
# backup/restore.sh. `k0s backup` saves the certificates (<data-dir>/pki), an etcd
# snapshot, k0s.yaml and the manifests and image bundles of the data dir, and must run on
# the controller; `k0s restore` puts them back on a controller whose k0s is not running
# (k0s docs/backup.md, "Backup/Restore overview").

CLUSTER_STATE_DATA_DIR=/var/lib/k0s
CLUSTER_STATE_SERVICE=k0scontroller

# cluster_state_snapshot DIR: a new snapshot in the empty folder DIR; prints its path.
cluster_state_snapshot() {
  local file
  # Named k0s_backup_<date and time>.tar.gz: never one that exists (docs/backup.md).
  k0s backup --save-path "$1" >&2
  file="$(find "$1" -maxdepth 1 -type f -name 'k0s_backup_*.tar.gz' -print -quit)"
  [[ -n "$file" ]] || die "k0s backup wrote no k0s_backup_*.tar.gz to $1"
  printf '%s\n' "$file"
}

# cluster_state_restore FILE: the controller's state from snapshot FILE. The data dir in
# place is kept aside (its path is logged), never deleted; the program's /etc/k0s/k0s.yaml
# stays, as it is what `pulumi up` installs (the archive's copy goes to a temporary file).
cluster_state_restore() {
  local file=$1 aside
  aside="$CLUSTER_STATE_DATA_DIR.before-restore-$(date -u +%Y%m%dT%H%M%SZ)"
  systemctl stop "$CLUSTER_STATE_SERVICE"
  if [[ -e "$ROOT$CLUSTER_STATE_DATA_DIR" ]]; then
    mv -- "$ROOT$CLUSTER_STATE_DATA_DIR" "$ROOT$aside"
    log "changed: moved $CLUSTER_STATE_DATA_DIR aside to $aside"
  fi
  make_temp_dir
  k0s restore --config-out "$TEMP_DIR/k0s.yaml" "$file" >&2
  systemctl start "$CLUSTER_STATE_SERVICE"
  log "changed: restored the control plane from $file; k0scontroller started"
}

# cluster_state_leave: before the first controller restores, on another: k0s stopped and
# its data dir (pki, etcd) put aside, so that this controller joins the restored cluster as
# a new one ("after restoring single controller node, join the rest of the controller
# nodes to the cluster", k0s docs/backup.md:57-62 at v1.36.3+k0s.2). A second run finds
# nothing to move.
cluster_state_leave() {
  leave_cluster "$CLUSTER_STATE_SERVICE" "$CLUSTER_STATE_DATA_DIR"
}

# cluster_state_api_ready ADDRESS PORT: success when the API server at ADDRESS:PORT answers
# /readyz to this controller's admin credential (`k0s kubectl` reads k0s's admin.conf on a
# controller; each controller's spec.api.sans names its own address:
# ControlPlaneEndpoint.sans in config/control_plane.py).
cluster_state_api_ready() {
  k0s kubectl --server "https://$1:$2" --request-timeout=5s get --raw=/readyz >/dev/null 2>&1
}
