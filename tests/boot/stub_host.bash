#!/usr/bin/env bash
# The bats suite's stubbed host (tests/scripts/helpers.bash) for a boot test: a fake host
# root, the stub commands and the SSM parameters their `python3` serves, in DIR.
# Usage: stub_host.bash DIR [REGION NAME VALUE]...
# Prints, NUL-separated, the NAME=VALUE settings the step scripts need to run against it.
set -euo pipefail

# setup_host builds everything below the test's own temporary folder (its template too).
BATS_TEST_TMPDIR=$1
BATS_FILE_TMPDIR=$1
shift
if (($# % 3)); then
  echo "usage: stub_host.bash DIR [REGION NAME VALUE]..." >&2
  exit 2
fi
# shellcheck source=../scripts/helpers.bash
source "$(dirname "${BASH_SOURCE[0]}")/../scripts/helpers.bash"

setup_host
while (($# > 0)); do
  ssm_parameter "$1" "$2" "$3"
  shift 3
done
printf '%s\0' "GPU_CLUSTER_ROOT=$GPU_CLUSTER_ROOT" "STUB_STATE=$STUB_STATE" \
  "STUB_CALLS=$STUB_CALLS" "PATH=$PATH"
