#!/usr/bin/env bats
# configure-time.sh and configure-time-remove.sh (time.ntpServers): the clock follows the
# site's servers through the host's own daemon. The written files are read by the real
# systemd-timesyncd and chronyd, which query an NTP server on loopback in a private network
# namespace (tests/scripts/ntp_responder.py).

bats_require_minimum_version 1.5.0
load helpers

DROPIN=/etc/systemd/timesyncd.conf.d/90-gpu-cluster.conf
CHRONY=/etc/chrony/chrony.conf
MANAGED='# Managed by gpu-cluster (time.ntpServers); the original is in /var/lib/gpu-cluster/time.'
# Ubuntu's chrony.conf as the package installs it (its directives; 24.04's chrony 4.5),
# and the part of it after its sources, which configure-time.sh keeps as it is.
UBUNTU_CHRONY_SETTINGS='keyfile /etc/chrony/chrony.keys
driftfile /var/lib/chrony/chrony.drift
ntsdumpdir /var/lib/chrony
logdir /var/log/chrony
maxupdateskew 100.0
rtcsync
makestep 1 3
leapsectz right/UTC'
UBUNTU_CHRONY="confdir /etc/chrony/conf.d
pool ntp.ubuntu.com iburst maxsources 4
sourcedir /run/chrony-dhcp
sourcedir /etc/chrony/sources.d
$UBUNTU_CHRONY_SETTINGS"

# RHEL 9's chrony.conf as its package installs it: upstream's examples/chrony.conf.example2
# at chrony 4.5 with Rocky's pool (its directives), and the part after its sources.
EL9_CHRONY=/etc/chrony.conf
EL9_CHRONY_SETTINGS='driftfile /var/lib/chrony/drift
makestep 1.0 3
rtcsync
ntsdumpdir /var/lib/chrony
logdir /var/log/chrony'
EL9_CHRONY_ORIGINAL="pool 2.rocky.pool.ntp.org iburst
sourcedir /run/chrony-dhcp
$EL9_CHRONY_SETTINGS"

setup() {
  setup_host
  export NTP_SERVERS='ntp1.example.internal 192.168.2.5'
  unset NTS
}

timesyncd_host() {
  installed_package systemd-timesyncd 255.4-1ubuntu8
}

chrony_host() {
  installed_package chrony 4.5-1ubuntu4
  mkdir -p "$GPU_CLUSTER_ROOT/etc/chrony"
  printf '%s\n' "$UBUNTU_CHRONY" >"$GPU_CLUSTER_ROOT$CHRONY"
}

@test "configure-time: systemd-timesyncd gets a drop-in naming the servers, restarted only if it runs" {
  timesyncd_host
  run_script configure-time.sh
  assert_success
  assert_file "$DROPIN" "$MANAGED
[Time]
NTP=ntp1.example.internal 192.168.2.5"
  assert_mode "$DROPIN" 644
  assert_called '^systemctl try-restart systemd-timesyncd.service$'
  refute_called '^apt-get'
  [ ! -e "$GPU_CLUSTER_ROOT$CHRONY" ]
  assert_idempotent configure-time.sh
  assert_output_contains "unchanged $DROPIN"
}

@test "configure-time: chrony's file is replaced by the servers alone, without DHCP's sources; the original kept" {
  chrony_host
  run_script configure-time.sh
  assert_success
  assert_file "$CHRONY" "$MANAGED
confdir /etc/chrony/conf.d
server ntp1.example.internal iburst
server 192.168.2.5 iburst
$UBUNTU_CHRONY_SETTINGS"
  assert_file /var/lib/gpu-cluster/time/chrony.conf "$UBUNTU_CHRONY"
  assert_called '^systemctl try-restart chrony.service$'
  [ ! -e "$GPU_CLUSTER_ROOT$DROPIN" ]
  assert_idempotent configure-time.sh
}

# el9_chrony_host: a Rocky Linux 9 root whose chrony came with the image.
el9_chrony_host() {
  set_os_release rocky-9.4
  installed_rpm chrony 4.5-1.el9
  printf '%s\n' "$EL9_CHRONY_ORIGINAL" >"$GPU_CLUSTER_ROOT$EL9_CHRONY"
}

@test "configure-time on EL9: /etc/chrony.conf with the servers alone, chronyd restarted; the remove step puts it back" {
  el9_chrony_host
  cp "$GPU_CLUSTER_ROOT$EL9_CHRONY" "$BATS_TEST_TMPDIR/original"
  export NTS=true
  run_script configure-time.sh
  assert_success
  assert_file "$EL9_CHRONY" "$MANAGED
server ntp1.example.internal iburst nts
server 192.168.2.5 iburst nts
$EL9_CHRONY_SETTINGS"
  assert_file /var/lib/gpu-cluster/time/chrony.conf "$EL9_CHRONY_ORIGINAL"
  assert_called '^systemctl try-restart chronyd.service$'
  refute_called '^systemctl .*chrony\.service'
  refute_called '^(dnf|apt-get)'
  [ ! -e "$GPU_CLUSTER_ROOT$CHRONY" ]
  assert_idempotent configure-time.sh
  reset_calls
  run_script configure-time-remove.sh
  assert_success
  cmp "$BATS_TEST_TMPDIR/original" "$GPU_CLUSTER_ROOT$EL9_CHRONY"
  assert_called '^systemctl try-restart chronyd.service$'
  assert_idempotent configure-time-remove.sh
}

@test "configure-time: NTS installs chrony on a systemd-timesyncd host and marks every server nts" {
  timesyncd_host
  export NTS=true
  run_script configure-time.sh
  assert_success
  assert_call_order "^$APT update" "^$APT install -y chrony$"
  assert_call_order "^$APT install -y chrony$" '^systemctl try-restart chrony.service$'
  grep -qx 'server ntp1.example.internal iburst nts' "$GPU_CLUSTER_ROOT$CHRONY"
  grep -qx 'server 192.168.2.5 iburst nts' "$GPU_CLUSTER_ROOT$CHRONY"
  [ ! -e "$GPU_CLUSTER_ROOT$DROPIN" ]
  assert_idempotent configure-time.sh
}

@test "configure-time: a server that is not a name or an address is refused, naming host and step" {
  timesyncd_host
  export NTP_SERVERS='ntp1.example.internal $(id) -x'
  run_script configure-time.sh
  assert_failure
  assert_output_contains "gpu-cluster: moscow: configure-time: NTP_SERVERS: '\$(id)' is not a host name or an address; NTP_SERVERS: '-x' is not"
  [ ! -e "$GPU_CLUSTER_ROOT$DROPIN" ]
  export NTP_SERVERS=ntp1.example.internal NTS=maybe
  run_script configure-time.sh
  assert_failure
  assert_output_contains "configure-time: expected \"true\" or \"false\": NTS='maybe'"
}

@test "configure-time: a host with neither daemon is refused, naming host and step" {
  run_script configure-time.sh
  assert_failure
  assert_output_contains "gpu-cluster: moscow: configure-time: neither chrony nor systemd-timesyncd is installed"
  assert_no_state_changes
}

@test "configure-time: a restart that failed is retried by the next run" {
  timesyncd_host
  STUB_FAIL_CALL='^systemctl try-restart' run_script configure-time.sh
  assert_failure
  run_script configure-time.sh
  assert_success
  assert_called '^systemctl try-restart systemd-timesyncd.service$'
}

@test "configure-time-remove: puts chrony's file back byte for byte and removes the drop-in" {
  chrony_host
  cp "$GPU_CLUSTER_ROOT$CHRONY" "$BATS_TEST_TMPDIR/original"
  run_script configure-time.sh
  assert_success
  reset_calls
  run_script configure-time-remove.sh
  assert_success
  cmp "$BATS_TEST_TMPDIR/original" "$GPU_CLUSTER_ROOT$CHRONY"
  [ ! -e "$GPU_CLUSTER_ROOT/var/lib/gpu-cluster/time/chrony.conf" ]
  assert_called '^systemctl try-restart chrony.service$'
  assert_idempotent configure-time-remove.sh

  remove_stub dpkg-query && ln -s "$TESTS_DIR/stubs/stub" "$BATS_TEST_TMPDIR/bin/dpkg-query"
  rm -rf "$STUB_STATE/dpkg" && timesyncd_host
  run_script configure-time.sh
  assert_success
  reset_calls
  run_script configure-time-remove.sh
  assert_success
  [ ! -e "$GPU_CLUSTER_ROOT$DROPIN" ]
  assert_called '^systemctl try-restart systemd-timesyncd.service$'
  assert_idempotent configure-time-remove.sh
}

# in_netns SCRIPT ARGS...: bash SCRIPT in a private network and mount namespace with the
# loopback NTP server on 127.0.0.1:123; its requests are logged to $BATS_TEST_TMPDIR/ntp.log.
in_netns() {
  /usr/bin/timeout 60 /usr/bin/unshare -mn /bin/bash -c '
    set -e
    PATH=/usr/sbin:/usr/bin:/sbin:/bin
    ip link set lo up
    python3 "$1" 127.0.0.1 123 >"$2" 3>&- &
    trap "kill $!" EXIT
    for _ in $(seq 50); do grep -q listening "$2" && break; sleep 0.1; done
    shift 2
    bash -c "$1" step "${@:2}"
  ' in-netns "$TESTS_DIR/ntp_responder.py" "$BATS_TEST_TMPDIR/ntp.log" "$@"
}

@test "configure-time: the real systemd-timesyncd reads the drop-in and queries the configured server" {
  [[ "$(id -u)" == 0 ]] && unshare -mn true 2>/dev/null || skip "needs root and unshare"
  local timesyncd=/usr/lib/systemd/systemd-timesyncd
  [[ -x "$timesyncd" ]] || skip "needs systemd-timesyncd"
  timesyncd_host
  export NTP_SERVERS='127.0.0.1'
  run_script configure-time.sh
  assert_success
  # The drop-in alone in /etc/systemd, timesyncd's state folder empty (tmpfs mounts in the
  # namespace: the machine's files are left alone); debug logs name the servers it reads
  # and asks.
  run in_netns '
    mount -t tmpfs -o mode=0755 tmpfs /etc/systemd
    mount -t tmpfs -o mode=0755 tmpfs /var/lib/systemd
    mkdir /etc/systemd/timesyncd.conf.d
    cp "$1" /etc/systemd/timesyncd.conf.d/
    SYSTEMD_LOG_LEVEL=debug SYSTEMD_LOG_TARGET=console timeout 5 "$2" 2>&1 || true
  ' "$GPU_CLUSTER_ROOT$DROPIN" "$timesyncd"
  assert_output_contains "Added new system server 127.0.0.1." \
    "Connecting to time server 127.0.0.1:123 (127.0.0.1)." "stratum      : 1"
  grep -q 'request from 127.0.0.1' "$BATS_TEST_TMPDIR/ntp.log"
}

@test "configure-time: the real chronyd parses the written chrony.conf and queries only the configured server" {
  [[ "$(id -u)" == 0 ]] && unshare -mn true 2>/dev/null || skip "needs root and unshare"
  # Debian's chrony conflicts with systemd-timesyncd, which the test above runs (chrony
  # 4.3-2+deb12u3's control: "Conflicts: time-daemon", which systemd-timesyncd provides):
  # tests/debian/setup.sh unpacks it without installing it; the skip is for no apt-get only.
  local unpacked=${DEBIAN_EXTRACT_DIR:-$TESTS_DIR/../../.cache/debian}/chrony/usr/sbin/chronyd
  local chronyd=${CHRONYD:-$(command -v chronyd || echo "$unpacked")}
  if [[ ! -x "$chronyd" ]]; then
    command -v apt-get >/dev/null ||
      skip "needs chronyd: no apt-get here to unpack chrony (CHRONYD=the path of one)"
    echo "no chronyd at $unpacked: run tests/debian/setup.sh, which unpacks chrony there" >&2
    return 1
  fi
  chrony_host
  export NTP_SERVERS='127.0.0.1' NTS=true
  run_script configure-time.sh
  assert_success
  # -p: chronyd prints the configuration as it parsed it (NTS included), and stops.
  run "$chronyd" -p -f "$GPU_CLUSTER_ROOT$CHRONY"
  assert_success
  assert_output_contains "server 127.0.0.1 iburst nts"
  refute_output_contains "pool" "sourcedir"
  # Plain NTP: -Q asks the servers once and logs the clock's offset without setting it.
  export NTS=false
  run_script configure-time.sh
  assert_success
  # Its drift file, logs and pid file in tmpfs mounts of the namespace, not on the machine.
  run in_netns '
    for dir in /var/lib /var/log /run; do mount -t tmpfs -o mode=0755 tmpfs "$dir"; done
    "$2" -Q -u root -t 20 -f "$1" 2>&1
  ' "$GPU_CLUSTER_ROOT$CHRONY" "$chronyd"
  assert_success
  assert_output_contains "System clock wrong by"
  grep -q 'request from 127.0.0.1' "$BATS_TEST_TMPDIR/ntp.log"
  # EL9's file, parsed by the same chronyd (-f names it; the directives are chrony's own).
  el9_chrony_host
  run_script configure-time.sh
  assert_success
  run "$chronyd" -p -f "$GPU_CLUSTER_ROOT$EL9_CHRONY"
  assert_success
  assert_output_contains "server 127.0.0.1 iburst" "driftfile /var/lib/chrony/drift"
  refute_output_contains "pool" "sourcedir"
}
