#!/usr/bin/env bash
# packages.aptMirror: Ubuntu's own archive and security suite from the site's mirror, in
# the file the release reads them from (24.04: the deb822 /etc/apt/sources.list.d/
# ubuntu.sources; 22.04: /etc/apt/sources.list). Other source files stay as they are.
set -euo pipefail
# shellcheck source=lib.sh
[[ -n "${GPU_CLUSTER_LIB_LOADED:-}" ]] || source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
# shellcheck source=os/lib.sh
[[ -n "${GPU_CLUSTER_OS_LIB_LOADED:-}" ]] || source "$(dirname "${BASH_SOURCE[0]}")/os/lib.sh"
: "${GPU_CLUSTER_STEP:=configure-apt}"

# Inputs: UBUNTU_APT_MIRROR
# Optional inputs: UBUNTU_APT_SECURITY_MIRROR
# The file it replaces is kept once under APT_BACKUP_DIR; configure-apt-remove.sh puts it
# back.

# The suites, components and key of Ubuntu's own sources as cloud-init writes them
# (canonical/cloud-init templates/sources.list.ubuntu.deb822.tmpl, the two stanzas; 22.04:
# templates/sources.list.ubuntu.tmpl). The mirror is still checked against Ubuntu's archive
# key (the ubuntu-keyring package's keyring), never a key it serves.
UBUNTU_KEYRING=/usr/share/keyrings/ubuntu-archive-keyring.gpg
COMPONENTS="main restricted universe multiverse"
DEB822_SOURCES=/etc/apt/sources.list.d/ubuntu.sources
LEGACY_SOURCES=/etc/apt/sources.list
APT_BACKUP_DIR=/var/lib/gpu-cluster/apt
MANAGED_PREFIX="# Managed by gpu-cluster (packages.aptMirror)"
MANAGED="$MANAGED_PREFIX; the original is in $APT_BACKUP_DIR."

check_inputs() {
  require_env UBUNTU_APT_MIRROR
  check_download_url UBUNTU_APT_MIRROR
  : "${UBUNTU_APT_SECURITY_MIRROR:=$UBUNTU_APT_MIRROR}"
  check_download_url UBUNTU_APT_SECURITY_MIRROR
}

sources_text() {
  local codename=$1 version=$2 archive=${UBUNTU_APT_MIRROR%/}/ security=${UBUNTU_APT_SECURITY_MIRROR%/}/
  if [[ "$version" == 22.04 ]]; then
    # sources.list(5), one-line style: options in [...] after the type.
    printf '%s\n' "$MANAGED" \
      "deb [signed-by=$UBUNTU_KEYRING] $archive $codename $COMPONENTS" \
      "deb [signed-by=$UBUNTU_KEYRING] $archive $codename-updates $COMPONENTS" \
      "deb [signed-by=$UBUNTU_KEYRING] $archive $codename-backports $COMPONENTS" \
      "deb [signed-by=$UBUNTU_KEYRING] $security $codename-security $COMPONENTS"
  else
    printf '%s\n' "$MANAGED" "Types: deb" "URIs: $archive" \
      "Suites: $codename $codename-updates $codename-backports" "Components: $COMPONENTS" \
      "Signed-By: $UBUNTU_KEYRING" "" "Types: deb" "URIs: $security" \
      "Suites: $codename-security" "Components: $COMPONENTS" "Signed-By: $UBUNTU_KEYRING"
  fi
}

main() {
  check_inputs
  local version codename target
  version="$(os_release_field VERSION_ID)"
  codename="$(os_release_field VERSION_CODENAME)"
  case "$version" in
    22.04) target=$LEGACY_SOURCES ;;
    24.04) target=$DEB822_SOURCES ;;
    *) die "Ubuntu $version: apt's sources are written for 22.04 and 24.04 only" ;;
  esac
  if [[ ! "$codename" =~ ^[a-z]+$ ]]; then
    die "/etc/os-release has no VERSION_CODENAME (got '$codename')"
  fi
  keep_original "$target" "$APT_BACKUP_DIR" "$MANAGED_PREFIX"
  write_file "$target" 0644 < <(sources_text "$codename" "$version")
  if ((FILE_CHANGED)); then
    log "changed: apt reads Ubuntu $version ($codename) from ${UBUNTU_APT_MIRROR%/}/"
  fi
}

main "$@"
