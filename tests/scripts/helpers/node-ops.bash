# shellcheck shell=bash
# node/admit-node.sh and node/remove-node.sh, one pair of scripts for both distributions,
# run on a controller of each with what components/distributions/k0s.py and rke2.py pass
# (kubectl_path as KUBECTL, controller_file as CONTROLLER_FILE). controller-ops.bats runs
# the checks below with k0s's controller, rke2-node-ops.bats with RKE2's.

# k0s_controller: k0s's controller: the k0s binary (the stub, logged as `k0s ...`) and its
# service, running; KUBECTL and CONTROLLER_FILE as k0s.py passes them, CALL how the stubs
# log that kubectl (a regular expression).
k0s_controller() {
  mkdir -p "${GPU_CLUSTER_ROOT:?}/usr/local/bin"
  ln -s "$TESTS_DIR/stubs/stub" "$GPU_CLUSTER_ROOT/usr/local/bin/k0s"
  echo "[Service]" >"$GPU_CLUSTER_ROOT/etc/systemd/system/k0scontroller.service"
  touch "$STUB_STATE/active-k0scontroller"
  export KUBECTL="/usr/local/bin/k0s kubectl" CONTROLLER_FILE=/etc/systemd/system/k0scontroller.service
  CALL='^k0s kubectl'
}

# rke2_controller: RKE2's server: its kubectl and admin kubeconfig; KUBECTL, CONTROLLER_FILE
# and CALL as for k0s_controller.
rke2_controller() {
  rke2_kubectl_installed
  mkdir -p "$GPU_CLUSTER_ROOT/etc/rancher/rke2"
  touch "$GPU_CLUSTER_ROOT/etc/rancher/rke2/rke2.yaml"
  export KUBECTL="/var/lib/rancher/rke2/bin/kubectl --kubeconfig /etc/rancher/rke2/rke2.yaml" \
    CONTROLLER_FILE=/etc/rancher/rke2/rke2.yaml
  CALL='^kubectl --kubeconfig .*/etc/rancher/rke2/rke2\.yaml'
}

# check_admit_ready: admit-node finds node kazan (NODE_NAME in any case) registered and waits
# for it to be Ready, changing nothing.
check_admit_ready() {
  export NODE_NAME=Kazan NODE_READY_TIMEOUT=600 STUB_NODES=kazan
  run_script node/admit-node.sh
  assert_success || return 1
  assert_called "$CALL get node kazan\$" || return 1
  assert_called "$CALL wait --for=condition=Ready node/kazan --timeout=[0-9]+s\$" || return 1
  assert_output_contains "gpu-cluster: $GPU_CLUSTER_HOST: admit-node: node kazan is Ready" || return 1
  assert_no_state_changes
}

# check_remove_drains_and_deletes: remove-node drains node kazan, then deletes it.
check_remove_drains_and_deletes() {
  export NODE_NAME=Kazan STUB_NODES=kazan
  run_script node/remove-node.sh
  assert_success || return 1
  assert_called "$CALL drain kazan --ignore-daemonsets --delete-emptydir-data --timeout=300s\$" || return 1
  assert_call_order "$CALL drain kazan " "$CALL delete node kazan\$"
}

# check_remove_absent_node: a node that does not exist is neither drained nor deleted.
check_remove_absent_node() {
  export NODE_NAME=kazan STUB_NODES=""
  run_script node/remove-node.sh
  assert_success || return 1
  assert_output_contains "remove-node: node kazan does not exist; nothing to drain or delete" || return 1
  refute_called "$CALL (drain|delete)"
}

# check_remove_without_controller: without CONTROLLER_FILE, or without the kubectl, the
# controller is gone (deleted before its nodes): nothing to drain or delete.
check_remove_without_controller() {
  export NODE_NAME=kazan STUB_NODES=kazan
  rm "$GPU_CLUSTER_ROOT$CONTROLLER_FILE"
  run_script node/remove-node.sh
  assert_success || return 1
  assert_output_contains "no controller on this host any more" \
    "($CONTROLLER_FILE is gone); nothing to drain or delete for kazan" || return 1
  touch "$GPU_CLUSTER_ROOT$CONTROLLER_FILE"
  rm "$GPU_CLUSTER_ROOT${KUBECTL%% *}"
  run_script node/remove-node.sh
  assert_success || return 1
  assert_output_contains "no controller on this host any more" || return 1
  refute_called "$CALL (get|drain|delete)"
}
