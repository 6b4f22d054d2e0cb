#!/usr/bin/env bats
# prepare-host.sh on Rocky Linux 9: the kernel arguments with grubby on every boot entry and in
# /etc/kernel/cmdline (stubbed grubby, stubs/stub stub_grubby), the NFS client with dnf.

bats_require_minimum_version 1.5.0
load helpers

CMDLINE=/etc/kernel/cmdline
RECORD=/var/lib/gpu-cluster/kernel-args
BASE='root=UUID=1b2c ro crashkernel=1G-4G:192M,4G-64G:256M,64G-:512M rhgb quiet'

setup() {
  setup_host
  set_os_release rocky-9.4
  mkdir -p "$GPU_CLUSTER_ROOT/etc/kernel"
  echo "$BASE" >"$GPU_CLUSTER_ROOT$CMDLINE"
  echo "BOOT_IMAGE=(hd0,gpt2)/vmlinuz-5.14.0-503.14.1.el9_5.x86_64 $BASE" >"$GPU_CLUSTER_ROOT/proc/cmdline"
  export DISABLE_IOMMU=true DISABLE_CPU_MITIGATIONS=false EXTRA_KERNEL_ARGS="pci=realloc" \
    INOTIFY_MAX_USER_INSTANCES=8192 INOTIFY_MAX_USER_WATCHES=1048576 INSTALL_NFS_CLIENT=true
}

# entries: each boot entry's arguments as grubby lists them, a line each.
entries() {
  sed -n 's/^args="\(.*\)"$/\1/p' < <(STUB_CALLS=/dev/null "$BATS_TEST_TMPDIR/bin/grubby" --info=ALL)
}

@test "prepare-host el9: the kernel arguments go on every boot entry with grubby and into /etc/kernel/cmdline, and a reboot is flagged" {
  run_script prepare-host.sh
  assert_success
  assert_called '^grubby --update-kernel=ALL --args=intel_iommu=off amd_iommu=off pci=realloc$'
  refute_called '^update-grub'
  [ "$(entries)" = "ro crashkernel=1G-4G:192M,4G-64G:256M,64G-:512M rhgb quiet intel_iommu=off amd_iommu=off pci=realloc
ro crashkernel=1G-4G:192M,4G-64G:256M,64G-:512M rhgb quiet intel_iommu=off amd_iommu=off pci=realloc" ]
  assert_file "$CMDLINE" "$BASE intel_iommu=off amd_iommu=off pci=realloc"
  assert_file "$RECORD" "intel_iommu=off amd_iommu=off pci=realloc"
  [ ! -e "$GPU_CLUSTER_ROOT/etc/default/grub.d/90-gpu-cluster.cfg" ]
  assert_file /var/run/reboot-required '*** System restart required ***'
  assert_output_contains "changed: set the kernel arguments of every boot entry (grubby): intel_iommu=off amd_iommu=off pci=realloc" \
    "reboot required: kernel arguments changed (intel_iommu=off amd_iommu=off pci=realloc)"
  assert_called '^dnf -y --setopt=exit_on_lock=False install nfs-utils$'
}

@test "prepare-host el9: a second run changes nothing and says so" {
  run_twice prepare-host.sh
  assert_output_contains "kernel arguments already configured, active after the next reboot: intel_iommu=off amd_iommu=off pci=realloc"
}

@test "prepare-host el9: after the reboot the arguments are active and nothing changes" {
  run_script prepare-host.sh
  assert_success
  echo "BOOT_IMAGE=(hd0,gpt2)/vmlinuz-5.14.0-503.14.1.el9_5.x86_64 $BASE intel_iommu=off amd_iommu=off pci=realloc" \
    >"$GPU_CLUSTER_ROOT/proc/cmdline"
  rm "$GPU_CLUSTER_ROOT/var/run/reboot-required"
  assert_idempotent prepare-host.sh
  assert_output_contains "kernel arguments already configured and active: intel_iommu=off amd_iommu=off pci=realloc"
  [ ! -e "$GPU_CLUSTER_ROOT/var/run/reboot-required" ]
}

@test "prepare-host el9: an argument no longer wanted comes out of the entries and /etc/kernel/cmdline; others' arguments stay" {
  run_script prepare-host.sh
  assert_success
  # What NVIDIA's nvidia-kmod-common adds in its %post.
  STUB_CALLS=/dev/null "$BATS_TEST_TMPDIR/bin/grubby" --update-kernel=ALL --args=rd.driver.blacklist=nouveau
  reset_calls
  export DISABLE_IOMMU=false
  run_script prepare-host.sh
  assert_success
  assert_called '^grubby --update-kernel=ALL --args=pci=realloc --remove-args=intel_iommu=off amd_iommu=off$'
  [ "$(entries | sort -u)" = "ro crashkernel=1G-4G:192M,4G-64G:256M,64G-:512M rhgb quiet pci=realloc rd.driver.blacklist=nouveau" ]
  assert_file "$CMDLINE" "$BASE pci=realloc"
  assert_file "$RECORD" "pci=realloc"
  assert_output_contains "removed intel_iommu=off amd_iommu=off"
}

@test "prepare-host el9: with no argument wanted any more, the program's all come out and its record goes" {
  run_script prepare-host.sh
  assert_success
  reset_calls
  export DISABLE_IOMMU=false EXTRA_KERNEL_ARGS=""
  run_script prepare-host.sh
  assert_success
  assert_called '^grubby --update-kernel=ALL --remove-args=intel_iommu=off amd_iommu=off pci=realloc$'
  [ "$(entries | sort -u)" = "ro crashkernel=1G-4G:192M,4G-64G:256M,64G-:512M rhgb quiet" ]
  assert_file "$CMDLINE" "$BASE"
  [ ! -e "$GPU_CLUSTER_ROOT$RECORD" ]
  assert_idempotent prepare-host.sh
}

@test "prepare-host el9: KEY=VALUE replaces the same key's other value, as grubby does" {
  echo "$BASE intel_iommu=on" >"$GPU_CLUSTER_ROOT$CMDLINE"
  export STUB_GRUBBY_ARGS="ro rhgb quiet intel_iommu=on"
  run_script prepare-host.sh
  assert_success
  [ "$(entries | sort -u)" = "ro rhgb quiet intel_iommu=off amd_iommu=off pci=realloc" ]
  assert_file "$CMDLINE" "$BASE intel_iommu=off amd_iommu=off pci=realloc"
}

@test "prepare-host el9: without /etc/kernel/cmdline only the entries change, and it says what later kernels take" {
  rm "$GPU_CLUSTER_ROOT$CMDLINE"
  run_script prepare-host.sh
  assert_success
  assert_output_contains "no /etc/kernel/cmdline: kernels installed later take the running kernel's arguments"
  [ ! -e "$GPU_CLUSTER_ROOT$CMDLINE" ]
  assert_idempotent prepare-host.sh
}

@test "prepare-host el9: a grubby that fails stops the step naming host and step, and the next run does it" {
  export STUB_FAIL_CALL='^grubby --update-kernel'
  run_script prepare-host.sh
  assert_failure
  assert_output_contains "gpu-cluster: moscow: prepare-host: command failed with exit code 1"
  [ ! -e "$GPU_CLUSTER_ROOT$RECORD" ]
  unset STUB_FAIL_CALL
  reset_calls
  run_script prepare-host.sh
  assert_success
  assert_called '^grubby --update-kernel=ALL --args=intel_iommu=off amd_iommu=off pci=realloc$'
}
