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

NM_CONF=/etc/NetworkManager/conf.d/90-gpu-cluster-cni.conf

# network_manager: the host runs NetworkManager (its binary, its unit active).
network_manager() {
  mkdir -p "$GPU_CLUSTER_ROOT/usr/sbin"
  printf '#!/bin/sh\n' >"$GPU_CLUSTER_ROOT/usr/sbin/NetworkManager"
  chmod +x "$GPU_CLUSTER_ROOT/usr/sbin/NetworkManager"
  touch "$STUB_STATE/active-NetworkManager.service"
}

@test "prepare-host el9: NetworkManager is told to leave the CNI's interfaces alone and reloaded, once" {
  network_manager
  export NM_UNMANAGED_INTERFACES="cali* flannel*"
  run_script prepare-host.sh
  assert_success
  assert_file "$NM_CONF" "# Managed by gpu-cluster (prepare-host): NetworkManager leaves the CNI's interfaces alone.
[keyfile]
unmanaged-devices=interface-name:cali*;interface-name:flannel*"
  assert_called '^systemctl reload NetworkManager\.service$'
  assert_output_contains "changed: NetworkManager reloaded; it leaves cali* flannel* alone"
  refute_output_contains "NetworkManager managed the CNI's interfaces"
  assert_idempotent prepare-host.sh
}

@test "prepare-host el9: CNI interfaces NetworkManager managed until now need a reboot, which is flagged" {
  network_manager
  mkdir -p "$GPU_CLUSTER_ROOT/sys/class/net/flannel.1" "$GPU_CLUSTER_ROOT/sys/class/net/eth0"
  export NM_UNMANAGED_INTERFACES="cali* flannel*" DISABLE_IOMMU=false EXTRA_KERNEL_ARGS=""
  echo "ro rhgb quiet" >"$GPU_CLUSTER_ROOT/proc/cmdline"
  run_script prepare-host.sh
  assert_success
  assert_output_contains "reboot required: NetworkManager managed the CNI's interfaces until now"
  assert_file /var/run/reboot-required '*** System restart required ***'
}

@test "prepare-host el9: without NetworkManager, or without CNI interfaces to name, there is no file" {
  export NM_UNMANAGED_INTERFACES="cali* flannel*"
  run_script prepare-host.sh
  assert_success
  [ ! -e "$GPU_CLUSTER_ROOT$NM_CONF" ]
  refute_called 'NetworkManager'
  network_manager
  run_script prepare-host.sh
  assert_success
  [ -f "$GPU_CLUSTER_ROOT$NM_CONF" ]
  export NM_UNMANAGED_INTERFACES=""
  run_script prepare-host.sh
  assert_success
  [ ! -e "$GPU_CLUSTER_ROOT$NM_CONF" ]
}

@test "prepare-host el9: an interface name with anything but a name's characters and NetworkManager's globs is refused" {
  export NM_UNMANAGED_INTERFACES="cali* bad;name"
  run_script prepare-host.sh
  assert_failure
  assert_output_contains "prepare-host: NM_UNMANAGED_INTERFACES has a word that is not an interface name: 'bad;name'"
}

@test "prepare-host el9: the real NetworkManager reads the file as unmanaged-devices of [keyfile]" {
  local unpacked=${DEBIAN_EXTRACT_DIR:-$TESTS_DIR/../../.cache/debian}
  local binary=$unpacked/network-manager/usr/sbin/NetworkManager
  if [[ ! -x "$binary" ]]; then
    command -v apt-get >/dev/null || skip "needs NetworkManager: no apt-get here to unpack it"
    echo "no NetworkManager at $binary: run tests/debian/setup.sh, which unpacks it there" >&2
    return 1
  fi
  network_manager
  export NM_UNMANAGED_INTERFACES="cali* tunl* vxlan.calico wireguard.cali"
  run_script prepare-host.sh
  assert_success
  mkdir -p "$BATS_TEST_TMPDIR/nm-empty"
  : >"$BATS_TEST_TMPDIR/nm-empty/NetworkManager.conf"
  # --print-config: NetworkManager 1.42 merges its configuration as it would run with it and
  # prints it; nothing else is read (no system or internal config), no network is touched.
  run env LD_LIBRARY_PATH="$unpacked/libndp0/usr/lib/x86_64-linux-gnu" "$binary" --print-config \
    --config="$BATS_TEST_TMPDIR/nm-empty/NetworkManager.conf" \
    --config-dir="$GPU_CLUSTER_ROOT/etc/NetworkManager/conf.d" \
    --system-config-dir="$BATS_TEST_TMPDIR/nm-empty/none" \
    --intern-config="$BATS_TEST_TMPDIR/nm-empty/none/intern.conf"
  assert_success
  assert_output_contains "(etc: 90-gpu-cluster-cni.conf)" "[keyfile]
unmanaged-devices=interface-name:cali*;interface-name:tunl*;interface-name:vxlan.calico;interface-name:wireguard.cali"
}
