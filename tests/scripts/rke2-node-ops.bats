#!/usr/bin/env bats
# rke2/reset-node.sh, and node/remove-node.sh and node/admit-node.sh with RKE2's kubectl.

bats_require_minimum_version 1.5.0
load helpers
load helpers/node-ops

setup() {
  setup_host
}

# rke2_installed: what the tarball and a started RKE2 leave on the host.
rke2_installed() {
  local r=$GPU_CLUSTER_ROOT
  mkdir -p "$r/usr/local/bin" "$r/etc/rancher/rke2" "$r/var/lib/rancher/rke2/server" \
    "$r/var/lib/kubelet/pods"
  printf '#!/bin/sh\n' >"$r/usr/local/bin/rke2-uninstall.sh"
  printf 'token-file: /etc/rancher/rke2/agent-token\n' >"$r/etc/rancher/rke2/config.yaml"
  touch "$STUB_STATE/active-rke2-agent"
}

@test "reset-node: kills RKE2, then uninstalls it" {
  rke2_installed
  nvidia_driver_loaded 580.95.05
  run_script rke2/reset-node.sh
  assert_success
  assert_call_order '^rke2-killall\.sh$' '^rke2-uninstall\.sh$'
  [ ! -e "$GPU_CLUSTER_ROOT/var/lib/rancher/rke2" ]
  [ ! -e "$GPU_CLUSTER_ROOT/etc/rancher/rke2" ]
  refute_gpu_detached
  assert_idempotent rke2/reset-node.sh
  assert_output_contains "RKE2 is not installed; nothing to reset"
}

@test "reset-node: shares mounted below the kubelet root are detached first" {
  rke2_installed
  printf '%s\n' '192.0.2.50:/export/data /var/lib/kubelet/pods/abc/volumes/kubernetes.io~nfs/data nfs4 rw 0 0' \
    >>"$GPU_CLUSTER_ROOT/proc/mounts"
  run_script rke2/reset-node.sh
  assert_success
  assert_call_order '^umount /var/lib/kubelet/pods/abc/volumes/kubernetes\.io~nfs/data$' '^rke2-uninstall\.sh$'
}

@test "reset-node: refuses to uninstall while a share stays mounted below the data dir" {
  rke2_installed
  printf '%s\n' '192.0.2.50:/export/data /var/lib/rancher/rke2/storage/pvc-1 nfs4 rw 0 0' \
    >>"$GPU_CLUSTER_ROOT/proc/mounts"
  export STUB_EXIT_UMOUNT=32
  run_script rke2/reset-node.sh
  assert_failure
  assert_output_contains "reset-node: refusing to run rke2-uninstall.sh while these are still mounted" \
    "/var/lib/rancher/rke2/storage/pvc-1"
  refute_called '^rke2-uninstall\.sh'
  [ -d "$GPU_CLUSTER_ROOT/var/lib/rancher/rke2" ]
}

@test "reset-node: a data dir without the uninstall script is reported" {
  mkdir -p "$GPU_CLUSTER_ROOT/var/lib/rancher/rke2"
  run_script rke2/reset-node.sh
  assert_failure
  assert_output_contains "reset-node: /var/lib/rancher/rke2 exists but /usr/local/bin/rke2-uninstall.sh does not"
}

@test "remove-node: drains and deletes the node with RKE2's kubectl and admin kubeconfig" {
  rke2_controller
  check_remove_drains_and_deletes
}

@test "remove-node: a gone node is a no-op" {
  rke2_controller
  check_remove_absent_node
}

@test "remove-node: a gone server is a no-op" {
  rke2_controller
  check_remove_without_controller
}

@test "admit-node: waits for the node to register and be Ready" {
  rke2_controller
  check_admit_ready
}

# The RuntimeClasses RKE2's rke2-runtimeclasses chart installs: rancher/rke2-charts
# packages/rke2-runtimeclasses (tests/stacks/fixtures/rke2-runtimeclasses.yaml).
@test "wait-for-runtime-class: waits until RKE2's chart has installed its nvidia RuntimeClass" {
  rke2_kubectl_installed
  export RUNTIME_CLASS=nvidia CHART_RELEASE=rke2-runtimeclasses WAIT_TIMEOUT=60 \
    STUB_RUNTIMECLASS_RELEASE=rke2-runtimeclasses STUB_RUNTIMECLASS_AFTER=3
  run_script rke2/wait-for-runtime-class.sh
  assert_success
  assert_called '^kubectl --kubeconfig .*/etc/rancher/rke2/rke2\.yaml get runtimeclass nvidia -o jsonpath=\{\.metadata\.annotations\.meta\\\.helm\\\.sh/release-name\}$'
  [ "$(grep -c 'get runtimeclass nvidia' "$STUB_CALLS")" -eq 3 ]
  assert_output_contains "ready: RuntimeClass nvidia from RKE2's rke2-runtimeclasses chart" \
    "RuntimeClass nvidia is RKE2's (rke2-runtimeclasses chart); its scheduling is patched next"
  assert_no_state_changes
}

@test "wait-for-runtime-class: another owner's RuntimeClass or none fails, naming the chart" {
  rke2_kubectl_installed
  export RUNTIME_CLASS=nvidia CHART_RELEASE=rke2-runtimeclasses WAIT_TIMEOUT=4 \
    STUB_RUNTIMECLASS_RELEASE=""
  run_script rke2/wait-for-runtime-class.sh
  assert_failure
  assert_output_contains "RuntimeClass nvidia is not (yet) the rke2-runtimeclasses chart's (its release: none)" \
    "gpu-cluster: moscow: wait-for-runtime-class: RKE2 has not installed its rke2-runtimeclasses chart: \`kubectl -n kube-system get helmchart rke2-runtimeclasses\` and the job helm-install-rke2-runtimeclasses say why"
  unset STUB_RUNTIMECLASS_RELEASE
  run_script rke2/wait-for-runtime-class.sh
  assert_failure
  assert_output_contains 'runtimeclasses.node.k8s.io "nvidia" not found'
  export RUNTIME_CLASS='nvidia;id'
  run_script rke2/wait-for-runtime-class.sh
  assert_failure
  assert_output_contains "RUNTIME_CLASS and CHART_RELEASE must be object names"
}
