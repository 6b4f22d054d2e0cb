#!/usr/bin/env bats
# k0s/reset-node.sh: the delete step; safe to re-run, never touches shared data.

bats_require_minimum_version 1.5.0
load helpers

# Pod volumes below k0s's default kubelet root (workers installed without
# KUBELET_ROOT_DIR) and below the kubelet root the program passes now.
POD_VOLUMES=/var/lib/k0s/kubelet/pods/5f0c/volumes
KUBELET_POD_VOLUMES=/var/lib/kubelet/pods/7a1d/volumes

setup() {
  setup_host
  export KUBELET_ROOT_DIR=/var/lib/kubelet
}

# installed_worker: a running, joined k0s worker with pod volumes mounted below
# both kubelet roots, and a disk next to (not below) the kubelet root.
installed_worker() {
  local r=${GPU_CLUSTER_ROOT:?}
  mkdir -p "$r/usr/local/bin" "$r/etc/k0s" "$r/var/lib/k0s/kubelet" \
    "$r$KUBELET_POD_VOLUMES" "$r/var/lib/kubelet-backup"
  echo keep >"$r/var/lib/kubelet-backup/data"
  printf '#!/bin/sh\n# fake k0s v1.34.1+k0s.0\n' >"$r/usr/local/bin/k0s"
  echo "[Service]" >"$r/etc/systemd/system/k0sworker.service"
  echo token >"$r/etc/k0s/worker-token"
  printf 'worker\n--token-file\n/etc/k0s/worker-token\n' >"$r/etc/k0s/gpu-cluster-k0sworker.args"
  touch "$r/var/lib/k0s/kubelet.conf" "${STUB_STATE:?}/active-k0sworker"
  cat >>"$r/proc/mounts" <<EOF
192.0.2.50:/export/data $POD_VOLUMES/kubernetes.io~nfs/shared\\040data nfs4 rw,relatime 0 0
tmpfs $POD_VOLUMES/kubernetes.io~projected/kube-api-access tmpfs rw 0 0
/dev/sdb1 /var/lib/kubelet-backup ext4 rw,relatime 0 0
192.0.2.50:/export/models $KUBELET_POD_VOLUMES/kubernetes.io~nfs/models nfs4 rw,relatime 0 0
tmpfs $KUBELET_POD_VOLUMES/kubernetes.io~projected/kube-api-access tmpfs rw 0 0
EOF
}

@test "reset-node: is a no-op when k0s is not installed" {
  remove_stub k0s
  remember_root
  run_script k0s/reset-node.sh
  assert_success
  assert_output_contains "gpu-cluster: moscow: reset-node: k0s is not installed; nothing to reset"
  [ "$(<"$STUB_CALLS")" = "" ]
  assert_root_unchanged
}

@test "reset-node: stops k0s, detaches pod mounts, resets and cleans up" {
  installed_worker
  run_script k0s/reset-node.sh
  assert_success
  assert_called '^k0s stop$'
  assert_called "^umount $POD_VOLUMES/kubernetes\\.io~projected/kube-api-access\$"
  assert_called "^umount $POD_VOLUMES/kubernetes\\.io~nfs/shared data\$"
  assert_called "^umount $KUBELET_POD_VOLUMES/kubernetes\\.io~projected/kube-api-access\$"
  assert_called "^umount $KUBELET_POD_VOLUMES/kubernetes\\.io~nfs/models\$"
  assert_output_contains "changed: unmounted $KUBELET_POD_VOLUMES/kubernetes.io~nfs/models"
  refute_called '^umount /mnt/shared'
  refute_called '^umount /var/lib/kubelet-backup'
  assert_call_order '^k0s stop$' '^umount '
  assert_call_order '^umount ' '^k0s reset --kubelet-root-dir=/var/lib/kubelet$'
  refute_called '^k0s reset$'
  # Shared data and its fstab entry are untouched.
  grep -q '^192.0.2.50:/export/data /mnt/shared nfs4' "$GPU_CLUSTER_ROOT/proc/mounts"
  grep -q '^192.0.2.50:/export/data /mnt/shared nfs4' "$GPU_CLUSTER_ROOT/etc/fstab"
  refute_file_contains "$GPU_CLUSTER_ROOT/proc/mounts" ' /var/lib/kubelet/'
  grep -q '^/dev/sdb1 /var/lib/kubelet-backup ext4' "$GPU_CLUSTER_ROOT/proc/mounts"
  assert_file /var/lib/kubelet-backup/data keep
  [ ! -e "$GPU_CLUSTER_ROOT/var/lib/k0s" ]
  [ ! -e "$GPU_CLUSTER_ROOT/var/lib/kubelet" ]
  [ ! -e "$GPU_CLUSTER_ROOT/etc/k0s/worker-token" ]
  [ ! -e "$GPU_CLUSTER_ROOT/etc/k0s/gpu-cluster-k0sworker.args" ]
  assert_file /var/run/reboot-required '*** System restart required ***'
}

@test "reset-node: re-running the delete is safe" {
  installed_worker
  run_twice k0s/reset-node.sh
  assert_output_contains "no k0s service and no /var/lib/k0s; nothing to reset"
}

@test "reset-node: refuses to reset while something stays mounted below the data dir" {
  installed_worker
  export STUB_EXIT_UMOUNT=32
  run_script k0s/reset-node.sh
  [ "$status" -eq 1 ]
  assert_output_contains "gpu-cluster: moscow: reset-node: refusing to run k0s reset while these are still mounted below /var/lib/k0s or /var/lib/kubelet" \
    "$KUBELET_POD_VOLUMES/kubernetes.io~nfs/models"
  assert_called "^umount -l $POD_VOLUMES/kubernetes\\.io~nfs/shared data\$"
  assert_called "^umount -l $KUBELET_POD_VOLUMES/kubernetes\\.io~nfs/models\$"
  refute_called '^k0s reset'
  [ -e "$GPU_CLUSTER_ROOT/var/lib/k0s/kubelet.conf" ]
  [ -d "$GPU_CLUSTER_ROOT$KUBELET_POD_VOLUMES" ]
}

@test "reset-node: a mount that stays below the kubelet root alone blocks the reset" {
  installed_worker
  # umount succeeds for everything except the NFS volume below /var/lib/kubelet.
  export STUB_FAIL_CALL='^umount( -l)? /var/lib/kubelet/.*/models$'
  run_script k0s/reset-node.sh
  [ "$status" -eq 1 ]
  assert_output_contains "gpu-cluster: moscow: reset-node: warning: could not unmount $KUBELET_POD_VOLUMES/kubernetes.io~nfs/models" \
    "(it would delete their contents): $KUBELET_POD_VOLUMES/kubernetes.io~nfs/models"
  refute_called '^k0s reset'
  [ -d "$GPU_CLUSTER_ROOT$KUBELET_POD_VOLUMES" ]
}

@test "reset-node: without KUBELET_ROOT_DIR only k0s's own data dir is reset" {
  installed_worker
  unset KUBELET_ROOT_DIR
  run_script k0s/reset-node.sh
  assert_success
  assert_called '^k0s reset$'
  assert_called "^umount $POD_VOLUMES/kubernetes\\.io~nfs/shared data\$"
  refute_called '^umount /var/lib/kubelet'
  [ ! -e "$GPU_CLUSTER_ROOT/var/lib/k0s" ]
  [ -d "$GPU_CLUSTER_ROOT$KUBELET_POD_VOLUMES" ]
}

@test "reset-node: an unsafe KUBELET_ROOT_DIR is refused before anything runs" {
  installed_worker
  local dir
  remember_root
  for dir in / /var var/lib/kubelet /var/lib/../.. /var/lib/kubelet/ "/var/lib/kube let"; do
    export KUBELET_ROOT_DIR=$dir
    run_script k0s/reset-node.sh
    assert_refused "gpu-cluster: moscow: reset-node: KUBELET_ROOT_DIR must be an absolute path at least two levels deep" \
      "got '$dir'"
  done
  assert_root_unchanged
}

@test "reset-node: a stopped k0s is still reset" {
  installed_worker
  rm "$STUB_STATE/active-k0sworker"
  run_script k0s/reset-node.sh
  assert_success
  assert_output_contains "k0s was not running"
  assert_called '^k0s reset --kubelet-root-dir=/var/lib/kubelet$'
}

@test "reset-node: a failing k0s stop while k0s runs aborts before reset" {
  installed_worker
  export STUB_EXIT_K0S=1
  run_script k0s/reset-node.sh
  [ "$status" -eq 1 ]
  assert_output_contains "k0s stop failed while k0sworker is running"
  refute_called '^k0s reset'
}
