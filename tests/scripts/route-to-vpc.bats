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

# --- EL9 (Rocky Linux 9): the routes go into the NetworkManager profile of the interface that
# reaches the gateway (stubs/nmcli.bash), whose reapply sets them in the kernel.

UUID=5fb06bd0-0bb0-7ffb-45f1-d6edd65f3e03
RECORD=/var/lib/gpu-cluster/route-to-vpc-nm

# el9_host: Rocky Linux 9.4, eth0 on the gateway's network with NetworkManager's "System eth0"
# active, which holds a route of the user's own.
el9_host() {
  set_os_release rocky-9.4
  export STUB_IP_OUTPUT="1: lo    inet 127.0.0.1/8 scope host lo\\       valid_lft forever preferred_lft forever
2: eth0    inet 192.168.2.10/24 brd 192.168.2.255 scope global noprefixroute eth0\\       valid_lft forever preferred_lft forever
3: eth1    inet 10.50.0.10/16 brd 10.50.255.255 scope global noprefixroute eth1\\       valid_lft forever preferred_lft forever"
  nm_profile eth0 "$UUID" "System eth0" "192.0.2.0/24 192.168.2.1"
}

profile_routes() {
  cat "$STUB_STATE/nm/profile-$UUID/routes"
}

@test "route-to-vpc el9: the routes go into the active profile of the gateway's interface, which is reapplied" {
  el9_host
  run_script route-to-vpc.sh
  assert_success
  assert_called "^nmcli connection modify uuid $UUID \+ipv4.routes 10\.20\.0\.0/16 192\.168\.2\.4 \+ipv4.routes 10\.8\.0\.0/24 192\.168\.2\.4$"
  assert_called '^nmcli device reapply eth0$'
  assert_call_order '^nmcli connection modify' '^nmcli device reapply'
  [ "$(profile_routes)" = "192.0.2.0/24 192.168.2.1
10.20.0.0/16 192.168.2.4
10.8.0.0/24 192.168.2.4" ]
  [ "$(routes | sort)" = "10.20.0.0/16 via 192.168.2.4 dev eth0 proto static metric 100
10.8.0.0/24 via 192.168.2.4 dev eth0 proto static metric 100
192.0.2.0/24 via 192.168.2.1 dev eth0 proto static metric 100" ]
  assert_file "$RECORD" "# Managed by gpu-cluster (route-to-vpc): the routes it added to a NetworkManager profile.
connection=$UUID
route=10.20.0.0/16 192.168.2.4
route=10.8.0.0/24 192.168.2.4"
  # Neither the unit nor systemd-networkd's drop-in: NetworkManager holds the routes.
  [ ! -e "$GPU_CLUSTER_ROOT$UNIT_FILE" ]
  [ ! -e "$GPU_CLUSTER_ROOT/etc/systemd/networkd.conf.d/60-gpu-cluster-keep-routes.conf" ]
  refute_called '^systemctl (enable|start|daemon-reload)'
  refute_called '^ip (-4 )?route (add|replace|del)'
  assert_output_contains \
    "route-to-vpc: changed: added the route 10.20.0.0/16 192.168.2.4 to NetworkManager connection 'System eth0'" \
    "route-to-vpc: changed: reapplied NetworkManager connection 'System eth0' on eth0" \
    "route-to-vpc: 10.20.0.0/16 10.8.0.0/24 routed via 192.168.2.4"
  [ -z "$(ls -A "$GPU_CLUSTER_ROOT/var/lib/gpu-cluster/pending")" ]
}

@test "route-to-vpc el9: a second run changes nothing and does not reapply" {
  el9_host
  run_twice route-to-vpc.sh
  refute_called '^nmcli (connection modify|device reapply)'
  assert_output_contains "unchanged: NetworkManager connection 'System eth0' on eth0 has the route(s)"
}

@test "route-to-vpc el9: a changed VPC_CIDR takes the old route out of the profile and puts the new in; the user's route stays" {
  el9_host
  run_again_with route-to-vpc.sh VPC_CIDR=10.30.0.0/16
  assert_success
  assert_called "^nmcli connection modify uuid $UUID -ipv4.routes 10\.20\.0\.0/16 192\.168\.2\.4 \+ipv4.routes 10\.30\.0\.0/16 192\.168\.2\.4$"
  assert_called '^nmcli device reapply eth0$'
  [ "$(profile_routes)" = "192.0.2.0/24 192.168.2.1
10.8.0.0/24 192.168.2.4
10.30.0.0/16 192.168.2.4" ]
  [ "$(routes | sort)" = "10.30.0.0/16 via 192.168.2.4 dev eth0 proto static metric 100
10.8.0.0/24 via 192.168.2.4 dev eth0 proto static metric 100
192.0.2.0/24 via 192.168.2.1 dev eth0 proto static metric 100" ]
  assert_output_contains "changed: removed the old route 10.20.0.0/16 192.168.2.4 from NetworkManager connection 'System eth0'" \
    "changed: added the route 10.30.0.0/16 192.168.2.4 to NetworkManager connection 'System eth0'"
  grep -qx 'route=10.30.0.0/16 192.168.2.4' "$GPU_CLUSTER_ROOT$RECORD"
  refute_file_contains "$GPU_CLUSTER_ROOT$RECORD" 10.20.0.0
  assert_idempotent route-to-vpc.sh
}

@test "route-to-vpc el9: a route the profile had before is not the program's, and stays when no longer wanted" {
  el9_host
  nm_profile eth0 "$UUID" "System eth0" "10.8.0.0/24 192.168.2.4" "10.20.0.0/16 192.168.2.4 50"
  run_script route-to-vpc.sh
  assert_success
  # The user's 10.20.0.0/16 has a metric: another route; theirs of the tunnel is the one wanted.
  assert_called "^nmcli connection modify uuid $UUID \+ipv4.routes 10\.20\.0\.0/16 192\.168\.2\.4$"
  assert_file "$RECORD" "# Managed by gpu-cluster (route-to-vpc): the routes it added to a NetworkManager profile.
connection=$UUID
route=10.20.0.0/16 192.168.2.4"
  export TUNNEL_CIDR=""
  reset_calls
  run_script route-to-vpc.sh
  assert_success
  refute_called '^nmcli (connection modify|device reapply)'
  [ "$(profile_routes)" = "10.8.0.0/24 192.168.2.4
10.20.0.0/16 192.168.2.4 50
10.20.0.0/16 192.168.2.4" ]
}

@test "route-to-vpc el9: without NetworkManager running the step fails saying so, and changes no profile" {
  el9_host
  rm "$STUB_STATE/active-NetworkManager"
  run_script route-to-vpc.sh
  [ "$status" -eq 1 ]
  assert_output_contains "gpu-cluster: moscow: route-to-vpc: NetworkManager is not running: on EL9 hosts the route to the VPC is kept in the NetworkManager profile of the interface that reaches 192.168.2.4"
  refute_called '^nmcli'
  [ ! -e "$GPU_CLUSTER_ROOT$RECORD" ]
}

@test "route-to-vpc el9: no profile active on the gateway's interface, or a gateway off the host's networks, fails naming it" {
  el9_host
  : >"$STUB_STATE/nm/device-eth0"
  run_script route-to-vpc.sh
  [ "$status" -eq 1 ]
  assert_output_contains "route-to-vpc: no NetworkManager connection is active on eth0, the interface that reaches 192.168.2.4"
  refute_called '^nmcli connection modify'

  export GATEWAY_ADDRESS=172.16.9.9
  run_script route-to-vpc.sh
  [ "$status" -eq 1 ]
  assert_output_contains "route-to-vpc: GATEWAY_ADDRESS 172.16.9.9 is not on a network of this host's interfaces (ip route get: 172.16.9.9 via 192.0.2.1 dev eth0"
}

@test "route-to-vpc el9: an earlier run's unit is retired before the routes go into the profile" {
  # What route-to-vpc did on every host before it knew EL9: the unit, and networkd's drop-in.
  run_script route-to-vpc.sh
  assert_success
  el9_host
  routes_before="$(routes)"
  [ -n "$routes_before" ]
  reset_calls
  run_script route-to-vpc.sh
  assert_success
  assert_called "^systemctl stop $UNIT$"
  assert_called "^systemctl disable $UNIT$"
  assert_called '^systemctl daemon-reload$'
  assert_call_order "^systemctl stop $UNIT$" '^nmcli connection modify'
  [ ! -e "$GPU_CLUSTER_ROOT$UNIT_FILE" ]
  [ ! -e "$GPU_CLUSTER_ROOT/etc/systemd/networkd.conf.d/60-gpu-cluster-keep-routes.conf" ]
  [ "$(routes | sort)" = "10.20.0.0/16 via 192.168.2.4 dev eth0 proto static metric 100
10.8.0.0/24 via 192.168.2.4 dev eth0 proto static metric 100
192.0.2.0/24 via 192.168.2.1 dev eth0 proto static metric 100" ]
  assert_output_contains "changed: stopped $UNIT" "changed: removed $UNIT_FILE"
  assert_idempotent route-to-vpc.sh
}

@test "route-to-vpc el9: a route gone from the kernel is restored by a reapply" {
  el9_host
  first_run route-to-vpc.sh
  STUB_CALLS=/dev/null "$BATS_TEST_TMPDIR/bin/ip" route del 10.8.0.0/24
  run_script route-to-vpc.sh
  assert_success
  refute_called '^nmcli connection modify'
  assert_called '^nmcli device reapply eth0$'
  grep -qx '10.8.0.0/24 via 192.168.2.4 dev eth0 proto static metric 100' "$STUB_STATE/routes"
  assert_output_contains "reapplying NetworkManager connection 'System eth0' on eth0 to restore the route(s) 10.8.0.0/24 192.168.2.4"
  assert_idempotent route-to-vpc.sh
}

@test "route-to-vpc el9: a failed reapply fails the step, and the next run reapplies" {
  el9_host
  STUB_FAIL_CALL='^nmcli device reapply' run_script route-to-vpc.sh
  [ "$status" -eq 1 ]
  assert_output_contains "route-to-vpc: nmcli could not reapply NetworkManager connection 'System eth0' on eth0"
  reset_calls
  run_script route-to-vpc.sh
  assert_success
  refute_called '^nmcli connection modify'
  assert_called '^nmcli device reapply eth0$'
  assert_output_contains "changed: reapplied NetworkManager connection 'System eth0' on eth0"
  [ -z "$(ls -A "$GPU_CLUSTER_ROOT/var/lib/gpu-cluster/pending")" ]
  assert_idempotent route-to-vpc.sh
}

@test "route-to-vpc-remove el9: the recorded routes leave the profile and the kernel; the user's stay; a second run changes nothing" {
  el9_host
  first_run route-to-vpc.sh
  run_script route-to-vpc-remove.sh
  assert_success
  assert_called "^nmcli connection modify uuid $UUID -ipv4.routes 10\.20\.0\.0/16 192\.168\.2\.4 -ipv4.routes 10\.8\.0\.0/24 192\.168\.2\.4$"
  assert_called '^nmcli device reapply eth0$'
  [ "$(profile_routes)" = "192.0.2.0/24 192.168.2.1" ]
  [ "$(routes)" = "192.0.2.0/24 via 192.168.2.1 dev eth0 proto static metric 100" ]
  [ ! -e "$GPU_CLUSTER_ROOT$RECORD" ]
  refute_called '^ip (-4 )?route del'
  assert_output_contains "remove-route-to-vpc: changed: removed the route(s) 10.20.0.0/16 192.168.2.4 10.8.0.0/24 192.168.2.4 from NetworkManager connection 'System eth0'" \
    "remove-route-to-vpc: changed: reapplied NetworkManager connection 'System eth0' on eth0"

  reset_calls
  run_script route-to-vpc-remove.sh
  assert_success
  assert_no_state_changes
  refute_changes_logged
}

@test "route-to-vpc el9: when the gateway is reached through another interface the routes move to its profile" {
  el9_host
  first_run route-to-vpc.sh
  nm_profile eth1 9d6c1f5e-2a41-4c8e-b1f4-0c2a7e5d3b10 "Wired connection 2"
  export GATEWAY_ADDRESS=10.50.0.4
  run_script route-to-vpc.sh
  assert_success
  assert_called "^nmcli connection modify uuid $UUID -ipv4.routes 10\.20\.0\.0/16 192\.168\.2\.4 -ipv4.routes 10\.8\.0\.0/24 192\.168\.2\.4$"
  assert_called '^nmcli connection modify uuid 9d6c1f5e-2a41-4c8e-b1f4-0c2a7e5d3b10 \+ipv4.routes 10\.20\.0\.0/16 10\.50\.0\.4 \+ipv4.routes 10\.8\.0\.0/24 10\.50\.0\.4$'
  assert_called '^nmcli device reapply eth0$'
  assert_called '^nmcli device reapply eth1$'
  [ "$(profile_routes)" = "192.0.2.0/24 192.168.2.1" ]
  [ "$(routes | sort)" = "10.20.0.0/16 via 10.50.0.4 dev eth1 proto static metric 100
10.8.0.0/24 via 10.50.0.4 dev eth1 proto static metric 100
192.0.2.0/24 via 192.168.2.1 dev eth0 proto static metric 100" ]
  grep -qx 'connection=9d6c1f5e-2a41-4c8e-b1f4-0c2a7e5d3b10' "$GPU_CLUSTER_ROOT$RECORD"
  assert_idempotent route-to-vpc.sh
}
