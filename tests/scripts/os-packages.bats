#!/usr/bin/env bats
# components/scripts/os/lib.sh: the steps' packages, installed and queried the family's
# way (apt-get and dpkg-query on Ubuntu, dnf and rpm on EL9, all stubbed: stubs/stub), under
# the names its table gives each family; and steps that install one, run against an EL9
# root (an os-release fixture of tests/scripts/os-release/) from start to end.

bats_require_minimum_version 1.5.0
load helpers
load helpers/envelopes

# How os/lib.sh runs dnf, as a regular expression.
DNF='dnf -y --setopt=exit_on_lock=False'

setup() {
  setup_host
  export GPU_CLUSTER_STEP=os-test
}

# packages CODE: runs CODE in a bash that sourced os/lib.sh (and so os/lib.sh, lib.sh).
packages() {
  run_library os/lib.sh "$1"
}

@test "os/lib.sh: EL9 installs what is missing with dnf in one transaction, logging each" {
  set_os_release rocky-9.4
  installed_rpm chrony 4.5-1.el9
  packages 'os_install_packages chrony nfs-client nftables'
  assert_success
  [[ "$(grep -c '^dnf' "$STUB_CALLS")" == 1 ]]
  assert_called "^$DNF install nfs-utils nftables$"
  assert_called '^rpm -q --quiet chrony$'
  refute_called '^(apt-get|dpkg-query)'
  assert_output_contains "gpu-cluster: moscow: os-test: chrony is already installed" \
    "gpu-cluster: moscow: os-test: changed: installed nfs-utils" \
    "gpu-cluster: moscow: os-test: changed: installed nftables"
  [[ "$(<"$STUB_STATE/rpm/nfs-utils")" == 1.0-1.el9 ]]
}

@test "os/lib.sh: a second run installs nothing and says so, on EL9 and on Ubuntu" {
  local release
  for release in almalinux-9.4 ubuntu-24.04; do
    set_os_release "$release"
    packages 'os_install_packages nfs-client keepalived'
    assert_success
    reset_calls
    packages 'os_install_packages nfs-client keepalived'
    assert_success
    assert_no_state_changes
    refute_changes_logged
    [[ "$output" == *"is already installed"*"keepalived is already installed" ]]
  done
}

@test "os/lib.sh: Ubuntu installs with apt-get as the steps always did: the lists updated once" {
  installed_package chrony 4.5-1ubuntu4
  packages 'os_install_packages chrony nfs-client; os_install_packages --no-recommends nftables'
  assert_success
  [[ "$(grep -c "^$APT update$" "$STUB_CALLS")" == 1 ]]
  assert_called "^$APT install -y nfs-common$"
  assert_called "^$APT install -y --no-install-recommends nftables$"
  assert_call_order "^$APT update$" "^$APT install -y nfs-common$"
  refute_called '^(dnf|rpm)'
  assert_output_contains "gpu-cluster: moscow: os-test: chrony is already installed" \
    "gpu-cluster: moscow: os-test: changed: installed nfs-common" \
    "gpu-cluster: moscow: os-test: changed: installed nftables"
}

@test "os/lib.sh: --no-recommends leaves out EL9's weak dependencies" {
  set_os_release rhel-9.4
  packages 'os_install_packages --no-recommends keepalived'
  assert_success
  assert_called "^$DNF install --setopt=install_weak_deps=False keepalived$"
}

@test "os/lib.sh: the names map to each family's package; EL9's one NFS package is installed once" {
  local code='for name in nfs-client nfs-server iptables ping openvpn keepalived chrony; do
    os_package "$name"; printf "%s=%s " "$name" "$OS_PACKAGE"; done'
  packages "$code"
  assert_success
  [[ "$output" == "nfs-client=nfs-common nfs-server=nfs-kernel-server iptables=iptables ping=iputils-ping openvpn=openvpn keepalived=keepalived chrony=chrony " ]]
  set_os_release rocky-9.4
  packages "$code"
  assert_success
  [[ "$output" == "nfs-client=nfs-utils nfs-server=nfs-utils iptables=iptables-nft ping=iputils openvpn=openvpn keepalived=keepalived chrony=chrony " ]]
  packages 'os_install_packages nfs-client nfs-server'
  assert_success
  assert_called "^$DNF install nfs-utils$"
  [[ "$(grep -c 'changed: installed nfs-utils' <<<"$output")" == 1 ]]
}

@test "os/lib.sh: a name the table does not have is refused, naming host and step" {
  packages 'os_install_packages nfs-client nfs-common'
  assert_failure
  [[ "$output" == "gpu-cluster: moscow: os-test: no package named 'nfs-common' in os/lib.sh's table (OS_PACKAGES)" ]]
  refute_called '^apt-get'
}

@test "os/lib.sh: a failing dnf names host, step and packages; nothing is installed" {
  set_os_release rocky-9.4
  STUB_FAIL_CALL='^dnf ' packages 'os_install_packages nfs-client nftables; echo not reached'
  assert_failure
  assert_output_contains "gpu-cluster: moscow: os-test: dnf could not install nfs-utils nftables (exit code 1)"
  refute_output_contains "not reached" "changed: installed"
  [[ ! -e "$STUB_STATE/rpm/nfs-utils" ]]
}

@test "os/lib.sh: openvpn without EPEL: dnf's failure says EPEL has it" {
  set_os_release rocky-9.4
  STUB_DNF_NO_MATCH=openvpn packages 'os_install_packages openvpn iptables'
  assert_failure
  assert_output_contains "No match for argument: openvpn" \
    "gpu-cluster: moscow: os-test: dnf could not install openvpn iptables-nft (exit code 1); openvpn is in EPEL, not in the distribution's own repositories: set gpu-cluster:packages.epel to true for the program to enable EPEL and CRB, or enable EPEL on the host (https://docs.fedoraproject.org/en-US/epel/)"
  [[ ! -e "$STUB_STATE/rpm/iptables-nft" ]]
}

@test "os/lib.sh: installed and version, the family's way" {
  installed_package nfs-common 1:2.6.4-3ubuntu5
  packages 'os_package_installed nfs-client && os_package_version nfs-client; echo
    os_package_installed keepalived || echo "no keepalived: [$(os_package_version keepalived)]"'
  assert_success
  [[ "$output" == $'1:2.6.4-3ubuntu5\nno keepalived: []' ]]
  set_os_release rocky-9.4
  installed_rpm nfs-utils 2.5.4-27.el9
  packages 'os_package_installed nfs-server && os_package_version nfs-server
    os_package_installed keepalived || echo "no keepalived: [$(os_package_version keepalived)]"'
  assert_success
  [[ "$output" == $'2.5.4-27.el9\nno keepalived: []' ]]
  assert_called "^rpm -q --queryformat %\\{VERSION\\}-%\\{RELEASE\\}\\\\n nfs-utils$"
}

@test "serve-nfs on an EL9 root: nfs-utils from dnf, the export, nfs-server on; a second run changes nothing" {
  set_os_release rocky-9.4
  export GPU_CLUSTER_STEP=serve-nfs NFS_EXPORT_PATH=/srv/nfs/gpu-cluster \
    NFS_CLIENT_CIDRS="192.168.10.11/32" NFS_EXPORT_OPTIONS="$(nfs_export_options)"
  run_script serve-nfs.sh
  assert_success
  assert_called '^rpm -q --quiet nfs-utils$'
  assert_called "^$DNF install nfs-utils$"
  refute_called '^(apt-get|dpkg-query)'
  assert_call_order "^$DNF install nfs-utils$" '^exportfs -ra$'
  assert_call_order '^exportfs -ra$' '^systemctl enable --now nfs-server$'
  assert_file /etc/exports.d/gpu-cluster.exports "# Managed by gpu-cluster (serve-nfs); changes are overwritten.
# Shared storage of the cluster, exported to its nodes' addresses, root squashed.
\"/srv/nfs/gpu-cluster\" 192.168.10.11/32($NFS_EXPORT_OPTIONS)"
  assert_output_contains "gpu-cluster: moscow: serve-nfs: changed: installed nfs-utils" \
    "gpu-cluster: moscow: serve-nfs: changed: enabled and started nfs-server"
  assert_idempotent serve-nfs.sh
  assert_output_contains "gpu-cluster: moscow: serve-nfs: nfs-utils is already installed"
}

@test "configure-time on an EL9 root: chrony for NTS from dnf; a second run installs nothing" {
  set_os_release almalinux-9.4
  export GPU_CLUSTER_STEP=configure-time NTP_SERVERS=ntp1.example.com NTS=true
  run_script configure-time.sh
  assert_success
  assert_called "^$DNF install chrony$"
  assert_call_order "^$DNF install chrony$" '^systemctl try-restart chronyd.service$'
  assert_output_contains "installing chrony: time.nts needs it (systemd-timesyncd has no NTS)" \
    "changed: installed chrony"
  assert_idempotent configure-time.sh
  refute_called '^(dnf|apt-get)'
}

# render_prepare_host: prepare-host's envelope for host moscow, the NFS client requested.
render_prepare_host() {
  "$PYTHON" "$TESTS_DIR/render_envelope.py" moscow prepare-host prepare-host.sh \
    DISABLE_IOMMU=false DISABLE_CPU_MITIGATIONS=false INOTIFY_MAX_USER_INSTANCES=8192 \
    INOTIFY_MAX_USER_WATCHES=1048576 INSTALL_NFS_CLIENT=true >"$ENVELOPE"
}

@test "check on an EL9 root: prepare-host in sync after create; nfs-utils removed is drift, installing nothing" {
  setup_envelope
  set_os_release rocky-9.4
  render_prepare_host
  run_envelope create --separate-stderr
  assert_success
  assert_called "^$DNF install nfs-utils$"
  reset_calls
  run_envelope check --separate-stderr
  [[ "$status" == 0 && "$output" != *drift:* ]] || { echo "$output $stderr" >&2; return 1; }
  assert_called '^rpm -q --quiet nfs-utils$'
  rm "$STUB_STATE/rpm/nfs-utils"
  reset_calls
  run_envelope check --separate-stderr
  [[ "$status" == 3 ]] || { echo "$status $output $stderr" >&2; return 1; }
  [[ "$output" == "drift: the step would run: dnf install nfs-utils" ]]
  assert_no_state_changes
  [[ ! -e "$STUB_STATE/rpm/nfs-utils" ]]
}
