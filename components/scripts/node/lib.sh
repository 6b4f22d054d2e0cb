#!/usr/bin/env bash
# What every distribution's node steps share: the controller's kubectl (admitting, removing,
# draining and upgrading nodes), a release download checked against its pinned sha256, an
# EC2 node's providerID, and the mounts detached before a reset deletes the folders below
# which pods mount volumes.
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

# same_text A B: success when A and B differ at most in trailing newlines (files written by
# write_text end in exactly one).
same_text() {
  local a=$1 b=$2
  while [[ "$a" == *$'\n' ]]; do a=${a%$'\n'}; done
  while [[ "$b" == *$'\n' ]]; do b=${b%$'\n'}; done
  [[ "$a" == "$b" ]]
}

# check_worker_profile_inputs: adds to INPUT_PROBLEMS what is wrong with the inputs every
# distribution's kubelet settings step takes: CPU_MANAGER_POLICY (none or static) and
# NODE_NAME (a node name).
check_worker_profile_inputs() {
  if [[ -n "${CPU_MANAGER_POLICY:-}" && ! "$CPU_MANAGER_POLICY" =~ ^(none|static)$ ]]; then
    INPUT_PROBLEMS+=("CPU_MANAGER_POLICY must be none or static, got '$CPU_MANAGER_POLICY'")
  fi
  if [[ -n "${NODE_NAME:-}" && ! "$NODE_NAME" =~ ^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$ ]]; then
    INPUT_PROBLEMS+=("NODE_NAME is not a node name: '$NODE_NAME'")
  fi
}

# An EC2 node's Kubernetes providerID, aws:///ZONE/INSTANCE-ID, as ssm-parameter.py
# provider-id prints it (SSM_READER): what the AWS cloud controller manager finds the
# instance by (components/aws/cloud_controller.py), for every distribution's kubelet.
AWS_PROVIDER_ID='^aws:///[a-z]{2}(-[a-z]+)+-[0-9][a-z]/i-[0-9a-f]{8,17}$'

# check_cloud_provider_input VAR: adds to INPUT_PROBLEMS what is wrong with cloud provider
# input VAR (set to "" when unset): empty, or aws with SSM_READER (the text of
# ssm-parameter.py) to read the instance's identity.
check_cloud_provider_input() {
  local var=$1
  [[ -v "$var" ]] || printf -v "$var" '%s' ""
  case "${!var}" in
    "") ;;
    aws) [[ -n "${SSM_READER:-}" ]] ||
      INPUT_PROBLEMS+=("$var=aws needs SSM_READER (ssm-parameter.py) to read the instance's zone and id") ;;
    *) INPUT_PROBLEMS+=("$var must be empty or aws, got '${!var}'") ;;
  esac
}

# read_aws_provider_id VAR: sets VAR to this instance's providerID, read by SSM_READER's
# provider-id from EC2 metadata (IMDSv2); dies when it cannot be read or is not one.
read_aws_provider_id() {
  local _id_var=$1 _id_value
  _id_value="$(python3 - provider-id <<<"$SSM_READER")" ||
    die "could not read this instance's zone and id from EC2 metadata (IMDSv2)"
  [[ "$_id_value" =~ $AWS_PROVIDER_ID ]] ||
    die "EC2 metadata gave '$_id_value', not a providerID aws:///ZONE/INSTANCE-ID"
  printf -v "$_id_var" '%s' "$_id_value"
}

# recorded_cpu_manager_policy KUBELET_ROOT: the CPU manager policy the kubelet's state below
# KUBELET_ROOT was made with ("" without a state).
recorded_cpu_manager_policy() {
  local state="$ROOT$1/cpu_manager_state"
  [[ -f "$state" ]] || return 0
  sed -n 's/.*"policyName" *: *"\([a-z]*\)".*/\1/p' "$state"
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

# A distribution's release, installed by install_pinned_release PREFIX WHAT VERSION FOLDER
# IMAGES. WHAT names it in messages (k0s, RKE2); its inputs are PREFIX_SHA256_<ARCH>,
# PREFIX_RELEASE_URL and PREFIX_AIRGAP_SHA256_<ARCH> (components/distributions/base.py
# release_env); its lib.sh defines what differs: PREFIX_RELEASE, what a version looks like
# (a regex), and functions named by PREFIX in lower case:
#   <what>_current_version          the installed version, or nothing
#   <what>_release_file ARCH VERSION  the release file's name, e.g. k0s-v1.34.1+k0s.0-amd64
#   <what>_airgap_file ARCH VERSION   its image bundle's name
#   <what>_unpack FILE VERSION        installs the verified FILE; sets RELEASE_CHANGED
# Set by install_pinned_release: 1 when it replaced the installed release.
RELEASE_CHANGED=0

# install_pinned_release PREFIX WHAT VERSION FOLDER IMAGES: release VERSION of WHAT installed from
# FOLDER (where it publishes its files) unless it is already, then, when the program gives
# the sha256 of its image bundle for any architecture (versions.airgapBundleSha256), that
# bundle into host folder IMAGES, whence the distribution imports its images.
install_pinned_release() {
  local prefix=$1 what=$2 version=$3 folder=$4 images=$5 name=${1,,} format
  local current arch file key
  RELEASE_CHANGED=0
  format="${prefix}_RELEASE"
  if [[ ! "$version" =~ ${!format} ]]; then
    die "${prefix}_VERSION '$version' does not look like a release of $what"
  fi
  current="$("${name}_current_version")"
  arch="$(release_arch "$what")"
  if [[ "$current" == "$version" ]]; then
    log "$what $version already installed"
  else
    file="$("${name}_release_file" "$arch" "$version")"
    key="releaseSha256.$arch (config/versions.py pins none for it on $arch)"
    download_pinned "$what $version for $arch" "$file" "$folder" "${prefix}_RELEASE_URL" \
      "${prefix}_SHA256_${arch^^}" "$key" "$current"
    "${name}_unpack" "$TEMP_DIR/$file" "$version"
    current="$("${name}_current_version")"
    if [[ "$current" != "$version" ]]; then
      die "$what reports '$current' after installing $version"
    fi
  fi
  if airgap_bundle_wanted "$prefix"; then
    install_image_bundle "$("${name}_airgap_file" "$arch" "$version")" "$folder" \
      "${prefix}_RELEASE_URL" "${prefix}_AIRGAP_SHA256_${arch^^}" "$images"
  fi
}

# airgap_bundle_wanted PREFIX: success when PREFIX_AIRGAP_SHA256_<ARCH> is given for any
# architecture (config/versions.py RELEASE_ARCHITECTURES).
airgap_bundle_wanted() {
  local arch pin
  for arch in AMD64 ARM64; do
    pin="${1}_AIRGAP_SHA256_$arch"
    [[ -z "${!pin:-}" ]] || return 0
  done
  return 1
}

# release_file_url FOLDER URL_VAR FILE: where release file FILE is downloaded from: the
# release's FOLDER ('+' escaped, as GitHub's release paths have it), or, when variable
# URL_VAR is set (kubernetes.releaseUrl), the folder it names, holding FILE under its own
# name. Sets RELEASE_FILE_URL.
release_file_url() {
  local folder=$1 url_var=$2 file=$3
  RELEASE_FILE_URL="$folder/${file//+/%2B}"
  if [[ -n "${!url_var:-}" ]]; then
    check_download_url "$url_var"
    RELEASE_FILE_URL="${!url_var%/}/$file"
  fi
}

# download_pinned WHAT FILE FOLDER URL_VAR PIN_VAR KEY [INSTALLED]: release file FILE (of
# WHAT, e.g. "k0s v1.34.1+k0s.0 for amd64") downloaded to $TEMP_DIR/FILE (release_file_url)
# and checked against the sha256 in variable PIN_VAR (pinned by the program:
# config/versions.py or `gpu-cluster:versions` KEY, which the message names), never against
# a checksum file of the same release. Dies before downloading without a valid pin, and
# after it, having installed nothing, when the sums differ. INSTALLED: the release it
# replaces, for the log.
download_pinned() {
  local what=$1 file=$2 folder=$3 url_var=$4 pin=$5 key=$6 installed=${7:-} expected
  expected="${!pin:-}"
  if [[ -z "$expected" ]]; then
    die "no pinned sha256 for $file of ${what% for *}: set gpu-cluster:versions $key"
  fi
  if [[ ! "$expected" =~ ^[0-9a-f]{64}$ ]]; then
    die "$pin must be 64 lower-case hex digits (a sha256), got '$expected'"
  fi
  release_file_url "$folder" "$url_var" "$file"
  log "downloading $what from ${RELEASE_FILE_URL%/*}${installed:+ (installed: $installed)}"
  fetch_checked "$file" "$RELEASE_FILE_URL" "$file" "$expected" pinned
  log "verified sha256 of $file"
}

# install_image_bundle FILE FOLDER URL_VAR PIN_VAR DIR: the distribution's airgap image
# bundle FILE (release_file_url) in host folder DIR, checked against the sha256 in variable
# PIN_VAR (versions.airgapBundleSha256, never a checksum file served beside it). A bundle
# already there with that sha256 is left as it is.
install_image_bundle() {
  local file=$1 folder=$2 url_var=$3 pin=$4 dir=$5 expected actual arch
  expected="${!pin:-}"
  if [[ -z "$expected" ]]; then
    arch=${pin##*_}
    die "no sha256 for $file: set gpu-cluster:versions airgapBundleSha256.${arch,,}"
  fi
  if [[ ! "$expected" =~ ^[0-9a-f]{64}$ ]]; then
    die "the sha256 of $file must be 64 lower-case hex digits, got '$expected'"
  fi
  if [[ -f "$ROOT$dir/$file" ]] && actual="$(sha256sum <"$ROOT$dir/$file")" &&
    [[ "${actual%% *}" == "$expected" ]]; then
    log "unchanged $dir/$file (sha256 verified)"
    return 0
  fi
  release_file_url "$folder" "$url_var" "$file"
  log "downloading the image bundle $file from ${RELEASE_FILE_URL%/*}"
  fetch_checked "the image bundle $file" "$RELEASE_FILE_URL" "$file" "$expected" \
    "versions.airgapBundleSha256 says"
  write_file "$dir/$file" 0644 <"$TEMP_DIR/$file"
}

# fetch_checked LABEL URL FILE SHA256 SAYS: URL downloaded to $TEMP_DIR/FILE; dies, naming
# LABEL, when that fails or its sha256 is not SHA256 (SAYS: whence that comes, for the
# message), having installed nothing.
fetch_checked() {
  local label=$1 url=$2 file=$3 expected=$4 says=$5 actual
  make_temp_dir
  if ! curl -fsSL --retry 5 -o "$TEMP_DIR/$file" "$url"; then
    die "could not download $label from $url"
  fi
  actual="$(sha256sum "$TEMP_DIR/$file")"
  actual="${actual%% *}"
  if [[ "$actual" != "$expected" ]]; then
    die "checksum mismatch for $label: $says $expected, downloaded $actual; nothing installed"
  fi
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
