# shellcheck shell=bash
# The control plane's state as RKE2 backs it up and restores it, for backup/backup.sh and
# backup/restore.sh: an on-demand etcd snapshot (`rke2 etcd-snapshot save`), restored by
# resetting the cluster to it (`rke2 server --cluster-reset --cluster-reset-restore-path`
# with rke2-server stopped; https://docs.rke2.io/backup_restore). RKE2 encrypts
# the snapshot's bootstrap data with the server token, which install-server keeps in its
# config: restore on a server `pulumi up` installed.

CLUSTER_STATE_SERVICE=rke2-server
CLUSTER_STATE_SNAPSHOT_NAME=gpu-cluster

# cluster_state_snapshot DIR: a new snapshot in the empty folder DIR; prints its path.
cluster_state_snapshot() {
  local file
  # Named <name>-<node>-<unix time> (RKE2's scheduled ones keep their own folder).
  rke2 etcd-snapshot save --name "$CLUSTER_STATE_SNAPSHOT_NAME" --dir "$1" >&2
  file="$(find "$1" -maxdepth 1 -type f -name "$CLUSTER_STATE_SNAPSHOT_NAME-*" -print -quit)"
  [[ -n "$file" ]] || die "rke2 etcd-snapshot save wrote no $CLUSTER_STATE_SNAPSHOT_NAME-* to $1"
  printf '%s\n' "$file"
}

# cluster_state_restore FILE: the server's etcd from snapshot FILE. RKE2 moves the etcd
# data in place aside to server/db/etcd-old-<date> itself.
cluster_state_restore() {
  systemctl stop "$CLUSTER_STATE_SERVICE"
  rke2 server --cluster-reset --cluster-reset-restore-path="$1" >&2
  systemctl start "$CLUSTER_STATE_SERVICE"
  log "changed: restored the control plane from $1; rke2-server started"
}
CLUSTER_STATE_DB_DIR=/var/lib/rancher/rke2/server/db

# cluster_state_leave: before the first server restores, on another: rke2-server stopped
# and its etcd database put aside, so that it joins the restored cluster when it starts
# again (https://docs.rke2.io/backup_restore, "Restoring a Snapshot to Existing Nodes":
# stop rke2-server on all servers, restore on the first, remove server/db on the others,
# start them). A second run finds nothing to move.
cluster_state_leave() {
  leave_cluster "$CLUSTER_STATE_SERVICE" "$CLUSTER_STATE_DB_DIR"
}

CLUSTER_STATE_KUBECTL=/var/lib/rancher/rke2/bin/kubectl
CLUSTER_STATE_KUBECONFIG=/etc/rancher/rke2/rke2.yaml

# cluster_state_api_ready ADDRESS PORT: success when the API server at ADDRESS:PORT answers
# /readyz to this server's admin kubeconfig (RKE2 writes it for 127.0.0.1; every server's
# tls-san names its own address: ControlPlaneEndpoint.sans in config/control_plane.py).
cluster_state_api_ready() {
  "$ROOT$CLUSTER_STATE_KUBECTL" --kubeconfig "$ROOT$CLUSTER_STATE_KUBECONFIG" \
    --server "https://$1:$2" --request-timeout=5s get --raw=/readyz >/dev/null 2>&1
}
