#!/usr/bin/env bats
# k0s/join-worker.sh: token handling, worker service arguments, secrecy.

bats_require_minimum_version 1.5.0
load helpers

TOKEN='H4sIAAAAAAAC_secret-join-token-0123456789'

setup() {
  setup_host
  export K0S_VERSION=v1.34.1+k0s.0 K0S_JOIN_TOKEN="$TOKEN" NODE_IP=192.0.2.21 \
    KUBELET_EXTRA_ARGS="--max-pods=250" NODE_LABELS="gpu-cluster.io/gpu=true" \
    NODE_TAINTS="nvidia.com/gpu=present:NoSchedule" K0S_PROFILE=gpu KUBELET_ROOT_DIR=/var/lib/kubelet
}

@test "join-worker: installs k0s, writes the token 0600 and starts the worker" {
  run_script k0s/join-worker.sh
  assert_success
  assert_file /etc/k0s/worker-token "$TOKEN"
  assert_mode /etc/k0s/worker-token 600
  assert_called '^k0s install worker --token-file /etc/k0s/worker-token --kubelet-extra-args=--node-ip=192\.0\.2\.21 --max-pods=250 --labels=gpu-cluster\.io/gpu=true --taints=nvidia\.com/gpu=present:NoSchedule --profile=gpu --kubelet-root-dir=/var/lib/kubelet$'
  assert_called '^k0s start$'
  assert_called '^systemctl is-active --quiet k0sworker$'
  assert_output_contains "ready: the k0sworker service to be active"
}

@test "join-worker: optional inputs may be empty" {
  export KUBELET_EXTRA_ARGS="" NODE_LABELS="" NODE_TAINTS="" K0S_PROFILE="" KUBELET_ROOT_DIR=""
  run_script k0s/join-worker.sh
  assert_success
  assert_called '^k0s install worker --token-file /etc/k0s/worker-token --kubelet-extra-args=--node-ip=192\.0\.2\.21$'
}

@test "join-worker: the token never shows up in output, command lines or environments" {
  export STUB_RECORD_ENV=1
  run --separate-stderr bash "$SCRIPTS_DIR/k0s/join-worker.sh"
  assert_success
  [[ "$output$stderr" != *"$TOKEN"* ]]
  [[ "$stderr" == *"changed /etc/k0s/worker-token"* ]]
  ! grep -qF "$TOKEN" "$STUB_CALLS"
  [ -s "$STUB_STATE/env.log" ]
  ! grep -qF "$TOKEN" "$STUB_STATE/env.log"
}

@test "join-worker: a failing join does not reveal the token either" {
  export STUB_FAIL_CALL='^k0s install'
  run_script k0s/join-worker.sh
  [ "$status" -eq 1 ]
  assert_output_contains "gpu-cluster: moscow: join-worker: command failed with exit code 1 at line"
  [[ "$output" != *"$TOKEN"* ]]
  ! grep -qF "$TOKEN" "$STUB_CALLS"
}

@test "join-worker: a second run changes nothing and says so" {
  run_script k0s/join-worker.sh
  assert_success
  assert_idempotent k0s/join-worker.sh
  assert_output_contains "the worker has already joined; the join token is not needed" \
    "the k0sworker service is already installed with the same arguments" \
    "k0sworker is already running"
}

@test "join-worker: a joined worker needs no token" {
  run_script k0s/join-worker.sh
  assert_success
  unset K0S_JOIN_TOKEN
  assert_idempotent k0s/join-worker.sh
}

@test "join-worker: a new token before the join completed is written and the worker restarted" {
  run_script k0s/join-worker.sh
  assert_success
  rm "$GPU_CLUSTER_ROOT/var/lib/k0s/kubelet.conf" # joining has not finished
  reset_calls
  export K0S_JOIN_TOKEN="${TOKEN}-renewed"
  run_script k0s/join-worker.sh
  assert_success
  assert_file /etc/k0s/worker-token "${TOKEN}-renewed"
  assert_mode /etc/k0s/worker-token 600
  assert_called '^systemctl restart k0sworker$'
  refute_called '^k0s install'
}

@test "join-worker: changed labels reinstall the service with --force and restart it" {
  run_script k0s/join-worker.sh
  assert_success
  reset_calls
  export NODE_LABELS="gpu-cluster.io/gpu=true,gpu-cluster.io/pool=a100"
  unset K0S_JOIN_TOKEN
  run_script k0s/join-worker.sh
  assert_success
  assert_called '^k0s install worker --force --token-file /etc/k0s/worker-token .* --labels=gpu-cluster\.io/gpu=true,gpu-cluster\.io/pool=a100 '
  assert_called '^systemctl daemon-reload$'
  assert_called '^systemctl restart k0sworker$'
  assert_idempotent k0s/join-worker.sh
}

@test "join-worker: a changed kubelet root dir reinstalls the service and restarts it" {
  export KUBELET_ROOT_DIR=""
  run_script k0s/join-worker.sh
  assert_success
  refute_called 'kubelet-root-dir'
  reset_calls
  export KUBELET_ROOT_DIR=/var/lib/kubelet
  unset K0S_JOIN_TOKEN
  run_script k0s/join-worker.sh
  assert_success
  assert_called '^k0s install worker --force --token-file /etc/k0s/worker-token .* --profile=gpu --kubelet-root-dir=/var/lib/kubelet$'
  assert_called '^systemctl restart k0sworker$'
  assert_output_contains "changed: reinstalled the k0sworker service"
  grep -qx -- '--kubelet-root-dir=/var/lib/kubelet' "$GPU_CLUSTER_ROOT/etc/k0s/gpu-cluster-k0sworker.args"
  assert_idempotent k0s/join-worker.sh
}

@test "join-worker: an unsafe kubelet root dir is refused before anything runs" {
  export KUBELET_ROOT_DIR=/var
  run_script k0s/join-worker.sh
  [ "$status" -eq 1 ]
  assert_output_contains "gpu-cluster: moscow: join-worker: KUBELET_ROOT_DIR must be an absolute path at least two levels deep" "got '/var'"
  [ "$(<"$STUB_CALLS")" = "" ]
}

@test "join-worker: all missing environment variables are named at once" {
  unset K0S_VERSION K0S_JOIN_TOKEN NODE_IP
  run_script k0s/join-worker.sh
  [ "$status" -eq 1 ]
  assert_output_contains "gpu-cluster: moscow: join-worker: missing required environment variable(s): K0S_VERSION NODE_IP K0S_JOIN_TOKEN"
  [ "$(<"$STUB_CALLS")" = "" ]
}
