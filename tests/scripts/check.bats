#!/usr/bin/env bats
# The `check` action of step envelopes (check/lib.sh and check/<script>), run as the doctor
# runs it: the envelope the program renders, on stdin of `bash -s -- check`. In sync: exit 0
# and no drift; drifted: exit 3 and `drift:` lines naming what; either way nothing changed.

bats_require_minimum_version 1.5.0
load helpers
load helpers/envelopes

setup() {
  setup_envelope
}

# render STEP SCRIPT NAME=VALUE...: the program's envelope of SCRIPT for host moscow.
render() {
  "$PYTHON" "$TESTS_DIR/render_envelope.py" moscow "$@" >"$ENVELOPE"
}

# check_changes_nothing: runs `check`, and the fake root and the stubs' state are the same
# afterwards and no state-changing command was called.
check_changes_nothing() {
  local before after
  before="$(snapshot_root; cd "$STUB_STATE" && find . -type f ! -name calls.log -exec sha256sum {} + | sort -k 2)"
  reset_calls
  run_envelope check --separate-stderr
  after="$(snapshot_root; cd "$STUB_STATE" && find . -type f ! -name calls.log -exec sha256sum {} + | sort -k 2)"
  if [[ "$before" != "$after" ]]; then
    printf 'the check changed the host:\n%s\n' "$(diff <(echo "$before") <(echo "$after"))" >&2
    return 1
  fi
  assert_no_state_changes
}

assert_in_sync() {
  if [[ "$status" -ne 0 || "$output" == *drift:* ]]; then
    printf 'expected in sync (exit 0, no drift), got %s:\n%s\nstderr:\n%s\n' "$status" \
      "$output" "$stderr" >&2
    return 1
  fi
}

assert_drifted() {
  if [[ "$status" -ne 3 ]]; then
    printf 'expected drift (exit 3), got %s:\n%s\nstderr:\n%s\n' "$status" "$output" "$stderr" >&2
    return 1
  fi
  assert_output_contains "$@"
}

prepare_host() {
  render prepare-host prepare-host.sh DISABLE_IOMMU=true DISABLE_CPU_MITIGATIONS=false \
    EXTRA_KERNEL_ARGS=pci=realloc INOTIFY_MAX_USER_INSTANCES=8192 \
    INOTIFY_MAX_USER_WATCHES=1048576 INSTALL_NFS_CLIENT=true "$@"
}

# prepared_host: prepare-host's create has run and the host rebooted into its arguments.
prepared_host() {
  prepare_host "$@"
  run_envelope create --separate-stderr
  assert_success
  echo "BOOT_IMAGE=/vmlinuz root=UUID=1b2c ro quiet intel_iommu=off amd_iommu=off pci=realloc" \
    >"$GPU_CLUSTER_ROOT/proc/cmdline"
  rm -f "$GPU_CLUSTER_ROOT/var/run/reboot-required"
}

@test "check: prepare-host in sync exits 0, reports nothing and changes nothing, twice" {
  prepared_host
  check_changes_nothing
  assert_in_sync
  [[ "$stderr" == *"prepare-host: in sync with the config"* ]]
  check_changes_nothing
  assert_in_sync
}

@test "check: a sysctl file changed by hand is drift, named with its lines; nothing changed" {
  prepared_host
  sed -i 's/^fs.inotify.max_user_watches = .*/fs.inotify.max_user_watches = 8192/' \
    "$GPU_CLUSTER_ROOT/etc/sysctl.d/90-gpu-cluster.conf"
  check_changes_nothing
  assert_drifted "drift: /etc/sysctl.d/90-gpu-cluster.conf differs from what the step writes" \
    "drift:   /etc/sysctl.d/90-gpu-cluster.conf: - fs.inotify.max_user_watches = 8192" \
    "drift:   /etc/sysctl.d/90-gpu-cluster.conf: + fs.inotify.max_user_watches = 1048576" \
    "drift: the step would run: sysctl --system"
}

@test "check: a live sysctl set by hand is drift although the file is as written" {
  prepared_host
  STUB_CALLS=/dev/null "$BATS_TEST_TMPDIR/bin/sysctl" -w fs.inotify.max_user_instances=128
  check_changes_nothing
  assert_drifted "drift: sysctl fs.inotify.max_user_instances is 128 in the kernel, not 8192"
  refute_output_contains "90-gpu-cluster.conf"
}

@test "check: a kernel argument configured but not active, and one not configured, are drift" {
  prepared_host
  echo "BOOT_IMAGE=/vmlinuz root=UUID=1b2c ro intel_iommu=off amd_iommu=off" \
    >"$GPU_CLUSTER_ROOT/proc/cmdline"
  check_changes_nothing
  assert_drifted "drift: kernel arguments not active in the running kernel: pci=realloc"
  refute_output_contains "grub.d"

  prepare_host EXTRA_KERNEL_ARGS="pci=realloc iommu=pt"
  check_changes_nothing
  assert_drifted "drift: /etc/default/grub.d/90-gpu-cluster.cfg differs from what the step writes" \
    "the step would run: update-grub" "not active in the running kernel: pci=realloc iommu=pt"
}

@test "check: prepare-host on Rocky Linux 9 in sync; an argument taken off the boot entries is drift" {
  set_os_release rocky-9.4
  mkdir -p "$GPU_CLUSTER_ROOT/etc/kernel"
  echo "root=UUID=1b2c ro quiet" >"$GPU_CLUSTER_ROOT/etc/kernel/cmdline"
  prepared_host
  check_changes_nothing
  assert_in_sync
  # An administrator's grub2-mkconfig --update-bls-cmdline, or a hand edit, drops them.
  STUB_CALLS=/dev/null "$BATS_TEST_TMPDIR/bin/grubby" --update-kernel=ALL --remove-args=pci=realloc
  check_changes_nothing
  assert_drifted "drift: the step would run: grubby --update-kernel=ALL --args=intel_iommu=off amd_iommu=off pci=realloc"
}

@test "check: swap back on and a module unloaded are drift; nothing changed" {
  prepared_host
  printf 'Filename Type Size Used Priority\n/swap.img file 4194300 0 -2\n' \
    >"$GPU_CLUSTER_ROOT/proc/swaps"
  rmdir "$GPU_CLUSTER_ROOT/sys/module/br_netfilter"
  check_changes_nothing
  assert_drifted "drift: swap is on (the step would run: swapoff -a)" \
    "drift: kernel module br_netfilter is not loaded (the step would run: modprobe br_netfilter)"
}

install_nvidia() {
  render install-nvidia install-nvidia.sh INSTALL_DRIVER=true NVSWITCH=auto \
    NVIDIA_DRIVER_BRANCH=580 NVIDIA_CONTAINER_TOOLKIT_VERSION=1.19.1-1 \
    NVIDIA_REPO_KEY_FINGERPRINT=C95B321B61E88C1809C4F759DDCAE044F796ECB0 \
    NVIDIA_CUDA_REPO_KEY_FINGERPRINT=610C7B14E068A878070DA4E99CD0A493D42D0685 \
    CONTAINERD_DROPIN_PATH=/etc/k0s/containerd.d/nvidia.toml \
    CONTAINERD_DROPIN_CONTENT=$'version = 3\n[plugins."io.containerd.cri.v1.runtime".containerd.runtimes.nvidia]\n  runtime_type = "io.containerd.runc.v2"' \
    "$@"
}

@test "check: install-nvidia in sync exits 0 and changes nothing, twice" {
  install_nvidia
  run_envelope create --separate-stderr
  assert_success
  check_changes_nothing
  assert_in_sync
  check_changes_nothing
  assert_in_sync
}

@test "check: a driver of another branch is drift; nothing is installed" {
  install_nvidia
  run_envelope create --separate-stderr
  assert_success
  install_nvidia NVIDIA_DRIVER_BRANCH=570
  check_changes_nothing
  assert_drifted "drift: NVIDIA driver 580.95.05 is loaded, not branch 570" \
    "drift: the step would run: apt-get install -y --allow-change-held-packages nvidia-headless-570-server nvidia-utils-570-server"
}

@test "check: install-nvidia on Rocky Linux 9 in sync exits 0 and changes nothing" {
  set_os_release rocky-9.4
  install_nvidia
  run_envelope create --separate-stderr
  assert_success
  check_changes_nothing
  assert_in_sync
}

@test "check: on an enforcing Rocky Linux 9 host, container_use_devices turned off and container-selinux removed are drift" {
  set_os_release rocky-9.4
  export STUB_SELINUX=Enforcing
  install_nvidia
  run_envelope create --separate-stderr
  assert_success
  check_changes_nothing
  assert_in_sync
  rm "$STUB_STATE/sebool-container_use_devices"
  check_changes_nothing
  assert_drifted "drift: the step would run: setsebool -P container_use_devices on"
  prepared_host
  check_changes_nothing
  assert_in_sync
  rm "$STUB_STATE/rpm/container-selinux"
  check_changes_nothing
  assert_drifted "container-selinux"
}

@test "check: on Rocky Linux 9 a toolkit no longer locked at its version is drift" {
  set_os_release rocky-9.4
  install_nvidia
  run_envelope create --separate-stderr
  assert_success
  sed -i '/^libnvidia-container1-/d' "$GPU_CLUSTER_ROOT/etc/dnf/plugins/versionlock.list"
  check_changes_nothing
  assert_drifted "drift: the step would run: dnf versionlock add libnvidia-container1"
}

@test "check: on Rocky Linux 9 another driver branch is drift: the module stream it would switch to" {
  set_os_release rocky-9.4
  install_nvidia
  run_envelope create --separate-stderr
  assert_success
  install_nvidia NVIDIA_DRIVER_BRANCH=570
  check_changes_nothing
  assert_drifted "drift: the step would run: dnf versionlock delete kmod-nvidia-open-dkms nvidia-driver-cuda nvidia-open" \
    "drift: the step would run: dnf module switch-to nvidia-driver:570-open --allowerasing" \
    "drift: the step would run: dnf install nvidia-open"
}

@test "check: a missing containerd runtime drop-in is drift, named" {
  install_nvidia
  run_envelope create --separate-stderr
  assert_success
  rm "$GPU_CLUSTER_ROOT/etc/k0s/containerd.d/nvidia.toml"
  check_changes_nothing
  assert_drifted "drift: /etc/k0s/containerd.d/nvidia.toml is missing"
}

@test "check: the toolkit honouring NVIDIA_VISIBLE_DEVICES again is drift; nothing changed" {
  install_nvidia
  run_envelope create --separate-stderr
  assert_success
  sed -i 's/^accept-nvidia-visible-devices-envvar-when-unprivileged = false/accept-nvidia-visible-devices-envvar-when-unprivileged = true/' \
    "$GPU_CLUSTER_ROOT/etc/nvidia-container-runtime/config.toml"
  check_changes_nothing
  assert_drifted "drift: /etc/nvidia-container-runtime/config.toml differs"
}

@test "check: a Fabric Manager stopped on an HGX host is drift" {
  add_nvswitches 6
  install_nvidia
  run_envelope create --separate-stderr
  assert_success
  STUB_CALLS=/dev/null "$BATS_TEST_TMPDIR/bin/systemctl" stop nvidia-fabricmanager.service
  check_changes_nothing
  assert_drifted "drift: the step would run: systemctl start nvidia-fabricmanager.service" \
    "nvidia-fabricmanager.service is not running"
}

route_to_vpc() {
  render route-to-vpc route-to-vpc.sh VPC_CIDR=10.20.0.0/16 GATEWAY_ADDRESS=192.168.2.4 \
    TUNNEL_CIDR=10.8.0.0/24
}

@test "check: route-to-vpc in sync exits 0; a missing route is drift; nothing changed" {
  route_to_vpc
  run_envelope create --separate-stderr
  assert_success
  check_changes_nothing
  assert_in_sync

  STUB_CALLS=/dev/null "$BATS_TEST_TMPDIR/bin/ip" route del 10.8.0.0/24 via 192.168.2.4
  check_changes_nothing
  assert_drifted "drift: the step would run: systemctl restart gpu-cluster-route-vpc" \
    "drift: gpu-cluster-route-vpc is active but there is no route to 10.8.0.0/24 via 192.168.2.4"
  [ "$(grep -c 10.8.0.0 "$STUB_STATE/routes" || true)" = 0 ]
}

@test "check: route-to-vpc on EL9 in sync exits 0; a route gone from the profile is drift; nothing changed" {
  set_os_release rocky-9.4
  export STUB_IP_OUTPUT="2: eth0    inet 192.168.2.10/24 brd 192.168.2.255 scope global noprefixroute eth0\       valid_lft forever preferred_lft forever"
  nm_profile eth0 5fb06bd0-0bb0-7ffb-45f1-d6edd65f3e03 "System eth0"
  route_to_vpc
  run_envelope create --separate-stderr
  assert_success
  check_changes_nothing
  assert_in_sync

  STUB_CALLS=/dev/null "$BATS_TEST_TMPDIR/bin/nmcli" connection modify uuid \
    5fb06bd0-0bb0-7ffb-45f1-d6edd65f3e03 -ipv4.routes "10.8.0.0/24 192.168.2.4"
  check_changes_nothing
  assert_drifted "drift: the step would run: nmcli connection modify uuid 5fb06bd0-0bb0-7ffb-45f1-d6edd65f3e03 +ipv4.routes 10.8.0.0/24 192.168.2.4" \
    "drift: the step would run: nmcli device reapply eth0"
}

@test "check: authorized-keys in sync exits 0; a key removed from the block is drift" {
  local user file
  user="$(whoami)"
  echo "$user:x:1000:1000::/home/ops:/bin/bash" >"$GPU_CLUSTER_ROOT/etc/passwd"
  mkdir -p -m 700 "$GPU_CLUSTER_ROOT/home/ops/.ssh"
  cat >"$BATS_TEST_TMPDIR/bin/getent" <<'SH'
#!/bin/bash
PATH=$STUB_PATH grep "^$2:" "$GPU_CLUSTER_ROOT/etc/passwd"
SH
  chmod +x "$BATS_TEST_TMPDIR/bin/getent"
  render authorized-keys authorized-keys.sh SSH_USER="$user" \
    AUTHORIZED_KEYS='ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAINewKey0000000000000000000000000000000000 ops'
  run_envelope create --separate-stderr
  assert_success
  check_changes_nothing
  assert_in_sync

  file="$GPU_CLUSTER_ROOT/home/ops/.ssh/authorized_keys"
  sed -i '/ops$/d' "$file"
  check_changes_nothing
  assert_drifted "drift: /home/ops/.ssh/authorized_keys differs from what the step writes"
  # Mode 600: its lines are not shown.
  refute_output_contains "AAAAC3"
}

@test "check: a step without check support answers unknown action and runs nothing" {
  render verify-boot verify-boot.sh DISABLE_IOMMU=true GPU_COUNT=2
  grep -q '^  create) gpu_cluster_create' "$ENVELOPE"
  refute_file_contains "$ENVELOPE" "gpu_cluster_check"
  remember_root
  run_envelope check --separate-stderr
  [ "$status" -eq 2 ]
  [[ "$stderr" == "gpu-cluster: unknown action: check" ]]
  [ ! -s "$STUB_CALLS" ]
  assert_root_unchanged
}

@test "check: a command check/lib.sh does not list fails the check instead of running" {
  # A step that would touch a file by a command of its own: the check cannot run it.
  {
    printf 'gpu_cluster_check() {\n'
    cat "$SCRIPTS_DIR/lib.sh" "$SCRIPTS_DIR/check/lib.sh"
    printf 'touch "$ROOT/etc/touched"\ncheck_result\n}\ngpu_cluster_check\n'
  } >"$ENVELOPE"
  run -127 --separate-stderr bash "$ENVELOPE"
  [ ! -e "$GPU_CLUSTER_ROOT/etc/touched" ]
}
