#!/usr/bin/env bats
# configure-dnf.sh and configure-dnf-remove.sh (packages.epel): EPEL 9 and CRB on RHEL 9 family
# hosts, with the stubs (dnf's repolist and config-manager and subscription-manager edit the
# fake root's .repo files); configure-dnf-dnf.bats runs the real dnf on the file it writes.

bats_require_minimum_version 1.5.0
load helpers

REPO=/etc/yum.repos.d/gpu-cluster-epel.repo
KEY=/etc/pki/rpm-gpg/RPM-GPG-KEY-EPEL-9
CRB_RECORD=/var/lib/gpu-cluster/dnf/crb-enabled
EPEL_PIN=FF8AD1344597106ECE813B918A3872BF3228467C

setup() {
  setup_host
  set_os_release rocky-9.4
  rocky_repos 0
  # dnf-plugins-core is in Rocky Linux 9's images (dnf config-manager).
  mkdir -p "$STUB_STATE/rpm" && echo 4.3.0-16.el9 >"$STUB_STATE/rpm/dnf-plugins-core"
  export EPEL_KEY_FINGERPRINT=$EPEL_PIN
  unset EPEL_MIRROR
}

@test "configure-dnf: Rocky Linux 9 gets EPEL 9 from Fedora's mirror list with the pinned key, and CRB; a second run changes nothing" {
  run_script configure-dnf.sh
  assert_success
  assert_file "$REPO" '# Managed by gpu-cluster (packages.epel): EPEL 9, its packages checked against the pinned key.
[gpu-cluster-epel]
name=Extra Packages for Enterprise Linux 9 - $basearch
metalink=https://mirrors.fedoraproject.org/metalink?repo=epel-9&arch=$basearch
enabled=1
gpgcheck=1
gpgkey=file:///etc/pki/rpm-gpg/RPM-GPG-KEY-EPEL-9'
  assert_mode "$REPO" 644
  grep -qx "stub key $EPEL_PIN" "$GPU_CLUSTER_ROOT$KEY"
  assert_called "^curl -fsSL --retry 5 -o .* https://dl.fedoraproject.org/pub/epel/RPM-GPG-KEY-EPEL-9$"
  assert_called '^dnf -y --setopt=exit_on_lock=False config-manager --set-enabled crb$'
  grep -qx 'enabled=1' <(sed -n '/^\[crb\]/,$p' "$GPU_CLUSTER_ROOT/etc/yum.repos.d/rocky.repo")
  assert_file "$CRB_RECORD" crb
  assert_output_contains "changed: EPEL 9 from Fedora's mirror list (key $EPEL_PIN)" \
    "changed: enabled CRB (crb), which EPEL's packages need"
  assert_idempotent configure-dnf.sh
  assert_output_contains "unchanged $KEY (key $EPEL_PIN)" "CRB (crb) is already enabled"
}

@test "configure-dnf: the key EPEL publishes (tests/scripts/keys) is the one config/versions.py pins, read by the real gpg" {
  local pinned
  pinned="$("$PYTHON" -c 'from config import versions; print(versions.EPEL_9_KEY_FINGERPRINT)')"
  export EPEL_KEY_FINGERPRINT=$pinned STUB_EPEL_GPGKEY_FILE="$TESTS_DIR/keys/RPM-GPG-KEY-EPEL-9"
  run_script configure-dnf.sh
  assert_success
  assert_called "^gpg --batch --show-keys --with-colons -- "
  cmp -s "$STUB_EPEL_GPGKEY_FILE" "$GPU_CLUSTER_ROOT$KEY"
  assert_output_contains "changed: EPEL 9 from Fedora's mirror list (key $pinned)"
}

@test "configure-dnf: packages.epelMirror: the key and packages come from the mirror, still the pinned key" {
  export EPEL_MIRROR=https://rpm.example.internal/epel/
  run_script configure-dnf.sh
  assert_success
  grep -qx 'baseurl=https://rpm.example.internal/epel/9/Everything/$basearch/' "$GPU_CLUSTER_ROOT$REPO"
  assert_called "^curl .* https://rpm.example.internal/epel/RPM-GPG-KEY-EPEL-9$"
  assert_output_contains "changed: EPEL 9 from https://rpm.example.internal/epel/ (key $EPEL_PIN)"
  run ! grep -q metalink "$GPU_CLUSTER_ROOT$REPO"
}

@test "configure-dnf: a key that is not the pinned one is refused, naming host and step; nothing is written" {
  export STUB_EPEL_KEY_FINGERPRINT=0123456789ABCDEF0123456789ABCDEF01234567
  run_script configure-dnf.sh
  assert_failure
  assert_output_contains "gpu-cluster: moscow: configure-dnf: https://dl.fedoraproject.org/pub/epel/RPM-GPG-KEY-EPEL-9 is not the pinned key $EPEL_PIN (found: 0123456789ABCDEF0123456789ABCDEF01234567); nothing trusted"
  [ ! -e "$GPU_CLUSTER_ROOT$REPO" ]
  [ ! -e "$GPU_CLUSTER_ROOT$KEY" ]
}

@test "configure-dnf: a key file that is not the pinned key is replaced" {
  mkdir -p "$GPU_CLUSTER_ROOT/etc/pki/rpm-gpg"
  printf -- '-----BEGIN PGP PUBLIC KEY BLOCK-----\nstub key 0123456789ABCDEF0123456789ABCDEF01234567\n-----END PGP PUBLIC KEY BLOCK-----\n' \
    >"$GPU_CLUSTER_ROOT$KEY"
  run_script configure-dnf.sh
  assert_success
  assert_output_contains "warning: $KEY does not hold exactly the pinned key $EPEL_PIN; replacing it"
  grep -qx "stub key $EPEL_PIN" "$GPU_CLUSTER_ROOT$KEY"
}

@test "configure-dnf: a host with its own epel-release gets no second definition; one written before is removed" {
  printf '[epel]\nname=Extra Packages for Enterprise Linux 9 - $basearch\nenabled=1\ngpgcheck=1\n' \
    >"$GPU_CLUSTER_ROOT/etc/yum.repos.d/epel.repo"
  run_script configure-dnf.sh
  assert_success
  assert_output_contains "EPEL is already enabled by the host's own repository 'epel' (epel-release); it is left as it is, without a second definition"
  [ ! -e "$GPU_CLUSTER_ROOT$REPO" ]
  refute_called '^curl'
  assert_file "$CRB_RECORD" crb
  # Written while the host had none, then the host installed epel-release.
  rm "$GPU_CLUSTER_ROOT/etc/yum.repos.d/epel.repo"
  run_script configure-dnf.sh
  assert_success
  [ -e "$GPU_CLUSTER_ROOT$REPO" ]
  printf '[epel]\nname=EPEL\nenabled=1\n' >"$GPU_CLUSTER_ROOT/etc/yum.repos.d/epel.repo"
  run_script configure-dnf.sh
  assert_success
  assert_output_contains "changed: removed $REPO"
  [ ! -e "$GPU_CLUSTER_ROOT$REPO" ]
  assert_idempotent configure-dnf.sh
}

@test "configure-dnf: CRB enabled by the host is left to it, and the remove step leaves it enabled" {
  rocky_repos 1
  run_script configure-dnf.sh
  assert_success
  assert_output_contains "CRB (crb) is already enabled"
  refute_called 'config-manager'
  [ ! -e "$GPU_CLUSTER_ROOT$CRB_RECORD" ]
  run_script configure-dnf-remove.sh
  assert_success
  assert_output_contains "unchanged: configure-dnf did not enable CRB"
  grep -qx 'enabled=1' <(sed -n '/^\[crb\]/,$p' "$GPU_CLUSTER_ROOT/etc/yum.repos.d/rocky.repo")
}

@test "configure-dnf: without dnf-plugins-core it is installed first, for dnf config-manager" {
  rm "$STUB_STATE/rpm/dnf-plugins-core"
  run_script configure-dnf.sh
  assert_success
  assert_call_order '^dnf -y --setopt=exit_on_lock=False install dnf-plugins-core$' 'config-manager --set-enabled crb'
  assert_output_contains "changed: installed dnf-plugins-core"
}

@test "configure-dnf: RHEL 9 enables its CodeReady Linux Builder with subscription-manager" {
  set_os_release rhel-9.4
  rm "$GPU_CLUSTER_ROOT/etc/yum.repos.d/rocky.repo"
  printf '[rhel-9-for-x86_64-baseos-rpms]\nname=BaseOS\nenabled=1\n\n[codeready-builder-for-rhel-9-x86_64-rpms]\nname=CodeReady Linux Builder\nenabled=0\n' \
    >"$GPU_CLUSTER_ROOT/etc/yum.repos.d/redhat.repo"
  run_script configure-dnf.sh
  assert_success
  assert_called '^subscription-manager repos --enable codeready-builder-for-rhel-9-x86_64-rpms$'
  refute_called 'config-manager'
  assert_file "$CRB_RECORD" codeready-builder-for-rhel-9-x86_64-rpms
  assert_idempotent configure-dnf.sh
  run_script configure-dnf-remove.sh
  assert_success
  assert_called '^subscription-manager repos --disable codeready-builder-for-rhel-9-x86_64-rpms$'
  grep -qx 'enabled=0' <(sed -n '/^\[codeready-builder/,$p' "$GPU_CLUSTER_ROOT/etc/yum.repos.d/redhat.repo")
}

@test "configure-dnf: an unregistered RHEL host fails, naming subscription-manager" {
  set_os_release rhel-9.4
  rm "$GPU_CLUSTER_ROOT/etc/yum.repos.d/rocky.repo"
  printf '[rhel-9-for-x86_64-baseos-rpms]\nname=BaseOS\nenabled=1\n' >"$GPU_CLUSTER_ROOT/etc/yum.repos.d/redhat.repo"
  run_script configure-dnf.sh
  assert_failure
  assert_output_contains "gpu-cluster: moscow: configure-dnf: subscription-manager could not enable codeready-builder-for-rhel-9-x86_64-rpms: EPEL's packages need it (is the host registered?)"
  [ ! -e "$GPU_CLUSTER_ROOT$CRB_RECORD" ]
}

@test "configure-dnf: an Ubuntu host is left alone and says why" {
  set_os_release ubuntu-24.04
  run_script configure-dnf.sh
  assert_success
  assert_output_contains "configure-dnf: Ubuntu host: packages.epel is for RHEL 9 family hosts; nothing to do"
  refute_called '^(dnf|curl|subscription-manager)'
  [ ! -e "$GPU_CLUSTER_ROOT$REPO" ]
  assert_idempotent configure-dnf.sh
}

@test "configure-dnf: inputs are checked before anything changes" {
  EPEL_MIRROR='https://rpm.example.internal/epel $(id)' run_script configure-dnf.sh
  assert_failure
  assert_output_contains "gpu-cluster: moscow: configure-dnf: EPEL_MIRROR is not a download location"
  EPEL_KEY_FINGERPRINT=ff8ad1344597106ece813b918a3872bf3228467c run_script configure-dnf.sh
  assert_failure
  assert_output_contains "EPEL_KEY_FINGERPRINT must be an OpenPGP v4 fingerprint (40 upper-case hex digits)"
  unset EPEL_KEY_FINGERPRINT
  run_script configure-dnf.sh
  assert_failure
  assert_output_contains "EPEL_KEY_FINGERPRINT"
  assert_no_state_changes
  [ ! -e "$GPU_CLUSTER_ROOT$REPO" ]
}

@test "configure-dnf-remove: deletes the repository file and key and disables the CRB it enabled; a second run changes nothing" {
  run_script configure-dnf.sh
  assert_success
  run_script configure-dnf-remove.sh
  assert_success
  assert_output_contains "changed: removed $REPO" "changed: removed $KEY" \
    "changed: disabled CRB (crb), which configure-dnf had enabled" "changed: removed $CRB_RECORD"
  [ ! -e "$GPU_CLUSTER_ROOT$REPO" ] && [ ! -e "$GPU_CLUSTER_ROOT$KEY" ] && [ ! -e "$GPU_CLUSTER_ROOT$CRB_RECORD" ]
  grep -qx 'enabled=0' <(sed -n '/^\[crb\]/,$p' "$GPU_CLUSTER_ROOT/etc/yum.repos.d/rocky.repo")
  assert_idempotent configure-dnf-remove.sh
}

@test "configure-dnf-remove: the key of the host's own epel-release stays" {
  printf '[epel]\nname=EPEL\nenabled=1\n' >"$GPU_CLUSTER_ROOT/etc/yum.repos.d/epel.repo"
  mkdir -p "$GPU_CLUSTER_ROOT/etc/pki/rpm-gpg" && echo "epel-release's key" >"$GPU_CLUSTER_ROOT$KEY"
  run_script configure-dnf-remove.sh
  assert_success
  [ -e "$GPU_CLUSTER_ROOT$KEY" ]
  assert_output_contains "unchanged: $REPO is absent"
}
