#!/usr/bin/env bats
# A changed host setting on a worker already in the cluster (the NVIDIA driver branch, the
# container toolkit, kernel arguments): drain-node with HOST_SETTINGS (its drain-host
# step) drains it from the controller, reboot-if-needed reboots it while it is drained,
# verify-boot checks the driver branch, uncordon-node uncordons it and records the settings.

bats_require_minimum_version 1.5.0
load helpers
load helpers/upgrade

OLD='nvidia-driver=570,container-toolkit=1.17.8-1,kernel-args=a31b8c7292b5'
NEW='nvidia-driver=580,container-toolkit=1.19.1-1,kernel-args=a31b8c7292b5'

setup() {
  setup_host
  rke2_admin_kubectl
  export MAX_UNAVAILABLE=1 SLOT_WAIT_TIMEOUT=30 DRAIN_TIMEOUT=120 NODE_READY_TIMEOUT=300
  export NODE_NAME=kazan STUB_NODES="kazan tokyo" HOST_SETTINGS=$NEW REBOOT_WHEN_NEEDED=true
  # reboot-if-needed and verify-boot on the worker.
  export SSH_PORT=22 REBOOT_TIMEOUT=900 NVIDIA_DRIVER_BRANCH=580 GPU_COUNT=2 \
    NODE_SERVICES="rke2-server.service rke2-agent.service" CHECK_DRIVER_BRANCH=true \
    NODE_KUBECTL="/var/lib/rancher/rke2/bin/kubectl --kubeconfig /var/lib/rancher/rke2/agent/kubelet.kubeconfig"
}

prepared_with() {
  printf '%s' "$2" >"$STUB_STATE/settings-$1"
}

# joined_worker_with_driver VERSION: an RKE2 agent whose NVIDIA driver VERSION is loaded
# and whose newer packages wait for a reboot (install-nvidia ran).
joined_worker_pending_reboot() {
  mkdir -p "$GPU_CLUSTER_ROOT/usr/local/lib/systemd/system" "$GPU_CLUSTER_ROOT/sys/module/nvidia"
  touch "$GPU_CLUSTER_ROOT/usr/local/lib/systemd/system/rke2-agent.service"
  echo 570.172.08 >"$GPU_CLUSTER_ROOT/sys/module/nvidia/version"
  echo 580.95.05 >"$STUB_STATE/nvidia-driver-version"
  echo '*** System restart required ***' >"$GPU_CLUSTER_ROOT/var/run/reboot-required"
}

# reboot: the fake host after its reboot: a new boot id, the new driver loaded.
reboot() {
  echo 9f0e8d7c-6b5a-4c3d-2e1f-0a9b8c7d6e5f >"$GPU_CLUSTER_ROOT/proc/sys/kernel/random/boot_id"
  rm -f "$GPU_CLUSTER_ROOT/var/run/reboot-required"
  cp "$STUB_STATE/nvidia-driver-version" "$GPU_CLUSTER_ROOT/sys/module/nvidia/version"
  : >"$STUB_STATE/iptables"
}

# run_reboot_step: reboot-if-needed as a worker gets it over SSH, with upgrade/lib.sh.
run_reboot_step() {
  run bash -c 'source "$1/upgrade/lib.sh" && source "$1/reboot-if-needed.sh"' _ "$SCRIPTS_DIR"
}

@test "drain-host: a node prepared with other host settings is drained in a slot" {
  prepared_with kazan "$OLD"
  run_script upgrade/drain-node.sh
  assert_success
  assert_call_order "$ADMIN get --raw=/readyz" "$ADMIN annotate node kazan --overwrite gpu-cluster\\.io/upgrading-to=$NEW gpu-cluster\\.io/upgrade-failed-$"
  assert_call_order "$ADMIN annotate node kazan " \
    "$ADMIN drain kazan --ignore-daemonsets --delete-emptydir-data --timeout=120s$"
  assert_output_contains "draining node kazan (prepared with $OLD) for its host settings $NEW" \
    "gpu-cluster: moscow: drain-node: changed: drained node kazan"
  # The settings are recorded once the node is back (uncordon-node), not before.
  assert_marks kazan "$NEW||$OLD"
}

@test "drain-host: a node without the annotation (joined before it existed) is recorded, not drained" {
  run_script upgrade/drain-node.sh
  assert_success
  assert_output_contains "node kazan has no gpu-cluster.io/host-settings yet" \
    "taken as prepared with $NEW, recorded, not drained"
  refute_called ' drain |upgrading-to'
  assert_marks kazan "||$NEW"
  reset_calls
  run_script upgrade/drain-node.sh
  assert_success
  assert_output_contains "unchanged: node kazan was prepared with $NEW; not drained"
  refute_called ' (drain|annotate) '
}

@test "drain-host: a new cluster or a new host has nothing to drain" {
  rm -f "$GPU_CLUSTER_ROOT/var/lib/rancher/rke2/bin/kubectl"
  run_script upgrade/drain-node.sh
  assert_success
  assert_output_contains "the controller is not installed yet: no node kazan to drain"
  rke2_kubectl_installed
  STUB_NODES=tokyo run_script upgrade/drain-node.sh
  assert_success
  assert_output_contains "node kazan is not registered yet: nothing to drain"
  refute_called ' (drain|annotate) '
}

@test "drain-host: with tuning.rebootWhenNeeded false it refuses, changing nothing" {
  prepared_with kazan "$OLD"
  REBOOT_WHEN_NEEDED=false run_script upgrade/drain-node.sh
  assert_failure
  assert_output_contains "gpu-cluster: moscow: drain-node: node kazan was prepared with $OLD; the config wants $NEW" \
    "tuning.rebootWhenNeeded is false; nothing was changed" \
    "kubectl annotate node kazan --overwrite gpu-cluster.io/host-settings='$NEW'"
  refute_drained kazan "||$OLD"
}

@test "drain-host: a failed drain stops the rollout; the next node's drain refuses, naming it" {
  prepared_with kazan "$OLD"
  prepared_with tokyo "$OLD"
  STUB_PDB_PODS=ml/trainer-0 run_script upgrade/drain-node.sh
  assert_failure
  local why="could not drain node kazan: ml/trainer-0: a PodDisruptionBudget allowed no eviction within 120s (Cannot evict pod as it would violate the pod's disruption budget.)"
  assert_output_contains "gpu-cluster: moscow: drain-node: $why"
  assert_marks kazan "$NEW|drain-node: $why|$OLD"
  reset_calls
  export MAX_UNAVAILABLE=2
  NODE_NAME=tokyo run_script upgrade/drain-node.sh
  assert_failure
  assert_output_contains "refusing to start the upgrade of node tokyo: node(s) failed theirs: kazan (drain-node: $why)"
  refute_drained tokyo "||$OLD"
}

@test "drain-host: inputs are checked, all at once" {
  HOST_SETTINGS='driver=580; reboot' KUBERNETES_VERSION=v1.37.0+rke2r1 run_script upgrade/drain-node.sh
  assert_failure
  assert_output_contains "KUBERNETES_VERSION and HOST_SETTINGS are one step each, not both" \
    "HOST_SETTINGS must be KEY=VALUE pairs joined by commas, got 'driver=580; reboot'"
}

@test "reboot-if-needed: a joined worker drained for its upgrade is rebooted" {
  joined_worker_pending_reboot
  printf '%s' "$NEW" >"$STUB_STATE/annotation-kazan"
  STUB_NODE_UNSCHEDULABLE=true run_reboot_step
  assert_success
  assert_called '^kubectl --kubeconfig /var/lib/rancher/rke2/agent/kubelet.kubeconfig get node kazan -o jsonpath=\{\.spec\.unschedulable\}$'
  assert_called '^systemd-run --unit=gpu-cluster-reboot --on-active=2s systemctl reboot$'
  assert_output_contains "changed: rebooting in 2s"
}

@test "reboot-if-needed: a joined worker not drained (or cordoned by an admin) is only warned about" {
  joined_worker_pending_reboot
  run_reboot_step
  assert_success
  assert_output_contains "but this host is in the cluster: drain it"
  assert_no_state_changes
  # Cordoned, but not for an upgrade: no slot.
  STUB_NODE_UNSCHEDULABLE=true run_reboot_step
  assert_success
  assert_output_contains "but this host is in the cluster: drain it"
  assert_no_state_changes
  # Without NODE_KUBECTL (the boot of an EC2 instance, the controller) as before.
  printf '%s' "$NEW" >"$STUB_STATE/annotation-kazan"
  STUB_NODE_UNSCHEDULABLE=true NODE_KUBECTL= run_reboot_step
  assert_success
  assert_output_contains "but this host is in the cluster: drain it"
  assert_no_state_changes
}

@test "reboot-if-needed: a joined worker whose node cannot be read is not rebooted, and says so" {
  joined_worker_pending_reboot
  STUB_FAIL_CALL='kubelet.kubeconfig get node' run_reboot_step
  assert_failure
  assert_output_contains "gpu-cluster: moscow: reboot-if-needed: a reboot is pending but whether node kazan is drained cannot be read from the API"
  assert_no_state_changes
}

@test "verify-boot: the loaded driver must be of the wanted branch" {
  joined_worker_pending_reboot
  rm -f "$GPU_CLUSTER_ROOT/var/run/reboot-required"
  echo 570.172.08 >"$STUB_STATE/nvidia-driver-version"
  run_script verify-boot.sh
  assert_failure
  assert_output_contains "gpu-cluster: moscow: verify-boot: the loaded NVIDIA driver is 570.172.08, not of branch 580"
  # An image's own driver (boot user data, CHECK_DRIVER_BRANCH unset) is not held to it.
  CHECK_DRIVER_BRANCH= run_script verify-boot.sh
  assert_success
}

@test "drain-host, reboot, verify-boot, uncordon-node: the new branch, then a second run changes nothing" {
  prepared_with kazan "$OLD"
  joined_worker_pending_reboot
  run_script upgrade/drain-node.sh
  assert_success
  STUB_NODE_UNSCHEDULABLE=true run_reboot_step
  assert_success
  assert_called 'systemctl reboot$'
  reboot
  run_script verify-boot.sh
  assert_success
  assert_output_contains "the host rebooted" "boot verified"
  run_script upgrade/uncordon-node.sh
  assert_success
  assert_called "$ADMIN uncordon kazan"
  assert_output_contains "changed: recorded node kazan's host settings: $NEW" \
    "changed: node kazan is Ready at $NEW and uncordoned"
  assert_marks kazan "||$NEW"
  [ ! -e "$STUB_STATE/cordoned-kazan" ]
  reset_calls
  run_script upgrade/drain-node.sh
  assert_success
  run_reboot_step
  assert_success
  run_script verify-boot.sh
  assert_success
  run_script upgrade/uncordon-node.sh
  assert_success
  refute_changes_logged
  refute_called ' (drain|annotate|uncordon) |^systemd-run'
}

@test "uncordon-node: a new host's node gets its host settings recorded once Ready" {
  run_script upgrade/uncordon-node.sh
  assert_success
  assert_output_contains "changed: recorded node kazan's host settings: $NEW"
  refute_called ' uncordon '
  assert_marks kazan "||$NEW"
}
