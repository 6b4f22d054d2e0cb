#!/usr/bin/env bats
# serve-nfs.sh: NFS server package, export folder owned by the user root is squashed to,
# exports file for the nodes' addresses only, exportfs, service.

bats_require_minimum_version 1.5.0
load helpers

EXPORTS=/etc/exports.d/gpu-cluster.exports
# The user a client's root becomes (helpers.bash nfs_export_options).
OPTIONS="$(nfs_export_options)"
ANON="$(sed -E 's/.*anonuid=([0-9]+),anongid=([0-9]+).*/\1:\2/' <<<"$OPTIONS")"

setup() {
  setup_host
  export NFS_EXPORT_PATH=/srv/nfs/gpu-cluster NFS_CLIENT_CIDRS="192.168.10.11/32 192.168.10.12/32" \
    NFS_EXPORT_OPTIONS=$OPTIONS NFS_OWNED_FOLDERS=gpu-cluster-backups
}

# folder_snapshot PATH: type, mode, owner and content hash of everything below host path
# PATH, the folder itself but its owner.
folder_snapshot() {
  (
    cd "${GPU_CLUSTER_ROOT:?}$1" || exit 1
    stat -c '. %F %a' .
    find . -mindepth 1 -printf '%p %y %m %U:%G\n' | LC_ALL=C sort
    find . -type f -exec sha256sum {} + | LC_ALL=C sort -k 2
  )
}

# owner PATH: uid:gid of host path PATH.
owner() {
  stat -c %u:%g "$GPU_CLUSTER_ROOT$1"
}

@test "serve-nfs: first run installs the server, creates the folder, exports it and starts the server" {
  run_script serve-nfs.sh
  assert_success
  assert_called "^dpkg-query -W -f=\\$\\{Status\\} nfs-kernel-server$"
  assert_called "^$APT "'update$'
  assert_called "^$APT "'install -y nfs-kernel-server$'
  [ -d "$GPU_CLUSTER_ROOT/srv/nfs/gpu-cluster" ]
  assert_mode /srv/nfs/gpu-cluster 755
  [ "$(owner /srv/nfs/gpu-cluster)" = "$ANON" ]
  [ -z "$(ls -A "$GPU_CLUSTER_ROOT/srv/nfs/gpu-cluster")" ]
  assert_file "$EXPORTS" "# Managed by gpu-cluster (serve-nfs); changes are overwritten.
# Shared storage of the cluster, exported to its nodes' addresses, root squashed.
\"/srv/nfs/gpu-cluster\" 192.168.10.11/32($OPTIONS) 192.168.10.12/32($OPTIONS)"
  assert_mode "$EXPORTS" 644
  assert_called '^exportfs -ra$'
  assert_called '^systemctl enable --now nfs-server$'
  assert_call_order "^$APT install" '^exportfs -ra$'
  assert_call_order '^exportfs -ra$' '^systemctl enable --now nfs-server$'
  assert_output_contains \
    "gpu-cluster: moscow: serve-nfs: changed: installed nfs-kernel-server" \
    "gpu-cluster: moscow: serve-nfs: changed: created export folder /srv/nfs/gpu-cluster (mode 0755)" \
    "gpu-cluster: moscow: serve-nfs: changed $EXPORTS" \
    "gpu-cluster: moscow: serve-nfs: changed: re-exported the NFS shares (exportfs -ra)" \
    "gpu-cluster: moscow: serve-nfs: changed: enabled and started nfs-server" \
    "gpu-cluster: moscow: serve-nfs: changed: /srv/nfs/gpu-cluster belongs to $ANON, what root on a client becomes" \
    "serving /srv/nfs/gpu-cluster over NFS to 192.168.10.11/32 192.168.10.12/32, root squashed to $ANON"
  [ ! -e "$GPU_CLUSTER_ROOT/var/lib/gpu-cluster/pending/exportfs" ]
}

@test "serve-nfs: a second run changes nothing and says so" {
  run_twice serve-nfs.sh
  assert_output_contains "nfs-kernel-server is already installed" \
    "export folder /srv/nfs/gpu-cluster already exists; leaving its mode and content as they are" \
    "unchanged $EXPORTS" \
    "nfs-server is already enabled and running"
  refute_output_contains "belongs to"
  refute_called '^exportfs'
}

@test "serve-nfs: an existing export folder keeps its mode and content; the folder itself goes to the squashed root" {
  local r=${GPU_CLUSTER_ROOT:?} before
  mkdir -p "$r/srv/nfs/gpu-cluster/mysql"
  echo "ibdata" >"$r/srv/nfs/gpu-cluster/mysql/ibdata1"
  echo "notes" >"$r/srv/nfs/gpu-cluster/README"
  chmod 0600 "$r/srv/nfs/gpu-cluster/mysql/ibdata1"
  chmod 0750 "$r/srv/nfs/gpu-cluster/mysql"
  chmod 0700 "$r/srv/nfs/gpu-cluster"
  before="$(folder_snapshot /srv/nfs/gpu-cluster)"
  run_script serve-nfs.sh
  assert_success
  assert_output_contains "export folder /srv/nfs/gpu-cluster already exists; leaving its mode and content as they are"
  refute_output_contains "created export folder"
  [ "$(folder_snapshot /srv/nfs/gpu-cluster)" = "$before" ]
  assert_mode /srv/nfs/gpu-cluster 700
  [ "$(owner /srv/nfs/gpu-cluster)" = "$ANON" ]
  assert_called '^exportfs -ra$'
}

@test "serve-nfs: a changed address list rewrites the exports and re-exports without reinstalling" {
  run_script serve-nfs.sh
  assert_success
  echo "data" >"$GPU_CLUSTER_ROOT/srv/nfs/gpu-cluster/keep"
  reset_calls
  export NFS_CLIENT_CIDRS="192.168.10.11/32 192.168.10.12/32 198.51.100.7/32"
  run_script serve-nfs.sh
  assert_success
  assert_file "$EXPORTS" "# Managed by gpu-cluster (serve-nfs); changes are overwritten.
# Shared storage of the cluster, exported to its nodes' addresses, root squashed.
\"/srv/nfs/gpu-cluster\" 192.168.10.11/32($OPTIONS) 192.168.10.12/32($OPTIONS) 198.51.100.7/32($OPTIONS)"
  assert_output_contains "changed $EXPORTS" "changed: re-exported the NFS shares (exportfs -ra)"
  assert_called '^exportfs -ra$'
  refute_called '^apt-get'
  refute_called '^systemctl enable'
  assert_file /srv/nfs/gpu-cluster/keep data
  assert_idempotent serve-nfs.sh
}

@test "serve-nfs: a stopped or disabled server is enabled and started without re-exporting" {
  run_script serve-nfs.sh
  assert_success
  rm "$STUB_STATE/active-nfs-server"
  reset_calls
  run_script serve-nfs.sh
  assert_success
  assert_called '^systemctl enable --now nfs-server$'
  refute_called '^exportfs'
  rm "$STUB_STATE/enabled-nfs-server"
  reset_calls
  run_script serve-nfs.sh
  assert_success
  assert_called '^systemctl is-enabled --quiet nfs-server$'
  assert_called '^systemctl enable --now nfs-server$'
  assert_idempotent serve-nfs.sh
}

@test "serve-nfs: an interrupted exportfs is retried by the next run" {
  STUB_FAIL_CALL='^exportfs' run_script serve-nfs.sh
  assert_failure
  assert_output_contains "gpu-cluster: moscow: serve-nfs: command failed with exit code 1 at line"
  [ -e "$GPU_CLUSTER_ROOT/var/lib/gpu-cluster/pending/exportfs" ]
  reset_calls
  run_script serve-nfs.sh
  assert_success
  assert_output_contains "unchanged $EXPORTS" "retrying exportfs, which an earlier run did not finish"
  assert_called '^exportfs -ra$'
  [ ! -e "$GPU_CLUSTER_ROOT/var/lib/gpu-cluster/pending/exportfs" ]
  assert_idempotent serve-nfs.sh
}

@test "serve-nfs: a folder with blanks is quoted and duplicate addresses are listed once" {
  export NFS_EXPORT_PATH="/srv/nfs/shared data" NFS_CLIENT_CIDRS=" 10.0.0.7/32  10.0.0.7/32 " \
    NFS_EXPORT_OPTIONS="ro,sync,$OPTIONS"
  run_script serve-nfs.sh
  assert_success
  [ -d "$GPU_CLUSTER_ROOT/srv/nfs/shared data" ]
  grep -qx "\"/srv/nfs/shared data\" 10.0.0.7/32(ro,sync,$OPTIONS)" \
    "$GPU_CLUSTER_ROOT$EXPORTS"
  assert_called '^exportfs -ra$'
}

@test "serve-nfs: a file where the folder should be is refused" {
  mkdir -p "$GPU_CLUSTER_ROOT/srv/nfs"
  echo "not a folder" >"$GPU_CLUSTER_ROOT/srv/nfs/gpu-cluster"
  run_script serve-nfs.sh
  [ "$status" -eq 1 ]
  assert_output_contains "gpu-cluster: moscow: serve-nfs: cannot export /srv/nfs/gpu-cluster: it exists but is not a directory"
  assert_file /srv/nfs/gpu-cluster "not a folder"
  [ ! -e "$GPU_CLUSTER_ROOT$EXPORTS" ]
  refute_called '^exportfs'
}

@test "serve-nfs: all missing environment variables are named at once" {
  unset NFS_EXPORT_PATH NFS_CLIENT_CIDRS NFS_EXPORT_OPTIONS
  run_script serve-nfs.sh
  assert_refused "gpu-cluster: moscow: serve-nfs: missing required environment variable(s): NFS_EXPORT_PATH NFS_CLIENT_CIDRS NFS_EXPORT_OPTIONS"
}

@test "serve-nfs: missing and invalid inputs are all named at once" {
  remember_root
  unset NFS_EXPORT_OPTIONS
  export NFS_EXPORT_PATH=/srv/../etc \
    NFS_CLIENT_CIDRS="192.168.10.7/32 10.244.0.0 192.0.2.300/32 198.51.100.0/33 010.0.0.1/32 fd00::/8"
  run_script serve-nfs.sh
  [ "$status" -eq 1 ]
  [ "$(grep -c 'serve-nfs: ' <<<"$output")" -eq 1 ]
  assert_output_contains \
    "gpu-cluster: moscow: serve-nfs: missing required environment variable(s): NFS_EXPORT_OPTIONS; NFS_EXPORT_PATH must be an absolute folder path" \
    "got '/srv/../etc'" \
    "NFS_CLIENT_CIDRS has '10.244.0.0', which is not one node's address" \
    "NFS_CLIENT_CIDRS has '192.0.2.300/32'" \
    "NFS_CLIENT_CIDRS has '198.51.100.0/33'" \
    "NFS_CLIENT_CIDRS has '010.0.0.1/32'" \
    "NFS_CLIENT_CIDRS has 'fd00::/8'"
  refute_output_contains "'192.168.10.7/32'"
  [ "$(<"$STUB_CALLS")" = "" ]
  assert_root_unchanged
}

@test "serve-nfs: unsafe paths, blank CIDR lists and odd options are rejected" {
  local path
  for path in srv/nfs / /srv/nfs/ //srv/nfs /srv/./nfs '/srv/"nfs"' '/srv/$(reboot)' '/srv/a\b'; do
    export NFS_EXPORT_PATH=$path
    run_script serve-nfs.sh
    [ "$status" -eq 1 ]
    assert_output_contains "NFS_EXPORT_PATH must be an absolute folder path" "got '$path'"
  done
  export NFS_EXPORT_PATH=/srv/nfs/gpu-cluster NFS_CLIENT_CIDRS="   " \
    NFS_EXPORT_OPTIONS='rw,sync 10.0.0.0/8(rw)'
  run_script serve-nfs.sh
  [ "$status" -eq 1 ]
  assert_output_contains "NFS_CLIENT_CIDRS lists no CIDR; NFS_EXPORT_OPTIONS may only contain letters, digits and _,=.-, got 'rw,sync 10.0.0.0/8(rw)'"
  export NFS_CLIENT_CIDRS=192.168.10.7/32 NFS_EXPORT_OPTIONS='rw;reboot'
  run_script serve-nfs.sh
  assert_refused "got 'rw;reboot'"
  [ ! -e "$GPU_CLUSTER_ROOT/srv" ]
}

@test "serve-nfs: a network is refused, whichever its size: only nodes' own addresses mount" {
  local cidr
  for cidr in 192.168.10.0/24 192.168.10.12/31 0.0.0.0/0 10.0.0.0/8; do
    export NFS_CLIENT_CIDRS="192.168.10.11/32 $cidr"
    run_script serve-nfs.sh
    assert_failure
    assert_output_contains "NFS_CLIENT_CIDRS has '$cidr', which is not one node's address such as 192.0.2.7/32"
  done
  [ "$(<"$STUB_CALLS")" = "" ]
  [ ! -e "$GPU_CLUSTER_ROOT$EXPORTS" ]
}

@test "serve-nfs: options that do not squash root, or give clients more, are refused" {
  local options
  for options in rw,sync,no_root_squash rw,sync,root_squash,no_root_squash rw,sync \
    rw,root_squash,insecure rw,root_squash,anonuid=0 rw,root_squash,crossmnt; do
    export NFS_EXPORT_OPTIONS=$options
    run_script serve-nfs.sh
    assert_failure
    assert_output_contains "gpu-cluster: moscow: serve-nfs:" "NFS_EXPORT_OPTIONS"
  done
  [ "$(<"$STUB_CALLS")" = "" ]
  [ ! -e "$GPU_CLUSTER_ROOT$EXPORTS" ]
}

@test "serve-nfs: the snapshots' folders made by unsquashed root go to the squashed root, their files stay" {
  local r=${GPU_CLUSTER_ROOT:?}
  mkdir -p "$r/srv/nfs/gpu-cluster/gpu-cluster-backups/lab" "$r/srv/nfs/gpu-cluster/default-data-pvc"
  echo "snapshot" >"$r/srv/nfs/gpu-cluster/gpu-cluster-backups/lab/lab-1.enc"
  chown 0:0 "$r/srv/nfs/gpu-cluster/gpu-cluster-backups/lab/lab-1.enc" 2>/dev/null || true
  before="$(owner /srv/nfs/gpu-cluster/gpu-cluster-backups/lab/lab-1.enc)"
  claim="$(owner /srv/nfs/gpu-cluster/default-data-pvc)"
  run_script serve-nfs.sh
  assert_success
  [ "$(owner /srv/nfs/gpu-cluster/gpu-cluster-backups)" = "$ANON" ]
  [ "$(owner /srv/nfs/gpu-cluster/gpu-cluster-backups/lab)" = "$ANON" ]
  [ "$(owner /srv/nfs/gpu-cluster/gpu-cluster-backups/lab/lab-1.enc)" = "$before" ]
  [ "$(owner /srv/nfs/gpu-cluster/default-data-pvc)" = "$claim" ]
  assert_idempotent serve-nfs.sh
}

@test "serve-nfs el9: a Rocky Linux 9 controller serves NFS from nfs-utils' nfs-server, the same exports, once" {
  set_os_release rocky-9.4
  run_script serve-nfs.sh
  assert_success
  assert_called '^dnf -y --setopt=exit_on_lock=False install nfs-utils$'
  refute_called 'apt-get|dpkg-query'
  assert_file "$EXPORTS" "# Managed by gpu-cluster (serve-nfs); changes are overwritten.
# Shared storage of the cluster, exported to its nodes' addresses, root squashed.
\"/srv/nfs/gpu-cluster\" 192.168.10.11/32($OPTIONS) 192.168.10.12/32($OPTIONS)"
  assert_called '^systemctl enable --now nfs-server$'
  assert_idempotent serve-nfs.sh
}
