#!/usr/bin/env bash
# Installs a step bundle that bundle/receive.sh has checked (the tarball's sha256) and
# unpacked into INCOMING, a new folder below the bundles folder: owned by root, folders
# 0755, files not writable but by root; its digest checked (common/bundle.py: the sha256
# of its manifest); kept as <bundles>/<digest>, which `current` then names. The newest
# KEEP_BUNDLES bundles stay (a step's delete keeps its own files: bundle/run-step.sh).
# A bundle already installed and whole is left as it is: a second run changes nothing.
# Usage: bash install.sh INCOMING DIGEST
set -euo pipefail
# shellcheck source=run-step.sh
source "$(dirname "${BASH_SOURCE[0]}")/run-step.sh"
: "${GPU_CLUSTER_STEP:=install-bundle}"
: "${GPU_CLUSTER_HOST:=$(hostname)}"
KEEP_BUNDLES=3

main() {
  local incoming=$1 digest=$2 bundles target old
  bundles="$(dirname "$incoming")"
  target="$bundles/$digest"
  [[ "$digest" =~ ^[0-9a-f]{64}$ ]] || gpu_cluster_bundle_fail "not a bundle digest: '$digest'"
  chown -R 0:0 -- "$incoming"
  chmod -R go-w,a+rX -- "$incoming"
  if [[ "$(gpu_cluster_bundle_manifest "$incoming" | sha256sum | cut -c1-64)" != "$digest" ]]; then
    rm -rf -- "$incoming"
    gpu_cluster_bundle_fail "the bundle received does not give its digest $digest"
  fi
  if [[ -d "$target" && -z "$(gpu_cluster_bundle_problem "$target")" ]]; then
    rm -rf -- "$incoming"
  else
    rm -rf -- "$target"
    mv -T -- "$incoming" "$target"
    touch -- "$target"
    echo "gpu-cluster: $GPU_CLUSTER_HOST: $GPU_CLUSTER_STEP: changed: step bundle $digest installed" >&2
  fi
  if [[ "$(readlink -- "$bundles/current" || true)" != "$digest" ]]; then
    ln -sfn -- "$digest" "$bundles/current.new"
    mv -T -- "$bundles/current.new" "$bundles/current"
    echo "gpu-cluster: $GPU_CLUSTER_HOST: $GPU_CLUSTER_STEP: changed: current step bundle $digest" >&2
  fi
  # Newest first; the current one is never pruned.
  while IFS= read -r old; do
    [[ "${old##*/}" != "$digest" ]] || continue
    rm -rf -- "$old"
    echo "gpu-cluster: $GPU_CLUSTER_HOST: $GPU_CLUSTER_STEP: changed: pruned step bundle ${old##*/}" >&2
  done < <(find "$bundles" -mindepth 1 -maxdepth 1 -type d -regextype posix-extended \
    -regex '.*/[0-9a-f]{64}' -printf '%T@ %p\n' | sort -rn | cut -d' ' -f2- |
    tail -n +$((KEEP_BUNDLES + 1)))
  echo "gpu-cluster: $GPU_CLUSTER_HOST: $GPU_CLUSTER_STEP: step bundle $digest in place" >&2
}

main "$@"
