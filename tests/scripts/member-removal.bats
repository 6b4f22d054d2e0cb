#!/usr/bin/env bats
# k0s/leave-etcd.sh and rke2/leave-etcd.sh: on c1, the etcd member of another controller
# leaves before its machine is removed or replaced, and its node goes; refused when the
# members that stay would lose their quorum. k0s/etcd-member.sh and rke2/etcd-member.sh,
# the create of the same resource: on c1, after another controller joined, its member is
# there and healthy.

bats_require_minimum_version 1.5.0
load helpers
load helpers/etcd

setup() {
  setup_host
}

check_leave_then_no_op() {
  leave c3
  assert_member_left c3 || return 1
  assert_output_contains "gpu-cluster: $GPU_CLUSTER_HOST: leave-etcd: etcd: 2 of the 2 members that stay are healthy (quorum 2)" \
    "leave-etcd: changed: deleted node c3" || return 1
  assert_rerun_changes_nothing "$DISTRIBUTION/leave-etcd.sh" || return 1
  assert_output_contains "leave-etcd: no etcd member has peer address 10.20.0.13; c3 has already left etcd" \
    "leave-etcd: no node c3; nothing to delete"
}

# Replacing a dead controller: its member is the unhealthy one, the two that stay are up.
check_dead_member_leaves() {
  export STUB_ETCD_UNHEALTHY=c3
  leave c3
  assert_member_left c3
}

# c2 is down: without c3, c1 alone is not a quorum of the two that stay.
check_quorum_breaking_refused() {
  export STUB_ETCD_UNHEALTHY=c2
  leave c3
  assert_failure || return 1
  assert_output_contains "gpu-cluster: $GPU_CLUSTER_HOST: leave-etcd: refusing to remove c3: the 2 members that stay need 2 healthy for a quorum, 1 are (unhealthy: $(unhealthy c2)" || return 1
  assert_only_reads
}

# No member at the address and none of that name: nothing to remove.
check_peer_not_found() {
  etcd_members c1 c2
  export STUB_CONTROL_NODES="c1 c2"
  leave c3
  assert_success || return 1
  assert_output_contains "leave-etcd: no etcd member has peer address 10.20.0.13; c3 has already left etcd" || return 1
  assert_only_reads
}

# The member of that name is elsewhere: config and cluster disagree, nothing is removed.
check_address_mismatch() {
  leave c3 10.20.0.99
  assert_failure || return 1
  assert_output_contains "leave-etcd: etcd member c3 has peer address 10.20.0.13, not 10.20.0.99" || return 1
  assert_only_reads || return 1
  leave c4 10.20.0.12
  assert_failure || return 1
  assert_output_contains "leave-etcd: the etcd member at 10.20.0.12 is c2, not c4; nothing was removed" || return 1
  assert_only_reads
}

check_bad_inputs() {
  export NODE_NAME=c1 MEMBER_NODE='c3 c4' MEMBER_ADDRESS='10.20.0.13:2380'
  run_script "$DISTRIBUTION/leave-etcd.sh"
  assert_refused "gpu-cluster: $GPU_CLUSTER_HOST: leave-etcd: MEMBER_NODE is not a node name: 'c3 c4'" \
    "MEMBER_ADDRESS is not an IPv4 address: '10.20.0.13:2380'" || return 1
  export MEMBER_NODE=C1 MEMBER_ADDRESS=10.20.0.11
  run_script "$DISTRIBUTION/leave-etcd.sh"
  assert_refused "leave-etcd: MEMBER_NODE is this controller (c1): run leave-etcd on another one"
}

# member NAME [ADDRESS]: etcd-member on c1 for NAME (at 10.20.0.1N unless ADDRESS).
member() {
  export NODE_NAME=c1 MEMBER_NODE=$1 MEMBER_ADDRESS="${2:-10.20.0.1${1#c}}"
  run_script "$DISTRIBUTION/etcd-member.sh"
}

check_member_joined() {
  member c3
  assert_success || return 1
  assert_output_contains "gpu-cluster: $GPU_CLUSTER_HOST: etcd-member: ready: etcd member c3 (10.20.0.13) to be healthy" || return 1
  assert_only_reads || return 1
  assert_rerun_changes_nothing "$DISTRIBUTION/etcd-member.sh"
}

# A member that never shows up, shows at another address, or stays unhealthy: the step
# waits, then fails naming it, and changes nothing.
check_member_not_joined() {
  local why
  etcd_members c1 c2
  member c3
  assert_failure || return 1
  assert_output_contains "gpu-cluster: $GPU_CLUSTER_HOST: etcd-member: timed out after 300s waiting for etcd member c3 (10.20.0.13) to be healthy" \
    "no etcd member c3 (members: c1 c2)" || return 1
  assert_only_reads || return 1
  # One that joins at boot is given its whole boot.
  MEMBER_WAIT_SECONDS=1500 member c3
  assert_output_contains "etcd-member: timed out after 1500s waiting for etcd member c3 (10.20.0.13) to be healthy" || return 1
  etcd_members c1 c2 c3
  member c3 10.20.0.99
  assert_output_contains "etcd member c3 has peer address 10.20.0.13, not 10.20.0.99" || return 1
  export STUB_ETCD_UNHEALTHY=c3
  member c3
  assert_failure || return 1
  # unhealthy prints "c3 (why", and RKE2's why ends in a parenthesis of its own.
  why="$(unhealthy c3)"
  why=${why#c3 (}
  [[ "$DISTRIBUTION" != rke2 ]] || why=${why%)}
  assert_output_contains "etcd member c3 is not healthy: $why" || return 1
  assert_only_reads
}

check_member_bad_inputs() {
  export NODE_NAME=c1 MEMBER_NODE=C1 MEMBER_ADDRESS=10.20.0.256 MEMBER_WAIT_SECONDS='1; reboot'
  run_script "$DISTRIBUTION/etcd-member.sh"
  assert_refused "gpu-cluster: $GPU_CLUSTER_HOST: etcd-member: MEMBER_WAIT_SECONDS must be a number of seconds (1-99999), got '1; reboot'" \
    "MEMBER_ADDRESS is not an IPv4 address: '10.20.0.256'" \
    "MEMBER_NODE is this controller (c1): run etcd-member on another one"
}

@test "k0s: a joined controller's member is healthy; a second run reads the same" {
  k0s_etcd
  check_member_joined
}

@test "k0s: a joined controller without a healthy member fails, naming it" {
  k0s_etcd
  check_member_not_joined
}

@test "k0s: etcd-member's bad inputs are named before any command" {
  k0s_etcd
  check_member_bad_inputs
}

@test "rke2: a joined server's member is healthy; a second run reads the same" {
  rke2_etcd
  check_member_joined
}

@test "rke2: a joined server without a healthy member fails, naming it" {
  rke2_etcd
  check_member_not_joined
}

@test "rke2: etcd-member's bad inputs are named before any command" {
  rke2_etcd
  check_member_bad_inputs
}

@test "k0s: a member leaves, its node and ControlNode go; a second run is a no-op" {
  k0s_etcd
  check_leave_then_no_op
}

@test "k0s: a dead controller's member leaves" {
  k0s_etcd
  check_dead_member_leaves
}

@test "k0s: a removal that breaks the quorum of the rest is refused" {
  k0s_etcd
  check_quorum_breaking_refused
}

@test "k0s: no member at the address is a no-op" {
  k0s_etcd
  check_peer_not_found
}

@test "k0s: a member at another address is refused" {
  k0s_etcd
  check_address_mismatch
}

@test "k0s: bad inputs are named before any command" {
  k0s_etcd
  check_bad_inputs
}

@test "rke2: a member leaves through its node's annotation, then the node goes; a second run is a no-op" {
  rke2_etcd
  check_leave_then_no_op
}

@test "rke2: a dead server's member leaves" {
  rke2_etcd
  check_dead_member_leaves
}

@test "rke2: a removal that breaks the quorum of the rest is refused" {
  rke2_etcd
  check_quorum_breaking_refused
}

@test "rke2: no member at the address is a no-op" {
  rke2_etcd
  check_peer_not_found
}

@test "rke2: a member at another address is refused" {
  rke2_etcd
  check_address_mismatch
}

@test "rke2: bad inputs are named before any command" {
  rke2_etcd
  check_bad_inputs
}

@test "rke2: a removal RKE2 never makes times out naming the node, which stays" {
  rke2_etcd
  export STUB_ETCD_REMOVAL_STUCK=1
  leave c3
  assert_failure
  assert_output_contains "leave-etcd: timed out after 300s waiting for RKE2 to remove the etcd member of c3"
  refute_called ' delete node c3$'
}
