#!/usr/bin/env bats
# A GPU host that keeps its own NVIDIA driver (nvidia.installDriver: false; seed: vGPU guests
# with NVIDIA's guest driver), through the steps the program renders for it: install-nvidia
# installs the pinned container toolkit and containerd's `nvidia` runtime and leaves the
# driver alone; verify-boot counts the host's GPUs.

bats_require_minimum_version 1.5.0
load helpers

# A bare-metal stack whose one worker is a vGPU guest with one vGPU (docs/config-reference.md).
STACK='{"layout": "bare-metal", "clusterName": "vgpu", "network": {"lanCidr": "192.168.2.0/24"},
  "ssh": {"user": "ops"}, "nvidia": {"installDriver": false},
  "hosts": [{"name": "controller", "address": "192.168.2.1", "role": "controller"},
            {"name": "vgpu01", "address": "192.168.2.51", "gpus": 1}],
  "storage": {"nfs": {"host": "controller", "path": "/srv/nfs"}}}'

setup_file() {
  # One preview for the file: the program's steps of host vgpu01.
  local step
  for step in install-nvidia verify-boot; do
    "$PYTHON" "$TESTS_DIR/render_host_step.py" "$STACK" vgpu01 "$step" \
      >"$BATS_FILE_TMPDIR/$step.sh" 2>"$BATS_FILE_TMPDIR/$step.err" || true
  done
}

setup() {
  setup_host
  export GPU_CLUSTER_HOST=vgpu01
  mkdir -p "$BATS_TEST_TMPDIR/empty"
  cd "$BATS_TEST_TMPDIR/empty" || exit 1
  # NVIDIA's vGPU 16 guest driver (R535), not the stack's pinned branch (580), is loaded.
  nvidia_driver_loaded 535.183.06
  export STUB_GPU_COUNT=1
}

# run_step STEP: the program's envelope of STEP through a pipe to `bash -s -- create`.
run_step() {
  if [[ ! -s "$BATS_FILE_TMPDIR/$1.sh" ]]; then
    echo "the program rendered no $1 step: $(<"$BATS_FILE_TMPDIR/$1.err")" >&2
    return 1
  fi
  # shellcheck disable=SC2016 # expanded by the inner bash
  run bash -c 'cat "$1" | bash -s -- create' _ "$BATS_FILE_TMPDIR/$1.sh"
}

@test "own driver: install-nvidia installs the toolkit and the nvidia runtime, not a driver" {
  run_step install-nvidia
  assert_success
  assert_output_contains \
    "gpu-cluster: vgpu01: install-nvidia: the NVIDIA driver is the host's own and is kept (INSTALL_DRIVER=false): 535.183.06" \
    "gpu-cluster: vgpu01: install-nvidia: changed: installed NVIDIA Container Toolkit 1.19.1-1"
  assert_called "^$APT "'install -y --allow-downgrades --allow-change-held-packages nvidia-container-toolkit=1\.19\.1-1 '
  refute_called 'nvidia-headless|nvidia-utils|^modprobe|update-initramfs'
  # k0s's containerd gets the `nvidia` runtime the RuntimeClass names.
  grep -qx '\[plugins."io.containerd.cri.v1.runtime".containerd.runtimes.nvidia\]' \
    "$GPU_CLUSTER_ROOT/etc/k0s/containerd.d/nvidia.toml"
  [ ! -e "$GPU_CLUSTER_ROOT/var/run/reboot-required" ]
  # The same GPU isolation as on hosts whose driver the program installs: an unprivileged
  # pod's NVIDIA_VISIBLE_DEVICES is ignored (install-nvidia.sh TOOLKIT_SETTINGS).
  "$PYTHON" -c 'import sys, tomllib
config = tomllib.load(open(sys.argv[1], "rb"))
assert config["accept-nvidia-visible-devices-envvar-when-unprivileged"] is False, config
assert config["accept-nvidia-visible-devices-as-volume-mounts"] is True, config' \
    "$GPU_CLUSTER_ROOT/etc/nvidia-container-runtime/config.toml"

  reset_calls
  run_step install-nvidia
  assert_success
  assert_no_state_changes
  refute_changes_logged
}

@test "own driver: verify-boot counts the host's GPUs" {
  run_step verify-boot
  assert_success
  assert_output_contains "gpu-cluster: vgpu01: verify-boot: boot verified: kernel arguments active, 1 GPUs answer"
  # Another count than the host's gpus fails the step; the driver's branch is not checked.
  export STUB_GPU_COUNT=2
  run_step verify-boot
  assert_failure
  assert_output_contains "nvidia-smi lists 2 GPUs, not 1"
  refute_output_contains "not of branch"
}
