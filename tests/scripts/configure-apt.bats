#!/usr/bin/env bats
# configure-apt.sh and configure-apt-remove.sh (packages.aptMirror): Ubuntu's sources from
# the site's mirror, read by the real apt-get (2.x) from a repository served on loopback in
# a private network namespace, still checked against the keyring at Ubuntu's path.

bats_require_minimum_version 1.5.0
load helpers

DEB822=/etc/apt/sources.list.d/ubuntu.sources
LEGACY=/etc/apt/sources.list
MANAGED='# Managed by gpu-cluster (packages.aptMirror); the original is in /var/lib/gpu-cluster/apt.'

# os_release VERSION CODENAME: the fake host's /etc/os-release, as Ubuntu ships it.
os_release() {
  printf 'PRETTY_NAME="Ubuntu %s LTS"\nNAME="Ubuntu"\nVERSION_ID="%s"\nVERSION_CODENAME=%s\nID=ubuntu\nUBUNTU_CODENAME=%s\n' \
    "$1" "$1" "$2" "$2" >"$GPU_CLUSTER_ROOT/etc/os-release"
}

setup() {
  setup_host
  os_release 24.04 noble
  mkdir -p "$GPU_CLUSTER_ROOT/etc/apt/sources.list.d"
  printf 'Types: deb\nURIs: http://archive.ubuntu.com/ubuntu/\nSuites: noble\nComponents: main\nSigned-By: /usr/share/keyrings/ubuntu-archive-keyring.gpg\n' \
    >"$GPU_CLUSTER_ROOT$DEB822"
  export UBUNTU_APT_MIRROR=https://apt.example.internal/ubuntu
}

@test "configure-apt: 24.04 reads both stanzas from the mirror, signed by Ubuntu's keyring" {
  export UBUNTU_APT_SECURITY_MIRROR=https://apt.example.internal/ubuntu-security/
  cp "$GPU_CLUSTER_ROOT$DEB822" "$BATS_TEST_TMPDIR/original"
  run_script configure-apt.sh
  assert_success
  assert_file "$DEB822" "$MANAGED
Types: deb
URIs: https://apt.example.internal/ubuntu/
Suites: noble noble-updates noble-backports
Components: main restricted universe multiverse
Signed-By: /usr/share/keyrings/ubuntu-archive-keyring.gpg

Types: deb
URIs: https://apt.example.internal/ubuntu-security/
Suites: noble-security
Components: main restricted universe multiverse
Signed-By: /usr/share/keyrings/ubuntu-archive-keyring.gpg"
  assert_mode "$DEB822" 644
  cmp "$BATS_TEST_TMPDIR/original" "$GPU_CLUSTER_ROOT/var/lib/gpu-cluster/apt/ubuntu.sources"
  assert_no_state_changes
  assert_idempotent configure-apt.sh
  assert_output_contains "unchanged $DEB822"
}

@test "configure-apt: 22.04 writes sources.list, one line per suite, security from the archive mirror" {
  os_release 22.04 jammy
  run_script configure-apt.sh
  assert_success
  assert_file "$LEGACY" "$MANAGED
deb [signed-by=/usr/share/keyrings/ubuntu-archive-keyring.gpg] https://apt.example.internal/ubuntu/ jammy main restricted universe multiverse
deb [signed-by=/usr/share/keyrings/ubuntu-archive-keyring.gpg] https://apt.example.internal/ubuntu/ jammy-updates main restricted universe multiverse
deb [signed-by=/usr/share/keyrings/ubuntu-archive-keyring.gpg] https://apt.example.internal/ubuntu/ jammy-backports main restricted universe multiverse
deb [signed-by=/usr/share/keyrings/ubuntu-archive-keyring.gpg] https://apt.example.internal/ubuntu/ jammy-security main restricted universe multiverse"
  [ ! -e "$GPU_CLUSTER_ROOT/var/lib/gpu-cluster/apt/sources.list" ]  # there was none
}

@test "configure-apt: a mirror that is not a download location is refused, naming host and step" {
  export UBUNTU_APT_MIRROR='https://apt.example.internal/ubuntu $(id)'
  cp "$GPU_CLUSTER_ROOT$DEB822" "$BATS_TEST_TMPDIR/original"
  run_script configure-apt.sh
  assert_failure
  assert_output_contains "gpu-cluster: moscow: configure-apt: UBUNTU_APT_MIRROR is not a download location"
  cmp "$BATS_TEST_TMPDIR/original" "$GPU_CLUSTER_ROOT$DEB822"
}

@test "configure-apt: another Ubuntu release is refused" {
  os_release 20.04 focal
  run_script configure-apt.sh
  assert_failure
  assert_output_contains "configure-apt: Ubuntu 20.04: apt's sources are written for 22.04 and 24.04 only"
}

@test "configure-apt-remove: puts the original back; with none, removes the file it wrote" {
  cp "$GPU_CLUSTER_ROOT$DEB822" "$BATS_TEST_TMPDIR/original"
  run_script configure-apt.sh
  assert_success
  run_script configure-apt-remove.sh
  assert_success
  cmp "$BATS_TEST_TMPDIR/original" "$GPU_CLUSTER_ROOT$DEB822"
  [ ! -e "$GPU_CLUSTER_ROOT/var/lib/gpu-cluster/apt/ubuntu.sources" ]
  assert_idempotent configure-apt-remove.sh
  os_release 22.04 jammy
  run_script configure-apt.sh
  assert_success
  run_script configure-apt-remove.sh
  assert_success
  [ ! -e "$GPU_CLUSTER_ROOT$LEGACY" ]
}

# serve_repository DIR SUITE...: an apt repository under DIR/ubuntu with an empty
# Packages index per suite and component (one package, probe-SUITE), its InRelease signed by a throwaway key
# (exported to DIR/good.gpg; another key to DIR/other.gpg).
serve_repository() {
  local dir=$1 suite component index
  shift
  export GNUPGHOME="$dir/gnupg"
  mkdir -p "$GNUPGHOME" && chmod 0700 "$GNUPGHOME"
  /usr/bin/gpg --batch --quiet --passphrase '' --quick-generate-key 'mirror <m@example.com>' ed25519 sign never 2>/dev/null
  /usr/bin/gpg --batch --export >"$dir/good.gpg"
  GNUPGHOME="$dir/gnupg-other" && mkdir -p "$GNUPGHOME" && chmod 0700 "$GNUPGHOME"
  /usr/bin/gpg --batch --quiet --passphrase '' --quick-generate-key 'other <o@example.com>' ed25519 sign never 2>/dev/null
  /usr/bin/gpg --batch --export >"$dir/other.gpg"
  export GNUPGHOME="$dir/gnupg"
  for suite in "$@"; do
    local base="$dir/ubuntu/dists/$suite"
    mkdir -p "$base"
    {
      printf 'Suite: %s\nCodename: %s\nDate: %s\nArchitectures: amd64 arm64\nComponents: main restricted universe multiverse\nSHA256:\n' \
        "$suite" "$suite" "$(LC_ALL=C date -u -R)"
      for component in main restricted universe multiverse; do
        for index in binary-amd64 binary-arm64; do
          mkdir -p "$base/$component/$index"
          printf 'Package: probe-%s\nVersion: 1\nArchitecture: %s\nFilename: pool/probe.deb\nSize: 1\nDescription: probe\n' \
            "$suite" "${index#binary-}" >"$base/$component/$index/Packages"
          printf ' %s %s %s\n' "$(sha256sum <"$base/$component/$index/Packages" | cut -c1-64)" \
            "$(stat -c %s "$base/$component/$index/Packages")" "$component/$index/Packages"
        done
      done
    } >"$base/Release"
    /usr/bin/gpg --batch --yes --clearsign -o "$base/InRelease" "$base/Release"
  done
}

# real_apt_update KEYRING: apt-get update of the fake host's sources in a private network
# and mount namespace, with KEYRING at Ubuntu's keyring path and the repository on
# 127.0.0.1:8080.
real_apt_update() {
  local state="$BATS_TEST_TMPDIR/apt"
  rm -rf "$state" && mkdir -p "$state/lists/partial" "$state/cache/archives/partial"
  : >"$state/status"
  # The server is ended with the shell (bats waits for whatever holds its fd 3).
  /usr/bin/timeout 120 /usr/bin/unshare -mn /bin/bash -c '
    set -e
    PATH=/usr/sbin:/usr/bin:/sbin:/bin
    ip link set lo up
    mount -t tmpfs tmpfs /usr/share/keyrings
    cp "$1" /usr/share/keyrings/ubuntu-archive-keyring.gpg
    (cd "$3" && exec /usr/bin/python3 -m http.server 8080 --bind 127.0.0.1 >/dev/null 2>&1 3>&-) &
    trap "kill $!" EXIT
    for _ in $(seq 50); do (exec 3<>/dev/tcp/127.0.0.1/8080) 2>/dev/null && break; sleep 0.1; done
    apt=(/usr/bin/apt-get -o Dir::Etc::sourcelist="$2/etc/apt/sources.list"
      -o Dir::Etc::sourceparts="$2/etc/apt/sources.list.d" -o Dir::State="$4"
      -o Dir::State::lists="$4/lists" -o Dir::State::status="$4/status"
      -o Dir::Cache="$4/cache" -o Debug::NoLocking=1 -o APT::Sandbox::User=root
      -o Acquire::Languages=none -o APT::Architecture=amd64 -o APT::Architectures=amd64)
    "${apt[@]}" update
    /usr/bin/apt-cache "${apt[@]:1}" policy
  ' real-apt "$1" "$GPU_CLUSTER_ROOT" "$BATS_TEST_TMPDIR/repo" "$state"
}

@test "configure-apt: the real apt-get reads the written sources from the mirror and checks Ubuntu's keyring" {
  [[ "$(id -u)" == 0 ]] && unshare -mn true 2>/dev/null || skip "needs root and unshare"
  [[ -x /usr/bin/apt-get ]] || skip "needs apt-get"
  serve_repository "$BATS_TEST_TMPDIR/repo" noble noble-updates noble-backports noble-security \
    jammy jammy-updates jammy-backports jammy-security
  local release
  for release in "24.04 noble" "22.04 jammy"; do
    # shellcheck disable=SC2086 # two words on purpose
    os_release $release
    rm -f "$GPU_CLUSTER_ROOT$DEB822"
    export UBUNTU_APT_MIRROR=http://127.0.0.1:8080/ubuntu
    run_script configure-apt.sh
    assert_success

    run real_apt_update "$BATS_TEST_TMPDIR/repo/good.gpg"
    assert_success
    local codename=${release#* }
    for suite in "$codename" "$codename-updates" "$codename-backports" "$codename-security"; do
      assert_output_contains "500 http://127.0.0.1:8080/ubuntu $suite/main amd64 Packages" \
        "500 http://127.0.0.1:8080/ubuntu $suite/multiverse amd64 Packages"
    done
    # The same mirror signed by a key that is not in the keyring at Ubuntu's path: refused.
    run real_apt_update "$BATS_TEST_TMPDIR/repo/other.gpg"
    assert_failure
    assert_output_contains "The following signatures couldn't be verified" \
      "is not signed"
  done
}
