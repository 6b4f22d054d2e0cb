#!/usr/bin/env bats
# Upgrades by version bump: upgrade/check-version.sh, drain-node.sh and uncordon-node.sh
# on the controller, k0s/upgrade-node.sh and rke2/upgrade-node.sh on a worker.

bats_require_minimum_version 1.5.0
load helpers
load helpers/upgrade

setup() {
  setup_host
  rke2_admin_kubectl
  # drain-node's bound (a count) and how long it waits without a slot freeing.
  export MAX_UNAVAILABLE=1 SLOT_WAIT_TIMEOUT=30 NODE_NAME=kazan
}

# k0s_worker_running VERSION: a joined k0s worker running VERSION.
k0s_worker_running() {
  mkdir -p "$GPU_CLUSTER_ROOT/usr/local/bin"
  printf '#!/bin/sh\n# fake k0s %s\n' "$1" >"$GPU_CLUSTER_ROOT/usr/local/bin/k0s"
  chmod 0755 "$GPU_CLUSTER_ROOT/usr/local/bin/k0s"
  echo "[Service]" >"$GPU_CLUSTER_ROOT/etc/systemd/system/k0sworker.service"
  touch "$STUB_STATE/active-k0sworker"
}

# k0s_worker_joined VERSION: k0s_worker_running, with the kubelet's kubeconfig the join
# leaves (the credential upgrade-node marks its node with).
k0s_worker_joined() {
  k0s_worker_running "$1"
  mkdir -p "$GPU_CLUSTER_ROOT/var/lib/k0s"
  touch "$GPU_CLUSTER_ROOT/var/lib/k0s/kubelet.conf"
}

@test "drain-node: drains a node that runs an older version, bounded, through evictions" {
  upgrade_inputs
  export NODE_NAME=Kazan
  run_script upgrade/drain-node.sh
  assert_success
  assert_call_order "$ADMIN get nodes -o jsonpath=.*upgrading-to.*upgrade-failed" \
    "$ADMIN annotate node kazan --overwrite gpu-cluster\\.io/upgrading-to=v1\\.37\\.0\\+rke2r1 gpu-cluster\\.io/upgrade-failed-$"
  assert_call_order "$ADMIN annotate node kazan " \
    "$ADMIN drain kazan --ignore-daemonsets --delete-emptydir-data --timeout=120s$"
  assert_output_contains "took an upgrade slot for node kazan (0 other node(s) being upgraded, at most 1 at once)" \
    "gpu-cluster: moscow: drain-node: changed: drained node kazan"
  assert_marks kazan "v1.37.0+rke2r1||"
}

@test "drain-node: takes a free slot beside the nodes already being upgraded, under the lock" {
  upgrade_inputs
  export MAX_UNAVAILABLE=2 STUB_NODES="kazan tokyo omsk"
  printf 'v1.37.0+rke2r1' >"$STUB_STATE/annotation-tokyo"
  run_script upgrade/drain-node.sh
  assert_success
  assert_output_contains "took an upgrade slot for node kazan (1 other node(s) being upgraded, at most 2 at once)"
  refute_output_contains "waiting"
  assert_marks kazan "v1.37.0+rke2r1||"
  [ -f "$GPU_CLUSTER_ROOT/run/gpu-cluster/upgrade-slots.lock" ]
}

@test "drain-node: waits while maxUnavailable nodes are being upgraded, then takes the freed slot" {
  upgrade_inputs
  export MAX_UNAVAILABLE=2 STUB_NODES="kazan tokyo omsk"
  printf 'v1.37.0+rke2r1' >"$STUB_STATE/annotation-tokyo"
  printf 'v1.37.0+rke2r1' >"$STUB_STATE/annotation-omsk"
  export STUB_SLOT_FREED_AFTER="2 tokyo"
  run_script upgrade/drain-node.sh
  assert_success
  assert_output_contains "waiting for an upgrade slot for node kazan: 2 node(s) at once, being upgraded: tokyo omsk (up to 30s without progress)" \
    "took an upgrade slot for node kazan (1 other node(s) being upgraded, at most 2 at once)"
  [ "$(grep -c '^sleep 10$' "$STUB_CALLS")" -eq 2 ]
  assert_call_order '^sleep 10$' "$ADMIN annotate node kazan "
  assert_call_order "$ADMIN annotate node kazan " "$ADMIN drain kazan "
  assert_marks kazan "v1.37.0+rke2r1||"
}

@test "drain-node: no slot freeing within SLOT_WAIT_TIMEOUT changes nothing and says who holds them" {
  upgrade_inputs
  export STUB_NODES="kazan tokyo"
  printf 'v1.37.0+rke2r1' >"$STUB_STATE/annotation-tokyo"
  run_script upgrade/drain-node.sh
  assert_failure
  assert_output_contains "waiting for an upgrade slot for node kazan: 1 node(s) at once, being upgraded: tokyo" \
    "gpu-cluster: moscow: drain-node: no upgrade slot freed within 30s for node kazan; being upgraded: tokyo. Nothing was changed on kazan"
  # 30 s at one look every 10 s.
  [ "$(grep -c '^sleep 10$' "$STUB_CALLS")" -eq 3 ]
  refute_drained kazan "||"
}

@test "drain-node: a node marked as failed stops the rollout: nothing else starts, the way on is named" {
  upgrade_inputs
  export MAX_UNAVAILABLE=3 STUB_NODES="kazan tokyo"
  printf 'v1.37.0+rke2r1' >"$STUB_STATE/annotation-tokyo"
  printf 'drain-node: could not drain node tokyo within 600s' >"$STUB_STATE/failed-tokyo"
  run_script upgrade/drain-node.sh
  assert_failure
  assert_output_contains "gpu-cluster: moscow: drain-node: refusing to start the upgrade of node kazan: node(s) failed theirs: tokyo (drain-node: could not drain node tokyo within 600s). The rollout stops here; nodes already being upgraded finish." \
    "run pulumi up again, which retries its failed step" \
    "kubectl annotate node NODE gpu-cluster.io/upgrade-failed-"
  refute_called ' (drain|annotate) '
  refute_called '^sleep'
  assert_marks kazan "||"
}

@test "drain-node: the retry of a node's own failed drain clears its mark and keeps its slot" {
  upgrade_inputs
  export STUB_NODES="kazan tokyo"
  printf 'v1.37.0+rke2r1' >"$STUB_STATE/annotation-kazan"
  printf 'drain-node: could not drain node kazan within 120s' >"$STUB_STATE/failed-kazan"
  run_script upgrade/drain-node.sh
  assert_success
  assert_called "$ADMIN drain kazan "
  assert_marks kazan "v1.37.0+rke2r1||"
}

@test "drain-node: a new node or one at the wanted version takes no slot and waits for none" {
  upgrade_inputs
  export STUB_NODES=tokyo
  printf 'v1.37.0+rke2r1' >"$STUB_STATE/annotation-tokyo"
  printf 'uncordon-node: not Ready' >"$STUB_STATE/failed-tokyo"
  NODE_NAME=kazan run_script upgrade/drain-node.sh
  assert_success
  assert_output_contains "node kazan is not registered yet: nothing to drain"
  export STUB_NODES="kazan tokyo" STUB_KUBELET_VERSION=v1.37.0+rke2r1
  NODE_NAME=kazan run_script upgrade/drain-node.sh
  assert_success
  assert_output_contains "unchanged: node kazan already runs v1.37.0+rke2r1; not drained"
  refute_called ' (drain|annotate) |get nodes|^sleep'
  assert_marks kazan "||"
}

@test "drain-node: drain steps running at once take no more than maxUnavailable slots (the lock)" {
  upgrade_inputs
  export SLOT_WAIT_TIMEOUT=20 STUB_NODES="kazan tokyo"
  # Each look at the marks takes a second, so unlocked steps would both see no holder.
  export STUB_MARKS_DELAY=1
  NODE_NAME=kazan bash "$SCRIPTS_DIR/upgrade/drain-node.sh" >"$BATS_TEST_TMPDIR/kazan.out" 2>&1 &
  local kazan=$!
  NODE_NAME=tokyo bash "$SCRIPTS_DIR/upgrade/drain-node.sh" >"$BATS_TEST_TMPDIR/tokyo.out" 2>&1 &
  local tokyo=$! statuses=""
  wait "$kazan" && statuses+=0 || statuses+=1
  wait "$tokyo" && statuses+=0 || statuses+=1
  cat "$BATS_TEST_TMPDIR/kazan.out" "$BATS_TEST_TMPDIR/tokyo.out"
  # One took the slot and drained; the other waited and gave up, changing nothing.
  [[ "$statuses" == 01 || "$statuses" == 10 ]]
  [ "$(grep -c ' drain ' "$STUB_CALLS")" -eq 1 ]
  [ "$(ls "$STUB_STATE" | grep -c '^annotation-')" -eq 1 ]
  grep -q "no upgrade slot freed within 20s" "$BATS_TEST_TMPDIR/kazan.out" "$BATS_TEST_TMPDIR/tokyo.out"
}

@test "drain-node, upgrade, uncordon-node: a second run changes nothing" {
  upgrade_inputs
  export NODE_READY_TIMEOUT=300
  run_script upgrade/drain-node.sh
  assert_success
  export STUB_KUBELET_VERSION=v1.37.0+rke2r1
  run_script upgrade/uncordon-node.sh
  assert_success
  assert_marks kazan "||"
  reset_calls
  run_script upgrade/drain-node.sh
  assert_success
  refute_changes_logged
  run_script upgrade/uncordon-node.sh
  assert_success
  refute_changes_logged
  refute_called ' (drain|annotate|uncordon) '
}

@test "drain-node: a node that already runs the version is left alone, and a second run changes nothing" {
  upgrade_inputs
  export STUB_KUBELET_VERSION=v1.37.0+rke2r1
  run_script upgrade/drain-node.sh
  assert_success
  assert_output_contains "unchanged: node kazan already runs v1.37.0+rke2r1; not drained"
  refute_called ' (drain|annotate|cordon) '
  assert_idempotent upgrade/drain-node.sh
}

@test "drain-node: a new host's node is not registered yet: nothing to drain" {
  upgrade_inputs
  export STUB_NODES=
  run_script upgrade/drain-node.sh
  assert_success
  assert_output_contains "node kazan is not registered yet: nothing to drain"
  refute_called ' drain '
}

@test "drain-node: a drain that times out stops the rollout naming the host, step and node" {
  upgrade_inputs
  export DRAIN_TIMEOUT=30 STUB_PDB_PODS=ml/trainer-0
  run_script upgrade/drain-node.sh
  assert_failure
  local why="could not drain node kazan: ml/trainer-0: a PodDisruptionBudget allowed no eviction within 30s (Cannot evict pod as it would violate the pod's disruption budget.)"
  assert_output_contains "gpu-cluster: moscow: drain-node: $why"
  assert_output_contains "The upgrade stops here, before kazan is changed, and kazan is marked as failed"
  assert_marks kazan "v1.37.0+rke2r1|drain-node: $why|"
  # A failure kubectl names no pod for is shown as kubectl said it.
  STUB_PDB_PODS="" STUB_FAIL_CALL=' drain kazan ' run_script upgrade/drain-node.sh
  assert_failure
  assert_output_contains "could not drain node kazan: kubectl drain failed: stub: kubectl failed as asked."
}

@test "drain-node: refuses a KUBECTL that is not a path and options" {
  upgrade_inputs
  export DRAIN_TIMEOUT=x KUBECTL='kubectl; reboot'
  run_script upgrade/drain-node.sh
  assert_failure
  assert_output_contains "KUBECTL must be an absolute path and plain options"
  refute_called 'kubectl'
}

@test "uncordon-node: waits for Ready and uncordons the node drain-node cordoned, once" {
  export NODE_NAME=kazan NODE_READY_TIMEOUT=300 STUB_NODES=kazan
  printf 'v1.37.0+rke2r1' >"$STUB_STATE/annotation-kazan"
  printf 'uncordon-node: an earlier try' >"$STUB_STATE/failed-kazan"
  run_script upgrade/uncordon-node.sh
  assert_success
  assert_call_order "$ADMIN wait --for=condition=Ready node/kazan --timeout=300s$" \
    "$ADMIN uncordon kazan$"
  assert_call_order "$ADMIN uncordon kazan$" \
    "$ADMIN annotate node kazan gpu-cluster\\.io/upgrading-to- gpu-cluster\\.io/upgrade-failed-$"
  # The slot is free, and so is a failed mark of an earlier try.
  assert_marks kazan "||"
  assert_output_contains "changed: node kazan is Ready at v1.37.0+rke2r1 and uncordoned"
  reset_calls
  run_script upgrade/uncordon-node.sh
  assert_success
  refute_called ' uncordon '
  assert_output_contains "unchanged: node kazan is Ready and was not cordoned for an upgrade"
}

@test "uncordon-node: a node that does not get Ready stays cordoned and stops the rollout" {
  export NODE_NAME=kazan NODE_READY_TIMEOUT=60 STUB_NODES=kazan STUB_FAIL_CALL=' wait '
  printf 'v1.37.0+rke2r1' >"$STUB_STATE/annotation-kazan"
  run_script upgrade/uncordon-node.sh
  assert_failure
  assert_output_contains "gpu-cluster: moscow: uncordon-node: node kazan did not become Ready within 60s" \
    "(the node is marked as failed)"
  refute_called ' uncordon '
  assert_marks kazan "v1.37.0+rke2r1|uncordon-node: node kazan did not become Ready within 60s after its upgrade|"
}

@test "upgrade-node: a failure on a node holding an upgrade slot marks it as failed with the kubelet's credential" {
  k0s_worker_joined v1.36.3+k0s.2
  export K0S_VERSION=v1.37.0+k0s.0 NODE_NAME=Kazan STUB_NODES=kazan STUB_FAIL_CALL='^systemctl restart'
  printf 'v1.37.0+k0s.0' >"$STUB_STATE/annotation-kazan"
  run_script k0s/upgrade-node.sh
  assert_failure
  assert_called '^k0s kubectl --kubeconfig .*/var/lib/k0s/kubelet\.conf annotate node kazan --overwrite gpu-cluster\.io/upgrade-failed='
  assert_output_contains "marked node kazan as failed: no other node starts its upgrade"
  assert_marks kazan "v1.37.0+k0s.0|upgrade-node: failed (exit 1) restarting k0sworker at v1.37.0+k0s.0|"
}

@test "upgrade-node: a failure on a node without a slot, or on a new host, marks nothing" {
  k0s_worker_joined v1.36.3+k0s.2
  export K0S_VERSION=v1.37.0+k0s.0 NODE_NAME=kazan STUB_NODES=kazan STUB_FAIL_CALL='^systemctl restart'
  run_script k0s/upgrade-node.sh
  assert_failure
  refute_called ' annotate '
  rm "$GPU_CLUSTER_ROOT/var/lib/k0s/kubelet.conf"
  printf 'v1.37.0+k0s.0' >"$STUB_STATE/annotation-kazan"
  run_script k0s/upgrade-node.sh
  assert_failure
  refute_called ' annotate '
  assert_marks kazan "v1.37.0+k0s.0||"
}

@test "check-version: one minor up passes; a skipped minor or a downgrade is refused, naming what runs" {
  export KUBERNETES_VERSION=v1.37.0+rke2r1 STUB_SERVER_VERSION=v1.36.3+rke2r1 STUB_NODES="kazan tokyo"
  export STUB_KUBELET_VERSION=v1.36.3+rke2r1
  run_script upgrade/check-version.sh
  assert_success
  assert_output_contains "unchanged: v1.37.0+rke2r1 is a supported step from the running v1.36.3+rke2r1"
  export KUBERNETES_VERSION=v1.38.1+rke2r1
  run_script upgrade/check-version.sh
  assert_failure
  assert_output_contains "gpu-cluster: moscow: check-version: refusing kubernetes.version v1.38.1+rke2r1: the API server runs v1.36.3+rke2r1; from v1.36.3+rke2r1 to v1.38.1+rke2r1 skips minor version(s): upgrade one minor at a time (first to v1.37)"
  assert_output_contains "node tokyo runs v1.36.3+rke2r1; from v1.36.3+rke2r1 to v1.38.1+rke2r1 skips"
  export KUBERNETES_VERSION=v1.36.2+rke2r1
  run_script upgrade/check-version.sh
  assert_failure
  assert_output_contains "from v1.36.3+rke2r1 to v1.36.2+rke2r1 is a downgrade"
  assert_no_state_changes
}

@test "check-version: a node left behind by a stopped rollout is named" {
  export KUBERNETES_VERSION=v1.37.0+k0s.0 STUB_SERVER_VERSION=v1.36.3+k0s STUB_NODES=kazan
  export STUB_KUBELET_VERSION=v1.35.1+k0s
  run_script upgrade/check-version.sh
  assert_failure
  assert_output_contains "node kazan runs v1.35.1+k0s; from v1.35.1+k0s to v1.37.0+k0s.0 skips minor version(s)"
}

@test "check-version: nothing to check before the control plane is installed" {
  rm -f "$GPU_CLUSTER_ROOT/var/lib/rancher/rke2/bin/kubectl"
  export KUBERNETES_VERSION=v1.37.0+rke2r1
  run_script upgrade/check-version.sh
  assert_success
  assert_output_contains "no control plane runs here yet"
}

@test "k0s upgrade-node: replaces the binary and restarts the worker; a second run changes nothing" {
  k0s_worker_running v1.36.3+k0s.2
  export K0S_VERSION=v1.37.0+k0s.0
  run_script k0s/upgrade-node.sh
  assert_success
  [ "$(k0s version)" = v1.37.0+k0s.0 ]
  assert_called '^systemctl restart k0sworker$'
  assert_output_contains "gpu-cluster: moscow: upgrade-node: changed: restarted k0sworker at v1.37.0+k0s.0"
  assert_idempotent k0s/upgrade-node.sh
}

@test "k0s upgrade-node: on a new host installs the binary only; the join starts the worker" {
  export K0S_VERSION=v1.37.0+k0s.0
  run_script k0s/upgrade-node.sh
  assert_success
  [ "$(k0s version)" = v1.37.0+k0s.0 ]
  refute_called '^(systemctl (restart|start)|k0s (install|start))'
  assert_output_contains "the join step starts the worker"
}

@test "k0s upgrade-node: refuses a skipped minor and a downgrade, changing nothing" {
  k0s_worker_running v1.35.4+k0s.0
  export K0S_VERSION=v1.37.0+k0s.0
  run_script k0s/upgrade-node.sh
  assert_failure
  assert_output_contains "gpu-cluster: moscow: upgrade-node: refusing to change k0s here: from v1.35.4+k0s.0 to v1.37.0+k0s.0 skips minor version(s)"
  k0s_worker_running v1.37.0+k0s.1
  run_script k0s/upgrade-node.sh
  assert_failure
  assert_output_contains "from v1.37.0+k0s.1 to v1.37.0+k0s.0 is a downgrade"
  assert_no_state_changes
  [ "$(k0s version)" = v1.37.0+k0s.1 ]
}

@test "rke2 upgrade-node: installs the new release and restarts the agent; a second run changes nothing" {
  mkdir -p "$GPU_CLUSTER_ROOT/usr/local/bin"
  printf '#!/bin/sh\n# fake rke2 v1.36.3+rke2r1\n' >"$GPU_CLUSTER_ROOT/usr/local/bin/rke2"
  chmod 0755 "$GPU_CLUSTER_ROOT/usr/local/bin/rke2"
  touch "$STUB_STATE/enabled-rke2-agent" "$STUB_STATE/active-rke2-agent"
  export RKE2_VERSION=v1.37.0+rke2r1
  run_script rke2/upgrade-node.sh
  assert_success
  [[ "$(rke2 --version)" == "rke2 version v1.37.0+rke2r1 "* ]]
  assert_called '^systemctl restart --no-block rke2-agent$'
  assert_idempotent rke2/upgrade-node.sh
  export RKE2_VERSION=v1.36.3+rke2r1
  run_script rke2/upgrade-node.sh
  assert_failure
  assert_output_contains "refusing to change RKE2 here: from v1.37.0+rke2r1 to v1.36.3+rke2r1 is a downgrade"
}

@test "join steps without a version use the installed release" {
  k0s_worker_joined v1.37.0+k0s.0
  mkdir -p "$GPU_CLUSTER_ROOT/etc/k0s"
  printf '%s\n' worker --token-file /etc/k0s/worker-token \
    --kubelet-extra-args=--node-ip=192.168.2.2 >"$GPU_CLUSTER_ROOT/etc/k0s/gpu-cluster-k0sworker.args"
  export K0S_VERSION= NODE_IP=192.168.2.2
  run_script k0s/join-worker.sh
  assert_success
  refute_called '^curl'
  [ "$(k0s version)" = v1.37.0+k0s.0 ]
}
