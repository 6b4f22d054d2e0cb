#!/usr/bin/env bats
# components/scripts/kubeflow/port-forward.sh: the controller's systemd unit forwarding the
# Kubeflow UI to the Istio ingress gateway, on the port the gateway serves users on.

bats_require_minimum_version 1.5.0
load helpers

UNIT=gpu-cluster-kubeflow-port-forward
UNIT_FILE=/etc/systemd/system/gpu-cluster-kubeflow-port-forward.service
SCRIPT=kubeflow/port-forward.sh

setup() {
  setup_host
  export LISTEN_ADDRESS=127.0.0.1 LISTEN_PORT=8080 GATEWAY_NAMESPACE=istio-system \
    GATEWAY_SERVICE=istio-ingressgateway GATEWAY_PORT=443 \
    KUBECTL="/usr/local/bin/k0s kubectl" CONTROLLER_SERVICE=k0scontroller.service
}

exec_start() {
  grep '^ExecStart=' "$GPU_CLUSTER_ROOT$UNIT_FILE"
}

@test "kubeflow-port-forward: forwards to the gateway's HTTPS port and starts the unit" {
  run_script "$SCRIPT"
  assert_success
  [ "$(exec_start)" = "ExecStart=/usr/local/bin/k0s kubectl --namespace istio-system port-forward --address 127.0.0.1 service/istio-ingressgateway 8080:443" ]
  assert_mode "$UNIT_FILE" 644
  grep -qx 'After=k0scontroller.service' "$GPU_CLUSTER_ROOT$UNIT_FILE"
  assert_call_order '^systemctl daemon-reload$' "^systemctl enable $UNIT$"
  assert_call_order "^systemctl enable $UNIT$" "^systemctl start $UNIT$"
  assert_output_contains "gpu-cluster: moscow: kubeflow-port-forward: changed: started $UNIT" \
    "gpu-cluster: moscow: kubeflow-port-forward: $UNIT forwards 127.0.0.1:8080 to istio-system/istio-ingressgateway:443"
}

@test "kubeflow-port-forward: a second run changes nothing and says so" {
  run_twice "$SCRIPT"
  assert_output_contains "unchanged: $UNIT is enabled and running"
}

@test "kubeflow-port-forward: switching TLS off moves the forward to port 80 and restarts it" {
  first_run "$SCRIPT"
  GATEWAY_PORT=80 run_script "$SCRIPT"
  assert_success
  [[ "$(exec_start)" == *" 8080:80" ]]
  assert_called "^systemctl restart $UNIT$"
}

@test "kubeflow-port-forward: a stopped unit is started again" {
  run_script "$SCRIPT"
  assert_success
  rm "$STUB_STATE/active-$UNIT"
  reset_calls
  run_script "$SCRIPT"
  assert_success
  assert_called "^systemctl start $UNIT$"
  refute_called "^systemctl (daemon-reload|enable|restart)"
  assert_output_contains "changed: started $UNIT"
}

@test "kubeflow-port-forward: a restart that failed is retried by the next run" {
  first_run "$SCRIPT"
  export GATEWAY_PORT=80
  STUB_FAIL_CALL="^systemctl restart" run_script "$SCRIPT"
  assert_failure
  reset_calls
  run_script "$SCRIPT"
  assert_success
  assert_called "^systemctl restart $UNIT$"
  assert_output_contains "retrying restart-$UNIT"
}

@test "kubeflow-port-forward-remove: stops and removes the unit; a second run changes nothing" {
  first_run "$SCRIPT"
  reset_calls
  run_script kubeflow/port-forward-remove.sh
  assert_success
  assert_called "^systemctl stop $UNIT$"
  assert_called "^systemctl disable $UNIT$"
  assert_call_order "^systemctl disable $UNIT$" '^systemctl daemon-reload$'
  [ ! -e "$GPU_CLUSTER_ROOT$UNIT_FILE" ]
  assert_idempotent kubeflow/port-forward-remove.sh
}

@test "kubeflow-port-forward: bad ports are refused, naming host, step and input" {
  GATEWAY_PORT=https LISTEN_PORT=70000 run_script "$SCRIPT"
  assert_failure
  assert_output_contains "moscow" "kubeflow-port-forward" \
    "LISTEN_PORT must be a port number, got '70000'" \
    "GATEWAY_PORT must be a port number, got 'https'"
  [ ! -e "$GPU_CLUSTER_ROOT$UNIT_FILE" ]
}

@test "kubeflow-port-forward: a missing gateway port is refused" {
  unset GATEWAY_PORT
  run_script "$SCRIPT"
  assert_failure
  assert_output_contains "GATEWAY_PORT"
}

@test "kubeflow-port-forward: another distribution's kubectl and controller unit" {
  export KUBECTL="/var/lib/rancher/rke2/bin/kubectl --kubeconfig=/etc/rancher/rke2/rke2.yaml" \
    CONTROLLER_SERVICE=rke2-server.service
  run_script "$SCRIPT"
  assert_success
  [ "$(exec_start)" = "ExecStart=/var/lib/rancher/rke2/bin/kubectl --kubeconfig=/etc/rancher/rke2/rke2.yaml --namespace istio-system port-forward --address 127.0.0.1 service/istio-ingressgateway 8080:443" ]
  grep -qx 'Wants=rke2-server.service' "$GPU_CLUSTER_ROOT$UNIT_FILE"
}

@test "kubeflow-port-forward: a kubectl or unit that systemd would read otherwise is refused" {
  export KUBECTL='/usr/bin/kubectl; reboot' CONTROLLER_SERVICE='k0s controller'
  run_script "$SCRIPT"
  assert_failure
  assert_output_contains "KUBECTL must be an absolute path with plain arguments" \
    "CONTROLLER_SERVICE must be a systemd service name"
  [ "$(<"$STUB_CALLS")" = "" ]
}

@test "kubeflow-port-forward: systemd accepts the unit as written, for each distribution's kubectl" {
  run_script "$SCRIPT"
  assert_success
  assert_unit_verifies "$UNIT_FILE" /usr/local/bin/k0s
  KUBECTL="/var/lib/rancher/rke2/bin/kubectl --kubeconfig /etc/rancher/rke2/rke2.yaml" \
    CONTROLLER_SERVICE=rke2-server.service run_script "$SCRIPT"
  assert_success
  assert_unit_verifies "$UNIT_FILE" /var/lib/rancher/rke2/bin/kubectl
}
