#!/usr/bin/env bats
# RKE2's join-agent on an enforcing Rocky Linux 9 host against the real dnf (Debian's dnf 4.14
# in an installroot, offline): the .repo file rke2/lib.sh writes for rke2-selinux goes through
# dnf's own parser, dnf installs the pinned version from it only when the step enables it, and
# checks the package's signature against the key the step pinned. A local repository stands in
# for Rancher's (helpers/rpm-repos.bash make_rancher_repos), signed by a test key whose
# fingerprint is the pin.

bats_require_minimum_version 1.5.0
load helpers
load helpers/rpm-repos

setup_file() {
  make_repos_for_file make_rancher_repos
}

setup() {
  real_dnf_host rancher
  export STUB_SELINUX=Enforcing STUB_RANCHER_GPGKEY_FILE="$REPOS/rancher.asc" \
    RANCHER_RPM_KEY_FINGERPRINT="$(<"$REPOS/rancher.fpr")" RKE2_VERSION=v1.36.3+rke2r1 \
    RKE2_AGENT_TOKEN="K10$(printf '%064d' 7)::node:agent-token-secret-7d2b0a" \
    RKE2_KUBELET_CONFIG='resolv-conf: /run/systemd/resolve/resolv.conf' \
    RKE2_CONFIG='server: https://10.20.0.10:9345
token-file: /etc/rancher/rke2/agent-token
node-name: moscow'
}

@test "rke2-selinux through the real dnf: the pinned version from the step's disabled repository, its signature checked, once" {
  run_script rke2/join-agent.sh
  assert_success
  [ "$(/usr/bin/rpm --root "$GPU_CLUSTER_ROOT" -q --queryformat '%{VERSION}-%{RELEASE}' rke2-selinux)" = 0.23-1.el9 ]
  assert_output_contains "changed: installed rke2-selinux-0.23-1.el9"
  # dnf read the file as written: the repository is there, disabled, with the pinned key.
  run dnf -q repolist --disabled
  assert_success
  assert_output_contains "gpu-cluster-rke2-selinux"
  run dnf -q repolist --enabled
  refute_output_contains "gpu-cluster-rke2-selinux"
  # A second run finds it at its version and installs nothing.
  reset_calls
  run_script rke2/join-agent.sh
  assert_success
  refute_called '^dnf .*install'
  refute_changes_logged
}

@test "rke2-selinux through the real dnf: a package signed by another key than the pinned one is refused" {
  export REAL_DNF_RANCHER_TREE=rancher-forged
  run_script rke2/join-agent.sh
  assert_failure
  assert_output_contains "dnf could not install rke2-selinux-0.23-1.el9"
  run /usr/bin/rpm --root "$GPU_CLUSTER_ROOT" -q rke2-selinux
  assert_failure
  [ ! -e "$GPU_CLUSTER_ROOT/etc/rancher/rke2/config.yaml.d/40-gpu-cluster-selinux.yaml" ]
}
