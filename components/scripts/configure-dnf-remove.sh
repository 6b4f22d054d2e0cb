#!/usr/bin/env bash
# Delete step of configure-dnf (packages.epel false, or the host left the cluster): deletes the
# EPEL repository file and key it wrote and disables CRB only when configure-dnf enabled it.
set -euo pipefail
# shellcheck source=lib.sh
[[ -n "${GPU_CLUSTER_LIB_LOADED:-}" ]] || source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
# shellcheck source=os/lib.sh
[[ -n "${GPU_CLUSTER_OS_LIB_LOADED:-}" ]] || source "$(dirname "${BASH_SOURCE[0]}")/os/lib.sh"
: "${GPU_CLUSTER_STEP:=remove-configure-dnf}"

# It reads no input (configure-dnf.sh's come with the step and are not used here). Packages
# installed from EPEL stay installed; dnf no longer updates them.

EPEL_REPO_FILE=/etc/yum.repos.d/gpu-cluster-epel.repo
EPEL_KEY_FILE=/etc/pki/rpm-gpg/RPM-GPG-KEY-EPEL-9
CRB_ENABLED_FILE=/var/lib/gpu-cluster/dnf/crb-enabled

# remove_epel: the repository file and, with it, the key configure-dnf wrote for it. Without
# the file the key is not the step's: the host's own epel-release names the same path.
remove_epel() {
  if [[ ! -e "$ROOT$EPEL_REPO_FILE" ]]; then
    log "unchanged: $EPEL_REPO_FILE is absent"
    return 0
  fi
  remove_file "$EPEL_REPO_FILE"
  remove_file "$EPEL_KEY_FILE"
}

# disable_crb: the CRB repository configure-dnf enabled (CRB_ENABLED_FILE), disabled as it was
# enabled: subscription-manager's on RHEL, dnf config-manager's on the rebuilds.
disable_crb() {
  local id
  if [[ ! -f "$ROOT$CRB_ENABLED_FILE" ]]; then
    log "unchanged: configure-dnf did not enable CRB"
    return 0
  fi
  id="$(<"$ROOT$CRB_ENABLED_FILE")"
  case "$id" in
    crb) dnf_run config-manager --set-disabled crb || die "dnf config-manager could not disable crb" ;;
    codeready-builder-for-rhel-9-x86_64-rpms | codeready-builder-for-rhel-9-aarch64-rpms | \
      codeready-builder-for-rhel-9-ppc64le-rpms | codeready-builder-for-rhel-9-s390x-rpms)
      subscription-manager repos --disable "$id" || die "subscription-manager could not disable $id"
      ;;
    *) die "$CRB_ENABLED_FILE names no CRB repository configure-dnf enables: '$id'" ;;
  esac
  log "changed: disabled CRB ($id), which configure-dnf had enabled"
  remove_file "$CRB_ENABLED_FILE"
}

main() {
  remove_epel
  disable_crb
}

main "$@"
