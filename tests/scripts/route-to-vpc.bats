#!/usr/bin/env bats
# route-to-vpc.sh and route-to-vpc-remove.sh: the oneshot unit that routes the VPC (and
# the tunnel network) through the on-prem VPN gateway, and its removal.

bats_require_minimum_version 1.5.0
load helpers

UNIT=gpu-cluster-route-vpc
UNIT_FILE=/etc/systemd/system/gpu-cluster-route-vpc.service

setup() {
  setup_host
  export VPC_CIDR=10.20.0.0/16 GATEWAY_ADDRESS=192.168.2.4 TUNNEL_CIDR=10.8.0.0/24
}

routes() {
  cat "$STUB_STATE/routes"
}

@test "route-to-vpc: first run writes, enables and starts the unit, which sets both routes" {
  run_script route-to-vpc.sh
  assert_success
  assert_file "$UNIT_FILE" "# Managed by gpu-cluster (route-to-vpc); changes are overwritten.
[Unit]
Description=gpu-cluster: route 10.20.0.0/16 10.8.0.0/24 via the on-prem VPN gateway 192.168.2.4
Wants=network-online.target
After=network-online.target

[Service]
Type=oneshot
RemainAfterExit=yes
ExecStart=ip route replace 10.20.0.0/16 via 192.168.2.4
ExecStart=ip route replace 10.8.0.0/24 via 192.168.2.4
ExecStop=-ip route del 10.20.0.0/16 via 192.168.2.4
ExecStop=-ip route del 10.8.0.0/24 via 192.168.2.4

[Install]
WantedBy=multi-user.target"
  assert_mode "$UNIT_FILE" 644
  assert_called '^systemctl daemon-reload$'
  assert_called "^systemctl enable $UNIT$"
  assert_called "^systemctl start $UNIT$"
  assert_call_order '^systemctl daemon-reload$' "^systemctl start $UNIT$"
  [ "$(routes)" = "10.20.0.0/16 via 192.168.2.4 dev eth0
10.8.0.0/24 via 192.168.2.4 dev eth0" ]
  assert_output_contains \
    "gpu-cluster: moscow: route-to-vpc: changed $UNIT_FILE" \
    "gpu-cluster: moscow: route-to-vpc: changed: started $UNIT" \
    "gpu-cluster: moscow: route-to-vpc: 10.20.0.0/16 10.8.0.0/24 routed via 192.168.2.4"
  [ -z "$(ls -A "$GPU_CLUSTER_ROOT/var/lib/gpu-cluster/pending")" ]
}

@test "route-to-vpc: systemd-networkd keeps the routes it did not make when it restarts" {
  run_script route-to-vpc.sh
  assert_success
  assert_file /etc/systemd/networkd.conf.d/60-gpu-cluster-keep-routes.conf "# Managed by gpu-cluster (route-to-vpc): keep routes networkd did not configure (the
# route to the VPC, the CNI's) when systemd-networkd restarts.
[Network]
ManageForeignRoutes=no"
  assert_mode /etc/systemd/networkd.conf.d/60-gpu-cluster-keep-routes.conf 644
  # Read at networkd's next start: nothing restarts it now.
  refute_called 'systemd-networkd'
  # systemd finds the setting where networkd looks for its configuration.
  run systemd-analyze cat-config --root="$GPU_CLUSTER_ROOT" systemd/networkd.conf
  assert_success
  assert_output_contains "# $GPU_CLUSTER_ROOT/etc/systemd/networkd.conf.d/60-gpu-cluster-keep-routes.conf" \
    "ManageForeignRoutes=no"
}

@test "route-to-vpc: a second run changes nothing and says so" {
  run_twice route-to-vpc.sh
  assert_output_contains "unchanged $UNIT_FILE" "unchanged: $UNIT is enabled and running"
}

@test "route-to-vpc: without a tunnel network only the VPC is routed" {
  export TUNNEL_CIDR=""
  run_script route-to-vpc.sh
  assert_success
  [ "$(routes)" = "10.20.0.0/16 via 192.168.2.4 dev eth0" ]
  run ! grep -q 10.8.0.0 "$GPU_CLUSTER_ROOT$UNIT_FILE"
}

@test "route-to-vpc: a changed gateway rewrites the unit, drops the old routes and sets the new" {
  run_script route-to-vpc.sh
  assert_success
  add_route 192.0.2.0/24 192.168.2.1
  reset_calls
  export GATEWAY_ADDRESS=192.168.2.5 TUNNEL_CIDR=""
  run_script route-to-vpc.sh
  assert_success
  grep -qx 'ExecStart=ip route replace 10.20.0.0/16 via 192.168.2.5' "$GPU_CLUSTER_ROOT$UNIT_FILE"
  assert_called '^ip route del 10\.8\.0\.0/24 via 192\.168\.2\.4$'
  assert_called '^systemctl daemon-reload$'
  assert_called "^systemctl restart $UNIT$"
  refute_called "^systemctl (enable|start) "
  # Another route of the host is left alone.
  [ "$(routes | sort)" = "10.20.0.0/16 via 192.168.2.5 dev eth0
192.0.2.0/24 via 192.168.2.1 dev eth0" ]
  assert_output_contains "changed: removed the old route to 10.8.0.0/24 via 192.168.2.4" \
    "changed: restarted $UNIT"
  assert_idempotent route-to-vpc.sh
}

@test "route-to-vpc: a route that went missing (network reconfigured) is restored" {
  run_script route-to-vpc.sh
  assert_success
  awk '$1 != "10.20.0.0/16"' "$STUB_STATE/routes" >"$BATS_TEST_TMPDIR/routes"
  cp "$BATS_TEST_TMPDIR/routes" "$STUB_STATE/routes"
  reset_calls
  run_script route-to-vpc.sh
  assert_success
  assert_called "^systemctl restart $UNIT$"
  assert_output_contains "restarting $UNIT to restore the route(s) to 10.20.0.0/16" \
    "changed: restarted $UNIT"
  grep -qx '10.20.0.0/16 via 192.168.2.4 dev eth0' "$STUB_STATE/routes"
  assert_idempotent route-to-vpc.sh
}

@test "route-to-vpc: a unit that fails to set its route fails the step, and the next run retries" {
  export GATEWAY_ADDRESS=192.168.2.4
  STUB_FAIL_CALL="^systemctl start $UNIT" run_script route-to-vpc.sh
  assert_failure
  assert_output_contains "route-to-vpc: command failed with exit code 1"
  reset_calls
  run_script route-to-vpc.sh
  assert_success
  assert_output_contains "retrying restart-$UNIT, which an earlier run did not finish"
  assert_called "^systemctl start $UNIT$"
  assert_idempotent route-to-vpc.sh
}

@test "route-to-vpc: all missing and invalid inputs are named at once" {
  unset VPC_CIDR GATEWAY_ADDRESS
  run_script route-to-vpc.sh
  [ "$status" -eq 1 ]
  assert_output_contains "gpu-cluster: moscow: route-to-vpc: missing required environment variable(s): VPC_CIDR GATEWAY_ADDRESS"
  export VPC_CIDR=10.20.0.0/33 GATEWAY_ADDRESS="192.168.2.4; reboot" TUNNEL_CIDR=10.8.0.0
  run_script route-to-vpc.sh
  [ "$status" -eq 1 ]
  [ "$(grep -c 'route-to-vpc: ' <<<"$output")" -eq 1 ]
  assert_output_contains "VPC_CIDR must be an IPv4 CIDR such as 10.20.0.0/16, got '10.20.0.0/33'" \
    "TUNNEL_CIDR must be an IPv4 CIDR such as 10.20.0.0/16, got '10.8.0.0'" \
    "GATEWAY_ADDRESS must be an IPv4 address such as 192.168.2.4, got '192.168.2.4; reboot'"
  [ "$(<"$STUB_CALLS")" = "" ]
  [ ! -e "$GPU_CLUSTER_ROOT$UNIT_FILE" ]
}

@test "route-to-vpc-remove: the unit and its routes go; a second run changes nothing" {
  run_script route-to-vpc.sh
  assert_success
  add_route 192.0.2.0/24 192.168.2.1
  reset_calls
  run_script route-to-vpc-remove.sh
  assert_success
  assert_called "^systemctl stop $UNIT$"
  assert_called "^systemctl disable $UNIT$"
  assert_call_order "^systemctl stop $UNIT$" '^systemctl daemon-reload$'
  [ ! -e "$GPU_CLUSTER_ROOT$UNIT_FILE" ]
  [ ! -e "$GPU_CLUSTER_ROOT/etc/systemd/networkd.conf.d/60-gpu-cluster-keep-routes.conf" ]
  [ "$(routes)" = "192.0.2.0/24 via 192.168.2.1 dev eth0" ]
  assert_output_contains "gpu-cluster: moscow: remove-route-to-vpc: changed: stopped $UNIT" \
    "unchanged: no route to 10.20.0.0/16 via 192.168.2.4"

  reset_calls
  run_script route-to-vpc-remove.sh
  assert_success
  assert_no_state_changes
  refute_changes_logged
}

@test "route-to-vpc-remove: routes left without a unit are removed too" {
  add_route 10.20.0.0/16 192.168.2.4
  add_route 10.8.0.0/24 192.168.2.4
  run_script route-to-vpc-remove.sh
  assert_success
  assert_called '^ip route del 10\.20\.0\.0/16 via 192\.168\.2\.4$'
  assert_called '^ip route del 10\.8\.0\.0/24 via 192\.168\.2\.4$'
  [ -z "$(routes)" ]
  refute_called '^systemctl (stop|disable|daemon-reload)'
}

@test "route-to-vpc: systemd accepts the unit as written" {
  run_script route-to-vpc.sh
  assert_success
  # ExecStart=ip ...: systemd finds a command given without a path in its fixed search
  # path (systemd.service(5), "Command lines"), here /usr/sbin/ip as on Debian and Ubuntu.
  assert_unit_verifies "$UNIT_FILE" /usr/sbin/ip
}
