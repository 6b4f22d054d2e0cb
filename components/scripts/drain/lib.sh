#!/usr/bin/env bash
# Draining a node with kubectl drain, and naming what keeps it from draining: pods no
# controller manages, pods a PodDisruptionBudget protects, pods that do not stop.
# shellcheck shell=bash disable=SC2034 # its globals are read by the scripts that source it

# shellcheck source=../lib.sh
[[ -n "${GPU_CLUSTER_LIB_LOADED:-}" ]] || source "$(dirname "${BASH_SOURCE[0]}")/../lib.sh"

GPU_CLUSTER_DRAIN_LIB_LOADED=1
# Why the last drain_node_with failed: one "namespace/pod: why" per pod, or kubectl's last
# error line when it named none.
DRAIN_BLOCKERS=()
# kubectl's words (kubernetes/kubectl v0.36.3). A pod without a controller stops the
# drain before any eviction: pkg/drain/filters.go:35 (unmanagedFatal) in
# filters.go:90 "cannot delete %s: %s" with the pods as namespace/name joined by ", ",
# printed on a line of its own at the end (pkg/cmd/util/helpers.go:206-207, 322-329).
DRAIN_UNMANAGED="cannot delete Pods that declare no controller (use --force to override): "
# An eviction: pkg/drain/drain.go:313 refused with 429, which the Eviction API answers when
# a PodDisruptionBudget allows no disruption (retried); drain.go:300 still refused at the
# timeout; drain.go:327 refused otherwise; drain.go:358 evicted but not gone in time.
DRAIN_EVICTING='^error when evicting pods/"([^"]+)" -n "([^"]+)"(.*)$'
DRAIN_WAITING='^error when waiting for pod "([^"]+)" in namespace "([^"]+)" to terminate: (.*)$'
DRAIN_FORCE_KEY=kubernetes.drainForce

# check_drain_inputs: DRAIN_FORCE (kubernetes.drainForce), when set, is true or false.
check_drain_inputs() {
  if [[ -n "${DRAIN_FORCE:-}" && ! "$DRAIN_FORCE" =~ ^(true|false)$ ]]; then
    INPUT_PROBLEMS+=("DRAIN_FORCE must be true or false, got '$DRAIN_FORCE'")
  fi
}

# drain_node_with NODE TIMEOUT KUBECTL...: cordons NODE and evicts its pods with the kubectl
# command KUBECTL... (a command or a function) through the Eviction API, which honours
# PodDisruptionBudgets (kubernetes.io/docs/tasks/administer-cluster/safely-drain-node/),
# for at most TIMEOUT seconds. DaemonSet pods stay, emptyDir data goes. A pod no
# controller manages (`kubectl run`) is gone for good once deleted, so kubectl refuses the
# drain at once unless DRAIN_FORCE is true (kubectl drain --force deletes it). kubectl's
# output goes to stderr (its errors once it ends). On failure sets DRAIN_BLOCKERS, returns 1.
drain_node_with() {
  local node=$1 timeout=$2 errors status=0
  shift 2
  local args=(drain "$node" --ignore-daemonsets --delete-emptydir-data --timeout="${timeout}s")
  if is_true "${DRAIN_FORCE:-false}"; then
    args+=(--force)
  fi
  DRAIN_BLOCKERS=()
  make_temp_dir
  errors="$TEMP_DIR/drain-errors"
  "$@" "${args[@]}" >&2 2>"$errors" || status=$?
  cat "$errors" >&2
  if ((status == 0)); then
    return 0
  fi
  drain_blockers "$errors" "$timeout"
  return 1
}

# drain_blockers FILE TIMEOUT: DRAIN_BLOCKERS from kubectl drain's errors in FILE.
drain_blockers() {
  local file=$1 timeout=$2 line pod rest last="" item
  local -A reasons=()
  local order=() items=()
  while IFS= read -r line; do
    [[ -z "$line" ]] || last=$line
    items=()
    if [[ "$line" == "$DRAIN_UNMANAGED"* ]]; then
      IFS=',' read -ra items <<<"${line#"$DRAIN_UNMANAGED"}"
      for item in "${items[@]}"; do
        item=${item# }
        [[ -n "${reasons[$item]:-}" ]] || order+=("$item")
        reasons[$item]="no controller manages it, so a drain would delete it for good: delete it"
        reasons[$item]+=" yourself, or set $DRAIN_FORCE_KEY: true to let drains delete such pods"
      done
      continue
    fi
    if [[ "$line" =~ $DRAIN_EVICTING ]]; then
      pod="${BASH_REMATCH[2]}/${BASH_REMATCH[1]}" rest=${BASH_REMATCH[3]}
      case "$rest" in
        " (will retry after "*) rest="a PodDisruptionBudget allowed no eviction within ${timeout}s (${rest#*): })" ;;
        ": global timeout reached: "*) rest="not evicted within ${timeout}s" ;;
        *) rest="its eviction failed: ${rest#: }" ;;
      esac
    elif [[ "$line" =~ $DRAIN_WAITING ]]; then
      pod="${BASH_REMATCH[2]}/${BASH_REMATCH[1]}"
      rest="evicted, but still there after ${timeout}s (a finalizer, or a termination grace period longer than that)"
    else
      continue
    fi
    if [[ -z "${reasons[$pod]:-}" ]]; then
      order+=("$pod")
      reasons[$pod]=$rest
    elif [[ "${reasons[$pod]}" == "not evicted within "* ]]; then
      # The timeout repeats what stopped the eviction; the cause says more.
      reasons[$pod]=$rest
    fi
  done <"$file"
  for pod in "${order[@]}"; do
    DRAIN_BLOCKERS+=("$pod: ${reasons[$pod]}")
  done
  if ((${#DRAIN_BLOCKERS[@]} == 0)); then
    DRAIN_BLOCKERS=("kubectl drain failed: ${last:-without a message}")
  fi
}

# drain_blockers_text: DRAIN_BLOCKERS on one line, "; " between them.
drain_blockers_text() {
  local text
  printf -v text '; %s' "${DRAIN_BLOCKERS[@]}"
  printf '%s' "${text#; }"
}
