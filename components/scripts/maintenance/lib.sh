#!/usr/bin/env bash
# Node maintenance from the controller with the distribution's kubectl (KUBECTL, e.g.
# "/usr/local/bin/k0s kubectl"): cordon and drain a node (hosts[].maintenance: true),
# uncordon it (false), and remove the node object of a machine that was replaced. The
# scripts that drain also load drain/lib.sh, after this one.
# shellcheck shell=bash disable=SC2034 # its globals are read by the scripts that source it

# shellcheck source=../lib.sh
[[ -n "${GPU_CLUSTER_LIB_LOADED:-}" ]] || source "$(dirname "${BASH_SOURCE[0]}")/../lib.sh"

GPU_CLUSTER_MAINTENANCE_LIB_LOADED=1
KUBECTL_CMD=()

# maintenance_inputs VAR...: checks NODE_NAME, KUBECTL and the named extra inputs, and
# sets KUBECTL_CMD. KUBECTL is split on blanks on purpose, so its words are plain.
maintenance_inputs() {
  local INPUT_PROBLEMS=()
  check_missing_env NODE_NAME KUBECTL "$@"
  if [[ -n "${KUBECTL:-}" && ! "$KUBECTL" =~ ^[A-Za-z0-9/._-]+(\ [A-Za-z0-9/._=-]+)*$ ]]; then
    INPUT_PROBLEMS+=("KUBECTL is not a command with plain words: '$KUBECTL'")
  fi
  if [[ -n "${MAINTENANCE:-}" && ! "$MAINTENANCE" =~ ^(true|false)$ ]]; then
    INPUT_PROBLEMS+=("MAINTENANCE must be true or false, got '$MAINTENANCE'")
  fi
  local name
  for name in DRAIN_TIMEOUT MACHINE_GENERATION; do
    if [[ -n "${!name:-}" && ! "${!name}" =~ ^[0-9]+$ ]]; then
      INPUT_PROBLEMS+=("$name must be a whole number, got '${!name}'")
    fi
  done
  if declare -F check_drain_inputs >/dev/null; then
    # A script that drains (drain/lib.sh loaded): DRAIN_FORCE too.
    check_drain_inputs
  fi
  die_on_input_problems
  read -ra KUBECTL_CMD <<<"$KUBECTL"
}

# kubectl_available: success when the controller still has its kubectl (a controller
# being destroyed may not).
kubectl_available() {
  local binary=${KUBECTL_CMD[0]}
  if [[ "$binary" == /* ]]; then
    [[ -x "$ROOT$binary" ]]
  else
    command -v "$binary" >/dev/null 2>&1
  fi
}

# kube ARGS...: the distribution's kubectl.
kube() {
  "${KUBECTL_CMD[@]}" "$@"
}

# node_exists NODE
node_exists() {
  [[ -n "$(kube get node "$1" --ignore-not-found -o name)" ]]
}

# node_cordoned NODE: success when the node is unschedulable.
node_cordoned() {
  [[ "$(kube get node "$1" -o 'jsonpath={.spec.unschedulable}')" == true ]]
}

# drain_node NODE TIMEOUT: cordons NODE and drains it (drain/lib.sh drain_node_with); dies
# naming the pods that kept it.
drain_node() {
  local node=$1 timeout=$2
  if ! drain_node_with "$node" "$timeout" kube; then
    die "node $node is cordoned but was not drained: $(drain_blockers_text). Free those" \
      "pods and run pulumi up again (kubernetes.drainTimeoutSeconds bounds the wait)"
  fi
}
