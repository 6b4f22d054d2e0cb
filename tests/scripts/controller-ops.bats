#!/usr/bin/env bats
# Controller-side k0s steps: join token, admitting and removing nodes (node/admit-node.sh and
# node/remove-node.sh with k0s's kubectl; rke2-node-ops.bats runs them with RKE2's).

bats_require_minimum_version 1.5.0
load helpers

# What components/distributions/k0s.py passes: kubectl_path, controller_file.
K0S_KUBECTL="/usr/local/bin/k0s kubectl"
K0S_CONTROLLER_FILE=/etc/systemd/system/k0scontroller.service

setup() {
  setup_host
  mkdir -p "${GPU_CLUSTER_ROOT:?}/usr/local/bin"
  # k0s by its absolute path, as KUBECTL names it: the stub, logged as `k0s ...`.
  ln -s "$TESTS_DIR/stubs/stub" "$GPU_CLUSTER_ROOT/usr/local/bin/k0s"
  echo "[Service]" >"$GPU_CLUSTER_ROOT/etc/systemd/system/k0scontroller.service"
  touch "$STUB_STATE/active-k0scontroller"
}

@test "create-join-token: prints only the token on stdout" {
  export TOKEN_EXPIRY=2h STUB_JOIN_TOKEN=H4sIAAAAAAAC_token
  run --separate-stderr bash "$SCRIPTS_DIR/k0s/create-join-token.sh"
  assert_success
  [ "$output" = H4sIAAAAAAAC_token ]
  [[ "$stderr" == *"gpu-cluster: moscow: create-join-token: created a worker join token (expires in 2h)"* ]]
  [[ "$stderr" != *H4sIAAAAAAAC_token* ]]
  assert_called '^k0s token create --role=worker --expiry=2h$'
}

@test "create-join-token: rejects a malformed expiry and a missing one" {
  export TOKEN_EXPIRY="2 hours"
  run_script k0s/create-join-token.sh
  assert_failure
  assert_output_contains "TOKEN_EXPIRY must be a duration such as 2h or 90m, got '2 hours'"
  unset TOKEN_EXPIRY
  run_script k0s/create-join-token.sh
  assert_failure
  assert_output_contains "missing required environment variable(s): TOKEN_EXPIRY"
  refute_called '^k0s token'
}

@test "admit-node: waits for the node to register and become Ready" {
  export NODE_NAME=Kazan NODE_READY_TIMEOUT=600 STUB_NODES=kazan
  KUBECTL="$K0S_KUBECTL" run_script node/admit-node.sh
  assert_success
  assert_called '^k0s kubectl get node kazan$'
  assert_called '^k0s kubectl wait --for=condition=Ready node/kazan --timeout=[0-9]+s$'
  assert_output_contains "gpu-cluster: moscow: admit-node: node kazan is Ready"
  assert_no_state_changes
}

@test "admit-node: fails with host and step when the node never registers" {
  export NODE_NAME=kazan NODE_READY_TIMEOUT=4
  KUBECTL="$K0S_KUBECTL" run_script node/admit-node.sh
  [ "$status" -eq 1 ]
  assert_output_contains "gpu-cluster: moscow: admit-node: timed out after 4s waiting for node kazan to register"
  refute_called '^k0s kubectl wait'
}

@test "admit-node: fails when the node does not get Ready" {
  export NODE_NAME=kazan NODE_READY_TIMEOUT=60 STUB_NODES=kazan STUB_FAIL_CALL='^k0s kubectl wait'
  KUBECTL="$K0S_KUBECTL" run_script node/admit-node.sh
  [ "$status" -eq 1 ]
  assert_output_contains "gpu-cluster: moscow: admit-node: node kazan did not become Ready within 60s"
}

@test "admit-node: all missing environment variables are named at once" {
  run_script node/admit-node.sh
  [ "$status" -eq 1 ]
  assert_output_contains "missing required environment variable(s): NODE_NAME NODE_READY_TIMEOUT;" \
    "missing required environment variable(s): KUBECTL"
}

@test "remove-node: drains and deletes an existing node" {
  export NODE_NAME=kazan STUB_NODES=kazan
  KUBECTL="$K0S_KUBECTL" CONTROLLER_FILE="$K0S_CONTROLLER_FILE" run_script node/remove-node.sh
  assert_success
  assert_called '^k0s kubectl drain kazan --ignore-daemonsets --delete-emptydir-data --timeout=300s$'
  assert_called '^k0s kubectl delete node kazan$'
  assert_call_order '^k0s kubectl drain' '^k0s kubectl delete'
}

@test "remove-node: is a no-op when the node does not exist" {
  export NODE_NAME=kazan STUB_NODES=""
  KUBECTL="$K0S_KUBECTL" CONTROLLER_FILE="$K0S_CONTROLLER_FILE" run_script node/remove-node.sh
  assert_success
  assert_output_contains "remove-node: node kazan does not exist; nothing to drain or delete"
  refute_called '^k0s kubectl (drain|delete)'
}

@test "remove-node: is a no-op when the controller is already gone" {
  export NODE_NAME=kazan STUB_NODES=kazan
  rm "$GPU_CLUSTER_ROOT/etc/systemd/system/k0scontroller.service"
  KUBECTL="$K0S_KUBECTL" CONTROLLER_FILE="$K0S_CONTROLLER_FILE" run_script node/remove-node.sh
  assert_success
  assert_output_contains "no controller on this host any more" \
    "(/etc/systemd/system/k0scontroller.service is gone); nothing to drain or delete for kazan"
  echo "[Service]" >"$GPU_CLUSTER_ROOT/etc/systemd/system/k0scontroller.service"
  rm "$GPU_CLUSTER_ROOT/usr/local/bin/k0s"
  KUBECTL="$K0S_KUBECTL" CONTROLLER_FILE="$K0S_CONTROLLER_FILE" run_script node/remove-node.sh
  assert_success
  assert_output_contains "no controller on this host any more"
  refute_called '^k0s kubectl (get|drain|delete)'
}

@test "remove-node: a bad KUBECTL or CONTROLLER_FILE is refused with the missing inputs" {
  export KUBECTL="k0s kubectl" CONTROLLER_FILE="etc/k0s"
  run_script node/remove-node.sh
  assert_failure
  assert_output_contains "missing required environment variable(s): NODE_NAME;" \
    "KUBECTL must be an absolute path and plain options, got 'k0s kubectl';" \
    "CONTROLLER_FILE must be an absolute path, got 'etc/k0s'"
  refute_called '^k0s'
}
