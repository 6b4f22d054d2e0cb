# shellcheck shell=bash disable=SC2154 # status, output, lines, stderr: set by bats' run
# Shared setup for the step script tests: a fake host root (GPU_CLUSTER_ROOT) and a
# bin directory of stubs (see stubs/stub) first on PATH. Nothing here touches the
# real host or the network.

TESTS_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
REPO_ROOT="$(cd "$TESTS_DIR/../.." && pwd)"
SCRIPTS_DIR="$REPO_ROOT/components/scripts"
# The program's Python, for the tests that render steps with it (test_bats.py passes its own).
# shellcheck disable=SC2034 # used by the .bats files
PYTHON="${GPU_CLUSTER_PYTHON:-$REPO_ROOT/venv/bin/python}"
STUB_COMMANDS=(apt-get apt-mark curl df dnf dpkg-query dracut exportfs getenforce getsebool gpg grubby
  hostname id ip iptables k0s modprobe nmcli nvidia-smi ping python3 restorecon rke2
  rke2-killall.sh rke2-uninstall.sh rpm semanage setsebool sleep subscription-manager swapoff
  sysctl systemctl systemd-run timeout umount uname update-grub update-initramfs)
# How the scripts call apt-get, as a regular expression.
# shellcheck disable=SC2034 # used by the .bats files
APT='apt-get -o DPkg::Lock::Timeout=300 -o Dpkg::Options::=--force-confdef -o Dpkg::Options::=--force-confold'
# Commands whose call means the host was changed; a second run must not call them. dnf -y:
# every dnf that changes the host runs through os/lib.sh's dnf_run (queries run dnf -q).
STATE_CHANGING='^(setsebool|semanage fcontext -[am]|systemd-run|iptables -[ID]|apt-mark hold|update-grub|update-initramfs|dracut|grubby --update-kernel|sysctl --system|swapoff|modprobe|apt-get|dnf -y|subscription-manager repos|gpg (--batch )?(--yes )?--dearmor|curl|umount|exportfs|k0s (install|start|stop|reset)|k0s kubectl label|rke2-killall\.sh|rke2-uninstall\.sh|systemctl (start|restart|try-restart|reload|stop|daemon-reload|enable|disable)|ip (-4 )?route (add|replace|del|delete)|nmcli (connection (modify|up|down)|device (reapply|connect|disconnect)))( |$)'

# nfs_export_options: serve-nfs's options as the program sets them, root squashed to
# nobody (65534); on a runner that is not root, to the runner itself, whom serve-nfs may
# chown the export's folder to without privileges.
nfs_export_options() {
  local uid=65534 gid=65534
  if [[ "$(id -u)" != 0 ]]; then uid=$(id -u) gid=$(id -g); fi
  printf 'rw,sync,no_subtree_check,root_squash,anonuid=%s,anongid=%s\n' "$uid" "$gid"
}

# setup_host: fresh fake root and stubs for one test: a copy of the host the file's first
# test made (one `cp` in each test instead of some forty commands).
setup_host() {
  export GPU_CLUSTER_ROOT="$BATS_TEST_TMPDIR/root"
  export STUB_STATE="$BATS_TEST_TMPDIR/state"
  export STUB_CALLS="$STUB_STATE/calls.log"
  export GPU_CLUSTER_HOST=moscow
  # Inputs the machine running the tests may have set.
  unset GPU_CLUSTER_STEP K0S_JOIN_TOKEN K0S_JOIN_TOKEN_SSM_PARAMETER K0S_CA_KEY \
    K0S_CA_KEY_SSM_PARAMETER AWS_REGION SSM_READER RKE2_CA_KEY RKE2_CA_KEY_SSM_PARAMETER \
    RKE2_TOKEN RKE2_TOKEN_SSM_PARAMETER RKE2_AGENT_TOKEN RKE2_AGENT_TOKEN_SSM_PARAMETER \
    K0S_CLOUD_PROVIDER RKE2_CLOUD_PROVIDER K0S_CONTROL_PLANE_TAINT CONTROLLER_NODE_LABEL NODE_NAME
  # The rke2-selinux pins install-server and join-agent always get (config/versions.py).
  export RKE2_SELINUX_VERSION=0.23-1.el9 RANCHER_RPM_KEY_FINGERPRINT=C8CFF216455126E9B9C918BE925EA29AE257814A
  local template="${BATS_FILE_TMPDIR:?}/host"
  [[ -d "$template" ]] || make_host "$template"
  cp -a "$template/root" "$template/state" "$template/bin" "$BATS_TEST_TMPDIR/"
  export PATH="$BATS_TEST_TMPDIR/bin:$PATH"
  export STUB_PATH="$PATH"
}

# make_host DIR: DIR/root, the fake host (Ubuntu 24.04 with two NVIDIA GPUs), DIR/state,
# the stubs' state with no call yet, and DIR/bin, the stubs.
make_host() {
  mkdir -p "$1/state" "$1/bin"
  : >"$1/state/calls.log"
  local command
  for command in "${STUB_COMMANDS[@]}"; do
    ln -s "$TESTS_DIR/stubs/stub" "$1/bin/$command"
  done

  local r="$1/root"
  mkdir -p "$r/etc/default/grub.d" "$r/proc" "$r/sys/module" "$r/var/lib" "$r/var/run" \
    "$r/etc/systemd/system"
  cat >"$r/etc/os-release" <<'EOF'
PRETTY_NAME="Ubuntu 24.04.3 LTS"
NAME="Ubuntu"
VERSION_ID="24.04"
ID=ubuntu
EOF
  echo "BOOT_IMAGE=/vmlinuz-6.8.0-79-generic root=UUID=1b2c ro quiet splash" >"$r/proc/cmdline"
  mkdir -p "$r/proc/sys/kernel/random"
  echo 6c1d2a5e-0b61-4c1e-9d3a-1f0e2b3c4d5e >"$r/proc/sys/kernel/random/boot_id"
  printf 'Filename\t\t\t\tType\t\tSize\t\tUsed\t\tPriority\n/swap.img %s\n' \
    $'\tfile\t\t4194300\t\t0\t\t-2' >"$r/proc/swaps"
  cat >"$r/etc/fstab" <<'EOF'
UUID=1b2c / ext4 defaults 0 1
/swap.img	none	swap	sw	0	0
# /old.swap none swap sw 0 0
192.0.2.50:/export/data /mnt/shared nfs4 defaults,_netdev 0 0
EOF
  chmod 0644 "$r/etc/fstab"
  cat >"$r/proc/mounts" <<'EOF'
/dev/sda2 / ext4 rw,relatime 0 0
192.0.2.50:/export/data /mnt/shared nfs4 rw,relatime 0 0
EOF
  GPU_CLUSTER_ROOT=$r add_pci_device 0000:01:00.0 0x10de 0x030200 # GPU (3D controller)
  GPU_CLUSTER_ROOT=$r add_pci_device 0000:01:00.1 0x10de 0x040300 # its audio function: not a GPU
  GPU_CLUSTER_ROOT=$r add_pci_device 0000:02:00.0 0x10de 0x030000 # GPU (VGA controller)
  GPU_CLUSTER_ROOT=$r add_pci_device 0000:00:1f.0 0x8086 0x060100 # ISA bridge
}

# run_library LIBRARY CODE: bats' run of CODE in a bash that sourced components/scripts/LIBRARY.
run_library() {
  run bash -c 'source "$1"; eval "$2"' _ "$SCRIPTS_DIR/$1" "$2"
}

# rocky_repos CRB_ENABLED: the fake Rocky Linux 9 host's repositories, CRB on (1) or off (0), as
# rocky-repos ships rocky.repo (BaseOS and AppStream enabled, CRB not).
rocky_repos() {
  mkdir -p "$GPU_CLUSTER_ROOT/etc/yum.repos.d"
  # shellcheck disable=SC2016 # dnf's $releasever, literal in the file
  printf '[baseos]\nname=Rocky Linux $releasever - BaseOS\nenabled=1\n\n[appstream]\nname=Rocky Linux $releasever - AppStream\nenabled=1\n\n[crb]\nname=Rocky Linux $releasever - CRB\nenabled=%s\n' \
    "$1" >"$GPU_CLUSTER_ROOT/etc/yum.repos.d/rocky.repo"
}

# set_os_release NAME: the fake host's os-release is tests/scripts/os-release/NAME, as the
# distribution ships it; on the RHEL family /etc/os-release links to ../usr/lib/os-release
# (rocky-release's %install, tests/scripts/os-release/README.md).
set_os_release() {
  local root="${GPU_CLUSTER_ROOT:?}"
  rm -f "$root/etc/os-release"
  case "$1" in
    rocky-* | almalinux-* | rhel-* | centos-*)
      mkdir -p "$root/usr/lib"
      cp "$TESTS_DIR/os-release/$1" "$root/usr/lib/os-release"
      ln -s ../usr/lib/os-release "$root/etc/os-release"
      ;;
    *) cp "$TESTS_DIR/os-release/$1" "$root/etc/os-release" ;;
  esac
}

add_pci_device() {
  local dir="${GPU_CLUSTER_ROOT:?}/sys/bus/pci/devices/$1"
  mkdir -p "$dir"
  echo "$2" >"$dir/vendor"
  echo "$3" >"$dir/class"
}

# remove_stub NAME: make NAME absent from PATH (as on a host without it).
remove_stub() {
  rm -f "$BATS_TEST_TMPDIR/bin/$1"
}

# hide_command NAME: make NAME absent from PATH although the machine has it: PATH becomes
# the stubs plus a folder of links to every other command on the old PATH.
hide_command() {
  local dir dirs=() found=() links
  remove_stub "$1"
  links=$(mktemp -d "$BATS_TEST_TMPDIR/path.XXXXXX")
  IFS=: read -r -a dirs <<<"$PATH"
  for dir in "${dirs[@]}"; do
    [[ -d "$dir" && "$dir" != "$BATS_TEST_TMPDIR/bin" ]] && found+=("$dir")
  done
  # find, awk and ln rather than a loop: bats traces every command a test runs, and a
  # loop over the thousands of commands on PATH took seconds. find lists the folders in
  # PATH's order, so awk keeps the first of each name, as the shell would find it.
  find "${found[@]}" -mindepth 1 -maxdepth 1 ! -xtype d -executable ! -name "$1" \
    -printf '%f\t%p\n' | awk -F '\t' '!seen[$1]++ { print $2 }' |
    xargs -d '\n' ln -s -t "$links" --
  export PATH="$BATS_TEST_TMPDIR/bin:$links"
}

# rke2_kubectl_installed: RKE2's kubectl in its data dir (the stub; RKE2 puts it there
# when it starts: /var/lib/rancher/rke2/bin/kubectl).
rke2_kubectl_installed() {
  mkdir -p "${GPU_CLUSTER_ROOT:?}/var/lib/rancher/rke2/bin"
  ln -sf "$TESTS_DIR/stubs/stub" "$GPU_CLUSTER_ROOT/var/lib/rancher/rke2/bin/kubectl"
}

# add_route CIDR GATEWAY: the stubbed kernel routes CIDR via GATEWAY (see stubs/stub).
add_route() {
  printf '%s via %s dev eth0\n' "$1" "$2" >>"${STUB_STATE:?}/routes"
}

# nm_profile DEVICE UUID NAME [ROUTE...]: NetworkManager runs, and the profile UUID named NAME,
# with ROUTEs ("CIDR GATEWAY [METRIC]") as its ipv4.routes, is active on DEVICE, its routes
# applied (see stubs/nmcli.bash).
nm_profile() {
  local dir="${STUB_STATE:?}/nm/profile-$2"
  mkdir -p "$dir"
  printf '%s\n' "$3" >"$dir/id"
  : >"$dir/routes"
  (($# < 4)) || printf '%s\n' "${@:4}" >"$dir/routes"
  printf '%s\n' "$2" >"$STUB_STATE/nm/device-$1"
  touch "$STUB_STATE/active-NetworkManager"
  STUB_CALLS=/dev/null "$BATS_TEST_TMPDIR/bin/nmcli" device reapply "$1"
}

# ssm_parameter REGION NAME VALUE: the stubbed SSM client (`python3 - get REGION NAME`) returns
# VALUE for parameter NAME in REGION (see stubs/stub).
ssm_parameter() {
  local dir="${STUB_STATE:?}/ssm/$1"
  mkdir -p "$dir"
  printf '%s\n' "$3" >"$dir/${2//\//%2F}"
}

# assert_ssm_retried FAILURES PARAMETER: the step read PARAMETER from the stubbed SSM after
# FAILURES failed attempts, each followed by lib.sh's 6s wait (it tries 10 times).
assert_ssm_retried() {
  assert_success || return 1
  local reads waits
  reads="$(grep -c '^python3 ' "$STUB_CALLS")" waits="$(grep -cx 'sleep 6' "$STUB_CALLS")"
  if [[ "$reads" != $(($1 + 1)) || "$waits" != "$1" ]]; then
    echo "expected $(($1 + 1)) SSM reads and $1 waits, got $reads and $waits" >&2
    return 1
  fi
  assert_output_contains "warning: reading SSM parameter $2 failed (attempt $1 of 10), retrying in 6s: URLError:"
}

# assert_ssm_denied STEP WHAT PARAMETER: SSM denied every read: the step failed after 10
# attempts naming WHAT and PARAMETER, with AWS's answer, and changed nothing.
assert_ssm_denied() {
  [ "$status" -eq 1 ] || { echo "expected status 1, got $status" >&2; return 1; }
  assert_output_contains "gpu-cluster: $GPU_CLUSTER_HOST: $1: could not read $2 from SSM parameter $3 in eu-central-1 after 10 attempts; last error: HTTP 400: {\"__type\":\"AccessDeniedException\"" || return 1
  local reads waits
  reads="$(grep -c '^python3 ' "$STUB_CALLS")" waits="$(grep -c '^sleep ' "$STUB_CALLS")"
  if [[ "$reads" != 10 || "$waits" != 9 ]]; then
    echo "expected 10 SSM reads and 9 waits, got $reads and $waits" >&2
    return 1
  fi
  assert_no_state_changes
}

# k0s_join_token BOOTSTRAP_TOKEN [SERVER]: a worker join token in k0s's format (k0s
# pkg/token/kubeconfig.go and joinencode.go): the kubeconfig gzipped, in base64, holding
# SERVER (default https://10.20.0.10:6443), a CA and BOOTSTRAP_TOKEN.
k0s_join_token() {
  local ca
  ca="$(printf -- '-----BEGIN CERTIFICATE-----\nMIIBtest\n-----END CERTIFICATE-----\n' | base64 -w0)"
  printf 'apiVersion: v1\nclusters:\n- cluster:\n    server: %s\n    certificate-authority-data: %s\n  name: k0s\ncontexts:\n- context:\n    cluster: k0s\n    user: kubelet-bootstrap\n  name: k0s\ncurrent-context: k0s\nkind: Config\npreferences: {}\nusers:\n- name: kubelet-bootstrap\n  user:\n    token: %s\n' \
    "${2:-https://10.20.0.10:6443}" "$ca" "$1" | gzip -9 | base64 -w0
}

# export_ssm_reader: SSM_READER as the program passes it, the text of ssm-parameter.py
# (the stubbed python3 checks that it got that program).
export_ssm_reader() {
  SSM_READER="$(<"$SCRIPTS_DIR/ssm-parameter.py")"
  export SSM_READER
}

# installed_package NAME VERSION: dpkg-query reports NAME as installed (and, for the
# container toolkit's base package, nvidia-ctk is on PATH).
installed_package() {
  mkdir -p "${STUB_STATE:?}/dpkg"
  echo "$2" >"$STUB_STATE/dpkg/$1"
  if [[ "$1" == nvidia-container-toolkit-base ]]; then
    ln -sf "$TESTS_DIR/stubs/stub" "$BATS_TEST_TMPDIR/bin/nvidia-ctk"
  fi
}

# installed_rpm NAME VERSION-RELEASE: rpm reports NAME as installed on an EL9 host (stubs/stub
# stub_rpm).
installed_rpm() {
  mkdir -p "${STUB_STATE:?}/rpm"
  echo "$2" >"$STUB_STATE/rpm/$1"
}

# nvidia_driver_loaded VERSION: the NVIDIA driver VERSION is loaded (nvidia-smi reports it)
# and its device nodes exist, none linked in /dev/char yet: a running GPU node as NVIDIA's
# driver leaves it (see stubs/stub, load_nvidia).
nvidia_driver_loaded() {
  echo "$1" >"${STUB_STATE:?}/nvidia-driver-version"
  # The stubbed modprobe, unlogged: the test's own set-up, not a call of the script.
  STUB_CALLS=/dev/null "$BATS_TEST_TMPDIR/bin/modprobe" nvidia
}

# add_nvswitches N: N NVSwitches on the PCI bus (NVIDIA, class 0x068000), as on an HGX
# A100 board (six).
add_nvswitches() {
  local i
  for ((i = 0; i < $1; i++)); do
    add_pci_device "0000:c$i:00.0" 0x10de 0x068000
  done
}

# refute_gpu_detached: no call made systemd reload while an NVIDIA device node had no
# /dev/char link (see stubs/stub, note_reload).
refute_gpu_detached() {
  if [[ -s "$STUB_STATE/gpu-detached" ]]; then
    printf 'systemd reloaded with NVIDIA devices not linked in /dev/char:\n%s\n' \
      "$(<"$STUB_STATE/gpu-detached")" >&2
    return 1
  fi
}

# run_script [--separate-stderr] PATH [ARGS]: runs a step script standalone, as the tests
# do (with --separate-stderr, bats keeps stderr apart in $stderr).
run_script() {
  local flags=()
  [[ "$1" != --separate-stderr ]] || { flags=("$1"); shift; }
  local script=$1
  shift
  if [[ "${GPU_CLUSTER_ROOT:-}" != "$BATS_TEST_TMPDIR"/* ]]; then
    echo "run_script: call setup_host first; refusing to run against the real host" >&2
    return 1
  fi
  pin_fake_releases
  run "${flags[@]}" bash "$SCRIPTS_DIR/$script" "$@"
}

# first_run PATH: PATH ran once, successfully, and its calls are forgotten: what a test
# checks next is the second run's.
first_run() {
  run_script "$1"
  assert_success || return 1
  reset_calls
}

# pin_fake_releases: K0S_SHA256_AMD64/ARM64 and RKE2_SHA256_AMD64/ARM64 as the program
# passes them (config/versions.py RELEASE_SHA256), here the sha256 of the stub's fake release
# of K0S_VERSION and RKE2_VERSION. A test that gives its own sets FAKE_PINS=off.
# fake_sha256 k0s|rke2 VERSION: the sha256 of the stub's fake release file of VERSION.
fake_sha256() {
  "$TESTS_DIR/stubs/stub" fake-sha256 "$1" "$2"
}

pin_fake_releases() {
  [[ "${FAKE_PINS:-}" != off ]] || return 0
  local distribution version arch
  for distribution in K0S RKE2; do
    version="${distribution}_VERSION"
    [[ -n "${!version:-}" ]] || continue
    for arch in AMD64 ARM64; do
      export "${distribution}_SHA256_$arch=$(fake_sha256 "${distribution,,}" "${!version}")"
    done
  done
}

reset_calls() {
  : >"$STUB_CALLS"
}

# snapshot_root: every path below the fake root with type, mode and content hash.
snapshot_root() {
  (
    cd "${GPU_CLUSTER_ROOT:?}" || exit 1
    find . -printf '%p %y %m\n' | LC_ALL=C sort
    find . -type f -exec sha256sum {} + | LC_ALL=C sort -k 2
  )
}

assert_success() {
  if [[ "$status" -ne 0 ]]; then
    printf 'expected success, got status %s; output:\n%s\n' "$status" "$output" >&2
    return 1
  fi
}

assert_failure() {
  if [[ "$status" -eq 0 ]]; then
    printf 'expected failure, got success; output:\n%s\n' "$output" >&2
    return 1
  fi
}

# How a step fails, as lib.sh makes it fail: refused on its inputs before it runs any
# command (all problems named at once), or stopped by a failing command, with the host and
# step named (lib.sh's ERR trap).

# assert_refused TEXT...: the script exited 1 naming every TEXT, and ran no command: its
# input checks come before anything else.
assert_refused() {
  if [[ "$status" -ne 1 ]]; then
    printf 'expected exit status 1, got %s; output:\n%s\n' "$status" "$output" >&2
    return 1
  fi
  assert_output_contains "$@" || return 1
  if [[ -s "$STUB_CALLS" ]]; then
    printf 'commands ran before the refusal:\n%s\n' "$(<"$STUB_CALLS")" >&2
    return 1
  fi
}

# assert_failed_at_command STEP: the script exited 1 because a command failed, and said so
# naming the host and STEP (lib.sh's ERR trap).
assert_failed_at_command() {
  if [[ "$status" -ne 1 ]]; then
    printf 'expected exit status 1, got %s; output:\n%s\n' "$status" "$output" >&2
    return 1
  fi
  assert_output_contains "gpu-cluster: $GPU_CLUSTER_HOST: $1: command failed with exit code 1 at line"
}

# remember_root, then assert_root_unchanged: no file below the fake root was added, removed
# or changed in between.
remember_root() {
  ROOT_BEFORE="$(snapshot_root)"
}

assert_root_unchanged() {
  local after
  after="$(snapshot_root)"
  if [[ "$after" != "${ROOT_BEFORE:?call remember_root first}" ]]; then
    printf 'the host was changed:\n%s\n' "$(diff <(echo "$ROOT_BEFORE") <(echo "$after"))" >&2
    return 1
  fi
}

# assert_output_contains TEXT...: $output contains every TEXT (fixed strings).
assert_output_contains() {
  local text
  for text in "$@"; do
    if [[ "$output" != *"$text"* ]]; then
      printf 'output does not contain: %s\noutput:\n%s\n' "$text" "$output" >&2
      return 1
    fi
  done
}

refute_output_contains() {
  local text
  for text in "$@"; do
    if [[ "$output" == *"$text"* ]]; then
      printf 'output unexpectedly contains: %s\noutput:\n%s\n' "$text" "$output" >&2
      return 1
    fi
  done
}

# assert_called REGEX: some logged stub call matches the extended REGEX.
assert_called() {
  if ! grep -Eq -- "$1" "$STUB_CALLS"; then
    printf 'no call matches: %s\ncalls:\n%s\n' "$1" "$(<"$STUB_CALLS")" >&2
    return 1
  fi
}

refute_called() {
  if grep -Eq -- "$1" "$STUB_CALLS"; then
    printf 'unexpected call matching: %s\ncalls:\n%s\n' "$1" "$(grep -E -- "$1" "$STUB_CALLS")" >&2
    return 1
  fi
}

# assert_no_state_changes: no call in the log changed the host.
assert_no_state_changes() {
  refute_called "$STATE_CHANGING"
}

# assert_call_order REGEX1 REGEX2: the first call matching REGEX1 comes before the
# first call matching REGEX2.
assert_call_order() {
  local first second
  first="$(grep -En -- "$1" "$STUB_CALLS" | head -n 1 | cut -d: -f1)"
  second="$(grep -En -- "$2" "$STUB_CALLS" | head -n 1 | cut -d: -f1)"
  if [[ -z "$first" || -z "$second" || "$first" -ge "$second" ]]; then
    printf 'expected %s before %s; calls:\n%s\n' "$1" "$2" "$(<"$STUB_CALLS")" >&2
    return 1
  fi
}

# assert_file PATH CONTENT: host file PATH (below the fake root) has CONTENT.
assert_file() {
  local actual
  if [[ ! -f "$GPU_CLUSTER_ROOT$1" ]]; then
    printf 'missing file %s\n' "$1" >&2
    return 1
  fi
  actual="$(<"$GPU_CLUSTER_ROOT$1")"
  if [[ "$actual" != "$2" ]]; then
    printf 'unexpected content of %s:\n%s\n--- expected:\n%s\n' "$1" "$actual" "$2" >&2
    return 1
  fi
}

# assert_mode PATH MODE: host file PATH has octal MODE (e.g. 600).
assert_mode() {
  local actual
  actual="$(stat -c %a "$GPU_CLUSTER_ROOT$1")"
  if [[ "$actual" != "$2" ]]; then
    printf 'mode of %s is %s, expected %s\n' "$1" "$actual" "$2" >&2
    return 1
  fi
}

# assert_idempotent SCRIPT: a further run changes no file and makes no
# state-changing call, and says so.
assert_idempotent() {
  local before after
  before="$(snapshot_root)"
  reset_calls
  run_script "$1"
  assert_success
  after="$(snapshot_root)"
  if [[ "$before" != "$after" ]]; then
    printf 'second run changed the host:\n%s\n' "$(diff <(echo "$before") <(echo "$after"))" >&2
    return 1
  fi
  assert_no_state_changes
  refute_changes_logged
}

# run_again_with SCRIPT NAME=VALUE...: SCRIPT ran once (first_run), then runs again with
# the inputs NAME=VALUE changed (exported: later runs keep them).
run_again_with() {
  local script=$1
  shift
  first_run "$script" || return 1
  # shellcheck disable=SC2163 # NAME=VALUE words, exported as such
  export "$@"
  run_script "$script"
}

# run_twice SCRIPT: SCRIPT succeeds, and a second run changes nothing and says so
# (assert_idempotent); $output is the second run's.
run_twice() {
  run_script "$1"
  assert_success || return 1
  assert_idempotent "$1"
}

# refute_changes_logged: the output has no "changed ..." log line.
refute_changes_logged() {
  if grep -Eq ': changed[ :]' <<<"$output"; then
    printf 'unexpected change logged:\n%s\n' "$(grep -E ': changed[ :]' <<<"$output")" >&2
    return 1
  fi
}

# sh_quote VALUE: single-quoted shell word, like Python's shlex.quote.
sh_quote() {
  printf "'%s'" "${1//\'/\'\"\'\"\'}"
}

# refute_file_contains FILE TEXT: FILE does not contain TEXT (a fixed string). Unlike a
# bare `! grep`, which bats only checks on a test's last line, it fails the test.
refute_file_contains() {
  if grep -qF -- "$2" "$1"; then
    printf '%s unexpectedly contains: %s\n' "$1" "$2" >&2
    return 1
  fi
}

# assert_unit_verifies PATH [EXECUTABLE...]: systemd itself reads the unit (or drop-in's
# unit) at host path PATH below GPU_CLUSTER_ROOT: `systemd-analyze verify` fails on a
# command it cannot start and warns of unknown keys and bad values, so any output fails
# too. The root gets this machine's own units (the targets a unit orders itself against,
# a packaged unit a drop-in extends) and each EXECUTABLE (a host path the unit starts,
# installed by another step on a real host).
assert_unit_verifies() {
  local unit=$1 executable output
  shift
  if [[ ! -d "$GPU_CLUSTER_ROOT/usr/lib/systemd/system" ]]; then
    mkdir -p "$GPU_CLUSTER_ROOT/usr/lib/systemd"
    cp -r /usr/lib/systemd/system "$GPU_CLUSTER_ROOT/usr/lib/systemd/"
  fi
  for executable in "$@"; do
    mkdir -p "$GPU_CLUSTER_ROOT${executable%/*}"
    printf '#!/bin/sh\n' >"$GPU_CLUSTER_ROOT$executable"
    chmod 0755 "$GPU_CLUSTER_ROOT$executable"
  done
  if ! output="$(systemd-analyze verify --man=no --root="$GPU_CLUSTER_ROOT" "$unit" 2>&1)" ||
    [[ -n "$output" ]]; then
    printf 'systemd-analyze verify %s:\n%s\n' "$unit" "${output:-<failed without output>}" >&2
    return 1
  fi
}
