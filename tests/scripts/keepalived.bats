#!/usr/bin/env bats
# vip/keepalived.sh and vip/keepalived-remove.sh (control-plane-vip): the controllers' virtual
# IP by host keepalived. KEEPALIVED_CONF is what components/hosts/vip.py renders for
# controller moscow (rendered here by the program, see render_conf); the real keepalived
# parses those files in tests/components/test_keepalived.py, here the stubbed
# `keepalived --config-test` accepts or refuses them.

bats_require_minimum_version 1.5.0
load helpers

CONF=/etc/keepalived/keepalived.conf

# render_conf PEERS [INTERFACE]: vip.keepalived_conf for moscow (192.168.2.10) with the
# comma-separated PEERS, on INTERFACE (none: the placeholder the script fills in).
render_conf() {
  "$PYTHON" - "$REPO_ROOT" "$1" "${2:-}" <<'EOF'
import sys
sys.path.insert(0, sys.argv[1])
from components.hosts.vip import keepalived_conf
print(keepalived_conf(host="moscow", vip="192.168.2.5", prefix_length=24,
                      interface=sys.argv[3] or None, router_id=51, source="192.168.2.10",
                      peers=sys.argv[2].split(","), auth_pass="1a2b3c4d", api_port=6443), end="")
EOF
}

setup_file() {
  THREE="$(render_conf 192.168.2.11,192.168.2.12 eno1)"
  FIVE="$(render_conf 192.168.2.11,192.168.2.12,192.168.2.13,192.168.2.14 eno1)"
  DETECTED="$(render_conf 192.168.2.11,192.168.2.12)"
  export THREE FIVE DETECTED
}

setup() {
  setup_host
  ln -s "$TESTS_DIR/stubs/stub" "$BATS_TEST_TMPDIR/bin/keepalived"
  export KEEPALIVED_CONF=$THREE
  # moscow's addresses as `ip -4 -o address show` prints them.
  export STUB_IP_OUTPUT="1: lo    inet 127.0.0.1/8 scope host lo\\       valid_lft forever preferred_lft forever
2: eno1    inet 192.168.2.10/24 brd 192.168.2.255 scope global eno1\\       valid_lft forever preferred_lft forever"
}

@test "keepalived: the first run installs keepalived, checks and writes the file, enables and starts it" {
  run_script vip/keepalived.sh
  assert_success
  assert_call_order "^$APT update" "^$APT install -y --no-install-recommends keepalived$"
  assert_call_order "^$APT install" "^keepalived --config-test -f /tmp/"
  assert_call_order "^keepalived --config-test" '^systemctl enable keepalived$'
  assert_call_order '^systemctl enable keepalived$' '^systemctl start keepalived$'
  refute_called '^systemctl (reload|restart)'
  assert_file "$CONF" "$THREE"
  assert_mode "$CONF" 640
  assert_output_contains "gpu-cluster: moscow: control-plane-vip: changed $CONF"
  [ -f "$STUB_STATE/active-keepalived" ]
}

@test "keepalived: a second run changes nothing and says so" {
  run_twice vip/keepalived.sh
  refute_called '^keepalived'
  assert_output_contains "unchanged $CONF" "unchanged: keepalived is enabled and running"
}

@test "keepalived: a changed peer list rewrites the file and reloads the running keepalived" {
  run_again_with vip/keepalived.sh KEEPALIVED_CONF="$FIVE"
  assert_success
  assert_file "$CONF" "$FIVE"
  grep -qx $'\t\t192.168.2.14' "$GPU_CLUSTER_ROOT$CONF"
  assert_call_order '^keepalived --config-test' '^systemctl reload keepalived$'
  refute_called '^(apt-get|systemctl (restart|start|enable))'
  assert_output_contains "control-plane-vip: changed: reloaded keepalived"
  assert_idempotent vip/keepalived.sh
}

@test "keepalived: a file keepalived refuses is not put in place; the old one stays, host and step named" {
  first_run vip/keepalived.sh
  export KEEPALIVED_CONF=$FIVE STUB_FAIL_CALL='^keepalived --config-test'
  run_script vip/keepalived.sh
  [ "$status" -eq 1 ]
  assert_output_contains "gpu-cluster: moscow: control-plane-vip: keepalived refuses the new configuration (keepalived --config-test): stub: keepalived failed as asked; $CONF is unchanged"
  assert_file "$CONF" "$THREE"
  refute_called '^systemctl (reload|restart)'
  # On a new host nothing is written and nothing starts.
  rm "$GPU_CLUSTER_ROOT$CONF" "$STUB_STATE/active-keepalived"
  run_script vip/keepalived.sh
  [ "$status" -eq 1 ]
  [ ! -e "$GPU_CLUSTER_ROOT$CONF" ]
  refute_called '^systemctl (start|enable)'
}

@test "keepalived: without an interface, the one holding unicast_src_ip is used" {
  export KEEPALIVED_CONF=$DETECTED
  grep -q '@INTERFACE_OF_UNICAST_SRC_IP@' <<<"$DETECTED"
  run_script vip/keepalived.sh
  assert_success
  assert_file "$CONF" "$THREE"
  assert_output_contains "control-plane-vip: VRRP goes out on eno1, which holds 192.168.2.10"
  assert_idempotent vip/keepalived.sh
}

@test "keepalived: no interface holding unicast_src_ip is refused, naming the address" {
  export KEEPALIVED_CONF=$DETECTED STUB_IP_OUTPUT="2: eno1    inet 192.168.9.10/24 scope global eno1"
  run_script vip/keepalived.sh
  [ "$status" -eq 1 ]
  assert_output_contains "gpu-cluster: moscow: control-plane-vip: no interface holds 192.168.2.10 (unicast_src_ip)"
  [ ! -e "$GPU_CLUSTER_ROOT$CONF" ]
  refute_called '^systemctl (start|enable)'
}

@test "keepalived: a missing or foreign input is named before anything runs" {
  unset KEEPALIVED_CONF
  run_script vip/keepalived.sh
  assert_refused "gpu-cluster: moscow: control-plane-vip: missing required environment variable(s): KEEPALIVED_CONF"
  export KEEPALIVED_CONF=$'global_defs {\n}'
  run_script vip/keepalived.sh
  assert_refused "control-plane-vip: KEEPALIVED_CONF does not start with the line '# Managed by gpu-cluster (control-plane-vip); changes are overwritten.'"
}

@test "keepalived: a keepalived.conf that is not the program's is neither replaced nor removed" {
  mkdir -p "$GPU_CLUSTER_ROOT/etc/keepalived"
  printf 'vrrp_instance office {\n}\n' >"$GPU_CLUSTER_ROOT$CONF"
  run_script vip/keepalived.sh
  [ "$status" -eq 1 ]
  assert_output_contains "control-plane-vip: $CONF exists and is not the program's"
  assert_no_state_changes
  run_script vip/keepalived-remove.sh
  assert_success
  assert_file "$CONF" $'vrrp_instance office {\n}'
  assert_no_state_changes
}

@test "keepalived-remove: stops and disables keepalived and removes the file; twice changes nothing more" {
  first_run vip/keepalived.sh
  run_script vip/keepalived-remove.sh
  assert_success
  assert_called '^systemctl disable --now keepalived$'
  [ ! -e "$GPU_CLUSTER_ROOT$CONF" ]
  [ ! -f "$STUB_STATE/active-keepalived" ]
  assert_output_contains "gpu-cluster: moscow: remove-control-plane-vip: changed: removed $CONF"
  refute_called '^apt-get'
  assert_idempotent vip/keepalived-remove.sh
  assert_output_contains "unchanged: $CONF is absent"
}
