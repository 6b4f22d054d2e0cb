#!/usr/bin/env bats
# components/scripts/os/lib.sh: the host's OS family from its os-release (the distributions'
# own files, tests/scripts/os-release/), and os_do, which runs the family's function.

bats_require_minimum_version 1.5.0
load helpers

setup() {
  setup_host
  export GPU_CLUSTER_STEP=os-test
}

# os_lib CODE: runs CODE in a bash that sourced os/lib.sh (and so lib.sh).
os_lib() {
  run_library os/lib.sh "$1"
}

@test "os/lib.sh: Ubuntu 22.04 and 24.04 are the ubuntu family" {
  local release
  for release in ubuntu-22.04 ubuntu-24.04; do
    set_os_release "$release"
    os_lib 'os_family; echo "cached: $OS_FAMILY"'
    assert_success
    [[ "$output" == $'ubuntu\ncached: ubuntu' ]]
  done
}

@test "os/lib.sh: Rocky Linux, AlmaLinux and RHEL 9.4 are the el9 family" {
  local release
  for release in rocky-9.4 almalinux-9.4 rhel-9.4; do
    set_os_release "$release"
    os_lib 'os_family'
    assert_success
    [[ "$output" == el9 ]]
  done
}

@test "os/lib.sh: without /etc/os-release the distribution's /usr/lib/os-release is read" {
  set_os_release rocky-9.4
  rm "$GPU_CLUSTER_ROOT/etc/os-release"
  os_lib 'os_family; os_found'
  assert_success
  [[ "$output" == $'el9\nRocky Linux 9.4 (Blue Onyx) (rocky 9.4)' ]]
}

@test "os/lib.sh: RHEL 8.10, CentOS Stream 9 and Debian 12 are refused, naming host, step and OS" {
  set_os_release rhel-8.10
  os_lib 'os_family; echo not reached'
  assert_failure
  [[ "$output" == "gpu-cluster: moscow: os-test: OS is Red Hat Enterprise Linux 8.10 (Ootpa) (rhel 8.10); supported: Ubuntu, Rocky Linux 9, AlmaLinux 9, RHEL 9" ]]
  set_os_release centos-stream-9
  os_lib 'os_family'
  assert_failure
  [[ "$output" == "gpu-cluster: moscow: os-test: OS is CentOS Stream 9 (centos 9); supported: Ubuntu, Rocky Linux 9, AlmaLinux 9, RHEL 9" ]]
  set_os_release debian-12
  os_lib 'os_do anything'
  assert_failure
  [[ "$output" == "gpu-cluster: moscow: os-test: OS is Debian GNU/Linux 12 (bookworm) (debian 12); supported: Ubuntu, Rocky Linux 9, AlmaLinux 9, RHEL 9" ]]
}

@test "os/lib.sh: a host without os-release is refused" {
  rm "$GPU_CLUSTER_ROOT/etc/os-release"
  os_lib 'os_family'
  assert_failure
  assert_output_contains "gpu-cluster: moscow: os-test: no /etc/os-release or /usr/lib/os-release: cannot tell the OS"
}

@test "os/lib.sh: os_do runs the family's function with its arguments, reading os-release once" {
  local define='ubuntu_greet() { echo "apt says $*"; }; el9_greet() { echo "dnf says $*"; }'
  set_os_release rhel-9.4
  os_lib "$define; os_do greet a 'b c'; rm \"\$ROOT/usr/lib/os-release\"; os_do greet again"
  assert_success
  [[ "$output" == $'dnf says a b c\ndnf says again' ]]
  set_os_release ubuntu-24.04
  os_lib "$define; os_do greet a"
  assert_success
  [[ "$output" == "apt says a" ]]
}

@test "os/lib.sh: os_do refuses a verb the family does not define, naming it" {
  set_os_release almalinux-9.4
  os_lib 'ubuntu_greet() { :; }; os_do greet'
  assert_failure
  [[ "$output" == "gpu-cluster: moscow: os-test: os_do: no el9_greet: greet is not written for el9 hosts" ]]
}
