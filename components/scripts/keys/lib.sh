#!/usr/bin/env bash
# The one place steps take a repository's OpenPGP key: fetched, then trusted only when it is
# exactly the key pinned by fingerprint in config/versions.py (install-nvidia's keys for apt
# and dnf, configure-dnf's EPEL key, the rke2-selinux repository's key). Nothing is imported
# into a keyring here.
# shellcheck shell=bash disable=SC2034 # its include guard is read by the scripts that source it

# shellcheck source=../lib.sh
[[ -n "${GPU_CLUSTER_LIB_LOADED:-}" ]] || source "$(dirname "${BASH_SOURCE[0]}")/../lib.sh"

GPU_CLUSTER_KEYS_LIB_LOADED=1

# check_fingerprints NAME...: adds to INPUT_PROBLEMS each input NAME that is set but is not an
# OpenPGP v4 fingerprint as config/versions.py pins them (40 upper-case hex digits).
check_fingerprints() {
  local name
  for name in "$@"; do
    if [[ -n "${!name:-}" && ! "${!name}" =~ ^[0-9A-F]{40}$ ]]; then
      INPUT_PROBLEMS+=("$name must be an OpenPGP v4 fingerprint (40 upper-case hex digits), got '${!name}'")
    fi
  done
}

# primary_fingerprints FILE: the fingerprint of each primary key in FILE (armored, or a
# keyring gpg --dearmor wrote), one a line: field 10 of the "fpr" record right after each
# "pub" record of gpg's colon listing (gnupg doc/DETAILS). Nothing is imported.
primary_fingerprints() {
  gpg --batch --show-keys --with-colons -- "$1" 2>/dev/null |
    awk -F: '$1 == "pub" { primary = 1; next }
      $1 == "fpr" && primary { print $10 } { primary = 0 }'
}

# is_pinned_key FILE FINGERPRINT: FILE holds exactly one primary key, FINGERPRINT.
is_pinned_key() {
  [[ -s "$1" && "$(primary_fingerprints "$1")" == "$2" ]]
}

# fetch_pinned_key URL FINGERPRINT: the key at URL, in $TEMP_DIR/gpgkey, when it is
# exactly the pinned key FINGERPRINT; dies naming what it found otherwise.
fetch_pinned_key() {
  local found
  make_temp_dir
  curl -fsSL --retry 5 -o "$TEMP_DIR/gpgkey" "$1"
  if ! is_pinned_key "$TEMP_DIR/gpgkey" "$2"; then
    found="$(primary_fingerprints "$TEMP_DIR/gpgkey" | paste -sd ' ' -)"
    die "$1 is not the pinned key $2 (found: ${found:-no OpenPGP key}); nothing trusted"
  fi
}

# install_pinned_key URL FINGERPRINT FILE: FILE holds the key at URL, which must be the
# pinned FINGERPRINT; checked at every run, replaced when it is anything else. For dnf's
# gpgkey=file:// (dnf.conf(5)), which dnf then never fetches itself.
install_pinned_key() {
  if is_pinned_key "$ROOT$3" "$2"; then
    log "unchanged $3 (key $2)"
    return 0
  fi
  if [[ -e "$ROOT$3" ]]; then
    warn "$3 does not hold exactly the pinned key $2; replacing it"
  fi
  fetch_pinned_key "$1" "$2"
  write_file "$3" 0644 <"$TEMP_DIR/gpgkey"
}
