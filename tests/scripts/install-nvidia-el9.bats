#!/usr/bin/env bats
# install-nvidia.sh on Rocky Linux, AlmaLinux and RHEL 9 (nvidia/el9.sh): the driver's module
# stream from NVIDIA's CUDA repository, the toolkit from NVIDIA's RPM repository, Fabric
# Manager at the driver's version, each locked with versionlock; stubbed dnf and rpm
# (stubs/stub). install-nvidia-el9-dnf.bats runs the same step against the real dnf.

bats_require_minimum_version 1.5.0
load helpers

PINNED_KEY=C95B321B61E88C1809C4F759DDCAE044F796ECB0
CUDA_KEY=610C7B14E068A878070DA4E99CD0A493D42D0685
CUDA_URL=https://developer.download.nvidia.com/compute/cuda/repos/rhel9/x86_64
KERNEL=5.14.0-503.14.1.el9_5.x86_64
LOCKS=/etc/dnf/plugins/versionlock.list
TOOLKIT=(nvidia-container-toolkit nvidia-container-toolkit-base libnvidia-container-tools
  libnvidia-container1)

setup() {
  setup_host
  set_os_release rocky-9.4
  export NVIDIA_REPO_KEY_FINGERPRINT=$PINNED_KEY NVIDIA_CUDA_REPO_KEY_FINGERPRINT=$CUDA_KEY \
    NVIDIA_DRIVER_BRANCH=580 NVIDIA_CONTAINER_TOOLKIT_VERSION=1.19.1-1 \
    CONTAINERD_DROPIN_PATH=/var/lib/rancher/rke2/agent/etc/containerd/config.toml.d/nvidia.toml \
    CONTAINERD_DROPIN_CONTENT=''
}

# installed NAME VERSION-RELEASE: the stubbed rpm database has NAME at that version.
installed() {
  mkdir -p "$STUB_STATE/rpm"
  echo "$2" >"$STUB_STATE/rpm/$1"
}

# locked NAME VERSION-RELEASE: versionlock (installed) holds NAME at that version.
locked() {
  installed python3-dnf-plugin-versionlock 4.3.0-16.el9
  mkdir -p "$GPU_CLUSTER_ROOT/etc/dnf/plugins"
  printf '%s-0:%s.*\n' "$1" "$2" >>"$GPU_CLUSTER_ROOT$LOCKS"
}

@test "install-nvidia el9: a fresh Rocky Linux 9 GPU host gets the pinned keys, both repositories, the open DKMS driver of the branch's stream and the toolkit, all locked" {
  run_script install-nvidia.sh
  assert_success
  assert_called "^curl -fsSL --retry 5 -o [^ ]+/gpgkey $CUDA_URL/D42D0685\.pub\$"
  assert_call_order "/D42D0685\.pub\$" "^gpg --batch --show-keys --with-colons -- [^ ]+/gpgkey\$"
  grep -qx "stub key $CUDA_KEY" "$GPU_CLUSTER_ROOT/etc/pki/rpm-gpg/RPM-GPG-KEY-NVIDIA-CUDA"
  grep -qx "stub key $PINNED_KEY" \
    "$GPU_CLUSTER_ROOT/etc/pki/rpm-gpg/RPM-GPG-KEY-NVIDIA-CONTAINER-TOOLKIT"
  assert_file /etc/yum.repos.d/cuda-rhel9.repo "# Managed by gpu-cluster (install-nvidia).
[cuda-rhel9-x86_64]
name=cuda-rhel9-x86_64
baseurl=$CUDA_URL
enabled=1
gpgcheck=1
repo_gpgcheck=1
gpgkey=file:///etc/pki/rpm-gpg/RPM-GPG-KEY-NVIDIA-CUDA"
  # shellcheck disable=SC2016 # dnf expands $basearch, so it stays literal
  assert_file /etc/yum.repos.d/nvidia-container-toolkit.repo '# Managed by gpu-cluster (install-nvidia).
[nvidia-container-toolkit]
name=nvidia-container-toolkit
baseurl=https://nvidia.github.io/libnvidia-container/stable/rpm/$basearch
enabled=1
gpgcheck=0
repo_gpgcheck=1
gpgkey=file:///etc/pki/rpm-gpg/RPM-GPG-KEY-NVIDIA-CONTAINER-TOOLKIT'
  assert_mode /etc/yum.repos.d/cuda-rhel9.repo 644
  assert_called '^dnf -y --setopt=exit_on_lock=False install dkms$'
  assert_called "^dnf -y --setopt=exit_on_lock=False install kernel-devel-$KERNEL kernel-devel-matched kernel-headers\$"
  assert_called '^dnf -y --setopt=exit_on_lock=False module enable nvidia-driver:580-open$'
  assert_called '^dnf -y --setopt=exit_on_lock=False install nvidia-open$'
  assert_call_order 'install kernel-devel-' 'module enable'
  assert_call_order 'module enable' 'install nvidia-open'
  assert_call_order 'install nvidia-open' '^modprobe nvidia$'
  assert_called '^dnf -y --setopt=exit_on_lock=False install python3-dnf-plugin-versionlock$'
  assert_called '^dnf -y --setopt=exit_on_lock=False versionlock add kmod-nvidia-open-dkms nvidia-driver-cuda nvidia-open$'
  assert_called '^dnf -y --setopt=exit_on_lock=False install nvidia-container-toolkit-1\.19\.1-1 nvidia-container-toolkit-base-1\.19\.1-1 libnvidia-container-tools-1\.19\.1-1 libnvidia-container1-1\.19\.1-1$'
  assert_called "^dnf -y --setopt=exit_on_lock=False versionlock add ${TOOLKIT[*]}\$"
  grep -qx 'nvidia-driver-cuda-0:580.95.05-1.el9.\*' "$GPU_CLUSTER_ROOT$LOCKS"
  grep -qx 'nvidia-container-toolkit-0:1.19.1-1.\*' "$GPU_CLUSTER_ROOT$LOCKS"
  refute_called '^(apt-get|apt-mark|update-initramfs)'
  [ ! -e "$GPU_CLUSTER_ROOT/var/run/reboot-required" ]
  assert_output_contains "changed: enabled the module stream nvidia-driver:580-open" \
    "changed: loaded the nvidia kernel module"
  refute_gpu_detached
}

@test "install-nvidia el9: a second run changes nothing and says so" {
  run_twice install-nvidia.sh
  assert_output_contains \
    "NVIDIA driver 580.95.05 is already installed and loaded (branch 580)" \
    "unchanged /etc/pki/rpm-gpg/RPM-GPG-KEY-NVIDIA-CONTAINER-TOOLKIT (key $PINNED_KEY)" \
    "unchanged /etc/yum.repos.d/nvidia-container-toolkit.repo" \
    "NVIDIA Container Toolkit 1.19.1-1 is already installed" \
    "already locked at their versions: ${TOOLKIT[*]}"
}

@test "install-nvidia el9: AlmaLinux 9 and RHEL 9 take the same packages" {
  local release
  for release in almalinux-9.4 rhel-9.4; do
    rm -rf "$STUB_STATE/rpm" "$GPU_CLUSTER_ROOT/etc/dnf" "$GPU_CLUSTER_ROOT/sys/module/nvidia"
    set_os_release "$release"
    reset_calls
    run_script install-nvidia.sh
    assert_success
    assert_called '^dnf -y --setopt=exit_on_lock=False module enable nvidia-driver:580-open$'
    assert_called '^dnf -y --setopt=exit_on_lock=False install nvidia-open$'
  done
}

@test "install-nvidia el9: an Arm server takes the sbsa repository" {
  export STUB_UNAME_M=aarch64
  run_script install-nvidia.sh
  assert_success
  assert_called '/compute/cuda/repos/rhel9/sbsa/D42D0685\.pub$'
  grep -qx 'baseurl=https://developer.download.nvidia.com/compute/cuda/repos/rhel9/sbsa' \
    "$GPU_CLUSTER_ROOT/etc/yum.repos.d/cuda-rhel9.repo"
  grep -qx '\[cuda-rhel9-sbsa\]' "$GPU_CLUSTER_ROOT/etc/yum.repos.d/cuda-rhel9.repo"
}

@test "install-nvidia el9: another key at the CUDA repository is refused and nothing is trusted" {
  export STUB_CUDA_KEY_FINGERPRINT=0123456789ABCDEF0123456789ABCDEF01234567
  run_script install-nvidia.sh
  assert_failure
  assert_output_contains "moscow: install-nvidia: $CUDA_URL/D42D0685.pub is not the pinned key $CUDA_KEY (found: 0123456789ABCDEF0123456789ABCDEF01234567); nothing trusted"
  [ ! -e "$GPU_CLUSTER_ROOT/etc/pki/rpm-gpg/RPM-GPG-KEY-NVIDIA-CUDA" ]
  [ ! -e "$GPU_CLUSTER_ROOT/etc/yum.repos.d/cuda-rhel9.repo" ]
  refute_called '^dnf'
}

@test "install-nvidia el9: without EPEL there is no DKMS, and the failure says where it is" {
  export STUB_DNF_NO_MATCH=dkms
  run_script install-nvidia.sh
  assert_failure
  assert_output_contains "install-nvidia: dnf could not install dkms (exit code 1); dkms is in EPEL, not in the distribution's own repositories: set gpu-cluster:packages.epel to true for the program to enable EPEL and CRB, or enable EPEL on the host"
  refute_called 'module enable'
}

@test "install-nvidia el9: no kernel-devel for the running kernel fails naming the kernel and what to do" {
  export STUB_DNF_NO_MATCH="kernel-devel-$KERNEL"
  run_script install-nvidia.sh
  assert_failure
  assert_output_contains "could not install kernel-devel-$KERNEL kernel-devel-matched kernel-headers: DKMS builds the NVIDIA modules against the running kernel's kernel-devel-$KERNEL; when the enabled repositories no longer have it, update the kernel (dnf update kernel), reboot, and run the step again"
  refute_called 'module enable|nvidia-open'
}

@test "install-nvidia el9: a new branch switches the module stream, unlocking and relocking the driver, and flags the reboot" {
  mkdir -p "$GPU_CLUSTER_ROOT/etc/dnf/modules.d"
  printf '[nvidia-driver]\nname=nvidia-driver\nstream=575-open\nprofiles=\nstate=enabled\n' \
    >"$GPU_CLUSTER_ROOT/etc/dnf/modules.d/nvidia-driver.module"
  local package
  for package in nvidia-open nvidia-driver-cuda kmod-nvidia-open-dkms; do
    installed "$package" 575.57.08-1.el9
    locked "$package" 575.57.08-1.el9
  done
  nvidia_driver_loaded 575.57.08
  run_script install-nvidia.sh
  assert_success
  assert_output_contains "NVIDIA driver 575.57.08 is loaded; installing branch 580" \
    "changed: switched the nvidia-driver module from 575-open to 580-open" \
    "an older NVIDIA kernel module is loaded; branch 580 loads after the next reboot"
  assert_call_order 'versionlock delete kmod-nvidia-open-dkms nvidia-driver-cuda nvidia-open$' \
    'module switch-to nvidia-driver:580-open --allowerasing'
  assert_call_order 'module switch-to' 'versionlock add kmod-nvidia-open-dkms nvidia-driver-cuda nvidia-open$'
  grep -qx 'nvidia-driver-cuda-0:580.95.05-1.el9.\*' "$GPU_CLUSTER_ROOT$LOCKS"
  run ! grep -q '575' "$GPU_CLUSTER_ROOT$LOCKS"
  [ -e "$GPU_CLUSTER_ROOT/var/run/reboot-required" ]
}

@test "install-nvidia el9: a new toolkit version replaces the locked one and is locked in turn" {
  local package
  for package in "${TOOLKIT[@]}"; do
    installed "$package" 1.18.0-1
    locked "$package" 1.18.0-1
  done
  run_script install-nvidia.sh
  assert_success
  assert_call_order "versionlock delete ${TOOLKIT[*]}" 'install nvidia-container-toolkit-1\.19\.1-1 '
  assert_output_contains "changed: installed NVIDIA Container Toolkit 1.19.1-1 (was 1.18.0-1)"
  grep -qx 'libnvidia-container1-0:1.19.1-1.\*' "$GPU_CLUSTER_ROOT$LOCKS"
  run ! grep -q '1.18.0' "$GPU_CLUSTER_ROOT$LOCKS"
}

@test "install-nvidia el9: on an HGX board Fabric Manager and NSCQ come at the driver's exact version, locked, enabled and running" {
  add_nvswitches 6
  run_script install-nvidia.sh
  assert_success
  assert_called '^dnf -y --setopt=exit_on_lock=False install nvidia-fabricmanager-580\.95\.05 libnvidia-nscq-580\.95\.05$'
  assert_called '^dnf -y --setopt=exit_on_lock=False versionlock add nvidia-fabricmanager libnvidia-nscq$'
  assert_called '^systemctl start nvidia-fabricmanager\.service$'
  assert_output_contains "changed: installed Fabric Manager and NSCQ 580.95.05, the driver's version"
  refute_gpu_detached
  assert_idempotent install-nvidia.sh
  assert_output_contains "Fabric Manager and NSCQ 580.95.05 are already installed (the driver's version)"
}

@test "install-nvidia el9: no Fabric Manager of the driver's version fails naming it, starting nothing" {
  add_nvswitches 6
  export STUB_ARCHIVE_FABRIC_MANAGER_VERSION=580.82.07
  run_script install-nvidia.sh
  assert_failure
  assert_output_contains "could not install nvidia-fabricmanager-580.95.05 libnvidia-nscq-580.95.05: Fabric Manager must be the driver's version 580.95.05"
  refute_called '^systemctl (enable|start) nvidia-fabricmanager'
}

@test "install-nvidia el9: a branch before 580 takes Fabric Manager and NSCQ by their older names" {
  add_nvswitches 6
  export NVIDIA_DRIVER_BRANCH=570
  run_script install-nvidia.sh
  assert_success
  assert_called '^dnf -y --setopt=exit_on_lock=False module enable nvidia-driver:570-open$'
  assert_called '^dnf -y --setopt=exit_on_lock=False install nvidia-fabric-manager-570\.95\.05 libnvidia-nscq-570-570\.95\.05$'
}

@test "install-nvidia el9: with nouveau loaded the initramfs is rebuilt by dracut and a reboot flagged" {
  mkdir -p "$GPU_CLUSTER_ROOT/sys/module/nouveau"
  run_script install-nvidia.sh
  assert_success
  assert_called '^dracut --force$'
  refute_called '^update-initramfs'
  [ -e "$GPU_CLUSTER_ROOT/var/run/reboot-required" ]
  grep -qx 'blacklist nouveau' "$GPU_CLUSTER_ROOT/etc/modprobe.d/gpu-cluster-blacklist-nouveau.conf"
}

@test "install-nvidia el9: with INSTALL_DRIVER=false only the toolkit comes, and no CUDA repository" {
  export INSTALL_DRIVER=false
  nvidia_driver_loaded 535.183.06
  run_script install-nvidia.sh
  assert_success
  refute_called 'module|nvidia-open|dkms|D42D0685'
  [ ! -e "$GPU_CLUSTER_ROOT/etc/yum.repos.d/cuda-rhel9.repo" ]
  assert_called '^dnf -y --setopt=exit_on_lock=False install nvidia-container-toolkit-1\.19\.1-1 '
}

@test "install-nvidia el9: where SELinux enforces, containers may use the GPUs they are given (container_use_devices), once" {
  export STUB_SELINUX=Enforcing
  run_script install-nvidia.sh
  assert_success
  assert_called '^setsebool -P container_use_devices on$'
  assert_output_contains "changed: SELinux boolean container_use_devices on"
  assert_idempotent install-nvidia.sh
}

@test "install-nvidia el9: where SELinux is disabled no boolean is set" {
  run_script install-nvidia.sh
  assert_success
  refute_called '^setsebool'
}
