#!/usr/bin/env bats
# A cluster of an Ubuntu controller and Rocky Linux 9 GPU workers, as the program renders it:
# every step of a worker's bring-up, in `pulumi up`'s order, run against a Rocky Linux 9.4
# root with SELinux enforcing and NetworkManager (stubs/stub), for k0s and for RKE2, on bare metal
# and as a hybrid on-prem worker with its route to the VPC; then all of them again, changing
# nothing. The controller's preflight runs on an Ubuntu root.

bats_require_minimum_version 1.5.0
load helpers
load helpers/secrets

# Bare metal with packages.epel (DKMS for the driver comes from EPEL on Rocky Linux).
STACK='{"layout": "bare-metal", "clusterName": "mixed", "network": {"lanCidr": "192.168.2.0/24"},
  "ssh": {"user": "ops"}, "packages": {"epel": true},
  "hosts": [{"name": "controller", "address": "192.168.2.1", "role": "controller"},
            {"name": "gpu01", "address": "192.168.2.51", "gpus": 2}],
  "storage": {"nfs": {"host": "controller", "path": "/srv/nfs"}}}'
# A worker's steps in the order `pulumi up` runs them (after install-bundle and authorized-keys);
# on the hybrid layout route-to-vpc too, before the worker joins the control plane in the VPC.
WORKER_STEPS=(preflight configure-dnf prepare-host host-firewall install-nvidia reboot-if-needed
  verify-boot upgrade-node join-worker)
HYBRID_WORKER_STEPS=(preflight configure-dnf prepare-host host-firewall route-to-vpc install-nvidia
  reboot-if-needed verify-boot upgrade-node join-worker)

setup_file() {
  local stack
  render_steps "$STACK" k0s gpu01 "${WORKER_STEPS[@]}"
  stack="$("$PYTHON" -c 'import json, sys
values = json.loads(sys.argv[1])
values["kubernetes"] = {"distribution": "rke2"}
print(json.dumps(values))' "$STACK")"
  render_steps "$stack" rke2 gpu01 "${WORKER_STEPS[@]}"
  render_steps "$STACK" k0s controller preflight
  # tests/builders.py's hybrid stack: gpu000 is the on-prem VPN gateway, gpu001 a worker.
  stack="$(cd "$REPO_ROOT" && "$PYTHON" -c 'import json
from tests.builders import hybrid_config
values = hybrid_config()
values["packages"] = {"epel": True}
for host in values["hosts"]:
    host["gpus"] = 2
print(json.dumps(values))')"
  render_steps "$stack" hybrid gpu001 "${HYBRID_WORKER_STEPS[@]}"
}

# render_steps STACK DIR HOST STEP...: the program's envelope of each STEP of HOST in
# $BATS_FILE_TMPDIR/DIR/HOST-STEP.sh (its error, if it makes none, in .err).
render_steps() {
  local stack=$1 dir="$BATS_FILE_TMPDIR/$2" host=$3 step
  shift 3
  mkdir -p "$dir"
  for step in "$@"; do
    "$PYTHON" "$TESTS_DIR/render_host_step.py" "$stack" "$host" "$step" \
      >"$dir/$host-$step.sh" 2>"$dir/$host-$step.err" || true
  done
}

setup() {
  setup_host
  set_os_release rocky-9.4
  rocky_repos 0
  export GPU_CLUSTER_HOST=gpu01 STUB_HOSTNAME=gpu01 STUB_SELINUX=Enforcing \
    STUB_IP_OUTPUT='1: lo    inet 127.0.0.1/8 scope host lo\       valid_lft forever preferred_lft forever
2: eno1    inet 192.168.2.51/24 brd 192.168.2.255 scope global eno1\       valid_lft forever preferred_lft forever'
  mkdir -p "$GPU_CLUSTER_ROOT/etc/kernel" "$GPU_CLUSTER_ROOT/usr/sbin" "$BATS_TEST_TMPDIR/empty"
  # NetworkManager runs there, as on every RHEL 9 family server.
  touch "$GPU_CLUSTER_ROOT/usr/sbin/NetworkManager" && chmod 0755 "$GPU_CLUSTER_ROOT/usr/sbin/NetworkManager"
  echo "root=UUID=1b2c ro crashkernel=1G-4G:192M rhgb quiet" >"$GPU_CLUSTER_ROOT/etc/kernel/cmdline"
  echo "BOOT_IMAGE=(hd0,gpt2)/vmlinuz-5.14.0-503.14.1.el9_5.x86_64 root=UUID=1b2c ro rhgb quiet" \
    >"$GPU_CLUSTER_ROOT/proc/cmdline"
  cd "$BATS_TEST_TMPDIR/empty" || exit 1
}

# run_step DIR HOST-STEP: the program's envelope through a pipe to `bash -s -- create`, as
# remote.Command runs it. Two inputs differ from the preview's: the join token is one like
# the controller's create-join-token prints at `up` (the preview has a placeholder), and the
# release's sha256 is that of the fake release the stub serves (stubs/stub fake-release).
run_step() {
  local file="$BATS_FILE_TMPDIR/$1/$2.sh"
  if [[ ! -s "$file" ]]; then
    echo "the program rendered no $2 step: $(<"${file%.sh}.err")" >&2
    return 1
  fi
  sed -e "s|^export K0S_JOIN_TOKEN=.*|export K0S_JOIN_TOKEN='$(k0s_join_token abcdef.0123456789abcdef)'|" \
    -e "s|^export K0S_SHA256_AMD64=.*|export K0S_SHA256_AMD64='$(fake_sha256 k0s v1.36.3+k0s.2)'|" \
    -e "s|^export RKE2_SHA256_AMD64=.*|export RKE2_SHA256_AMD64='$(fake_sha256 rke2 v1.36.3+rke2r1)'|" \
    "$file" >"$BATS_TEST_TMPDIR/step.sh"
  # shellcheck disable=SC2016 # expanded by the inner bash
  run bash -c 'cat "$1" | bash -s -- create' _ "$BATS_TEST_TMPDIR/step.sh"
}

# the_reboot: what reboot-if-needed's reboot does to the fake Rocky host: a new boot id, /run
# emptied, the boot entries' arguments active, the NVIDIA driver of the branch loaded.
the_reboot() {
  echo 9f0e8d7c-6b5a-4c3d-2e1f-0a9b8c7d6e5f >"$GPU_CLUSTER_ROOT/proc/sys/kernel/random/boot_id"
  rm -f "$GPU_CLUSTER_ROOT/var/run/reboot-required"
  echo "BOOT_IMAGE=(hd0,gpt2)/vmlinuz-5.14.0-503.14.1.el9_5.x86_64 $(<"$GPU_CLUSTER_ROOT/etc/kernel/cmdline")" \
    >"$GPU_CLUSTER_ROOT/proc/cmdline"
  rm -rf "$GPU_CLUSTER_ROOT/sys/module/nouveau"
  mkdir -p "$GPU_CLUSTER_ROOT/sys/module/nvidia"
  : >"$STUB_STATE/iptables"
}

# bring_up DIR STEP...: each STEP of the host GPU_CLUSTER_HOST in order, the host rebooted where
# reboot-if-needed reboots it.
bring_up() {
  local dir=$1 step
  shift
  for step in "$@"; do
    run_step "$dir" "$GPU_CLUSTER_HOST-$step"
    if [[ "$status" -ne 0 ]]; then
      printf '%s-%s failed (%s):\n%s\n' "$GPU_CLUSTER_HOST" "$step" "$status" "$output" >&2
      return 1
    fi
    [[ "$step" != reboot-if-needed || "$output" != *"rebooting"* ]] || the_reboot
  done
}

# bring_up_again DIR STEP...: the same steps once more change nothing and say so.
bring_up_again() {
  local dir=$1 step before
  shift
  before="$(snapshot_root)"
  reset_calls
  for step in "$@"; do
    run_step "$dir" "$GPU_CLUSTER_HOST-$step"
    assert_success
    refute_changes_logged
  done
  [ "$before" = "$(snapshot_root)" ]
  assert_no_state_changes
}

@test "mixed: the controller's preflight passes on Ubuntu, the worker's on Rocky Linux 9, from one stack" {
  run_step k0s gpu01-preflight
  assert_success
  assert_output_contains "gpu01: preflight: ok: OS is Rocky Linux 9.4 (Blue Onyx) (rocky 9.4)"
  set_os_release ubuntu-24.04
  export GPU_CLUSTER_HOST=controller STUB_HOSTNAME=controller \
    STUB_IP_OUTPUT='2: eno1    inet 192.168.2.1/24 brd 192.168.2.255 scope global eno1\       valid_lft forever'
  run_step k0s controller-preflight
  assert_success
  assert_output_contains "controller: preflight: ok: OS is Ubuntu 24.04.4 LTS (ubuntu 24.04)"
}

@test "mixed k0s: a Rocky Linux 9 GPU worker comes up through the program's own steps, and again unchanged" {
  bring_up k0s "${WORKER_STEPS[@]}"
  # EPEL with its pinned key, then DKMS and the open driver of the branch from NVIDIA's CUDA
  # repository, SELinux left enforcing with the container policy, k0s's containerd labelled.
  [ -f "$GPU_CLUSTER_ROOT/etc/yum.repos.d/gpu-cluster-epel.repo" ]
  [ "$(<"$STUB_STATE/rpm/nvidia-open")" = 580.95.05-1.el9 ]
  [ -f "$STUB_STATE/rpm/container-selinux" ]
  [ -f "$STUB_STATE/sebool-container_use_devices" ]
  [ -f "$GPU_CLUSTER_ROOT/etc/k0s/containerd.d/gpu-cluster-selinux.toml" ]
  grep -q 'intel_iommu=off' <(STUB_CALLS=/dev/null "$BATS_TEST_TMPDIR/bin/grubby" --info=ALL)
  assert_called '^k0s start$'
  bring_up_again k0s "${WORKER_STEPS[@]}"
}

@test "mixed rke2: a Rocky Linux 9 GPU worker comes up through the program's own steps, and again unchanged" {
  bring_up rke2 "${WORKER_STEPS[@]}"
  [ "$(<"$STUB_STATE/rpm/rke2-selinux")" = 0.23-1.el9 ]
  [ "$(<"$GPU_CLUSTER_ROOT/etc/rancher/rke2/config.yaml.d/40-gpu-cluster-selinux.yaml")" = "selinux: true" ]
  # Canal's interfaces are left to the CNI by NetworkManager.
  grep -qx 'unmanaged-devices=interface-name:cali\*;interface-name:flannel\*' \
    "$GPU_CLUSTER_ROOT/etc/NetworkManager/conf.d/90-gpu-cluster-cni.conf"
  assert_called '^systemctl start --no-block rke2-agent$'
  bring_up_again rke2 "${WORKER_STEPS[@]}"
}

@test "mixed hybrid: a Rocky Linux 9 on-prem GPU worker comes up, its route to the VPC in NetworkManager's profile, and again unchanged" {
  export GPU_CLUSTER_HOST=gpu001 STUB_HOSTNAME=gpu001 \
    STUB_IP_OUTPUT='1: lo    inet 127.0.0.1/8 scope host lo\       valid_lft forever preferred_lft forever
2: eno2    inet 192.168.2.3/24 brd 192.168.2.255 scope global noprefixroute eno2\       valid_lft forever preferred_lft forever'
  nm_profile eno2 5fb06bd0-0bb0-7ffb-45f1-d6edd65f3e03 "System eno2"
  bring_up hybrid "${HYBRID_WORKER_STEPS[@]}"
  # The VPC and the VPN's tunnel network through the on-prem gateway gpu000 (192.168.2.2),
  # in the profile, where NetworkManager keeps them across reapplies and reboots.
  grep -q ' 192\.168\.2\.2$' "$STUB_STATE/nm/profile-5fb06bd0-0bb0-7ffb-45f1-d6edd65f3e03/routes"
  [ ! -e "$GPU_CLUSTER_ROOT/etc/systemd/system/gpu-cluster-route-vpc.service" ]
  assert_called '^k0s start$'
  bring_up_again hybrid "${HYBRID_WORKER_STEPS[@]}"
}
