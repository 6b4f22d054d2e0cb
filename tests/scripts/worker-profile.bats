#!/usr/bin/env bats
# k0s/apply-worker-profile.sh: a worker picks up changed kubelet settings by a restart, and
# a changed CPU manager policy only on a drained node, with the kubelet's old state gone.

bats_require_minimum_version 1.5.0
load helpers

NONE='{"resolvConf": "/run/systemd/resolve/resolv.conf"}'
STATIC='{"cpuManagerPolicy": "static", "reservedSystemCPUs": "0-1", "resolvConf": "/run/systemd/resolve/resolv.conf"}'

setup() {
  setup_host
  export WORKER_PROFILE_VALUES="$NONE" CPU_MANAGER_POLICY=none NODE_NAME=moscow \
    KUBELET_ROOT_DIR=/var/lib/kubelet
  mkdir -p "$GPU_CLUSTER_ROOT/var/lib/kubelet" "$GPU_CLUSTER_ROOT/var/lib/k0s"
  : >"$GPU_CLUSTER_ROOT/var/lib/k0s/kubelet.conf"
  echo '{"policyName":"none","defaultCpuSet":"","checksum":1353318690}' \
    >"$GPU_CLUSTER_ROOT/var/lib/kubelet/cpu_manager_state"
}

@test "apply-worker-profile: the first run records what the worker joined with" {
  run_script k0s/apply-worker-profile.sh
  assert_success
  assert_file /var/lib/gpu-cluster/worker-profile.json "$NONE"
  refute_called '^systemctl'
  assert_idempotent k0s/apply-worker-profile.sh
}

@test "apply-worker-profile: other settings restart the worker" {
  run_script k0s/apply-worker-profile.sh
  export WORKER_PROFILE_VALUES='{"maxPods": 250, "resolvConf": "/run/systemd/resolve/resolv.conf"}'
  reset_calls
  run_script k0s/apply-worker-profile.sh
  assert_success
  assert_call_order '^systemctl stop k0sworker$' '^systemctl start k0sworker$'
  [ -f "$GPU_CLUSTER_ROOT/var/lib/kubelet/cpu_manager_state" ]
  assert_output_contains "changed: the worker restarted with the new kubelet settings"
  assert_idempotent k0s/apply-worker-profile.sh
}

@test "apply-worker-profile: a new CPU manager policy on a node in service is refused, nothing touched" {
  run_script k0s/apply-worker-profile.sh
  export WORKER_PROFILE_VALUES="$STATIC" CPU_MANAGER_POLICY=static
  reset_calls
  run_script k0s/apply-worker-profile.sh
  assert_failure
  assert_output_contains "the CPU manager policy changes from none to static, which needs the node drained: kubectl drain moscow --ignore-daemonsets --delete-emptydir-data"
  refute_called '^systemctl'
  [ -f "$GPU_CLUSTER_ROOT/var/lib/kubelet/cpu_manager_state" ]
}

@test "apply-worker-profile: on a drained node the old CPU manager state goes before the kubelet starts" {
  run_script k0s/apply-worker-profile.sh
  export WORKER_PROFILE_VALUES="$STATIC" CPU_MANAGER_POLICY=static STUB_NODE_UNSCHEDULABLE=true
  reset_calls
  run_script k0s/apply-worker-profile.sh
  assert_success
  [ ! -e "$GPU_CLUSTER_ROOT/var/lib/kubelet/cpu_manager_state" ]
  assert_call_order '^systemctl stop k0sworker$' '^systemctl start k0sworker$'
  assert_output_contains "changed: removed /var/lib/kubelet/cpu_manager_state" \
    "uncordon the node: kubectl uncordon moscow"
  assert_file /var/lib/gpu-cluster/worker-profile.json "$STATIC"
  assert_idempotent k0s/apply-worker-profile.sh
}

@test "apply-worker-profile: inputs are checked, all at once" {
  export CPU_MANAGER_POLICY=dynamic NODE_NAME='Bad_Name'
  unset WORKER_PROFILE_VALUES
  run_script k0s/apply-worker-profile.sh
  assert_failure
  assert_output_contains "missing required environment variable(s): WORKER_PROFILE_VALUES" \
    "CPU_MANAGER_POLICY must be none or static, got 'dynamic'" "NODE_NAME is not a node name: 'Bad_Name'"
}
