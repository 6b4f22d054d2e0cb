#!/usr/bin/env bats
# install-nvidia.sh: driver, container toolkit, containerd runtime drop-in.

bats_require_minimum_version 1.5.0
load helpers

DROPIN_CONTENT='# Managed by gpu-cluster.
version = 3

[plugins."io.containerd.cri.v1.runtime".containerd.runtimes.nvidia]
  runtime_type = "io.containerd.runc.v2"

[plugins."io.containerd.cri.v1.runtime".containerd.runtimes.nvidia.options]
  BinaryName = "/usr/bin/nvidia-container-runtime"'

setup() {
  setup_host
  export NVIDIA_DRIVER_BRANCH=580 NVIDIA_CONTAINER_TOOLKIT_VERSION=1.19.1-1 \
    CONTAINERD_DROPIN_PATH=/etc/k0s/containerd.d/nvidia.toml \
    CONTAINERD_DROPIN_CONTENT="$DROPIN_CONTENT"
}

@test "install-nvidia: installs driver, toolkit and runtime on a fresh GPU host" {
  run_script install-nvidia.sh
  assert_success

  assert_called "^$APT "'install -y --allow-change-held-packages nvidia-headless-580-server nvidia-utils-580-server$'
  assert_called '^apt-mark hold nvidia-headless-580-server nvidia-utils-580-server$'
  assert_called '^modprobe nvidia$'
  [ ! -e "$GPU_CLUSTER_ROOT/var/run/reboot-required" ]

  assert_called '^curl -fsSL --retry 5 -o [^ ]+/gpgkey https://nvidia.github.io/libnvidia-container/gpgkey$'
  assert_called '^gpg --batch --yes --dearmor -o '
  [ "$(head -n 1 "$GPU_CLUSTER_ROOT/usr/share/keyrings/nvidia-container-toolkit-keyring.gpg")" = stub-dearmored ]
  assert_mode /usr/share/keyrings/nvidia-container-toolkit-keyring.gpg 644
  # shellcheck disable=SC2016 # apt expands $(ARCH), so it stays literal
  assert_file /etc/apt/sources.list.d/nvidia-container-toolkit.list \
    'deb [signed-by=/usr/share/keyrings/nvidia-container-toolkit-keyring.gpg] https://nvidia.github.io/libnvidia-container/stable/deb/$(ARCH) /'
  [ "$(grep -c ' update$' "$STUB_CALLS")" -eq 1 ]
  assert_called "^$APT "'install -y --allow-downgrades --allow-change-held-packages nvidia-container-toolkit=1\.19\.1-1 nvidia-container-toolkit-base=1\.19\.1-1 libnvidia-container-tools=1\.19\.1-1 libnvidia-container1=1\.19\.1-1$'
  assert_called '^apt-mark hold nvidia-container-toolkit nvidia-container-toolkit-base libnvidia-container-tools libnvidia-container1$'

  assert_file /etc/k0s/containerd.d/nvidia.toml "$DROPIN_CONTENT"
  assert_mode /etc/k0s/containerd.d/nvidia.toml 644
  refute_called '^(update-initramfs|systemctl)'
}

@test "install-nvidia: a second run changes nothing and says so" {
  run_script install-nvidia.sh
  assert_success
  assert_idempotent install-nvidia.sh
  assert_output_contains \
    "NVIDIA driver 580.95.05 is already installed and loaded (branch 580)" \
    "unchanged /usr/share/keyrings/nvidia-container-toolkit-keyring.gpg" \
    "unchanged /etc/apt/sources.list.d/nvidia-container-toolkit.list" \
    "NVIDIA Container Toolkit 1.19.1-1 is already installed" \
    "unchanged /etc/k0s/containerd.d/nvidia.toml"
}

@test "install-nvidia: with nouveau loaded it blacklists it and asks for a reboot" {
  mkdir -p "$GPU_CLUSTER_ROOT/sys/module/nouveau"
  run_script install-nvidia.sh
  assert_success
  assert_file /etc/modprobe.d/gpu-cluster-blacklist-nouveau.conf '# Managed by gpu-cluster (install-nvidia): the NVIDIA driver cannot load while
# nouveau drives the GPUs.
blacklist nouveau
options nouveau modeset=0'
  assert_called '^update-initramfs -u$'
  refute_called '^modprobe'
  assert_file /var/run/reboot-required '*** System restart required ***'
  assert_output_contains "reboot required: nouveau is loaded; the NVIDIA driver loads after the next reboot"
  # Until the reboot, re-runs neither reinstall nor rebuild anything.
  assert_idempotent install-nvidia.sh
}

@test "install-nvidia: a driver of the configured branch is left alone" {
  echo 580.82.07 >"$STUB_STATE/nvidia-driver-version"
  mkdir -p "$GPU_CLUSTER_ROOT/sys/module/nvidia"
  run_script install-nvidia.sh
  assert_success
  assert_output_contains "NVIDIA driver 580.82.07 is already installed and loaded (branch 580)"
  refute_called 'nvidia-headless|^modprobe'
}

@test "install-nvidia: a different toolkit version is installed pinned" {
  run_script install-nvidia.sh
  assert_success
  reset_calls
  export NVIDIA_CONTAINER_TOOLKIT_VERSION=1.18.0-1
  run_script install-nvidia.sh
  assert_success
  assert_called 'install -y --allow-downgrades --allow-change-held-packages nvidia-container-toolkit=1\.18\.0-1 nvidia-container-toolkit-base=1\.18\.0-1 libnvidia-container-tools=1\.18\.0-1 libnvidia-container1=1\.18\.0-1$'
  assert_output_contains "changed: installed NVIDIA Container Toolkit 1.18.0-1 (was 1.19.1-1)"
  refute_called '^(curl|gpg)|nvidia-headless'
}

@test "install-nvidia: a changed runtime drop-in is rewritten, nothing else" {
  run_script install-nvidia.sh
  assert_success
  reset_calls
  export CONTAINERD_DROPIN_CONTENT="$DROPIN_CONTENT
  # changed"
  run_script install-nvidia.sh
  assert_success
  assert_output_contains "changed /etc/k0s/containerd.d/nvidia.toml"
  assert_no_state_changes
}

@test "install-nvidia: all missing environment variables are named at once" {
  unset NVIDIA_DRIVER_BRANCH CONTAINERD_DROPIN_CONTENT
  run_script install-nvidia.sh
  [ "$status" -eq 1 ]
  assert_output_contains "gpu-cluster: moscow: install-nvidia: missing required environment variable(s): NVIDIA_DRIVER_BRANCH CONTAINERD_DROPIN_CONTENT"
  [ "$(<"$STUB_CALLS")" = "" ]
}

@test "install-nvidia: a relative drop-in path is rejected" {
  export CONTAINERD_DROPIN_PATH=../etc/nvidia.toml
  run_script install-nvidia.sh
  assert_failure
  assert_output_contains "CONTAINERD_DROPIN_PATH must be an absolute path"
}

@test "install-nvidia: with INSTALL_DRIVER=false the image's driver is left alone" {
  export INSTALL_DRIVER=false
  run_script install-nvidia.sh
  assert_success
  refute_called 'nvidia-headless|modprobe nvidia'
  assert_output_contains "the NVIDIA driver comes with the image (INSTALL_DRIVER=false)"
  assert_file /etc/k0s/containerd.d/nvidia.toml "$DROPIN_CONTENT"
}
