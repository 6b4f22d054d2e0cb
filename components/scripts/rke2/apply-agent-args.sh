#!/usr/bin/env bash
# Restarts RKE2 when the kubelet's settings (its config.yaml.d drop-in) changed: RKE2 reads
# them only when it starts. A changed CPU manager policy also needs the kubelet's
# cpu_manager_state gone, with the node drained.
set -euo pipefail
# shellcheck source=lib.sh
[[ -n "${GPU_CLUSTER_RKE2_LIB_LOADED:-}" ]] || source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
: "${GPU_CLUSTER_STEP:=apply-agent-args}"

# Inputs: CPU_MANAGER_POLICY NODE_NAME RKE2_KUBELET_CONFIG RKE2_SERVICE
#   RKE2_KUBELET_CONFIG  the drop-in (kubelet-arg, resolv-conf) as the program renders it.
#   CPU_MANAGER_POLICY   none or static: the policy in those settings.
#   NODE_NAME            this host's node.
#   RKE2_SERVICE         rke2-agent, or rke2-server on the server (its kubelet too).
#
# The kubelet refuses to start when its cpu_manager_state records another policy than it
# is configured with ("could not restore state from checkpoint": kubernetes
# pkg/kubelet/cm/cpumanager/state/state_checkpoint.go); the state may go only while no
# pod holds CPUs, i.e. with the node drained (Kubernetes' "Changing the CPU Manager
# Policy" task: drain, stop the kubelet, remove the state file, start).

SERVICE_ACTIVE_TIMEOUT=300

check_inputs() {
  check_missing_env RKE2_KUBELET_CONFIG CPU_MANAGER_POLICY NODE_NAME RKE2_SERVICE
  check_worker_profile_inputs
  if [[ -n "${RKE2_SERVICE:-}" && ! "$RKE2_SERVICE" =~ ^rke2-(agent|server)$ ]]; then
    INPUT_PROBLEMS+=("RKE2_SERVICE must be rke2-agent or rke2-server, got '$RKE2_SERVICE'")
  fi
  die_on_input_problems
}

# node_cordoned: success when the node is unschedulable, as its own kubelet may read it.
node_cordoned() {
  [[ "$("$ROOT$RKE2_KUBECTL" --kubeconfig "$ROOT$RKE2_KUBELET_KUBECONFIG" get node "$NODE_NAME" \
    -o 'jsonpath={.spec.unschedulable}')" == true ]]
}

main() {
  local policy reset=0 current=""
  check_inputs
  if [[ ! -f "$ROOT$RKE2_KUBELET_KUBECONFIG" ]]; then
    die "RKE2 has not started a kubelet on this host yet ($RKE2_KUBELET_KUBECONFIG is" \
      "missing); install-server or join-agent runs first"
  fi
  if [[ -f "$ROOT$RKE2_KUBELET_CONFIG_FILE" ]]; then
    current="$(<"$ROOT$RKE2_KUBELET_CONFIG_FILE")"
  fi
  if [[ -f "$ROOT$RKE2_KUBELET_CONFIG_FILE" ]] && same_text "$current" "$RKE2_KUBELET_CONFIG"; then
    log "unchanged: the kubelet runs with the configured settings"
    return 0
  fi
  policy="$(recorded_cpu_manager_policy "$RKE2_KUBELET_ROOT_DIR")"
  if [[ -n "$policy" && "$policy" != "$CPU_MANAGER_POLICY" ]]; then
    if ! node_cordoned; then
      die "the CPU manager policy changes from $policy to $CPU_MANAGER_POLICY, which needs" \
        "the node drained: kubectl drain $NODE_NAME --ignore-daemonsets" \
        "--delete-emptydir-data, then pulumi up again, then kubectl uncordon $NODE_NAME"
    fi
    reset=1
  fi
  systemctl stop "$RKE2_SERVICE"
  log "changed: stopped $RKE2_SERVICE to apply the new kubelet settings"
  if ((reset)); then
    remove_file "$RKE2_KUBELET_ROOT_DIR/cpu_manager_state"
  fi
  write_text "$RKE2_KUBELET_CONFIG_FILE" 0600 "$RKE2_KUBELET_CONFIG"
  systemctl start --no-block "$RKE2_SERVICE"
  wait_until "$SERVICE_ACTIVE_TIMEOUT" "the $RKE2_SERVICE service to be active" \
    systemctl is-active --quiet "$RKE2_SERVICE"
  if ((reset)); then
    log "changed: the kubelet runs with CPU manager policy $CPU_MANAGER_POLICY;" \
      "uncordon the node: kubectl uncordon $NODE_NAME"
  else
    log "changed: $RKE2_SERVICE restarted with the new kubelet settings"
  fi
}

main "$@"
