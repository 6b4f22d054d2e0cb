#!/usr/bin/env bats
# reboot-if-needed.sh and verify-boot.sh: a host that is not in the cluster yet reboots
# when its steps need it, SSH waits for it, and it joins only once it runs as prepared.

bats_require_minimum_version 1.5.0
load helpers

RULE='INPUT -p tcp --dport 22 -m conntrack --ctstate NEW -m comment --comment gpu-cluster-reboot -j REJECT --reject-with tcp-reset'

setup() {
  setup_host
  export SSH_PORT=22 REBOOT_TIMEOUT=900 NVIDIA_DRIVER_BRANCH=580 DISABLE_IOMMU=true \
    DISABLE_CPU_MITIGATIONS=false EXTRA_KERNEL_ARGS="" GPU_COUNT=2 \
    NODE_SERVICES="k0scontroller.service k0sworker.service"
}

reboot_required() {
  mkdir -p "$GPU_CLUSTER_ROOT/var/run"
  echo '*** System restart required ***' >"$GPU_CLUSTER_ROOT/var/run/reboot-required"
}

# reboot: what the reboot does to the fake host: a new boot id, /run emptied, the
# configured kernel arguments active, the NVIDIA driver loaded, the iptables rule gone.
reboot() {
  local args
  echo 9f0e8d7c-6b5a-4c3d-2e1f-0a9b8c7d6e5f >"$GPU_CLUSTER_ROOT/proc/sys/kernel/random/boot_id"
  rm -f "$GPU_CLUSTER_ROOT/var/run/reboot-required"
  # shellcheck disable=SC2016 # the drop-in's literal ${...}
  args="$(sed -n 's/^GRUB_CMDLINE_LINUX_DEFAULT="${GRUB_CMDLINE_LINUX_DEFAULT:-} \(.*\)"$/\1/p' \
    "$GPU_CLUSTER_ROOT/etc/default/grub.d/90-gpu-cluster.cfg" 2>/dev/null || true)"
  echo "BOOT_IMAGE=/vmlinuz-6.8.0-79-generic root=UUID=1b2c ro quiet splash $args" \
    >"$GPU_CLUSTER_ROOT/proc/cmdline"
  rm -rf "$GPU_CLUSTER_ROOT/sys/module/nouveau"
  mkdir -p "$GPU_CLUSTER_ROOT/sys/module/nvidia"
  echo 580.95.05 >"$STUB_STATE/nvidia-driver-version"
  : >"$STUB_STATE/iptables"
}

kernel_args_configured() {
  mkdir -p "$GPU_CLUSTER_ROOT/etc/default/grub.d"
  # shellcheck disable=SC2016 # the drop-in's literal ${...}
  printf '# Managed by gpu-cluster (prepare-host); changes are overwritten.\nGRUB_CMDLINE_LINUX_DEFAULT="${GRUB_CMDLINE_LINUX_DEFAULT:-} %s"\n' "$1" \
    >"$GPU_CLUSTER_ROOT/etc/default/grub.d/90-gpu-cluster.cfg"
}

@test "reboot-if-needed: nothing pending, nothing done" {
  run_script reboot-if-needed.sh
  assert_success
  assert_output_contains "gpu-cluster: moscow: reboot-if-needed: no reboot needed"
  assert_no_state_changes
}

@test "reboot-if-needed: a pending reboot holds off SSH, then reboots shortly after the step" {
  reboot_required
  run_script reboot-if-needed.sh
  assert_success
  assert_call_order "^iptables -I $RULE$" \
    "^systemd-run --unit=gpu-cluster-reboot-fallback --on-active=900s iptables -D $RULE$" \
    '^systemd-run --unit=gpu-cluster-reboot --on-active=2s systemctl reboot$'
  assert_file /var/lib/gpu-cluster/reboot/boot-id-before 6c1d2a5e-0b61-4c1e-9d3a-1f0e2b3c4d5e
  assert_output_contains "changed: rebooting in 2s"
  # It returned: the reboot comes after the program's session ended.
  refute_called '^systemctl reboot'
}

@test "reboot-if-needed: run again before the reboot, it schedules nothing more" {
  reboot_required
  run_twice reboot-if-needed.sh
  assert_output_contains "the reboot is already under way"
  [ "$(grep -c . "$STUB_STATE/iptables")" -eq 1 ]
}

@test "reboot-if-needed: a host already in the cluster is not rebooted, only warned about" {
  reboot_required
  mkdir -p "$GPU_CLUSTER_ROOT/etc/systemd/system"
  touch "$GPU_CLUSTER_ROOT/etc/systemd/system/k0sworker.service"
  run_script reboot-if-needed.sh
  assert_success
  assert_output_contains "warning: a reboot is pending (/var/run/reboot-required) but this host is in the cluster: drain it (kubectl drain moscow --ignore-daemonsets)"
  assert_no_state_changes
}

@test "reboot-if-needed: an RKE2 node, its unit where RKE2's tarball install puts it, is not rebooted" {
  export NODE_SERVICES="rke2-server.service rke2-agent.service"
  reboot_required
  mkdir -p "$GPU_CLUSTER_ROOT/usr/local/lib/systemd/system"
  touch "$GPU_CLUSTER_ROOT/usr/local/lib/systemd/system/rke2-agent.service"
  run_script reboot-if-needed.sh
  assert_success
  assert_output_contains "but this host is in the cluster: drain it"
  assert_no_state_changes
}

@test "reboot-if-needed: another distribution's unit does not make the host a node" {
  export NODE_SERVICES="rke2-server.service rke2-agent.service"
  reboot_required
  touch "$GPU_CLUSTER_ROOT/etc/systemd/system/k0sworker.service"
  run_script reboot-if-needed.sh
  assert_success
  assert_called '^systemd-run '
}

@test "reboot-if-needed: inputs are checked, all at once" {
  export SSH_PORT=99999 REBOOT_TIMEOUT=5 NODE_SERVICES="k0sworker.service; reboot"
  run_script reboot-if-needed.sh
  assert_failure
  assert_output_contains "SSH_PORT is not a port number: '99999'" \
    "REBOOT_TIMEOUT is not a number of seconds (10 or more): '5'" \
    "NODE_SERVICES is not a list of systemd service names: 'k0sworker.service; reboot'"
}

@test "verify-boot: after the reboot the host runs as prepared" {
  kernel_args_configured "intel_iommu=off amd_iommu=off"
  reboot_required
  run_script reboot-if-needed.sh
  assert_success
  reboot
  reset_calls
  run_script verify-boot.sh
  assert_success
  assert_output_contains "gpu-cluster: moscow: verify-boot: the host rebooted" \
    "boot verified: kernel arguments active (intel_iommu=off amd_iommu=off), 2 GPUs answer"
  [ ! -e "$GPU_CLUSTER_ROOT/var/lib/gpu-cluster/reboot/boot-id-before" ]
  assert_idempotent verify-boot.sh
}

@test "verify-boot: a host that did not reboot fails the step, naming it" {
  reboot_required
  run_script reboot-if-needed.sh
  assert_success
  run_script verify-boot.sh
  assert_failure
  assert_output_contains "gpu-cluster: moscow: verify-boot: the host was to reboot but has not (boot id 6c1d2a5e-0b61-4c1e-9d3a-1f0e2b3c4d5e unchanged)"
}

@test "verify-boot: missing kernel arguments, nouveau and a silent driver are all named" {
  kernel_args_configured "intel_iommu=off amd_iommu=off"
  mkdir -p "$GPU_CLUSTER_ROOT/sys/module/nouveau"
  run_script verify-boot.sh
  assert_failure
  assert_output_contains "the kernel runs without the configured arguments: intel_iommu=off amd_iommu=off; the nouveau driver is loaded; nvidia-smi fails: NVIDIA-SMI has failed"
}

@test "verify-boot: a GPU missing from nvidia-smi fails the step" {
  reboot
  export STUB_GPU_COUNT=1
  run_script verify-boot.sh
  assert_failure
  assert_output_contains "nvidia-smi lists 1 GPUs, not 2"
}

@test "verify-boot: while a reboot is still pending (reboots left to the user) it only warns" {
  reboot_required
  run_script verify-boot.sh
  assert_success
  assert_output_contains "warning: a reboot is still pending (/var/run/reboot-required)"
}

@test "verify-boot: a host without GPUs is not asked for a driver" {
  export GPU_COUNT=0
  run_script verify-boot.sh
  assert_success
  refute_called '^nvidia-smi'
}

@test "verify-boot: an NVSwitch host without Fabric Manager running fails the step" {
  reboot
  add_pci_device 0000:05:00.0 0x10de 0x068000 # an NVSwitch
  run_script verify-boot.sh
  assert_failure
  assert_output_contains "nvidia-fabricmanager.service is not running: CUDA cannot use the GPUs of an NVSwitch system"
  touch "$STUB_STATE/active-nvidia-fabricmanager.service"
  run_script verify-boot.sh
  assert_success
}

@test "verify-boot: Fabric Manager is not asked for without NVSwitches, or when told so" {
  reboot
  run_script verify-boot.sh
  assert_success
  add_pci_device 0000:05:00.0 0x10de 0x068000
  export NVSWITCH=false
  run_script verify-boot.sh
  assert_success
}
