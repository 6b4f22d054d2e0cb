#!/usr/bin/env bash
# Delete step of configure-apt (packages.aptMirror unset, or the host left the cluster):
# puts back the apt sources file configure-apt replaced, as it was, and forgets the copy.
set -euo pipefail
# shellcheck source=lib.sh
[[ -n "${GPU_CLUSTER_LIB_LOADED:-}" ]] || source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
: "${GPU_CLUSTER_STEP:=remove-configure-apt}"

# It reads no input (configure-apt.sh's come with the step and are not used here). The
# package lists stay until the next `apt-get update`.

APT_BACKUP_DIR=/var/lib/gpu-cluster/apt
MANAGED_PREFIX="# Managed by gpu-cluster (packages.aptMirror)"

main() {
  local target
  for target in /etc/apt/sources.list.d/ubuntu.sources /etc/apt/sources.list; do
    restore_original "$target" "$APT_BACKUP_DIR" "$MANAGED_PREFIX"
  done
}

main "$@"
