#!/usr/bin/env bash
# What every distribution's node steps share: the controller's kubectl (admitting, removing,
# draining and upgrading nodes), a release download checked against its pinned sha256, and
# the mounts detached before a reset deletes the folders below which pods mount volumes.
# shellcheck shell=bash disable=SC2034 # its globals are read by the scripts that source it
#
# Not in lib.sh: the install-backup step pastes lib.sh three times into an envelope that
# SSM parameters of a fixed total size hold (components/kubernetes/backups.py).

# shellcheck source=../lib.sh
[[ -n "${GPU_CLUSTER_LIB_LOADED:-}" ]] || source "$(dirname "${BASH_SOURCE[0]}")/../lib.sh"

GPU_CLUSTER_NODE_LIB_LOADED=1

# The controller's kubectl: KUBECTL, the distribution's kubectl with its admin credential,
# as words (an absolute path, then plain options), e.g. "/usr/local/bin/k0s kubectl".

# check_kubectl_input: KUBECTL is set and safe to split into words.
check_kubectl_input() {
  check_missing_env KUBECTL
  if [[ -n "${KUBECTL:-}" && ! "$KUBECTL" =~ ^/[A-Za-z0-9_./-]+([\ ][A-Za-z0-9_./=-]+)*$ ]]; then
    INPUT_PROBLEMS+=("KUBECTL must be an absolute path and plain options, got '$KUBECTL'")
  fi
}

# admin_kubectl ARGS...: the controller's kubectl (KUBECTL) with ARGS.
admin_kubectl() {
  local words
  read -r -a words <<<"$KUBECTL"
  "$ROOT${words[0]}" "${words[@]:1}" "$@"
}

# controller_installed: success when the controller's kubectl is there (its first word).
controller_installed() {
  local words
  read -r -a words <<<"$KUBECTL"
  [[ -x "$ROOT${words[0]}" ]]
}

# node_field NODE JSONPATH: the field of node NODE, nothing when the node does not exist.
node_field() {
  admin_kubectl get node "$1" --ignore-not-found -o "jsonpath=$2"
}

# release_arch WHAT: this host's architecture as releases name it (amd64, arm64); dies
# naming WHAT (the software to install) on any other.
release_arch() {
  local machine
  machine="$(uname -m)"
  case "$machine" in
    x86_64 | amd64) echo amd64 ;;
    aarch64 | arm64) echo arm64 ;;
    *) die "unsupported CPU architecture for $1: $machine" ;;
  esac
}

# download_pinned WHAT VERSION ARCH ASSET URL PIN_VAR URL_VAR [INSTALLED]: downloads release file ASSET
# of WHAT VERSION for ARCH to $TEMP_DIR/ASSET and checks it against the sha256 in variable
# PIN_VAR (pinned by the program: config/versions.py or `gpu-cluster:versions`
# releaseSha256), never against a checksum file of the same release. URL is where the
# release publishes it; variable URL_VAR, when set (kubernetes.releaseUrl), names a folder
# holding it under its own name instead. Dies before downloading without a valid pin, and
# after it, having installed nothing, when the sums differ. INSTALLED: the release it
# replaces, for the log.
download_pinned() {
  local what=$1 version=$2 arch=$3 asset=$4 url=$5 pin=$6 folder=$7 installed=${8:-}
  local expected actual
  expected="${!pin:-}"
  if [[ -z "$expected" ]]; then
    die "no pinned sha256 for $asset of $what $version: set gpu-cluster:versions" \
      "releaseSha256.$arch (config/versions.py pins none for it on $arch)"
  fi
  if [[ ! "$expected" =~ ^[0-9a-f]{64}$ ]]; then
    die "$pin must be 64 lower-case hex digits (a sha256), got '$expected'"
  fi
  if [[ -n "${!folder:-}" ]]; then
    check_download_url "$folder"
    url="${!folder%/}/$asset"
  fi
  make_temp_dir
  log "downloading $what $version for $arch from ${url%/*}${installed:+ (installed: $installed)}"
  curl -fsSL --retry 5 -o "$TEMP_DIR/$asset" "$url"
  actual="$(sha256sum "$TEMP_DIR/$asset")"
  actual="${actual%% *}"
  if [[ "$actual" != "$expected" ]]; then
    die "checksum mismatch for $asset: pinned $expected, downloaded $actual; nothing installed"
  fi
  log "verified sha256 of $asset"
}

# MOUNTS_BELOW: set by mounts_below.
MOUNTS_BELOW=()

# mounts_below DIR...: sets MOUNTS_BELOW to the mount points strictly below any DIR, deepest
# first; dies when /proc/mounts cannot be read. /proc/mounts escapes blanks as \040; %b
# decodes them.
mounts_below() {
  local _device mount_point _rest dir found=()
  MOUNTS_BELOW=()
  if [[ ! -r "$ROOT/proc/mounts" ]]; then
    die "cannot read /proc/mounts to check what is mounted below $*"
  fi
  while read -r _device mount_point _rest; do
    printf -v mount_point '%b' "$mount_point"
    for dir in "$@"; do
      if [[ "$mount_point" == "$dir"/* ]]; then
        found+=("$mount_point")
        break
      fi
    done
  done <"$ROOT/proc/mounts"
  if ((${#found[@]} > 0)); then
    # Byte order, so a mount point always sorts after everything below it. A point
    # mounted twice (stacked) stays listed twice: each umount detaches one layer.
    mapfile -t MOUNTS_BELOW < <(printf '%s\n' "${found[@]}" | LC_ALL=C sort -r)
  fi
}

# detach_mounts_below WHAT DIR...: before WHAT (a command that deletes the DIRs) runs:
# detaches every mount below them (lazily when busy) and dies, naming what stays, while
# any remains. Pod volumes (NFS shares, local volumes) are mounted below a kubelet root
# and a distribution's data dir; deleting a folder with one still mounted would delete
# shared data.
detach_mounts_below() {
  local what=$1 mount_point dirs
  shift
  printf -v dirs ' or %s' "$@"
  dirs=${dirs# or }
  mounts_below "$@"
  for mount_point in "${MOUNTS_BELOW[@]}"; do
    if umount "$mount_point" 2>/dev/null || umount -l "$mount_point"; then
      log "changed: unmounted $mount_point"
    else
      warn "could not unmount $mount_point"
    fi
  done
  mounts_below "$@"
  if ((${#MOUNTS_BELOW[@]} > 0)); then
    die "refusing to run $what while these are still mounted below $dirs (it would" \
      "delete their contents): ${MOUNTS_BELOW[*]}"
  fi
}
