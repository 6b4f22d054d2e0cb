#!/usr/bin/env bash
# Installs the Debian packages the tests run (tests/debian/packages.txt) when some are
# missing: as root with apt-get; otherwise it names them and the command that installs them,
# and fails, so that a green run is the same run as CI's. GPU_CLUSTER_TESTS_WITHOUT_DEBIAN=1
# runs the tests anyway: the tests of a missing tool then skip, naming it.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
list="${DEBIAN_PACKAGES_LIST:-$here/packages.txt}"

installed() {
  if [[ "$1" == /* ]]; then
    [[ -x "$1" ]]
  else
    command -v "$1" >/dev/null
  fi
}

missing=()
while read -r package probe _; do
  [[ -z "$package" || "$package" == \#* ]] && continue
  installed "$probe" || missing+=("$package")
done <"$list"
((${#missing[@]} == 0)) && exit 0

if [[ "${GPU_CLUSTER_TESTS_WITHOUT_DEBIAN:-}" == 1 ]]; then
  echo "tests/debian: not installed: ${missing[*]}; their tests skip" >&2
  exit 0
fi
if ! command -v apt-get >/dev/null; then
  echo "tests/debian: ${missing[*]} are needed and this machine has no apt-get;" \
    "install them with its package manager, or run with GPU_CLUSTER_TESTS_WITHOUT_DEBIAN=1" \
    "to skip their tests" >&2
  exit 1
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
