#!/usr/bin/env bash
# Installs the Debian packages the tests run (tests/debian/packages.txt) when some are
# missing: as root with apt-get; otherwise it names them and the command that installs them,
# and fails, so that a green run is the same run as CI's. GPU_CLUSTER_TESTS_WITHOUT_DEBIAN=1
# runs the tests anyway: the tests of a missing tool then skip, naming it.
# A line whose probe is `extract:PATH` names a package that is never installed (chrony
# conflicts with systemd-timesyncd, which other tests run): apt-get download and dpkg -x
# unpack it into $DEBIAN_EXTRACT_DIR/<package>, where its tests find PATH. That needs no
# root; its shared libraries are the machine's.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
list="${DEBIAN_PACKAGES_LIST:-$here/packages.txt}"
extract_dir="${DEBIAN_EXTRACT_DIR:-$(cd "$here/../.." && pwd)/.cache/debian}"

installed() {
  # An absolute path: the package's file is there (an executable, or a module such as
  # dnf-plugins-core's versionlock.py).
  if [[ "$1" == /* ]]; then
    [[ -e "$1" ]]
  else
    command -v "$1" >/dev/null
  fi
}

# extract PACKAGE...: each package's files under $extract_dir/<package>, never installed.
extract() {
  local work package
  work="$(mktemp -d)"
  trap 'rm -rf "$work"' RETURN
  chmod 755 "$work" # apt-get download writes as _apt when it can
  (cd "$work" && apt-get download -qq "$@")
  for package in "$@"; do
    rm -rf "${extract_dir:?}/$package"
    mkdir -p "$extract_dir/$package"
    dpkg -x "$(compgen -G "$work/${package}_*.deb")" "$extract_dir/$package"
  done
}

missing=()
unpacked=()
while read -r package probe _; do
  [[ -z "$package" || "$package" == \#* ]] && continue
  if [[ "$probe" == extract:* ]]; then
    [[ -x "$extract_dir/$package/${probe#extract:}" ]] || unpacked+=("$package")
  else
    installed "$probe" || missing+=("$package")
  fi
done <"$list"
((${#missing[@]} + ${#unpacked[@]} == 0)) && exit 0

if [[ "${GPU_CLUSTER_TESTS_WITHOUT_DEBIAN:-}" == 1 ]]; then
  echo "tests/debian: not installed: ${missing[*]} ${unpacked[*]}; their tests skip" >&2
  exit 0
fi
if ! command -v apt-get >/dev/null; then
  echo "tests/debian: ${missing[*]} ${unpacked[*]} are needed and this machine has no" \
    "apt-get; install them with its package manager, or run with" \
    "GPU_CLUSTER_TESTS_WITHOUT_DEBIAN=1 to skip their tests" >&2
  exit 1
fi
if ((${#missing[@]} == 0)); then
  echo "tests/debian: unpacking ${unpacked[*]} into $extract_dir (not installed)" >&2
  extract "${unpacked[@]}"
  exit 0
fi
if (($(id -u) != 0)); then
  echo "tests/debian: the tests need Debian packages that are not installed: ${missing[*]}" >&2
  echo "install them with: sudo apt-get update && sudo apt-get install -y ${missing[*]}" >&2
  echo "(or run with GPU_CLUSTER_TESTS_WITHOUT_DEBIAN=1 to skip their tests)" >&2
  exit 1
fi
echo "tests/debian: installing ${missing[*]}" >&2
apt-get update -qq
DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}"
if ((${#unpacked[@]})); then
  echo "tests/debian: unpacking ${unpacked[*]} into $extract_dir (not installed)" >&2
  extract "${unpacked[@]}"
fi
