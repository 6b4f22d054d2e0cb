#!/usr/bin/env bats
# Controller-side k0s steps: join token, admitting and removing nodes (node/admit-node.sh and
# node/remove-node.sh with k0s's kubectl; rke2-node-ops.bats runs them with RKE2's).

bats_require_minimum_version 1.5.0
load helpers
load helpers/node-ops

setup() {
  setup_host
  k0s_controller
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

@test "create-controller-token: prints only a controller token on stdout" {
  export TOKEN_EXPIRY=1h STUB_JOIN_TOKEN=H4sIAAAAAAAAcontroller
  run --separate-stderr bash "$SCRIPTS_DIR/k0s/create-controller-token.sh"
  assert_success
  [ "$output" = H4sIAAAAAAAAcontroller ]
  [[ "$stderr" == *"gpu-cluster: moscow: create-controller-token: created a controller join token (expires in 1h)"* ]]
  [[ "$stderr" != *H4sIAAAAAAAAcontroller* ]]
  assert_called '^k0s token create --role=controller --expiry=1h$'
  refute_called '--role=worker'
  export TOKEN_EXPIRY="1 hour"
  run_script k0s/create-controller-token.sh
  assert_failure
  assert_output_contains "gpu-cluster: moscow: create-controller-token: TOKEN_EXPIRY must be a duration"
}

@test "admit-node: waits for the node to register and become Ready" {
  check_admit_ready
}

@test "admit-node: fails with host and step when the node never registers" {
  export NODE_NAME=kazan NODE_READY_TIMEOUT=4
  run_script node/admit-node.sh
  [ "$status" -eq 1 ]
  assert_output_contains "gpu-cluster: moscow: admit-node: timed out after 4s waiting for node kazan to register"
  refute_called '^k0s kubectl wait'
}

@test "admit-node: fails when the node does not get Ready" {
  export NODE_NAME=kazan NODE_READY_TIMEOUT=60 STUB_NODES=kazan STUB_FAIL_CALL='^k0s kubectl wait'
  run_script node/admit-node.sh
  [ "$status" -eq 1 ]
  assert_output_contains "gpu-cluster: moscow: admit-node: node kazan did not become Ready within 60s"
}

@test "admit-node: all missing environment variables are named at once" {
  unset KUBECTL
  run_script node/admit-node.sh
  [ "$status" -eq 1 ]
  assert_output_contains "missing required environment variable(s): NODE_NAME NODE_READY_TIMEOUT;" \
    "missing required environment variable(s): KUBECTL"
}

@test "remove-node: drains and deletes an existing node" {
  check_remove_drains_and_deletes
}

@test "remove-node: is a no-op when the node does not exist" {
  check_remove_absent_node
}

@test "remove-node: is a no-op when the controller is already gone" {
  check_remove_without_controller
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
