# shellcheck shell=bash
# Local RPM repositories made like NVIDIA's, and the real dnf 4 and rpm against a fake root, for
# install-nvidia-el9-dnf.bats. Packages are empty RPMs built by rpmbuild; the CUDA repository's
# packages are signed with rpmsign and its repomd.xml carries a detached signature, as
# NVIDIA's does (NVIDIA/cuda-repo-management SIGNATURES.md), with the driver as modular streams
# (modules.yaml as NVIDIA's genmodules.py writes it: name nvidia-driver, streams BRANCH-open);
# the toolkit repository's repomd.xml is signed with a second key, its packages not.

# shellcheck disable=SC2034 # read by the .bats file
RPM_BUILD_TOOLS=(rpmbuild rpmsign createrepo_c modifyrepo_c dnf)
# The driver versions of the two streams the CUDA repository offers.
DRIVER_575=575.57.08
DRIVER_580=580.95.05
DRIVER_580_UPDATE=580.105.08
# shellcheck disable=SC2034 # read by the .bats file: the release of the kernel-devel built here
RUNNING_KERNEL=5.14.0-503.14.1.el9_5

# rpm_build NAME VERSION RELEASE ARCH OUT [REQUIRES...]: a package in folder OUT, empty but
# for the empty config files RPM_CONFIG_FILES names (absolute paths).
rpm_build() {
  local name=$1 version=$2 release=$3 arch=$4 out=$5 requirement requires="" file
  local install="" files=""
  shift 5
  for requirement in "$@"; do
    requires+="Requires: $requirement"$'\n'
  done
  for file in ${RPM_CONFIG_FILES:-}; do
    install+="mkdir -p %{buildroot}${file%/*} && touch %{buildroot}$file"$'\n'
    files+="%config(noreplace) $file"$'\n'
  done
  cat >"$REPOS/spec" <<EOF
Name: $name
Version: $version
Release: $release
Summary: $name for the tests
License: MIT
BuildArch: $arch
$requires
%description
$name for the tests.
%install
$install
%files
$files
EOF
  rpmbuild -bb --quiet --define "_topdir $REPOS/build" --define "_rpmdir $out" \
    --define '_build_name_fmt %%{NAME}-%%{VERSION}-%%{RELEASE}.%%{ARCH}.rpm' "$REPOS/spec" >/dev/null
}

# stream_yaml BRANCH BUILD ARTIFACT...: the modulemd v2 document of stream BRANCH-open of the
# nvidia-driver module, its BUILD-th version (a later build of a stream has a higher one),
# with the NEVRAs ARTIFACT (as NVIDIA's genmodules.py writes them: name nvidia-driver, streams
# BRANCH-open, the default profile installing nvidia-open).
stream_yaml() {
  local branch=$1 build=$2 artifact
  shift 2
  cat <<EOF
---
document: modulemd
version: 2
data:
  name: nvidia-driver
  stream: $branch-open
  version: $build
  context: c$branch
  arch: noarch
  summary: NVIDIA driver $branch-open
  description: Build $build of the test's stream of branch $branch.
  license:
    module: [MIT]
  artifacts:
    rpms:
EOF
  for artifact in "$@"; do
    echo "    - $artifact"
  done
  printf '  profiles:\n    default:\n      rpms: [nvidia-open]\n...\n'
}

# driver_artifacts VERSION [FABRIC]: the driver's NEVRAs at VERSION, with Fabric Manager's and
# NSCQ's when FABRIC is given.
driver_artifacts() {
  echo "nvidia-open-0:$1-1.el9.noarch" "nvidia-driver-cuda-0:$1-1.el9.noarch" \
    "kmod-nvidia-open-dkms-0:$1-1.el9.noarch" \
    ${2:+"nvidia-fabricmanager-0:$1-1.noarch" "libnvidia-nscq-0:$1-1.noarch"}
}

# make_repos_for_file MAKER: a bats file's setup_file: MAKER (make_rpm_repos, make_epel_repos,
# make_rancher_repos) makes its repositories in $BATS_FILE_TMPDIR/repos; without the RPM tools
# every test of the file skips, saying which is missing.
make_repos_for_file() {
  local tool
  for tool in "${RPM_BUILD_TOOLS[@]}"; do
    command -v "$tool" >/dev/null || skip "$tool is not installed (tests/debian/packages.txt)"
  done
  "$1" "$BATS_FILE_TMPDIR/repos"
}

# real_dnf_host KEY: a test's setup: REPOS, and a fresh Rocky Linux 9.4 host whose dnf and rpm
# are the real ones reading REPOS (use_real_dnf); skips when setup_file made no key
# $REPOS/KEY.fpr.
real_dnf_host() {
  REPOS="$BATS_FILE_TMPDIR/repos"
  [[ -f "$REPOS/$1.fpr" ]] || skip "the repositories were not made"
  setup_host
  set_os_release rocky-9.4
  use_real_dnf "$REPOS"
}

# make_signing_keys NAME...: a signing key for each NAME in the keyring $REPOS/gnupg (GNUPGHOME,
# exported for the signing that follows), its public key in $REPOS/NAME.asc and its
# fingerprint in $REPOS/NAME.fpr.
make_signing_keys() {
  local name
  export GNUPGHOME="$REPOS/gnupg"
  mkdir -p "$GNUPGHOME"
  chmod 0700 "$GNUPGHOME"
  for name in "$@"; do
    gpg --batch --quiet --passphrase '' --quick-generate-key "$name <$name@example.com>" \
      rsa3072 sign never 2>/dev/null
    gpg --batch --armor --export "$name@example.com" >"$REPOS/$name.asc"
    gpg --batch --with-colons --list-keys "$name@example.com" |
      awk -F: '$1 == "fpr" { print $10; exit }' >"$REPOS/$name.fpr"
  done
}

# make_rpm_repos DIR: DIR/cuda, DIR/toolkit/stable/rpm/x86_64 (and DIR/toolkit/gpgkey) and DIR/base (what the
# distribution and EPEL would have: dkms, the running kernel's kernel-devel and
# kernel-headers, the versionlock plugin), the keys DIR/cuda.asc and DIR/toolkit.asc and their
# fingerprints in DIR/cuda.fpr and DIR/toolkit.fpr.
make_rpm_repos() {
  REPOS=$1
  local version package toolkit="$1/toolkit/stable/rpm/x86_64"
  mkdir -p "$REPOS/cuda" "$toolkit" "$REPOS/base"
  make_signing_keys cuda toolkit
  # The toolkit repository's key where NVIDIA serves it, beside stable/ (nvidia.aptMirror).
  cp "$REPOS/toolkit.asc" "$REPOS/toolkit/gpgkey"
  for version in "$DRIVER_575" "$DRIVER_580"; do
    rpm_build nvidia-open "$version" 1.el9 noarch "$REPOS/cuda" \
      "nvidia-driver-cuda = $version" "kmod-nvidia-open-dkms = $version"
    rpm_build nvidia-driver-cuda "$version" 1.el9 noarch "$REPOS/cuda"
    rpm_build kmod-nvidia-open-dkms "$version" 1.el9 noarch "$REPOS/cuda" dkms
    rpm_build nvidia-fabricmanager "$version" 1 noarch "$REPOS/cuda"
    rpm_build libnvidia-nscq "$version" 1 noarch "$REPOS/cuda"
  done
  for version in 1.18.0 1.19.1; do
    for package in nvidia-container-toolkit nvidia-container-toolkit-base \
      libnvidia-container-tools libnvidia-container1; do
      rpm_build "$package" "$version" 1 noarch "$toolkit"
    done
  done
  rpm_build dkms 3.1.5 1.el9 noarch "$REPOS/base"
  rpm_build kernel-devel 5.14.0 503.14.1.el9_5 x86_64 "$REPOS/base"
  rpm_build kernel-headers 5.14.0 503.14.1.el9_5 x86_64 "$REPOS/base"
  rpm_build kernel-devel-matched 5.14.0 503.14.1.el9_5 x86_64 "$REPOS/base" \
    "kernel-devel = 5.14.0-503.14.1.el9_5"
  # Its empty lock list, as dnf-plugins-core.spec ships it.
  RPM_CONFIG_FILES=/etc/dnf/plugins/versionlock.list \
    rpm_build python3-dnf-plugin-versionlock 4.3.0 16.el9 noarch "$REPOS/base"
  rpmsign --addsign --define '__gpg /usr/bin/gpg' --define '_gpg_name cuda@example.com' \
    --define "_gpg_path $GNUPGHOME" "$REPOS"/cuda/*.rpm >/dev/null 2>&1
  createrepo_c --quiet "$REPOS/cuda"
  createrepo_c --quiet "$toolkit"
  createrepo_c --quiet "$REPOS/base"
  # shellcheck disable=SC2046 # NEVRAs, one word each
  {
    stream_yaml 575 1 $(driver_artifacts "$DRIVER_575" fabric)
    stream_yaml 580 1 $(driver_artifacts "$DRIVER_580" fabric)
  } >"$REPOS/modules.yaml"
  modifyrepo_c --mdtype=modules "$REPOS/modules.yaml" "$REPOS/cuda/repodata" >/dev/null
  make_updates_repo "$REPOS/updates"
  gpg --batch --yes --local-user cuda@example.com --detach-sign --armor \
    "$REPOS/cuda/repodata/repomd.xml"
  gpg --batch --yes --local-user toolkit@example.com --detach-sign --armor \
    "$toolkit/repodata/repomd.xml"
  unset GNUPGHOME
}

# use_real_dnf REPOS: `dnf` and `rpm` on PATH are the real ones on the fake root
# (--installroot, --root) with no network, against REPOS: the base repository is the host's,
# the CUDA repository's baseurl is REPOS/cuda, and each repository's gpgkey file:///PATH is read
# at the fake root's PATH (dnf takes file URLs on the machine, not in the installroot). The
# versionlock plugin's list is the fake root's, and it runs once its package is installed
# there. Each call is logged like a stub's; after one,
# nvidia-smi reports the installed kernel module's version, as the loaded driver would.
use_real_dnf() {
  local bin="$BATS_TEST_TMPDIR/real-bin" plugins="$BATS_TEST_TMPDIR/dnf-plugins"
  mkdir -p "$bin" "$plugins" "$GPU_CLUSTER_ROOT/etc/yum.repos.d"
  printf '[main]\nenabled = 1\nlocklist = %s/etc/dnf/plugins/versionlock.list\n' \
    "$GPU_CLUSTER_ROOT" >"$plugins/versionlock.conf"
  printf '[test-base]\nname=test-base\nbaseurl=file://%s/base\ngpgcheck=0\n' "$1" \
    >"$GPU_CLUSTER_ROOT/etc/yum.repos.d/test-base.repo"
  cat >"$bin/dnf" <<EOF
#!/bin/bash
echo "dnf \$*" >>"\$STUB_CALLS"
keys=()
for repo in "\$GPU_CLUSTER_ROOT"/etc/yum.repos.d/*.repo; do
  id=\$(sed -n 's/^\[\(.*\)\]\$/\1/p' "\$repo" | head -n 1)
  key=\$(sed -n 's|^gpgkey=file://||p' "\$repo")
  [[ -z "\$key" ]] || keys+=("--setopt=\$id.gpgkey=file://\$GPU_CLUSTER_ROOT\$key")
done
# The plugin runs once its package is on the fake root, as on a host.
/usr/bin/rpm --root "\$GPU_CLUSTER_ROOT" -q --quiet python3-dnf-plugin-versionlock ||
  keys+=(--disableplugin=versionlock)
# NVIDIA's CUDA repository from REPOS once its file is there (config-manager refuses an option
# of a repository dnf does not have).
[[ ! -f "\$GPU_CLUSTER_ROOT/etc/yum.repos.d/cuda-rhel9.repo" ]] ||
  keys+=(--setopt=cuda-rhel9-x86_64.baseurl=file://$1/cuda)
# Rancher's rke2-selinux repository from REPOS/\${REAL_DNF_RANCHER_TREE:-rancher} likewise.
[[ ! -f "\$GPU_CLUSTER_ROOT/etc/yum.repos.d/gpu-cluster-rke2-selinux.repo" ]] ||
  keys+=("--setopt=gpu-cluster-rke2-selinux.baseurl=file://$1/\${REAL_DNF_RANCHER_TREE:-rancher}")
unshare -n /usr/bin/dnf --installroot="\$GPU_CLUSTER_ROOT" --releasever=9 \\
  --setopt=module_platform_id=platform:el9 --setopt=pluginconfpath=$plugins \\
  "\${keys[@]}" "\$@" || exit
version=\$(/usr/bin/rpm --root "\$GPU_CLUSTER_ROOT" -q --queryformat '%{VERSION}' kmod-nvidia-open-dkms) &&
  echo "\$version" >"\$STUB_STATE/nvidia-driver-version"
exit 0
EOF
  cat >"$bin/rpm" <<'EOF'
#!/bin/bash
echo "rpm $*" >>"$STUB_CALLS"
exec /usr/bin/rpm --root "$GPU_CLUSTER_ROOT" "$@"
EOF
  chmod +x "$bin/dnf" "$bin/rpm"
  export PATH="$bin:$PATH"
}

# make_updates_repo DIR: what the repositories publish later: a newer build of branch 580 (a
# later version of its stream, as NVIDIA publishes one) and a newer toolkit. use_real_dnf
# leaves it out until with_updates adds it.
make_updates_repo() {
  local package
  mkdir -p "$1"
  for package in nvidia-open nvidia-driver-cuda kmod-nvidia-open-dkms; do
    rpm_build "$package" "$DRIVER_580_UPDATE" 1.el9 noarch "$1"
  done
  for package in nvidia-container-toolkit nvidia-container-toolkit-base \
    libnvidia-container-tools libnvidia-container1; do
    rpm_build "$package" 1.20.0 1 noarch "$1"
  done
  createrepo_c --quiet "$1"
  # shellcheck disable=SC2046 # NEVRAs, one word each
  stream_yaml 580 2 $(driver_artifacts "$DRIVER_580_UPDATE") >"$REPOS/updates.yaml"
  modifyrepo_c --mdtype=modules "$REPOS/updates.yaml" "$1/repodata" >/dev/null
}

# with_updates: the fake root's dnf also sees the updates repository.
with_updates() {
  printf '[test-updates]\nname=test-updates\nbaseurl=file://%s/updates\ngpgcheck=0\n' "$REPOS" \
    >"$GPU_CLUSTER_ROOT/etc/yum.repos.d/test-updates.repo"
}


# make_rancher_repos DIR: DIR/rancher, a repository like Rancher's stable one for EL9 with
# rke2-selinux 0.23-1.el9 signed by the key DIR/rancher.asc (its fingerprint in
# DIR/rancher.fpr) and unsigned metadata, as Rancher's (repo_gpgcheck=0); DIR/rancher-forged,
# the same package signed by another key; DIR/base, the host's own (empty).
make_rancher_repos() {
  REPOS=$1
  local tree
  mkdir -p "$REPOS/base"
  make_signing_keys rancher other
  for tree in rancher rancher-forged; do
    mkdir -p "$REPOS/$tree"
    rpm_build rke2-selinux 0.23 1.el9 noarch "$REPOS/$tree"
  done
  rpmsign --addsign --define '__gpg /usr/bin/gpg' --define '_gpg_name rancher@example.com' \
    --define "_gpg_path $GNUPGHOME" "$REPOS/rancher"/*.rpm >/dev/null 2>&1
  rpmsign --addsign --define '__gpg /usr/bin/gpg' --define '_gpg_name other@example.com' \
    --define "_gpg_path $GNUPGHOME" "$REPOS/rancher-forged"/*.rpm >/dev/null 2>&1
  for tree in rancher rancher-forged base; do
    createrepo_c --quiet "$REPOS/$tree"
  done
  unset GNUPGHOME
}

# make_epel_repos DIR: EPEL-like trees with the layout of dl.fedoraproject.org/pub/epel
# (packages.epelMirror): DIR/epel, whose dkms is signed by the key it serves as
# RPM-GPG-KEY-EPEL-9 (DIR/epel.asc, its fingerprint in DIR/epel.fpr), and DIR/forged, serving
# the same key but with a dkms signed by another; DIR/crb, the distribution's CRB (one
# package, crb-probe); DIR/base, what use_real_dnf reads as the host's own (dnf-plugins-core).
make_epel_repos() {
  REPOS=$1
  local name tree arch
  arch="$(/usr/bin/uname -m)"
  mkdir -p "$REPOS/crb" "$REPOS/base"
  make_signing_keys epel other
  for tree in epel forged; do
    mkdir -p "$REPOS/$tree/9/Everything/$arch"
    cp "$REPOS/epel.asc" "$REPOS/$tree/RPM-GPG-KEY-EPEL-9"
    rpm_build dkms 3.1.5 1.el9 noarch "$REPOS/$tree/9/Everything/$arch"
  done
  rpmsign --addsign --define '__gpg /usr/bin/gpg' --define '_gpg_name epel@example.com' \
    --define "_gpg_path $GNUPGHOME" "$REPOS/epel/9/Everything/$arch"/*.rpm >/dev/null 2>&1
  rpmsign --addsign --define '__gpg /usr/bin/gpg' --define '_gpg_name other@example.com' \
    --define "_gpg_path $GNUPGHOME" "$REPOS/forged/9/Everything/$arch"/*.rpm >/dev/null 2>&1
  rpm_build crb-probe 1.0 1.el9 noarch "$REPOS/crb"
  rpm_build dnf-plugins-core 4.3.0 16.el9 noarch "$REPOS/base"
  for tree in "$REPOS/epel/9/Everything/$arch" "$REPOS/forged/9/Everything/$arch" \
    "$REPOS/crb" "$REPOS/base"; do
    createrepo_c --quiet "$tree"
  done
  unset GNUPGHOME
}

# assert_idempotent_with_dnf SCRIPT: assert_idempotent where the real dnf answers the step's
# queries: each dnf run, a query's too, appends to dnf's own logs in the root
# (/var/log/dnf*.log, logdir under the installroot), which are not the step's changes.
assert_idempotent_with_dnf() {
  local before after logs='(^| )\./var/log/dnf[^ ]*\.log( |$)'
  before="$(snapshot_root | grep -Ev "$logs")"
  reset_calls
  run_script "$1"
  assert_success || return 1
  after="$(snapshot_root | grep -Ev "$logs")"
  if [[ "$before" != "$after" ]]; then
    printf 'second run changed the host:\n%s\n' "$(diff <(echo "$before") <(echo "$after"))" >&2
    return 1
  fi
  assert_no_state_changes
  refute_changes_logged
}
