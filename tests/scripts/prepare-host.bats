#!/usr/bin/env bats
# prepare-host.sh: kernel arguments, swap, modules, sysctls, NFS client.

bats_require_minimum_version 1.5.0
load helpers

setup() {
  setup_host
  export DISABLE_IOMMU=true DISABLE_CPU_MITIGATIONS=false EXTRA_KERNEL_ARGS="pci=realloc" \
    INOTIFY_MAX_USER_INSTANCES=8192 INOTIFY_MAX_USER_WATCHES=1048576 INSTALL_NFS_CLIENT=true
}

@test "prepare-host: first run configures the host" {
  run_script prepare-host.sh
  assert_success

  assert_file /etc/default/grub.d/90-gpu-cluster.cfg '# Managed by gpu-cluster (prepare-host); changes are overwritten.
# Kernel arguments for GPU nodes, appended to the distribution defaults.
GRUB_CMDLINE_LINUX_DEFAULT="${GRUB_CMDLINE_LINUX_DEFAULT:-} intel_iommu=off amd_iommu=off pci=realloc"'
  assert_mode /etc/default/grub.d/90-gpu-cluster.cfg 644
  assert_called '^update-grub$'
  assert_file /var/run/reboot-required '*** System restart required ***'
  assert_output_contains \
    "gpu-cluster: moscow: prepare-host: changed /etc/default/grub.d/90-gpu-cluster.cfg" \
    "the kernel arguments take effect after the next reboot"

  assert_called '^swapoff -a$'
  assert_file /etc/fstab 'UUID=1b2c / ext4 defaults 0 1
# gpu-cluster: swap disabled for Kubernetes: /swap.img	none	swap	sw	0	0
# /old.swap none swap sw 0 0
192.0.2.50:/export/data /mnt/shared nfs4 defaults,_netdev 0 0'
  assert_mode /etc/fstab 644

  assert_file /etc/modules-load.d/gpu-cluster.conf '# Managed by gpu-cluster (prepare-host): needed by containerd and pod networking.
overlay
br_netfilter'
  assert_called '^modprobe overlay$'
  assert_called '^modprobe br_netfilter$'

  assert_file /etc/sysctl.d/90-gpu-cluster.conf '# Managed by gpu-cluster (prepare-host): Kubernetes networking and inotify limits.
net.bridge.bridge-nf-call-iptables = 1
net.bridge.bridge-nf-call-ip6tables = 1
net.ipv4.ip_forward = 1
fs.inotify.max_user_instances = 8192
fs.inotify.max_user_watches = 1048576'
  assert_called '^sysctl --system$'
  assert_call_order '^modprobe br_netfilter' '^sysctl --system'

  assert_called "^dpkg-query -W -f=\\$\\{Status\\} nfs-common$"
  assert_called "^$APT "'update$'
  assert_called "^$APT "'install -y nfs-common$'
  refute_called '^reboot|^shutdown|^systemctl (reboot|poweroff)'
}

@test "prepare-host: a second run changes nothing and says so" {
  run_twice prepare-host.sh
  assert_output_contains \
    "unchanged /etc/default/grub.d/90-gpu-cluster.cfg" \
    "swap is already off" \
    "kernel module br_netfilter is already loaded" \
    "unchanged /etc/sysctl.d/90-gpu-cluster.conf" \
    "nfs-common is already installed"
}

@test "prepare-host: mitigations=off only when asked for" {
  run_script prepare-host.sh
  assert_success
  run grep -c 'mitigations=off' "$GPU_CLUSTER_ROOT/etc/default/grub.d/90-gpu-cluster.cfg"
  [ "$output" = 0 ]
  reset_calls
  export DISABLE_CPU_MITIGATIONS=true
  run_script prepare-host.sh
  assert_success
  grep -q '} intel_iommu=off amd_iommu=off mitigations=off pci=realloc"$' \
    "$GPU_CLUSTER_ROOT/etc/default/grub.d/90-gpu-cluster.cfg"
  assert_called '^update-grub$'
  refute_called '^sysctl --system'
}

@test "prepare-host: the drop-in is removed when no kernel argument is wanted" {
  run_script prepare-host.sh
  assert_success
  rm "$GPU_CLUSTER_ROOT/var/run/reboot-required" # as after a reboot
  reset_calls
  export DISABLE_IOMMU=false EXTRA_KERNEL_ARGS=""
  run_script prepare-host.sh
  assert_success
  [ ! -e "$GPU_CLUSTER_ROOT/etc/default/grub.d/90-gpu-cluster.cfg" ]
  assert_called '^update-grub$'
  assert_file /var/run/reboot-required '*** System restart required ***'
  assert_idempotent prepare-host.sh
}

@test "prepare-host: configured kernel arguments already active are reported" {
  run_script prepare-host.sh
  assert_success
  echo "BOOT_IMAGE=/vmlinuz ro quiet intel_iommu=off amd_iommu=off pci=realloc" \
    >"$GPU_CLUSTER_ROOT/proc/cmdline"
  run_script prepare-host.sh
  assert_success
  assert_output_contains "kernel arguments already configured and active: intel_iommu=off amd_iommu=off pci=realloc"
}

@test "prepare-host: only the changed sysctl file is re-applied" {
  run_again_with prepare-host.sh INOTIFY_MAX_USER_WATCHES=2097152
  assert_success
  assert_called '^sysctl --system$'
  grep -q '^fs.inotify.max_user_watches = 2097152$' "$GPU_CLUSTER_ROOT/etc/sysctl.d/90-gpu-cluster.conf"
  refute_called '^(update-grub|modprobe|swapoff|apt-get)'
}

@test "prepare-host: no NFS client work when it is installed or not wanted" {
  installed_package nfs-common 1:2.6.4-3ubuntu5
  run_script prepare-host.sh
  assert_success
  refute_called '^apt-get'
  reset_calls
  rm -rf "$STUB_STATE/dpkg"
  export INSTALL_NFS_CLIENT=false
  run_script prepare-host.sh
  assert_success
  refute_called '^(apt-get|dpkg-query)'
  assert_output_contains "NFS client not requested"
}

@test "prepare-host: all missing environment variables are named at once" {
  unset DISABLE_IOMMU INOTIFY_MAX_USER_WATCHES INSTALL_NFS_CLIENT
  run_script prepare-host.sh
  assert_refused "gpu-cluster: moscow: prepare-host: missing required environment variable(s): DISABLE_IOMMU INOTIFY_MAX_USER_WATCHES INSTALL_NFS_CLIENT"
}

@test "prepare-host: invalid booleans and unsafe kernel arguments are rejected" {
  export DISABLE_IOMMU=yes INSTALL_NFS_CLIENT=1
  run_script prepare-host.sh
  assert_failure
  assert_output_contains "expected \"true\" or \"false\": DISABLE_IOMMU='yes' INSTALL_NFS_CLIENT='1'"
  export DISABLE_IOMMU=true INSTALL_NFS_CLIENT=true EXTRA_KERNEL_ARGS='quiet "$(reboot)"'
  run_script prepare-host.sh
  assert_failure
  assert_output_contains "EXTRA_KERNEL_ARGS has unsupported characters in: \"\$(reboot)\""
  [ ! -e "$GPU_CLUSTER_ROOT/etc/default/grub.d/90-gpu-cluster.cfg" ]
}

@test "prepare-host: a failing command names host, step and command" {
  export STUB_EXIT_UPDATE_GRUB=1
  run_script prepare-host.sh
  [ "$status" -eq 1 ]
  assert_output_contains "gpu-cluster: moscow: prepare-host: command failed with exit code 1 at line"
  [[ "$output" =~ at\ line\ [0-9]+:\ update-grub ]]
}

@test "prepare-host: an interrupted update-grub is retried by the next run" {
  STUB_EXIT_UPDATE_GRUB=1 run_script prepare-host.sh
  assert_failure
  reset_calls
  run_script prepare-host.sh
  assert_success
  assert_output_contains "unchanged /etc/default/grub.d/90-gpu-cluster.cfg" \
    "retrying update-grub, which an earlier run did not finish"
  assert_called '^update-grub$'
  assert_file /var/run/reboot-required '*** System restart required ***'
  assert_idempotent prepare-host.sh
}

@test "prepare-host: the preview's machine summary names exactly the kernel arguments it writes" {
  local combo written summarised
  for combo in "true false" "false true pci=realloc" "false false" "true true iommu=pt nokaslr"; do
    read -r DISABLE_IOMMU DISABLE_CPU_MITIGATIONS EXTRA_KERNEL_ARGS <<<"$combo"
    export DISABLE_IOMMU DISABLE_CPU_MITIGATIONS EXTRA_KERNEL_ARGS
    run_script prepare-host.sh
    assert_success
    written=""
    if [[ -f "$GPU_CLUSTER_ROOT/etc/default/grub.d/90-gpu-cluster.cfg" ]]; then
      written="$(sed -n 's/^GRUB_CMDLINE_LINUX_DEFAULT="${GRUB_CMDLINE_LINUX_DEFAULT:-} \(.*\)"$/\1/p' \
        "$GPU_CLUSTER_ROOT/etc/default/grub.d/90-gpu-cluster.cfg")"
    fi
    summarised="$("$PYTHON" -c 'import os, sys
sys.path.insert(0, sys.argv[1])
from preview.host_summary import HostSummary
keys = ("DISABLE_IOMMU", "DISABLE_CPU_MITIGATIONS", "EXTRA_KERNEL_ARGS")
host = HostSummary("moscow", inputs={"prepare-host": {k: os.environ[k] for k in keys}})
print(" ".join(host.kernel_args()))' "$REPO_ROOT")"
    [[ "$written" == "$summarised" ]] || {
      echo "$combo: the script writes '$written', the summary says '$summarised'" >&2
      return 1
    }
  done
}
