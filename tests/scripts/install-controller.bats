#!/usr/bin/env bats
# k0s/install-controller.sh: binary, config, service arguments, readiness.

bats_require_minimum_version 1.5.0
load helpers

K0S_YAML='apiVersion: k0s.k0sproject.io/v1beta1
kind: ClusterConfig
metadata:
  name: gpu-cluster
spec:
  api:
    address: 192.0.2.10
    port: 6443'
RELEASE_URL='https://github\.com/k0sproject/k0s/releases/download/v1\.34\.1%2Bk0s\.0'

setup() {
  setup_host
  export K0S_VERSION=v1.34.1+k0s.0 K0S_CONFIG="$K0S_YAML" K0S_ENABLE_WORKER=false \
    NODE_IP=192.0.2.10 KUBELET_EXTRA_ARGS="" NODE_LABELS="" NODE_TAINTS="" API_PORT=6443 \
    KUBELET_ROOT_DIR=/var/lib/kubelet
}

@test "install-controller: installs k0s, writes the config and starts the controller" {
  run_script k0s/install-controller.sh
  assert_success
  assert_called "^curl -fsSL --retry 5 -o [^ ]+/k0s-v1\\.34\\.1\\+k0s\\.0-amd64 $RELEASE_URL/k0s-v1\\.34\\.1%2Bk0s\\.0-amd64\$"
  assert_called "^curl -fsSL --retry 5 -o [^ ]+/sha256sums\\.txt $RELEASE_URL/sha256sums\\.txt\$"
  assert_output_contains "verified sha256 of k0s-v1.34.1+k0s.0-amd64" "changed /usr/local/bin/k0s"
  assert_mode /usr/local/bin/k0s 755
  assert_file /etc/k0s/k0s.yaml "$K0S_YAML"
  assert_mode /etc/k0s/k0s.yaml 600
  assert_called '^k0s install controller -c /etc/k0s/k0s.yaml$'
  assert_called '^k0s start$'
  assert_called '^k0s kubectl get --raw=/readyz$'
  assert_call_order '^k0s start$' '^k0s kubectl get --raw=/readyz$'
  assert_output_contains "ready: the Kubernetes API (port 6443) to be ready"
  refute_called '^systemctl restart'
}

@test "install-controller: a second run changes nothing and says so" {
  run_script k0s/install-controller.sh
  assert_success
  assert_idempotent k0s/install-controller.sh
  assert_output_contains "k0s v1.34.1+k0s.0 already installed" "unchanged /etc/k0s/k0s.yaml" \
    "the k0scontroller service is already installed with the same arguments" \
    "k0scontroller is already running"
}

@test "install-controller: controller+worker passes the worker flags" {
  export K0S_ENABLE_WORKER=true KUBELET_EXTRA_ARGS="--max-pods=250" \
    NODE_LABELS="gpu-cluster.io/gpu=true,topology.kubernetes.io/zone=rack-1" \
    NODE_TAINTS="nvidia.com/gpu=present:NoSchedule" K0S_PROFILE=gpu-cluster
  run_script k0s/install-controller.sh
  assert_success
  assert_called '^k0s install controller -c /etc/k0s/k0s.yaml --enable-worker --no-taints --kubelet-extra-args=--node-ip=192.0.2.10 --max-pods=250 --labels=gpu-cluster.io/gpu=true,topology.kubernetes.io/zone=rack-1 --taints=nvidia.com/gpu=present:NoSchedule --profile=gpu-cluster --kubelet-root-dir=/var/lib/kubelet$'
  assert_idempotent k0s/install-controller.sh
}

@test "install-controller: worker-only inputs are ignored for a pure controller" {
  export NODE_LABELS="gpu-cluster.io/gpu=true" NODE_TAINTS="a=b:NoSchedule" K0S_PROFILE=gpu-cluster
  run_script k0s/install-controller.sh
  assert_success
  assert_called '^k0s install controller -c /etc/k0s/k0s.yaml$'
  refute_called 'kubelet-root-dir'
  # No kubelet on a pure controller: a new kubelet root dir changes nothing.
  export KUBELET_ROOT_DIR=/var/lib/kubelet-gpu
  assert_idempotent k0s/install-controller.sh
}

@test "install-controller: a changed kubelet root dir reinstalls a controller+worker" {
  export K0S_ENABLE_WORKER=true KUBELET_ROOT_DIR=""
  run_script k0s/install-controller.sh
  assert_success
  assert_called '^k0s install controller -c /etc/k0s/k0s.yaml --enable-worker --no-taints --kubelet-extra-args=--node-ip=192\.0\.2\.10$'
  reset_calls
  export KUBELET_ROOT_DIR=/var/lib/kubelet
  run_script k0s/install-controller.sh
  assert_success
  assert_called '^k0s install controller --force -c /etc/k0s/k0s.yaml --enable-worker --no-taints --kubelet-extra-args=--node-ip=192\.0\.2\.10 --kubelet-root-dir=/var/lib/kubelet$'
  assert_called '^systemctl daemon-reload$'
  assert_called '^systemctl restart k0scontroller$'
  assert_idempotent k0s/install-controller.sh
}

@test "install-controller: an unsafe kubelet root dir is refused before anything runs" {
  export KUBELET_ROOT_DIR=/var/lib/../lib
  run_script k0s/install-controller.sh
  [ "$status" -eq 1 ]
  assert_output_contains "gpu-cluster: moscow: install-controller: KUBELET_ROOT_DIR must be an absolute path" "got '/var/lib/../lib'"
  [ "$(<"$STUB_CALLS")" = "" ]
}

@test "install-controller: changed flags reinstall the service with --force and restart it" {
  run_script k0s/install-controller.sh
  assert_success
  reset_calls
  export K0S_ENABLE_WORKER=true
  run_script k0s/install-controller.sh
  assert_success
  assert_called '^k0s install controller --force -c /etc/k0s/k0s.yaml --enable-worker --no-taints --kubelet-extra-args=--node-ip=192.0.2.10 --kubelet-root-dir=/var/lib/kubelet$'
  assert_called '^systemctl daemon-reload$'
  assert_called '^systemctl restart k0scontroller$'
  refute_called '^k0s install controller -c'
  refute_called '^curl'
  assert_idempotent k0s/install-controller.sh
}

@test "install-controller: a changed config restarts the controller without reinstalling" {
  run_script k0s/install-controller.sh
  assert_success
  reset_calls
  export K0S_CONFIG="$K0S_YAML
  network:
    provider: calico"
  run_script k0s/install-controller.sh
  assert_success
  assert_output_contains "changed /etc/k0s/k0s.yaml"
  assert_called '^systemctl restart k0scontroller$'
  refute_called '^k0s install'
}

@test "install-controller: a new k0s version is downloaded and the service restarted" {
  run_script k0s/install-controller.sh
  assert_success
  reset_calls
  export K0S_VERSION=v1.34.2+k0s.0
  run_script k0s/install-controller.sh
  assert_success
  assert_called 'download/v1\.34\.2%2Bk0s\.0/k0s-v1\.34\.2%2Bk0s\.0-amd64$'
  assert_output_contains "installed: v1.34.1+k0s.0"
  assert_called '^systemctl restart k0scontroller$'
  refute_called '^k0s install'
}

@test "install-controller: arm64 hosts get the arm64 binary" {
  export STUB_UNAME_M=aarch64
  run_script k0s/install-controller.sh
  assert_success
  assert_called "$RELEASE_URL/k0s-v1\\.34\\.1%2Bk0s\\.0-arm64\$"
}

@test "install-controller: a checksum mismatch installs nothing" {
  export STUB_BAD_CHECKSUM=1
  run_script k0s/install-controller.sh
  [ "$status" -eq 1 ]
  assert_output_contains "gpu-cluster: moscow: install-controller: checksum mismatch for k0s-v1.34.1+k0s.0-amd64"
  [ ! -e "$GPU_CLUSTER_ROOT/usr/local/bin/k0s" ]
  refute_called '^k0s (install|start)'
}

@test "install-controller: gives up when the API never gets ready" {
  export STUB_READYZ_EXIT=1
  run_script k0s/install-controller.sh
  [ "$status" -eq 1 ]
  assert_output_contains "gpu-cluster: moscow: install-controller: timed out after 600s waiting for the Kubernetes API (port 6443) to be ready"
  [ "$(grep -c '^sleep 2$' "$STUB_CALLS")" -eq 300 ]
}

@test "install-controller: an interrupted restart is retried by the next run" {
  run_script k0s/install-controller.sh
  assert_success
  export K0S_CONFIG="$K0S_YAML
# new"
  STUB_FAIL_CALL='^systemctl restart' run_script k0s/install-controller.sh
  assert_failure
  reset_calls
  run_script k0s/install-controller.sh
  assert_success
  assert_output_contains "retrying restart-k0scontroller, which an earlier run did not finish"
  assert_called '^systemctl restart k0scontroller$'
  assert_idempotent k0s/install-controller.sh
}

@test "install-controller: all missing environment variables are named at once" {
  unset K0S_VERSION K0S_CONFIG API_PORT
  run_script k0s/install-controller.sh
  [ "$status" -eq 1 ]
  assert_output_contains "gpu-cluster: moscow: install-controller: missing required environment variable(s): K0S_VERSION K0S_CONFIG API_PORT"
  [ "$(<"$STUB_CALLS")" = "" ]
}
