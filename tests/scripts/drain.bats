#!/usr/bin/env bats
# Drains that cannot finish (drain/lib.sh): a pod no controller manages (`kubectl run`) and
# a pod a PodDisruptionBudget protects, with kubectl drain's own messages (the stub's
# stub_drain, kubernetes/kubectl v0.36.3), through every step that drains: drain-node,
# both distributions' remove-node, maintenance and retire-node. Each names the pods and why;
# kubernetes.drainForce (DRAIN_FORCE=true) lets drains delete bare pods.

bats_require_minimum_version 1.5.0
load helpers
load helpers/upgrade
load helpers/node-ops

BARE="default/gpu-shell: no controller manages it, so a drain would delete it for good: delete it yourself, or set kubernetes.drainForce: true to let drains delete such pods"

setup() {
  setup_host
}

@test "drain-node: a bare pod fails the drain at once, named, not blamed on budgets or time" {
  upgrade_inputs
  export STUB_BARE_PODS="default/gpu-shell"
  run_script upgrade/drain-node.sh
  [ "$status" -eq 1 ]
  # kubectl's own words are shown too.
  assert_output_contains "cannot delete Pods that declare no controller (use --force to override): default/gpu-shell" \
    "gpu-cluster: moscow: drain-node: could not drain node kazan: $BARE. The upgrade stops here"
  refute_output_contains "PodDisruptionBudget" "within 120s"
  assert_called "$ADMIN drain kazan --ignore-daemonsets --delete-emptydir-data --timeout=120s$"
  [ "$(cat "$STUB_STATE/failed-kazan")" = "drain-node: could not drain node kazan: $BARE" ]
}

@test "drain-node: with kubernetes.drainForce the bare pod is deleted and the drain goes on" {
  upgrade_inputs
  export STUB_BARE_PODS="default/gpu-shell ml/notebook" DRAIN_FORCE=true
  run_script upgrade/drain-node.sh
  assert_success
  assert_called "$ADMIN drain kazan --ignore-daemonsets --delete-emptydir-data --timeout=120s --force$"
  assert_output_contains "Warning: deleting Pods that declare no controller: default/gpu-shell, ml/notebook" \
    "gpu-cluster: moscow: drain-node: changed: drained node kazan"
}

@test "drain-node: a pod its PodDisruptionBudget keeps is named with the API's answer" {
  upgrade_inputs
  export STUB_PDB_PODS="ml/trainer-0"
  run_script upgrade/drain-node.sh
  [ "$status" -eq 1 ]
  assert_output_contains "gpu-cluster: moscow: drain-node: could not drain node kazan: ml/trainer-0: a PodDisruptionBudget allowed no eviction within 120s (Cannot evict pod as it would violate the pod's disruption budget.). The upgrade stops here"
}

@test "drain-node: a bare pod and a budget, each pod once with its own reason" {
  upgrade_inputs
  export STUB_BARE_PODS="default/gpu-shell default/debug" STUB_PDB_PODS="ml/trainer-0" DRAIN_FORCE=true
  run_script upgrade/drain-node.sh
  [ "$status" -eq 1 ]
  assert_output_contains "could not drain node kazan: ml/trainer-0: a PodDisruptionBudget allowed no eviction within 120s"
  refute_output_contains "gpu-shell: no controller"
  DRAIN_FORCE=false run_script upgrade/drain-node.sh
  [ "$status" -eq 1 ]
  assert_output_contains "could not drain node kazan: $BARE; default/debug: no controller manages it"
}

@test "drain-node: DRAIN_FORCE must be true or false, named with the other inputs" {
  upgrade_inputs
  export DRAIN_FORCE=yes MAX_UNAVAILABLE=x
  run_script upgrade/drain-node.sh
  [ "$status" -eq 1 ]
  assert_output_contains "DRAIN_FORCE must be true or false, got 'yes'"
  refute_called ' drain '
}

# assert_remove_kept NODE WHY: remove-node, on the controller rke2_controller or
# k0s_controller made, could not drain NODE and keeps it, saying WHY.
assert_remove_kept() {
  export NODE_NAME=$1 STUB_NODES=$1
  run_script node/remove-node.sh
  [ "$status" -eq 1 ] || return 1
  assert_output_contains "gpu-cluster: moscow: remove-node: could not drain node $1, so it stays: $2" || return 1
  refute_called "$CALL delete node"
}

@test "remove-node (RKE2): a bare pod keeps the node, named; drainForce removes it" {
  rke2_controller
  export STUB_BARE_PODS="default/gpu-shell"
  assert_remove_kept tokyo "$BARE"
  DRAIN_FORCE=true run_script node/remove-node.sh
  assert_success
  assert_called '^kubectl --kubeconfig .*rke2\.yaml drain tokyo --ignore-daemonsets --delete-emptydir-data --timeout=300s --force$'
  assert_called ' delete node tokyo$'
}

@test "remove-node (k0s): a budget keeps the node, named" {
  k0s_controller
  export STUB_PDB_PODS="ml/trainer-0"
  assert_remove_kept kazan "ml/trainer-0: a PodDisruptionBudget allowed no eviction within 300s"
}

@test "maintenance: a bare pod fails the drain, named" {
  export NODE_NAME=kazan STUB_NODES=kazan KUBECTL="k0s kubectl" MAINTENANCE=true DRAIN_TIMEOUT=600
  export STUB_BARE_PODS="default/gpu-shell"
  run_script maintenance/maintain-node.sh
  [ "$status" -eq 1 ]
  assert_output_contains "gpu-cluster: moscow: maintenance: node kazan is cordoned but was not drained: $BARE."
}

@test "retire-node: an old node that cannot drain is deleted anyway, saying what stayed" {
  export NODE_NAME=kazan STUB_NODES=kazan KUBECTL="k0s kubectl" DRAIN_TIMEOUT=600
  export MACHINE_GENERATION=2 GENERATION_LABEL=gpu-cluster/machine-generation
  export STUB_PDB_PODS="ml/trainer-0"
  run_script maintenance/retire-node.sh
  assert_success
  assert_output_contains "retire-node: warning: node kazan was not drained (ml/trainer-0: a PodDisruptionBudget allowed no eviction within 600s"
  assert_called '^k0s kubectl delete node kazan$'
}
