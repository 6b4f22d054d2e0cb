#!/usr/bin/env bats
# configure-dnf.sh on a Rocky Linux 9 root with the real dnf 4.14, its config-manager and rpm
# (Debian's, the versions RHEL 9 ships) against a local tree laid out like EPEL's mirrors
# (helpers/rpm-repos.bash make_epel_repos): dnf parses the .repo file the step writes, checks
# EPEL's packages against the key the step pinned, and config-manager switches CRB.

bats_require_minimum_version 1.5.0
load helpers
load helpers/rpm-repos

REPO=/etc/yum.repos.d/gpu-cluster-epel.repo

setup_file() {
  make_repos_for_file make_epel_repos
}

setup() {
  real_dnf_host epel
  # Rocky Linux's CRB as rocky.repo ships it: defined, not enabled.
  printf '[crb]\nname=Rocky Linux $releasever - CRB\nbaseurl=file://%s/crb\ngpgcheck=0\nenabled=0\n' \
    "$REPOS" >"$GPU_CLUSTER_ROOT/etc/yum.repos.d/rocky.repo"
  EPEL_KEY_FINGERPRINT="$(<"$REPOS/epel.fpr")"
  export EPEL_KEY_FINGERPRINT EPEL_MIRROR="file://$REPOS/epel"
}

# installed: the fake root's packages, NAME-VERSION-RELEASE a line, sorted.
installed() {
  /usr/bin/rpm --root "$GPU_CLUSTER_ROOT" -qa --queryformat '%{NAME}-%{VERSION}-%{RELEASE}\n' |
    grep -v '^gpg-pubkey-' | sort
}

@test "real dnf: EPEL from the mirror and CRB: dkms installs, checked against the pinned key; a second run changes nothing" {
  run_script configure-dnf.sh
  assert_success
  assert_output_contains "changed: installed dnf-plugins-core" "changed: enabled CRB (crb)"
  run dnf -q repolist --enabled
  assert_success
  assert_output_contains "gpu-cluster-epel" "crb "
  run dnf -y install dkms crb-probe
  assert_success
  [ "$(installed)" = "crb-probe-1.0-1.el9
dkms-3.1.5-1.el9
dnf-plugins-core-4.3.0-16.el9" ]
  # The key dnf imported to check dkms is the pinned one, from the file the step wrote.
  /usr/bin/rpm --root "$GPU_CLUSTER_ROOT" -q "gpg-pubkey-$(tail -c 9 "$REPOS/epel.fpr" | tr A-F a-f | head -c 8)"
  assert_idempotent_with_dnf configure-dnf.sh
}

@test "real dnf: without a mirror, dnf reads the metalink repository as written" {
  unset EPEL_MIRROR
  export STUB_EPEL_GPGKEY_FILE="$REPOS/epel.asc"
  run_script configure-dnf.sh
  assert_success
  run dnf config-manager --dump gpu-cluster-epel
  assert_success
  assert_output_contains 'metalink = https://mirrors.fedoraproject.org/metalink?repo=epel-9&arch=' \
    "name = Extra Packages for Enterprise Linux 9 - $(/usr/bin/uname -m)" 'gpgcheck = 1' 'enabled = 1'
}

@test "real dnf: a mirror whose dkms another key signed is refused by dnf" {
  export EPEL_MIRROR="file://$REPOS/forged"
  run_script configure-dnf.sh
  assert_success
  run dnf -y install dkms
  assert_failure
  assert_output_contains "GPG check FAILED"
  run ! grep -q dkms <(installed)
}

@test "real dnf: configure-dnf-remove takes EPEL away and disables the CRB it enabled" {
  run_script configure-dnf.sh
  assert_success
  run_script configure-dnf-remove.sh
  assert_success
  run dnf -q repolist --enabled
  assert_success
  refute_output_contains "gpu-cluster-epel" "crb "
  grep -Eqx 'enabled ?= ?0' "$GPU_CLUSTER_ROOT/etc/yum.repos.d/rocky.repo"
  assert_idempotent_with_dnf configure-dnf-remove.sh
}
