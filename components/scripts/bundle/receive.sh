# shellcheck shell=bash
# Receives a step bundle (common/bundle.py) on a machine, as root: sent whole on the stdin
# of the bundle step over SSH, and part of EC2 boot user data. It trusts nothing it has not
# checked: it copies the tarball where only root can write, checks its sha256, unpacks it
# there and hands it to the bundle's own bundle/install.sh.
#
# Inputs: BUNDLE_DIGEST BUNDLE_SHA256 BUNDLE_TARBALL
# Optional inputs: GPU_CLUSTER_ROOT
# What they hold: BUNDLE_TARBALL (its path; relative: to the login user's home,
# where the SSH command starts), BUNDLE_SHA256 (the tarball's), BUNDLE_DIGEST (the bundle's).

set -euo pipefail

gpu_cluster_receive_bundle() {
  local tarball=$1 sha256=$2 digest=$3 incoming
  local bundles="${GPU_CLUSTER_ROOT:-}/var/lib/gpu-cluster/bundles"
  local prefix="gpu-cluster: $GPU_CLUSTER_HOST: $GPU_CLUSTER_STEP:"
  if [[ ! -f "$tarball" ]]; then
    echo "$prefix the step bundle's tarball $tarball is missing" >&2
    return 1
  fi
  mkdir -p -- "$bundles"
  chown 0:0 -- "$bundles"
  chmod 0755 -- "$bundles"
  incoming="$(mktemp -d "$bundles/.incoming.XXXXXX")"
  cp -- "$tarball" "$incoming.tar.gz"
  if [[ "$(sha256sum -- "$incoming.tar.gz" | cut -c1-64)" != "$sha256" ]]; then
    rm -rf -- "$incoming" "$incoming.tar.gz"
    echo "$prefix refused: the step bundle received ($tarball) is not the one sent" \
      "(sha256 $sha256): altered in transit or on this host" >&2
    return 1
  fi
  tar -xzf "$incoming.tar.gz" -C "$incoming" --no-same-owner
  rm -f -- "$incoming.tar.gz"
  bash "$incoming/bundle/install.sh" "$incoming" "$digest"
  # Earlier uploads next to it are not needed any more.
  find "$(dirname -- "$tarball")" -maxdepth 1 -type f -name 'bundle-*.tar.gz' \
    ! -name "${tarball##*/}" -delete
}

gpu_cluster_receive_bundle "$BUNDLE_TARBALL" "$BUNDLE_SHA256" "$BUNDLE_DIGEST"
