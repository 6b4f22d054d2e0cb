#!/usr/bin/env bats
# host-firewall.sh and host-firewall-remove.sh with the real nft, each test in a network
# namespace of its own (never the machine's): the program's ruleset loaded, kept, replaced
# and removed, every other table left alone, and its check reporting drift.

bats_require_minimum_version 1.5.0
load helpers

RULES_FILE=/etc/gpu-cluster/host-firewall.nft
UNIT=gpu-cluster-firewall
UNIT_FILE=/etc/systemd/system/gpu-cluster-firewall.service

setup() {
  if [[ "$(id -u)" != 0 ]] || ! command -v nft >/dev/null || ! command -v nsenter >/dev/null; then
    skip "needs root, nft (apt-get install nftables) and nsenter: network namespaces"
  fi
  setup_host
  NETNS="$BATS_TEST_TMPDIR/netns"
  : >"$NETNS"
  /usr/bin/unshare --net="$NETNS" true
  export HOST_FIREWALL_RULESET
  HOST_FIREWALL_RULESET="$(ruleset 192.168.2.1/32 192.168.2.2/32)"
  installed_package nftables 1.0.9-1build1
  ENVELOPE="$BATS_TEST_TMPDIR/envelope.sh"
}

teardown() {
  [[ -z "${NETNS:-}" ]] || /usr/bin/umount "$NETNS" 2>/dev/null || true
}

# ruleset SOURCE...: the program's ruleset (components/hosts/firewall.py) for an RKE2 agent.
ruleset() {
  "$PYTHON" - "$@" <<'EOF'
import sys
sys.path.insert(0, ".")
from components.hosts.firewall import ruleset
from components.distributions.rke2 import NODE_PORTS
print(ruleset("moscow", NODE_PORTS, sys.argv[1:], ["10.244.0.0/16", "10.96.0.0/12"]), end="")
EOF
}

# in_netns COMMAND...: COMMAND in the test's network namespace.
in_netns() {
  /usr/bin/nsenter --net="$NETNS" -- "$@"
}

# run_script SCRIPT: as helpers.bash's, in the test's network namespace.
run_script() {
  [[ "${GPU_CLUSTER_ROOT:-}" == "$BATS_TEST_TMPDIR"/* ]] || return 1
  run in_netns bash "$SCRIPTS_DIR/$1"
}

listing() {
  in_netns nft -s list table inet gpu_cluster
}

# run_envelope ACTION: the program's envelope of host-firewall on stdin of bash, as the
# doctor runs it over SSH.
run_envelope() {
  "$PYTHON" "$TESTS_DIR/render_envelope.py" moscow host-firewall host-firewall.sh \
    "HOST_FIREWALL_RULESET=$HOST_FIREWALL_RULESET" >"$ENVELOPE"
  # shellcheck disable=SC2016 # expanded by the inner bash
  run --separate-stderr in_netns bash -c 'bash -s -- "$1" <"$2"' _ "$1" "$ENVELOPE"
}

@test "host-firewall: first run installs nftables, writes the file and unit, loads the table" {
  rm -f "$STUB_STATE/dpkg/nftables"
  run_script host-firewall.sh
  assert_success
  assert_called "^$APT install -y --no-install-recommends nftables$"
  assert_file "$RULES_FILE" "$HOST_FIREWALL_RULESET"
  assert_mode "$RULES_FILE" 644
  grep -qx "ExecStart=/usr/sbin/nft -f $RULES_FILE" "$GPU_CLUSTER_ROOT$UNIT_FILE"
  assert_called '^systemctl daemon-reload$'
  assert_called "^systemctl enable $UNIT$"
  # Debian's nftables.service is never used: it flushes the whole ruleset.
  refute_called 'nftables.service|systemctl (enable|start|restart) nftables'
  run listing
  assert_success
  assert_output_contains "elements = { 192.168.2.1, 192.168.2.2 }" \
    "elements = { 10.96.0.0/12, 10.244.0.0/16 }" "elements = { 9099, 10250 }" \
    "elements = { 8472 }" "type filter hook input priority filter; policy accept;"
  assert_unit_verifies "$UNIT_FILE" /usr/sbin/nft
}

@test "host-firewall: a second run changes nothing and says so" {
  run_twice host-firewall.sh
  assert_output_contains "unchanged $RULES_FILE" "table inet gpu_cluster is loaded as configured"
}

@test "host-firewall: kube-proxy's and the CNI's tables are left alone, and nothing else drops" {
  in_netns nft -f - <<'EOF'
table ip kube-proxy {
	chain filter-input {
		type filter hook input priority -110; policy accept;
		ct state new jump services
	}
	chain services {
		ip daddr 10.96.0.1 tcp dport 443 accept
	}
}
table ip filter {
	chain KUBE-FIREWALL {
		ip saddr != 127.0.0.0/8 ip daddr 127.0.0.0/8 counter drop
	}
}
EOF
  before="$(in_netns nft -s list table ip kube-proxy; in_netns nft -s list table ip filter)"
  run_script host-firewall.sh
  assert_success
  [ "$(in_netns nft -s list table ip kube-proxy; in_netns nft -s list table ip filter)" = "$before" ]
  # Its only drop is behind the node ports' jump; no chain has a drop policy.
  run in_netns nft -s list table inet gpu_cluster
  [ "$(grep -c drop <<<"$output")" = 1 ]
  refute_output_contains "policy drop"
}

@test "host-firewall: new sources replace the old in one load, a host removed is gone" {
  run_script host-firewall.sh
  assert_success
  HOST_FIREWALL_RULESET="$(ruleset 192.168.2.1/32 192.168.2.3/32 10.8.0.1/32)"
  reset_calls
  run_script host-firewall.sh
  assert_success
  assert_output_contains "changed $RULES_FILE" "changed: loaded table inet gpu_cluster"
  run listing
  [[ "$(tr -d '\n\t ' <<<"$output")" == *"elements={10.8.0.1,192.168.2.1,192.168.2.3}"* ]]
  refute_output_contains "192.168.2.2"
  assert_idempotent host-firewall.sh
}

@test "host-firewall: a table changed or deleted by hand is loaded again" {
  run_script host-firewall.sh
  assert_success
  in_netns nft add element inet gpu_cluster node_sources '{ 192.168.2.99 }'
  run_script host-firewall.sh
  assert_success
  assert_output_contains "changed: loaded table inet gpu_cluster"
  run listing
  refute_output_contains "192.168.2.99"
  in_netns nft delete table inet gpu_cluster
  run_script host-firewall.sh
  assert_success
  assert_output_contains "changed: loaded table inet gpu_cluster"
  run listing
  assert_success
}

@test "host-firewall: a ruleset that reaches beyond its table is refused, naming host and step" {
  local bad
  for bad in "flush ruleset" "table ip filter { }" 'include "/etc/nftables.conf"' \
    $'\t}\n\tflush ruleset'; do
    HOST_FIREWALL_RULESET="$(ruleset 192.168.2.1/32)"$'\n'"$bad"
    run_script host-firewall.sh
    assert_failure
    assert_output_contains "gpu-cluster: moscow: host-firewall: HOST_FIREWALL_RULESET may only define table inet gpu_cluster"
  done
  HOST_FIREWALL_RULESET="table inet gpu_cluster { }"
  run_script host-firewall.sh
  assert_failure
  assert_output_contains "does not start with the line '# Managed by gpu-cluster (host-firewall)"
  unset HOST_FIREWALL_RULESET
  run_script host-firewall.sh
  assert_failure
  assert_output_contains "missing required environment variable(s): HOST_FIREWALL_RULESET"
  [ ! -e "$GPU_CLUSTER_ROOT$RULES_FILE" ]
  run in_netns nft list ruleset
  [ -z "$output" ]
}

@test "host-firewall: a ruleset nft refuses changes nothing" {
  HOST_FIREWALL_RULESET="${HOST_FIREWALL_RULESET/ip saddr @node_sources accept/ip saddr @nowhere accept}"
  run_script host-firewall.sh
  assert_failure
  assert_output_contains "gpu-cluster: moscow: host-firewall: nft refuses the ruleset"
  [ ! -e "$GPU_CLUSTER_ROOT$RULES_FILE" ]
  run in_netns nft list ruleset
  [ -z "$output" ]
}

@test "check: host-firewall in sync exits 0; a table changed by hand is drift; nothing changes" {
  run_envelope create
  assert_success
  run_envelope check
  [ "$status" -eq 0 ] && [[ "$output" != *drift:* ]]
  in_netns nft add element inet gpu_cluster node_sources '{ 192.168.2.99 }'
  before="$(listing)"
  reset_calls
  run_envelope check
  [ "$status" -eq 3 ]
  assert_output_contains "drift: table inet gpu_cluster in the kernel differs from $RULES_FILE (the step would load it: nft -f $RULES_FILE)"
  [[ "$output" != *"right after"* ]]
  [ "$(listing)" = "$before" ]
  assert_no_state_changes
}

@test "check: host-firewall on a host that never ran it reports the file, unit and table" {
  run_envelope check
  [ "$status" -eq 3 ]
  assert_output_contains "drift: $RULES_FILE is missing" "drift: $UNIT_FILE is missing" \
    "drift: the step would run: systemctl enable $UNIT" \
    "drift: table inet gpu_cluster in the kernel is not loaded from $RULES_FILE"
  run in_netns nft list ruleset
  [ -z "$output" ]
}

@test "host-firewall-remove: deletes the table, unit and file; other tables stay; twice" {
  run_script host-firewall.sh
  assert_success
  in_netns nft add table ip filter
  reset_calls
  run_script host-firewall-remove.sh
  assert_success
  assert_called "^systemctl disable $UNIT$"
  [ ! -e "$GPU_CLUSTER_ROOT$RULES_FILE" ] && [ ! -e "$GPU_CLUSTER_ROOT$UNIT_FILE" ]
  run in_netns nft list tables
  [ "$output" = "table ip filter" ]
  assert_idempotent host-firewall-remove.sh
  assert_output_contains "unchanged: no table inet gpu_cluster"
}
