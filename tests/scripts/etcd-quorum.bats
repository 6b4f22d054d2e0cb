#!/usr/bin/env bats
# k0s/etcd-quorum.sh and rke2/etcd-quorum.sh: before a controller's upgrade, every expected
# etcd member listed and healthy, or a refusal naming what is not.

bats_require_minimum_version 1.5.0
load helpers
load helpers/etcd

setup() {
  setup_host
}

check_healthy_three() {
  quorum_check 3
  assert_success || return 1
  assert_output_contains "etcd-quorum: etcd: all 3 members healthy (c1 c2 c3); quorum 2 holds while c1 is down" || return 1
  assert_rerun_changes_nothing "$DISTRIBUTION/etcd-quorum.sh"
}

check_one_unhealthy() {
  export STUB_ETCD_UNHEALTHY=c2
  quorum_check 3
  assert_refused_upgrade "unhealthy: $(unhealthy c2)"
}

check_missing_member() {
  etcd_members c1 c2
  quorum_check 3
  assert_refused_upgrade "2 members are listed (c1 c2) where 3 controllers are configured: with one down the rest would not be a majority"
}

# Five members, one down: taking c1 down too would leave exactly the quorum (3 of 5) with
# no failure to spare, so the check refuses at every size (etcd/lib.sh
# etcd_require_all_healthy).
check_five_one_down() {
  etcd_members c1 c2 c3 c4 c5
  export STUB_ETCD_UNHEALTHY=c4
  quorum_check 5
  assert_refused_upgrade "etcd needs a majority of its members up and every member healthy" \
    "unhealthy: $(unhealthy c4)"
}

# Controllers going from 3 to 5 (the new ones join after this check) or from 5 to 3 (the
# removed ones leave after it): the members listed decide, all healthy and 3 or more.
check_growing_and_shrinking() {
  quorum_check 5
  assert_success || return 1
  assert_output_contains "etcd-quorum: etcd: all 3 members healthy (c1 c2 c3); quorum 2 holds while c1 is down" || return 1
  etcd_members c1 c2 c3 c4 c5
  quorum_check 3
  assert_success || return 1
  assert_output_contains "etcd-quorum: etcd: all 5 members healthy (c1 c2 c3 c4 c5); quorum 3 holds while c1 is down"
}

check_not_a_member() {
  etcd_members c2 c3 c4
  quorum_check 3
  assert_refused_upgrade "this controller (c1) is not an etcd member"
}

check_no_quorum() {
  export STUB_ETCD_NO_QUORUM=1
  quorum_check 3
  assert_failure || return 1
  assert_output_contains "gpu-cluster: $GPU_CLUSTER_HOST: etcd-quorum: this" "no quorum" || return 1
  refute_output_contains "all 3 members healthy"
}

# A controller the install step after the check will join (or initialise): no member of
# its own to take down, nothing read, and the step's inputs still checked.
check_not_installed() {
  rm -f "$GPU_CLUSTER_ROOT$1"
  export KUBERNETES_VERSION=v1.36.3
  quorum_check 3
  assert_success || return 1
  assert_output_contains "etcd-quorum: unchanged: no control plane runs here yet ($1)" \
    "takes no etcd member down for v1.36.3" || return 1
  [[ ! -s "$STUB_CALLS" ]] || { cat "$STUB_CALLS" >&2; return 1; }
  assert_rerun_changes_nothing "$DISTRIBUTION/etcd-quorum.sh" || return 1
  export NODE_NAME='c1;reboot'
  run_script "$DISTRIBUTION/etcd-quorum.sh"
  assert_refused "NODE_NAME is not a node name: 'c1;reboot'"
}

check_bad_inputs() {
  export NODE_NAME='c1;reboot' NODE_ADDRESS=10.20.0.256 EXPECTED_MEMBERS=9
  run_script "$DISTRIBUTION/etcd-quorum.sh"
  assert_refused "gpu-cluster: $GPU_CLUSTER_HOST: etcd-quorum: NODE_NAME is not a node name: 'c1;reboot'" \
    "NODE_ADDRESS is not an IPv4 address: '10.20.0.256'" \
    "EXPECTED_MEMBERS must be a member count from 1 to 7, got '9'" || return 1
  unset NODE_NAME NODE_ADDRESS EXPECTED_MEMBERS
  run_script "$DISTRIBUTION/etcd-quorum.sh"
  assert_refused "etcd-quorum: missing required environment variable(s): NODE_NAME" \
    "missing required environment variable(s): NODE_ADDRESS" \
    "missing required environment variable(s): EXPECTED_MEMBERS"
}

@test "k0s: a healthy three-member cluster passes, and a second run changes nothing" {
  k0s_etcd
  check_healthy_three
}

@test "k0s: one unhealthy member is refused, named" {
  k0s_etcd
  check_one_unhealthy
}

@test "k0s: a missing member is refused" {
  k0s_etcd
  check_missing_member
}

@test "k0s: five members with one down is refused" {
  k0s_etcd
  check_five_one_down
}

@test "k0s: controllers being added or removed: the healthy members listed decide" {
  k0s_etcd
  check_growing_and_shrinking
}

@test "k0s: this controller not among the members is refused" {
  k0s_etcd
  check_not_a_member
}

@test "k0s: no leader here is refused" {
  k0s_etcd
  check_no_quorum
}

@test "k0s: bad inputs are named, all at once, before any command" {
  k0s_etcd
  check_bad_inputs
}

@test "k0s: a controller not installed yet has no member to take down" {
  k0s_etcd
  check_not_installed /etc/systemd/system/k0scontroller.service
}

@test "rke2: a healthy three-member cluster passes, and a second run changes nothing" {
  rke2_etcd
  check_healthy_three
}

@test "rke2: one unhealthy member is refused, named" {
  rke2_etcd
  check_one_unhealthy
}

@test "rke2: a missing member is refused" {
  rke2_etcd
  check_missing_member
}

@test "rke2: five members with one down is refused" {
  rke2_etcd
  check_five_one_down
}

@test "rke2: controllers being added or removed: the healthy members listed decide" {
  rke2_etcd
  check_growing_and_shrinking
}

@test "rke2: this controller not among the members is refused" {
  rke2_etcd
  check_not_a_member
}

@test "rke2: no leader here is refused" {
  rke2_etcd
  check_no_quorum
}

@test "rke2: bad inputs are named, all at once, before any command" {
  rke2_etcd
  check_bad_inputs
}

@test "rke2: a server not installed yet has no member to take down" {
  rke2_etcd
  check_not_installed /etc/rancher/rke2/rke2.yaml
}
