#!/usr/bin/env bats
# Controller-side node maintenance (hosts[].maintenance) and the retirement of a replaced
# machine's node (hosts[].generation), with the distribution's kubectl as KUBECTL.

bats_require_minimum_version 1.5.0
load helpers

setup() {
  setup_host
  export KUBECTL="k0s kubectl" NODE_NAME=Kazan STUB_NODES=kazan DRAIN_TIMEOUT=120
}

@test "maintenance true: cordons and drains within the timeout, then changes nothing" {
  export MAINTENANCE=true
  run_script maintenance/maintain-node.sh
  assert_success
  assert_called '^k0s kubectl drain kazan --ignore-daemonsets --delete-emptydir-data --timeout=120s$'
  assert_output_contains "gpu-cluster: moscow: maintenance: changed: cordoned and drained node kazan"
  refute_called 'k0s kubectl (delete|uncordon)'
  assert_idempotent maintenance/maintain-node.sh
  assert_output_contains "node kazan is cordoned and drained"
}

@test "maintenance true: a drain that cannot finish fails naming host, step and the budget" {
  export MAINTENANCE=true STUB_PDB_PODS=ml/trainer-0
  run_script maintenance/maintain-node.sh
  assert_failure
  assert_output_contains "gpu-cluster: moscow: maintenance: node kazan is cordoned but was not drained: ml/trainer-0: a PodDisruptionBudget allowed no eviction within 120s"
  refute_called '^k0s kubectl delete'
}

@test "maintenance false: uncordons a cordoned node, then changes nothing" {
  export MAINTENANCE=true
  run_again_with maintenance/maintain-node.sh MAINTENANCE=false
  assert_success
  assert_called '^k0s kubectl uncordon kazan$'
  refute_called '^k0s kubectl drain'
  assert_output_contains "changed: uncordoned node kazan"
  assert_idempotent maintenance/maintain-node.sh
  assert_output_contains "node kazan is not cordoned"
}

@test "maintenance: a node that does not exist cannot be drained; uncordoning it is a no-op" {
  export MAINTENANCE=true STUB_NODES=""
  run_script maintenance/maintain-node.sh
  assert_failure
  assert_output_contains "gpu-cluster: moscow: maintenance: node kazan does not exist"
  export MAINTENANCE=false
  run_script maintenance/maintain-node.sh
  assert_success
  refute_called 'k0s kubectl (drain|uncordon)'
}

@test "maintenance: every bad input is named at once" {
  export MAINTENANCE=yes DRAIN_TIMEOUT=5m KUBECTL='k0s kubectl; reboot'
  run_script maintenance/maintain-node.sh
  assert_failure
  assert_output_contains "KUBECTL is not a command with plain words"
  assert_output_contains "MAINTENANCE must be true or false, got 'yes'"
  assert_output_contains "DRAIN_TIMEOUT must be a whole number, got '5m'"
  unset KUBECTL NODE_NAME
  run_script maintenance/maintain-node.sh
  assert_failure
  assert_output_contains "missing required environment variable(s): NODE_NAME KUBECTL"
  refute_called 'k0s'
}

@test "end-maintenance: uncordons what maintenance cordoned; a no-op without kubectl" {
  export MAINTENANCE=true
  run_script maintenance/maintain-node.sh
  reset_calls
  run_script maintenance/end-maintenance.sh
  assert_success
  assert_called '^k0s kubectl uncordon kazan$'
  assert_idempotent maintenance/end-maintenance.sh
  export KUBECTL="/usr/local/bin/k0s kubectl"
  run_script maintenance/end-maintenance.sh
  assert_success
  assert_output_contains "no kubectl on this host any more"
}

@test "retire-node: drains and deletes the old machine's node, then changes nothing" {
  export MACHINE_GENERATION=2 GENERATION_LABEL=gpu-cluster/machine-generation STUB_NODE_GENERATION=1
  run_script maintenance/retire-node.sh
  assert_success
  assert_call_order '^k0s kubectl drain kazan .*--timeout=120s$' '^k0s kubectl delete node kazan$'
  assert_output_contains "gpu-cluster: moscow: retire-node: changed: deleted node kazan of machine generation 1"
  assert_idempotent maintenance/retire-node.sh
  assert_output_contains "node kazan does not exist; nothing to retire"
}

@test "retire-node: a dead machine's node is deleted even when its drain times out" {
  export MACHINE_GENERATION=1 GENERATION_LABEL=gpu-cluster/machine-generation \
    STUB_PDB_PODS=ml/trainer-0
  run_script maintenance/retire-node.sh
  assert_success
  assert_output_contains "warning: node kazan was not drained (ml/trainer-0: a PodDisruptionBudget allowed no eviction within 120s"
  assert_called '^k0s kubectl delete node kazan$'
  assert_output_contains "deleted node kazan of machine generation 0"
}

@test "retire-node: leaves the node of the new machine alone" {
  export MACHINE_GENERATION=3 GENERATION_LABEL=gpu-cluster/machine-generation STUB_NODE_GENERATION=3
  run_script maintenance/retire-node.sh
  assert_success
  assert_output_contains "node kazan is already machine generation 3"
  refute_called 'k0s kubectl (drain|delete)'
}
