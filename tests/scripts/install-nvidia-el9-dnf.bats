#!/usr/bin/env bats
# install-nvidia.sh on a Rocky Linux 9 root with the real dnf 4.14 and rpm (Debian's, the
# versions RHEL 9 ships) against local repositories made like NVIDIA's (helpers/rpm-repos.bash):
# dnf parses the .repo files the step writes, checks the CUDA packages' signatures and both
# repositories' signed metadata against the keys the step pinned, enables and switches the
# module stream, installs at the versions asked and keeps the versionlock plugin's list.

bats_require_minimum_version 1.5.0
load helpers
load helpers/rpm-repos

setup_file() {
  make_repos_for_file make_rpm_repos
}

setup() {
  real_dnf_host cuda
  ln -s "$TESTS_DIR/stubs/stub" "$BATS_TEST_TMPDIR/bin/nvidia-ctk"
  NVIDIA_CUDA_REPO_KEY_FINGERPRINT="$(<"$REPOS/cuda.fpr")"
  NVIDIA_REPO_KEY_FINGERPRINT="$(<"$REPOS/toolkit.fpr")"
  export STUB_UNAME_R="$RUNNING_KERNEL.x86_64" STUB_CUDA_GPGKEY_FILE="$REPOS/cuda.asc" \
    NVIDIA_CUDA_REPO_KEY_FINGERPRINT NVIDIA_REPO_KEY_FINGERPRINT \
    NVIDIA_APT_MIRROR="file://$REPOS/toolkit" \
    NVIDIA_DRIVER_BRANCH=580 NVIDIA_CONTAINER_TOOLKIT_VERSION=1.19.1-1 \
    CONTAINERD_DROPIN_PATH=/var/lib/rancher/rke2/agent/etc/containerd/config.toml.d/nvidia.toml \
    CONTAINERD_DROPIN_CONTENT=''
}

# installed: the fake root's packages, NAME-VERSION-RELEASE a line, sorted.
installed() {
  /usr/bin/rpm --root "$GPU_CLUSTER_ROOT" -qa --queryformat '%{NAME}-%{VERSION}-%{RELEASE}\n' |
    grep -v '^gpg-pubkey-' | sort
}

@test "real dnf: a fresh host gets the branch's stream, the driver, the toolkit at its version, each locked; a second run changes nothing" {
  run_script install-nvidia.sh
  assert_success
  [ "$(installed)" = "dkms-3.1.5-1.el9
kernel-devel-5.14.0-503.14.1.el9_5
kernel-devel-matched-5.14.0-503.14.1.el9_5
kernel-headers-5.14.0-503.14.1.el9_5
kmod-nvidia-open-dkms-580.95.05-1.el9
libnvidia-container-tools-1.19.1-1
libnvidia-container1-1.19.1-1
nvidia-container-toolkit-1.19.1-1
nvidia-container-toolkit-base-1.19.1-1
nvidia-driver-cuda-580.95.05-1.el9
nvidia-open-580.95.05-1.el9
python3-dnf-plugin-versionlock-4.3.0-16.el9" ]
  grep -qx 'stream=580-open' "$GPU_CLUSTER_ROOT/etc/dnf/modules.d/nvidia-driver.module"
  # The CUDA key dnf imported to check the packages' signatures is the pinned one.
  /usr/bin/rpm --root "$GPU_CLUSTER_ROOT" -q "gpg-pubkey-$(tail -c 9 "$REPOS/cuda.fpr" | tr A-F a-f | head -c 8)"
  [ "$(grep -v '^#' "$GPU_CLUSTER_ROOT/etc/dnf/plugins/versionlock.list" | grep . | sort)" = "kmod-nvidia-open-dkms-0:580.95.05-1.el9.*
libnvidia-container-tools-0:1.19.1-1.*
libnvidia-container1-0:1.19.1-1.*
nvidia-container-toolkit-0:1.19.1-1.*
nvidia-container-toolkit-base-0:1.19.1-1.*
nvidia-driver-cuda-0:580.95.05-1.el9.*
nvidia-open-0:580.95.05-1.el9.*" ]
  assert_idempotent install-nvidia.sh
}

@test "real dnf: the locks hold: with a newer build of the branch and a newer toolkit published, dnf upgrade changes nothing" {
  run_script install-nvidia.sh
  assert_success
  with_updates
  # Without the locks this upgrade takes both (the last test).
  run dnf -y upgrade
  assert_success
  [ "$(installed | grep -c -e "$DRIVER_580_UPDATE" -e 1.20.0)" -eq 0 ]
  [ "$(installed | grep -c -e "$DRIVER_580-" -e 1.19.1-)" -eq 7 ]
}

@test "real dnf: a host on branch 575 with toolkit 1.18.0 moves to 580 and 1.19.1, and only those are locked after" {
  NVIDIA_DRIVER_BRANCH=575 NVIDIA_CONTAINER_TOOLKIT_VERSION=1.18.0-1 run_script install-nvidia.sh
  assert_success
  installed | grep -qx 'nvidia-open-575.57.08-1.el9'
  run_script install-nvidia.sh
  assert_success
  assert_output_contains "changed: switched the nvidia-driver module from 575-open to 580-open" \
    "changed: installed NVIDIA Container Toolkit 1.19.1-1 (was 1.18.0-1)"
  installed | grep -qx 'nvidia-open-580.95.05-1.el9'
  installed | grep -qx 'nvidia-container-toolkit-base-1.19.1-1'
  run ! grep -e 575 -e 1.18.0 "$GPU_CLUSTER_ROOT/etc/dnf/plugins/versionlock.list"
  grep -qx 'nvidia-open-0:580.95.05-1.el9.\*' "$GPU_CLUSTER_ROOT/etc/dnf/plugins/versionlock.list"
}

@test "real dnf: Fabric Manager and NSCQ of the driver's version, from the enabled stream, locked" {
  add_nvswitches 6
  export NVSWITCH=true
  run_script install-nvidia.sh
  installed | grep -qx 'nvidia-fabricmanager-580.95.05-1'
  installed | grep -qx 'libnvidia-nscq-580.95.05-1'
  grep -qx 'nvidia-fabricmanager-0:580.95.05-1.\*' "$GPU_CLUSTER_ROOT/etc/dnf/plugins/versionlock.list"
}

@test "real dnf: a CUDA repository whose metadata another key signed is refused by dnf" {
  NVIDIA_CUDA_REPO_KEY_FINGERPRINT="$(<"$REPOS/toolkit.fpr")"
  export NVIDIA_CUDA_REPO_KEY_FINGERPRINT STUB_CUDA_GPGKEY_FILE="$REPOS/toolkit.asc"
  run_script install-nvidia.sh
  assert_failure
  assert_output_contains "Failed to download metadata for repo 'cuda-rhel9-x86_64': repomd.xml GPG signature verification error: Bad GPG signature" \
    "missing groups or modules: nvidia-driver:580-open"
  run ! grep -q nvidia <(installed)
}

@test "real dnf: without its locks the same upgrade takes the newer driver build and toolkit (what the locks hold off)" {
  run_script install-nvidia.sh
  assert_success
  with_updates
  run dnf -y versionlock clear
  assert_success
  run dnf -y upgrade
  assert_success
  installed | grep -qx "nvidia-open-$DRIVER_580_UPDATE-1.el9"
  installed | grep -qx 'nvidia-container-toolkit-1.20.0-1'
}
