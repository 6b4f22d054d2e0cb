#!/usr/bin/env bash
# Restarts the worker when its kubelet settings (the k0s worker profile) changed: k0s
# workers read the profile only when they start (k0sproject/k0s#1806, #6408). A changed
# CPU manager policy also needs the kubelet's cpu_manager_state gone, with the node drained.
set -euo pipefail
# shellcheck source=lib.sh
[[ -n "${GPU_CLUSTER_K0S_LIB_LOADED:-}" ]] || source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
: "${GPU_CLUSTER_STEP:=apply-worker-profile}"

# Inputs: CPU_MANAGER_POLICY KUBELET_ROOT_DIR NODE_NAME WORKER_PROFILE_VALUES
#   WORKER_PROFILE_VALUES  the profile's kubelet settings (JSON), as the controller has them.
#   CPU_MANAGER_POLICY     none or static: the policy in those settings.
#   NODE_NAME              this host's node.
#   KUBELET_ROOT_DIR       where the kubelet keeps its state (cpu_manager_state).
#
# The kubelet refuses to start when its cpu_manager_state records another policy than it
# is configured with ("could not restore state from checkpoint": kubernetes
# pkg/kubelet/cm/cpumanager/state/state_checkpoint.go); the state may go only while no
# pod holds CPUs, i.e. with the node drained (Kubernetes' "Changing the CPU Manager
# Policy" task: drain, stop the kubelet, remove the state file, start).

RECORD=/var/lib/gpu-cluster/worker-profile.json
SERVICE_ACTIVE_TIMEOUT=300

check_inputs() {
  check_missing_env WORKER_PROFILE_VALUES CPU_MANAGER_POLICY NODE_NAME KUBELET_ROOT_DIR
  check_worker_profile_inputs
  die_on_input_problems
  k0s_check_kubelet_root_dir
}

main() {
  local policy reset=0
  check_inputs
  if [[ ! -f "$ROOT$RECORD" ]]; then
    write_text "$RECORD" 0644 "$WORKER_PROFILE_VALUES"
    log "the worker started with these kubelet settings: $WORKER_PROFILE_VALUES"
    return 0
  fi
  if [[ "$(<"$ROOT$RECORD")" == "$WORKER_PROFILE_VALUES" ]]; then
    log "unchanged: the worker runs with the configured kubelet settings"
    return 0
  fi
  policy="$(recorded_cpu_manager_policy "$KUBELET_ROOT_DIR")"
  if [[ -n "$policy" && "$policy" != "$CPU_MANAGER_POLICY" ]]; then
    if [[ "$(k0s kubectl --kubeconfig "$ROOT$K0S_KUBELET_KUBECONFIG" get node "$NODE_NAME" \
      -o 'jsonpath={.spec.unschedulable}')" != true ]]; then
      die "the CPU manager policy changes from $policy to $CPU_MANAGER_POLICY, which needs" \
        "the node drained: kubectl drain $NODE_NAME --ignore-daemonsets" \
        "--delete-emptydir-data, then pulumi up again, then kubectl uncordon $NODE_NAME"
    fi
    reset=1
  fi
  systemctl stop k0sworker
  log "changed: stopped k0sworker to apply the new kubelet settings"
  if ((reset)); then
    remove_file "$KUBELET_ROOT_DIR/cpu_manager_state"
  fi
  systemctl start k0sworker
  wait_until "$SERVICE_ACTIVE_TIMEOUT" "the k0sworker service to be active" \
    systemctl is-active --quiet k0sworker
  write_text "$RECORD" 0644 "$WORKER_PROFILE_VALUES"
  if ((reset)); then
    log "changed: the kubelet runs with CPU manager policy $CPU_MANAGER_POLICY;" \
      "uncordon the node: kubectl uncordon $NODE_NAME"
  else
    log "changed: the worker restarted with the new kubelet settings"
  fi
}

main "$@"
