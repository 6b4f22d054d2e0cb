#!/usr/bin/env bats
# serve-nfs.sh: NFS server package, export folder, exports file, exportfs, service.

bats_require_minimum_version 1.5.0
load helpers

OPTIONS=rw,sync,no_subtree_check,no_root_squash
EXPORTS=/etc/exports.d/gpu-cluster.exports

setup() {
  setup_host
  export NFS_EXPORT_PATH=/srv/nfs/gpu-cluster NFS_CLIENT_CIDRS="192.168.10.0/24 10.244.0.0/16" \
    NFS_EXPORT_OPTIONS=$OPTIONS
}

# folder_snapshot PATH: type, mode and content hash of everything below host path PATH.
folder_snapshot() {
  (
    cd "${GPU_CLUSTER_ROOT:?}$1" || exit 1
    find . -printf '%p %y %m %U:%G\n' | LC_ALL=C sort
    find . -type f -exec sha256sum {} + | LC_ALL=C sort -k 2
  )
}

@test "serve-nfs: first run installs the server, creates the folder, exports it and starts the server" {
  run_script serve-nfs.sh
  assert_success
  assert_called "^dpkg-query -W -f=\\$\\{Status\\} nfs-kernel-server$"
  assert_called "^$APT "'update$'
  assert_called "^$APT "'install -y nfs-kernel-server$'
  [ -d "$GPU_CLUSTER_ROOT/srv/nfs/gpu-cluster" ]
  assert_mode /srv/nfs/gpu-cluster 755
  [ -z "$(ls -A "$GPU_CLUSTER_ROOT/srv/nfs/gpu-cluster")" ]
  assert_file "$EXPORTS" "# Managed by gpu-cluster (serve-nfs); changes are overwritten.
# Shared storage of the cluster, exported to the cluster networks.
\"/srv/nfs/gpu-cluster\" 192.168.10.0/24($OPTIONS) 10.244.0.0/16($OPTIONS)"
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
    "serving /srv/nfs/gpu-cluster over NFS to 192.168.10.0/24 10.244.0.0/16"
  [ ! -e "$GPU_CLUSTER_ROOT/var/lib/gpu-cluster/pending/exportfs" ]
}

@test "serve-nfs: a second run changes nothing and says so" {
  run_script serve-nfs.sh
  assert_success
  assert_idempotent serve-nfs.sh
  assert_output_contains "nfs-kernel-server is already installed" \
    "export folder /srv/nfs/gpu-cluster already exists; leaving it as it is" \
    "unchanged $EXPORTS" \
    "nfs-server is already enabled and running"
  refute_called '^exportfs'
}

@test "serve-nfs: an existing export folder keeps its mode, owner and content" {
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
  assert_output_contains "export folder /srv/nfs/gpu-cluster already exists; leaving it as it is"
  refute_output_contains "created export folder"
  [ "$(folder_snapshot /srv/nfs/gpu-cluster)" = "$before" ]
  assert_mode /srv/nfs/gpu-cluster 700
  assert_called '^exportfs -ra$'
}

@test "serve-nfs: a changed CIDR list rewrites the exports and re-exports without reinstalling" {
  run_script serve-nfs.sh
  assert_success
  echo "data" >"$GPU_CLUSTER_ROOT/srv/nfs/gpu-cluster/keep"
  reset_calls
  export NFS_CLIENT_CIDRS="192.168.10.0/24 10.244.0.0/16 198.51.100.0/24"
  run_script serve-nfs.sh
  assert_success
  assert_file "$EXPORTS" "# Managed by gpu-cluster (serve-nfs); changes are overwritten.
# Shared storage of the cluster, exported to the cluster networks.
\"/srv/nfs/gpu-cluster\" 192.168.10.0/24($OPTIONS) 10.244.0.0/16($OPTIONS) 198.51.100.0/24($OPTIONS)"
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

@test "serve-nfs: a folder with blanks is quoted and duplicate CIDRs are listed once" {
  export NFS_EXPORT_PATH="/srv/nfs/shared data" NFS_CLIENT_CIDRS=" 10.0.0.0/8  10.0.0.0/8 " \
    NFS_EXPORT_OPTIONS=ro,sync,root_squash,anonuid=65534
  run_script serve-nfs.sh
  assert_success
  [ -d "$GPU_CLUSTER_ROOT/srv/nfs/shared data" ]
  grep -qx '"/srv/nfs/shared data" 10.0.0.0/8(ro,sync,root_squash,anonuid=65534)' \
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
  [ "$status" -eq 1 ]
  assert_output_contains "gpu-cluster: moscow: serve-nfs: missing required environment variable(s): NFS_EXPORT_PATH NFS_CLIENT_CIDRS NFS_EXPORT_OPTIONS"
  [ "$(<"$STUB_CALLS")" = "" ]
}

@test "serve-nfs: missing and invalid inputs are all named at once" {
  local before
  before="$(snapshot_root)"
  unset NFS_EXPORT_OPTIONS
  export NFS_EXPORT_PATH=/srv/../etc \
    NFS_CLIENT_CIDRS="192.168.10.0/24 10.244.0.0 192.0.2.300/24 198.51.100.0/33 010.0.0.0/8 fd00::/8"
  run_script serve-nfs.sh
  [ "$status" -eq 1 ]
  [ "$(grep -c 'serve-nfs: ' <<<"$output")" -eq 1 ]
  assert_output_contains \
    "gpu-cluster: moscow: serve-nfs: missing required environment variable(s): NFS_EXPORT_OPTIONS; NFS_EXPORT_PATH must be an absolute folder path" \
    "got '/srv/../etc'" \
    "NFS_CLIENT_CIDRS has '10.244.0.0', which is not an IPv4 CIDR" \
    "NFS_CLIENT_CIDRS has '192.0.2.300/24'" \
    "NFS_CLIENT_CIDRS has '198.51.100.0/33'" \
    "NFS_CLIENT_CIDRS has '010.0.0.0/8'" \
    "NFS_CLIENT_CIDRS has 'fd00::/8'"
  refute_output_contains "'192.168.10.0/24'"
  [ "$(<"$STUB_CALLS")" = "" ]
  [ "$(snapshot_root)" = "$before" ]
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
  export NFS_CLIENT_CIDRS=192.168.10.0/24 NFS_EXPORT_OPTIONS='rw;reboot'
  run_script serve-nfs.sh
  [ "$status" -eq 1 ]
  assert_output_contains "got 'rw;reboot'"
  [ "$(<"$STUB_CALLS")" = "" ]
  [ ! -e "$GPU_CLUSTER_ROOT/srv" ]
}
