#!/usr/bin/env bats
# SELinux on Rocky Linux 9 (os/selinux.sh): left enforcing, container-selinux from prepare-host,
# rke2-selinux and `selinux: true` for RKE2, k0s's containerd labels and enable_selinux, and
# container_use_devices on GPU hosts; nothing of it where SELinux is disabled (Ubuntu). Stubbed
# getenforce, getsebool, setsebool, semanage and restorecon (stubs/stub).

bats_require_minimum_version 1.5.0
load helpers
load helpers/downloads
load helpers/secrets

RKE2_DROPIN=/etc/rancher/rke2/config.yaml.d/40-gpu-cluster-selinux.yaml
RKE2_REPO=/etc/yum.repos.d/gpu-cluster-rke2-selinux.repo
K0S_DROPIN=/etc/k0s/containerd.d/gpu-cluster-selinux.toml
AGENT_TOKEN="K10$(printf '%064d' 7)::node:agent-token-secret-7d2b0a"

setup() {
  setup_host
  set_os_release rocky-9.4
  export STUB_SELINUX=Enforcing
}

rke2_agent_inputs() {
  export RKE2_VERSION=v1.36.3+rke2r1 RKE2_AGENT_TOKEN="$AGENT_TOKEN" \
    RKE2_KUBELET_CONFIG='resolv-conf: /run/systemd/resolve/resolv.conf' \
    RKE2_CONFIG='server: https://10.20.0.10:9345
token-file: /etc/rancher/rke2/agent-token
node-name: moscow'
}

k0s_worker_inputs() {
  export K0S_VERSION=v1.36.3+k0s.2 K0S_JOIN_TOKEN="$(k0s_join_token abcdef.0123456789abcdef)" \
    NODE_IP=192.0.2.21
}

prepare_host_inputs() {
  export DISABLE_IOMMU=false DISABLE_CPU_MITIGATIONS=false INOTIFY_MAX_USER_INSTANCES=8192 \
    INOTIFY_MAX_USER_WATCHES=1048576 INSTALL_NFS_CLIENT=false
}

@test "prepare-host el9: an enforcing host gets container-selinux and semanage, and stays enforcing" {
  prepare_host_inputs
  run_twice prepare-host.sh
  run_script prepare-host.sh
  assert_output_contains "SELinux is enforcing; containers run under container-selinux's policy"
  [ "$(<"$STUB_STATE/rpm/container-selinux")" = 1.0-1.el9 ]
  [ -f "$STUB_STATE/rpm/policycoreutils-python-utils" ]
  refute_called '^setenforce|^grubby .*selinux'
}

@test "prepare-host: where SELinux is disabled no policy is installed" {
  prepare_host_inputs
  export STUB_SELINUX=Disabled
  run_script prepare-host.sh
  assert_success
  assert_output_contains "SELinux is not enabled: no container policy needed"
  [ ! -e "$STUB_STATE/rpm/container-selinux" ]
}

@test "join-agent el9: rke2-selinux from its disabled repository with the pinned key, RKE2 relabeled and selinux: true" {
  rke2_agent_inputs
  # A node RKE2 ran on before: its kubelet's pods (NFS volumes among them) and containerd's state.
  mkdir -p "$GPU_CLUSTER_ROOT/var/lib/kubelet/pods" "$GPU_CLUSTER_ROOT/var/lib/rancher/rke2/agent"
  run_script rke2/join-agent.sh
  assert_success
  assert_file "$RKE2_DROPIN" "selinux: true"
  assert_file "$RKE2_REPO" '# Managed by gpu-cluster (join-agent).
[gpu-cluster-rke2-selinux]
name=Rancher RKE2 Common (stable), rke2-selinux
baseurl=https://rpm.rancher.io/rke2/stable/common/centos/9/noarch
enabled=0
gpgcheck=1
repo_gpgcheck=0
gpgkey=file:///etc/pki/rpm-gpg/RPM-GPG-KEY-rancher'
  assert_called '^dnf -y --setopt=exit_on_lock=False --enablerepo=gpu-cluster-rke2-selinux install rke2-selinux-0\.23-1\.el9$'
  [ "$(<"$STUB_STATE/rpm/rke2-selinux")" = 0.23-1.el9 ]
  grep -qx "$GPU_CLUSTER_ROOT/usr/local/bin/rke2 [0-9]*" "$STUB_STATE/relabeled"
  # The state folders are rke2-selinux's own %post's: never walked here (pods' NFS volumes).
  refute_called '^restorecon .*/var/lib/(kubelet|rancher)'
  # The policy is in place before RKE2 first starts.
  assert_call_order '^dnf .* install rke2-selinux' '^systemctl start --no-block rke2-agent$'
  assert_output_contains "changed: installed rke2-selinux-0.23-1.el9"
  # The drop-in's keys are flags rke2 agent takes (tests/components/test_rke2.py, from
  # rancher/rke2's pkg/cli/cmds), a boolean as RKE2 reads `selinux`.
  run "$PYTHON" -c 'import sys, yaml
from tests.components.test_rke2 import RKE2_AGENT_KEYS, RKE2_SERVER_KEYS
values = yaml.safe_load(open(sys.argv[1]))
assert set(values) <= RKE2_AGENT_KEYS & RKE2_SERVER_KEYS, values
assert values["selinux"] is True, values' "$GPU_CLUSTER_ROOT$RKE2_DROPIN"
  assert_success
}

@test "join-agent el9: a second run changes nothing; a new pin installs that version" {
  rke2_agent_inputs
  run_twice rke2/join-agent.sh
  run_again_with rke2/join-agent.sh RKE2_SELINUX_VERSION=0.24-1.el9
  assert_success
  assert_called '^dnf .* --enablerepo=gpu-cluster-rke2-selinux install rke2-selinux-0\.24-1\.el9$'
  [ "$(<"$STUB_STATE/rpm/rke2-selinux")" = 0.24-1.el9 ]
}

@test "join-agent el9: permissive hosts are labeled too" {
  rke2_agent_inputs
  export STUB_SELINUX=Permissive
  run_script rke2/join-agent.sh
  assert_success
  assert_file "$RKE2_DROPIN" "selinux: true"
}

@test "join-agent el9: another key at rpm.rancher.io is refused and nothing is installed" {
  rke2_agent_inputs
  export STUB_RANCHER_KEY_FINGERPRINT=0123456789ABCDEF0123456789ABCDEF01234567
  run_script rke2/join-agent.sh
  assert_failure
  assert_output_contains "https://rpm.rancher.io/public.key is not the pinned key C8CFF216455126E9B9C918BE925EA29AE257814A"
  [ ! -e "$GPU_CLUSTER_ROOT$RKE2_REPO" ]
  refute_called '^dnf '
}

@test "join-agent: bad rke2-selinux pins are refused by name before anything changes" {
  rke2_agent_inputs
  export RKE2_SELINUX_VERSION='0.23; reboot' RANCHER_RPM_KEY_FINGERPRINT=c8cf
  run_script rke2/join-agent.sh
  assert_refused
  assert_output_contains "RKE2_SELINUX_VERSION must be VERSION-RELEASE such as 0.23-1.el9, got '0.23; reboot'"
  assert_output_contains "RANCHER_RPM_KEY_FINGERPRINT must be an OpenPGP v4 fingerprint (40 upper-case hex digits), got 'c8cf'"
}

@test "join-agent ubuntu: no SELinux, no policy, no drop-in; one left from before is removed" {
  rke2_agent_inputs
  set_os_release ubuntu-24.04
  export STUB_SELINUX=Disabled
  mkdir -p "$GPU_CLUSTER_ROOT${RKE2_DROPIN%/*}"
  echo "selinux: true" >"$GPU_CLUSTER_ROOT$RKE2_DROPIN"
  run_script rke2/join-agent.sh
  assert_success
  [ ! -e "$GPU_CLUSTER_ROOT$RKE2_DROPIN" ]
  refute_called '^dnf |^restorecon|^semanage'
}

@test "join-worker el9: k0s's containerd state labeled before its first start, and enable_selinux" {
  k0s_worker_inputs
  run_script k0s/join-worker.sh
  assert_success
  assert_called '^semanage fcontext -a -t container_var_lib_t /var/lib/k0s/containerd\(/\.\*\)\?$'
  assert_called '^semanage fcontext -a -t container_ro_file_t /var/lib/k0s/containerd/io\.containerd\.snapshotter\.\*/snapshots\(/\.\*\)\?$'
  [ -d "$GPU_CLUSTER_ROOT/var/lib/k0s/containerd/io.containerd.snapshotter.v1.overlayfs/snapshots" ]
  assert_mode /var/lib/k0s/containerd 711
  assert_mode /var/lib/k0s/containerd/io.containerd.snapshotter.v1.overlayfs/snapshots 700
  assert_call_order '^restorecon -R -v -- .*/var/lib/k0s/containerd$' '^k0s start$'
  # containerd 2 (config version 3) reads enable_selinux in its CRI runtime plugin
  # (k0s docs/selinux.md; the same table k0s.py's nvidia drop-in writes to).
  run "$PYTHON" -c 'import sys, tomllib
config = tomllib.load(open(sys.argv[1], "rb"))
assert config == {"version": 3, "plugins": {"io.containerd.cri.v1.runtime": {"enable_selinux": True}}}, config' \
    "$GPU_CLUSTER_ROOT$K0S_DROPIN"
  assert_success
}

@test "join-worker el9: a second run changes nothing; a rule of another type is modified" {
  k0s_worker_inputs
  run_twice k0s/join-worker.sh
  # containerd's state is relabeled after a new rule or new folders only, not at every run.
  refute_called '^restorecon'
  "$BATS_TEST_TMPDIR/bin/semanage" fcontext -m -t var_lib_t '/var/lib/k0s/containerd(/.*)?'
  run_script k0s/join-worker.sh
  assert_success
  assert_called '^semanage fcontext -m -t container_var_lib_t /var/lib/k0s/containerd\(/\.\*\)\?$'
  assert_called '^restorecon -R -v -- .*/var/lib/k0s/containerd$'
}

@test "join-worker: where SELinux is disabled, nothing is labeled and no drop-in is written" {
  k0s_worker_inputs
  export STUB_SELINUX=Disabled
  run_script k0s/join-worker.sh
  assert_success
  [ ! -e "$GPU_CLUSTER_ROOT$K0S_DROPIN" ]
  refute_called '^semanage|^restorecon'
}
