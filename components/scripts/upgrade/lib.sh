#!/usr/bin/env bash
# Helpers of the upgrade steps: Kubernetes versions compared by the version skew policy,
# and the marks a rollout leaves on the nodes.
# shellcheck shell=bash disable=SC2034 # its globals are read by the scripts that source it

# shellcheck source=../lib.sh
[[ -n "${GPU_CLUSTER_LIB_LOADED:-}" ]] || source "$(dirname "${BASH_SOURCE[0]}")/../lib.sh"
# shellcheck source=../node/lib.sh
[[ -n "${GPU_CLUSTER_NODE_LIB_LOADED:-}" ]] || source "$(dirname "${BASH_SOURCE[0]}")/../node/lib.sh"

GPU_CLUSTER_UPGRADE_LIB_LOADED=1
# Set on a node its drain-node step drained, to the version it is upgraded to: only such a
# node is uncordoned by uncordon-node (one an admin cordoned stays so). It is also the
# node's slot: drain-node starts a node only while fewer than MAX_UNAVAILABLE carry it.
UPGRADE_ANNOTATION=gpu-cluster.io/upgrading-to
# Set on a node whose drain-node, upgrade-node or uncordon-node failed, to why: no other
# node starts its upgrade while one carries it. uncordon-node removes it once the node
# is Ready; `kubectl annotate node NODE gpu-cluster.io/upgrade-failed-` clears it by hand.
UPGRADE_FAILED_ANNOTATION=gpu-cluster.io/upgrade-failed
# Set on a node to the host settings it was last prepared with (the NVIDIA driver branch,
# the container toolkit, the kernel arguments: HOST_SETTINGS of drain-node), by
# uncordon-node once it is Ready with them: drain-node drains a node whose value differs.
HOST_SETTINGS_ANNOTATION=gpu-cluster.io/host-settings
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

# refuse_version_skew WHAT CURRENT WANTED: dies, changing nothing, when going from the
# CURRENT release of WHAT (none: not installed) to WANTED skips a minor version or goes
# back (version_skew_problem).
refuse_version_skew() {
  local problem
  [[ -n "$2" && "$2" != "$3" ]] || return 0
  problem="$(version_skew_problem "$2" "$3")"
  [[ -z "$problem" ]] || die "refusing to change $1 here: $problem; nothing was changed"
}

# restart_at_version CHANGED SERVICE WHAT VERSION [RESTART_OPTION...]: restarts SERVICE
# when its release CHANGED (or an earlier run did not finish the restart), then waits up
# to SERVICE_ACTIVE_TIMEOUT for it to be active. A restart runs the new kubelet and
# containerd; pods the drain left (DaemonSets) keep running in their shims.
restart_at_version() {
  local changed=$1 service=$2 what=$3 version=$4
  shift 4
  if needs_follow_up "$changed" "restart-$service"; then
    UPGRADE_PHASE="restarting $service at $version"
    systemctl restart "$@" "$service"
    follow_up_done "restart-$service"
    log "changed: restarted $service at $version"
  else
    log "unchanged: $service already runs $what $version"
  fi
  UPGRADE_PHASE="waiting for $service to be active at $version"
  wait_until "$SERVICE_ACTIVE_TIMEOUT" "the $service service to be active" \
    systemctl is-active --quiet "$service"
}

# How long a restarted service may take to be active (restart_at_version).
SERVICE_ACTIVE_TIMEOUT=300
# Options of the restart upgrade_worker makes (a distribution's upgrade-node.sh sets them).
RESTART_OPTIONS=()
# Set by the distribution's install_release: 1 when it replaced the installed release.
RELEASE_CHANGED=0

# upgrade_worker WHAT VERSION SERVICE KUBECONFIG KUBECTL...: the body of every
# distribution's upgrade-node.sh, on a worker host (NODE_NAME its node): installs release
# VERSION of WHAT unless that skips a minor version or goes back, then restarts the worker
# SERVICE at it when the service is installed (a new host's join starts it). While the
# kubelet's KUBECONFIG is there, a failure marks the node as failed with it (KUBECTL...:
# the distribution's kubectl, to which --kubeconfig is added). The distribution's script
# defines release_version (the installed release, or nothing), install_release VERSION
# (sets RELEASE_CHANGED) and worker_installed (success when SERVICE is installed).
upgrade_worker() {
  local what=$1 version=$2 service=$3 kubeconfig=$4 current
  shift 4
  # Read by the exit handler mark_own_node_failed_on_exit sets.
  UPGRADE_PHASE=""
  if [[ -f "$ROOT$kubeconfig" ]]; then
    mark_own_node_failed_on_exit "${NODE_NAME,,}" "$@" --kubeconfig "$ROOT$kubeconfig"
  fi
  UPGRADE_PHASE="installing $what $version"
  current="$(release_version)"
  refuse_version_skew "$what" "$current" "$version"
  install_release "$version"
  if ! worker_installed; then
    log "$what $version is installed; the join step starts the worker"
    return 0
  fi
  restart_at_version "$RELEASE_CHANGED" "$service" "$what" "$version" "${RESTART_OPTIONS[@]}"
}

# check_host_settings_input: HOST_SETTINGS, when set, is KEY=VALUE pairs joined by commas.
check_host_settings_input() {
  if [[ -n "${HOST_SETTINGS:-}" && ! "$HOST_SETTINGS" =~ ^[a-z-]+=[A-Za-z0-9._+~-]*(,[a-z-]+=[A-Za-z0-9._+~-]*)*$ ]]; then
    INPUT_PROBLEMS+=("HOST_SETTINGS must be KEY=VALUE pairs joined by commas, got '$HOST_SETTINGS'")
  fi
}

# annotation_path KEY: KEY as a jsonpath member of .metadata.annotations (dots escaped).
annotation_path() {
  printf '{.metadata.annotations.%s}' "${1//./\\.}"
}

# upgrade_marks: "NODE<TAB>UPGRADING-TO<TAB>UPGRADE-FAILED" for every node.
upgrade_marks() {
  admin_kubectl get nodes -o "jsonpath={range .items[*]}{.metadata.name}{\"\t\"}$(
    annotation_path "$UPGRADE_ANNOTATION"){\"\t\"}$(
    annotation_path "$UPGRADE_FAILED_ANNOTATION"){\"\n\"}{end}"
}

# drained_for_upgrade NODE KUBECTL: on a worker host (KUBECTL: kubectl with the kubelet's
# credential, an absolute path and options); success when NODE is cordoned and holds an
# upgrade slot, as drain-node leaves it (reboot-if-needed may reboot it then); dies when
# that cannot be read.
drained_for_upgrade() {
  local node="${1,,}" words cordoned slot
  if [[ ! "$2" =~ ^/[A-Za-z0-9_./-]+([\ ][A-Za-z0-9_./=-]+)*$ || ! "$node" =~ ^[a-z0-9][a-z0-9.-]*$ ]]; then
    die "NODE_NAME and NODE_KUBECTL (an absolute path, then options) are needed, got" \
      "'$1' and '$2'"
  fi
  read -r -a words <<<"$2"
  if ! cordoned="$("$ROOT${words[0]}" "${words[@]:1}" get node "$node" \
    -o 'jsonpath={.spec.unschedulable}')" ||
    ! slot="$("$ROOT${words[0]}" "${words[@]:1}" get node "$node" \
      -o "jsonpath=$(annotation_path "$UPGRADE_ANNOTATION")")"; then
    die "a reboot is pending but whether node $node is drained cannot be read from the API" \
      "(kubectl's error above); not rebooted. Check its kubelet, then run pulumi up again"
  fi
  [[ "$cordoned" == true && -n "$slot" ]]
}

# one_line TEXT...: TEXT on one line, tabs and newlines as spaces (an annotation's value
# that upgrade_marks prints as one field).
one_line() {
  local text="$*"
  text="${text//$'\t'/ }"
  printf '%s' "${text//$'\n'/ }"
}

# mark_failed NODE REASON...: NODE carries UPGRADE_FAILED_ANNOTATION (from the controller).
mark_failed() {
  local node=$1
  shift
  if ! admin_kubectl annotate node "$node" --overwrite \
    "$UPGRADE_FAILED_ANNOTATION=$(one_line "$GPU_CLUSTER_STEP: $*")" >&2; then
    warn "could not mark node $node as failed; the rollout may carry on with other nodes"
  fi
}

# mark_own_node_failed_on_exit NODE KUBECTL...: on a worker host; when the script then
# fails while NODE carries the slot drain-node gave it, NODE is marked as failed with the
# kubelet's own credential (KUBECTL: a kubectl with the kubelet's kubeconfig). A kubelet
# may change its own Node object but labels and taints the NodeRestriction admission
# plugin guards (kubernetes plugin/pkg/admission/noderestriction/admission.go,
# admitNode); annotations are not among them. UPGRADE_PHASE says what was being done.
mark_own_node_failed_on_exit() {
  _UPGRADE_OWN_NODE=$1
  shift
  _UPGRADE_NODE_KUBECTL=("$@")
  trap '_upgrade_on_exit "$?"' EXIT
}

_upgrade_on_exit() {
  local status=$1 slot=""
  if ((status != 0)); then
    slot="$("${_UPGRADE_NODE_KUBECTL[@]}" get node "$_UPGRADE_OWN_NODE" --ignore-not-found \
      -o "jsonpath=$(annotation_path "$UPGRADE_ANNOTATION")" 2>/dev/null)" || slot=""
  fi
  if [[ -n "$slot" ]]; then
    if "${_UPGRADE_NODE_KUBECTL[@]}" annotate node "$_UPGRADE_OWN_NODE" --overwrite \
      "$UPGRADE_FAILED_ANNOTATION=$(one_line "$GPU_CLUSTER_STEP: failed (exit $status)" \
        "${UPGRADE_PHASE:-}")" >/dev/null 2>&1; then
      log "marked node $_UPGRADE_OWN_NODE as failed: no other node starts its upgrade" \
        "until it is fixed (the next pulumi up retries this step)"
    else
      warn "could not mark node $_UPGRADE_OWN_NODE as failed; it keeps its upgrade slot"
    fi
  fi
  _gc_cleanup
}
