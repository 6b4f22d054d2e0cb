#!/usr/bin/env bash
# Helpers of the upgrade steps: Kubernetes versions compared by the version skew policy,
# and the admin kubectl on the controller.
# shellcheck shell=bash disable=SC2034 # its globals are read by the scripts that source it

# shellcheck source=../lib.sh
[[ -n "${GPU_CLUSTER_LIB_LOADED:-}" ]] || source "$(dirname "${BASH_SOURCE[0]}")/../lib.sh"

GPU_CLUSTER_UPGRADE_LIB_LOADED=1
# Set on a node its drain-node step drained, to the version it is upgraded to: only such a
# node is uncordoned by uncordon-node (one an admin cordoned stays so).
UPGRADE_ANNOTATION=gpu-cluster.io/upgrading-to
# vMAJOR.MINOR.PATCH, then anything (a pre-release, +k0s.N, +rke2rN).
KUBE_VERSION_FORM='^v([0-9]+)\.([0-9]+)\.([0-9]+)'

# version_parts VERSION: prints "MAJOR MINOR PATCH BUILD", BUILD the distribution's build
# number (the digits ending a version with a "+", -1 without); fails for a text that is
# not a version.
version_parts() {
  local build=-1
  [[ "$1" =~ $KUBE_VERSION_FORM ]] || return 1
  if [[ "$1" == *+*[0-9] ]]; then
    build=$((10#${1##*[!0-9]}))
  fi
  printf '%s %s %s %s\n' "${BASH_REMATCH[1]}" "${BASH_REMATCH[2]}" "${BASH_REMATCH[3]}" "$build"
}

# kube_version VERSION: the Kubernetes part, vMAJOR.MINOR.PATCH.
kube_version() {
  local major minor patch build
  read -r major minor patch build <<<"$(version_parts "$1")"
  printf 'v%s.%s.%s\n' "$major" "$minor" "$patch"
}

# version_skew_problem RUNNING WANTED: prints why WANTED may not replace RUNNING, nothing
# when it may. Kubernetes supports upgrades one minor version at a time and no
# downgrades (https://kubernetes.io/releases/version-skew-policy/, "Supported component
# upgrade order": from 1.y to 1.y+1). A distribution build of the same Kubernetes
# version (+k0s.N, +rke2rN) may go up, not down.
version_skew_problem() {
  local running=$1 wanted=$2 r w
  if ! r="$(version_parts "$running")"; then
    printf 'cannot read the running version %s\n' "'$running'"
    return 0
  fi
  if ! w="$(version_parts "$wanted")"; then
    printf '%s is not a version\n' "'$wanted'"
    return 0
  fi
  local rmaj rmin rpat rbld wmaj wmin wpat wbld
  read -r rmaj rmin rpat rbld <<<"$r"
  read -r wmaj wmin wpat wbld <<<"$w"
  if ((wmaj != rmaj)); then
    printf 'from %s to %s changes the major version\n' "$running" "$wanted"
  elif ((wmin > rmin + 1)); then
    printf 'from %s to %s skips minor version(s): upgrade one minor at a time (first to v%s.%s)\n' \
      "$running" "$wanted" "$rmaj" "$((rmin + 1))"
  elif ((wmin < rmin || (wmin == rmin && (wpat < rpat || (wpat == rpat && wbld < rbld))))); then
    printf 'from %s to %s is a downgrade, which Kubernetes does not support\n' "$running" "$wanted"
  fi
}

# check_kubectl_input: KUBECTL (the controller's kubectl with its admin credential, as
# words: an absolute path, then options) is set and safe to split into words.
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
