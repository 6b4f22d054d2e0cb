#!/usr/bin/env bash
# packages.epel: on RHEL 9 family hosts, EPEL 9 as a dnf repository checked against its pinned
# key, and the CodeReady Linux Builder repository (CRB) EPEL's packages need. Ubuntu hosts are
# left alone.
set -euo pipefail
# shellcheck source=lib.sh
[[ -n "${GPU_CLUSTER_LIB_LOADED:-}" ]] || source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
# shellcheck source=os/lib.sh
[[ -n "${GPU_CLUSTER_OS_LIB_LOADED:-}" ]] || source "$(dirname "${BASH_SOURCE[0]}")/os/lib.sh"
# shellcheck source=keys/lib.sh
[[ -n "${GPU_CLUSTER_KEYS_LIB_LOADED:-}" ]] || source "$(dirname "${BASH_SOURCE[0]}")/keys/lib.sh"
: "${GPU_CLUSTER_STEP:=configure-dnf}"

# Inputs: EPEL_KEY_FINGERPRINT
# Optional inputs: EPEL_MIRROR
#   EPEL_KEY_FINGERPRINT  EPEL 9's signing key (config/versions.py EPEL_9_KEY_FINGERPRINT)
#   EPEL_MIRROR           packages.epelMirror: a mirror with the layout of EPEL_URL below
#                         (RPM-GPG-KEY-EPEL-9 and 9/Everything/<arch>/)
# What it enabled of CRB is kept in CRB_ENABLED_FILE; configure-dnf-remove.sh disables only
# that, and deletes the repository file and key written here.

# Where EPEL publishes its key and its releases (https://dl.fedoraproject.org/pub/epel/, the
# RPM-GPG-KEY-EPEL-9 beside 9/Everything/x86_64/).
EPEL_URL=https://dl.fedoraproject.org/pub/epel
# Fedora's mirror list for EPEL 9, as epel-release's epel.repo names it (repo=epel-$releasever;
# rocky-linux/documentation docs/books/admin_guide/13-softwares.md, "The EPEL repository");
# release 9 written out, since RHEL's $releasever may be a minor release locked by
# subscription-manager. The metalink carries repomd.xml's checksums, over HTTPS. dnf
# substitutes $basearch itself: it stays literal.
# shellcheck disable=SC2016
EPEL_METALINK='https://mirrors.fedoraproject.org/metalink?repo=epel-9&arch=$basearch'
EPEL_REPO_ID=gpu-cluster-epel
EPEL_REPO_FILE=/etc/yum.repos.d/gpu-cluster-epel.repo
# The key's path as epel-release installs it and its epel.repo names it.
EPEL_KEY_FILE=/etc/pki/rpm-gpg/RPM-GPG-KEY-EPEL-9
# The id of the repository epel-release's epel.repo defines: a host that has it enabled gets
# no second definition.
HOST_EPEL_REPO_ID=epel
CRB_ENABLED_FILE=/var/lib/gpu-cluster/dnf/crb-enabled

check_inputs() {
  require_env EPEL_KEY_FINGERPRINT
  check_fingerprints EPEL_KEY_FINGERPRINT
  die_on_input_problems
  if [[ -n "${EPEL_MIRROR:-}" ]]; then
    check_download_url EPEL_MIRROR
    EPEL_URL=${EPEL_MIRROR%/}
  fi
}

# enabled_repos: the ids of the repositories dnf has enabled, one a line (dnf repolist's first
# column, without its "repo id" header; dnf 4.14 dnf/cli/commands/repolist.py reads no
# metadata for it).
enabled_repos() {
  local listing
  listing="$(dnf -q repolist --enabled)" || die "dnf repolist could not list the repositories"
  awk '!($1 == "repo" && $2 == "id") && NF { print $1 }' <<<"$listing"
}

# repo_enabled ID: success when dnf has repository ID enabled.
repo_enabled() {
  enabled_repos | grep -Fxq -- "$1"
}

# crb_repo_id: the id of the host's CRB repository: Rocky Linux's and AlmaLinux's `crb`, RHEL's
# codeready-builder-for-rhel-9-ARCH-rpms (EPEL's getting started,
# https://docs.fedoraproject.org/en-US/epel/getting-started/, "RHEL 9" and "Rocky Linux 9,
# AlmaLinux 9").
crb_repo_id() {
  local arch
  if [[ "$(os_release_field ID)" != rhel ]]; then
    echo crb
    return 0
  fi
  arch="$(uname -m)"
  [[ "$arch" =~ ^(x86_64|aarch64|ppc64le|s390x)$ ]] || die "RHEL 9 has no CodeReady Linux Builder for $arch"
  echo "codeready-builder-for-rhel-9-$arch-rpms"
}

# enable_crb: CRB enabled as EPEL's getting started says, only when it is not; what was enabled
# here is kept in CRB_ENABLED_FILE for the remove step. RHEL's repositories are
# subscription-manager's (it rewrites /etc/yum.repos.d/redhat.repo); the rebuilds' are files
# dnf config-manager edits (dnf-plugins-core, BaseOS).
enable_crb() {
  local id
  id="$(crb_repo_id)"
  if repo_enabled "$id"; then
    log "CRB ($id) is already enabled"
    return 0
  fi
  if [[ "$id" == crb ]]; then
    os_install_packages dnf-plugins-core
    dnf_run config-manager --set-enabled crb || die "dnf config-manager could not enable $id"
  elif ! subscription-manager repos --enable "$id"; then
    die "subscription-manager could not enable $id: EPEL's packages need it (is the host registered?)"
  fi
  repo_enabled "$id" || die "$id is still not enabled after enabling it"
  write_text "$CRB_ENABLED_FILE" 0644 "$id"
  log "changed: enabled CRB ($id), which EPEL's packages need"
}

# epel_repository: the .repo file of EPEL 9 Everything (dnf.conf(5), repo options), its key the
# pinned one at EPEL_KEY_FILE. EPEL signs its packages, not its repomd.xml (epel-release's
# epel.repo: gpgcheck=1, no repo_gpgcheck).
epel_repository() {
  local location="metalink=$EPEL_METALINK" from="Fedora's mirror list"
  install_pinned_key "$EPEL_URL/RPM-GPG-KEY-EPEL-9" "$EPEL_KEY_FINGERPRINT" "$EPEL_KEY_FILE"
  if [[ -n "${EPEL_MIRROR:-}" ]]; then
    # shellcheck disable=SC2016 # $basearch is dnf's, as in EPEL_METALINK
    location="baseurl=$EPEL_URL/9/Everything/"'$basearch'"/" from="$EPEL_URL/"
  fi
  write_file "$EPEL_REPO_FILE" 0644 <<EOF
# Managed by gpu-cluster (packages.epel): EPEL 9, its packages checked against the pinned key.
[$EPEL_REPO_ID]
name=Extra Packages for Enterprise Linux 9 - \$basearch
$location
enabled=1
gpgcheck=1
gpgkey=file://$EPEL_KEY_FILE
EOF
  if ((FILE_CHANGED)); then
    log "changed: EPEL 9 from $from (key $EPEL_KEY_FINGERPRINT)"
  fi
}

# el9_configure_dnf: EPEL 9 unless the host has its own (epel-release's `epel` enabled), then
# CRB.
el9_configure_dnf() {
  if repo_enabled "$HOST_EPEL_REPO_ID"; then
    log "EPEL is already enabled by the host's own repository '$HOST_EPEL_REPO_ID'" \
      "(epel-release); it is left as it is, without a second definition"
    if [[ -e "$ROOT$EPEL_REPO_FILE" ]]; then
      remove_file "$EPEL_REPO_FILE"
    fi
  else
    epel_repository
  fi
  enable_crb
}

ubuntu_configure_dnf() {
  log "Ubuntu host: packages.epel is for RHEL 9 family hosts; nothing to do"
}

main() {
  check_inputs
  os_do configure_dnf
}

main "$@"
