#!/usr/bin/env bats
# authorized-keys.sh: the block of ssh.authorizedKeys in the SSH user's authorized_keys.

bats_require_minimum_version 1.5.0
load helpers

BEGIN='# BEGIN gpu-cluster ssh.authorizedKeys: managed by gpu-cluster, changes are overwritten'
END='# END gpu-cluster ssh.authorizedKeys'
OWN='ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOwnKeyOfTheUser0000000000000000000000000 me@laptop'
NEW='ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAINewKey0000000000000000000000000000000000 ops 2026'
SECOND='ecdsa-sha2-nistp256 AAAAE2VjZHNhLXNoYTItbmlzdHAyNTYAAAAIbmlzdHAyNTYAAABBBA=='

setup() {
  # The runner's own name: chown to it needs no privileges.
  USER_NAME="$(whoami)"
  setup_host
  export SSH_USER="$USER_NAME" AUTHORIZED_KEYS="$NEW"$'\n'"$SECOND"
  # getent answers from the fake root's passwd.
  cat >"$BATS_TEST_TMPDIR/bin/getent" <<'SH'
#!/usr/bin/env bash
echo "getent $*" >>"$STUB_CALLS"
grep "^$2:" "$GPU_CLUSTER_ROOT/etc/passwd"
SH
  chmod +x "$BATS_TEST_TMPDIR/bin/getent"
  echo "$USER_NAME:x:1000:1000::/home/ops:/bin/bash" >"$GPU_CLUSTER_ROOT/etc/passwd"
  mkdir -p "$GPU_CLUSTER_ROOT/home/ops"
  mkdir -m 700 "$GPU_CLUSTER_ROOT/home/ops/.ssh"
  printf '%s\n' "$OWN" >"$GPU_CLUSTER_ROOT/home/ops/.ssh/authorized_keys"
  chmod 600 "$GPU_CLUSTER_ROOT/home/ops/.ssh/authorized_keys"
}

# assert_keys LINE...: the user's authorized_keys holds exactly the LINEs.
assert_keys() {
  assert_file /home/ops/.ssh/authorized_keys "$(printf '%s\n' "$@")"
}

@test "authorized-keys: adds the block after the user's own keys; a second run changes nothing" {
  run_script authorized-keys.sh
  assert_success
  assert_keys "$OWN" "$BEGIN" "$NEW" "$SECOND" "$END"
  assert_mode /home/ops/.ssh/authorized_keys 600
  assert_output_contains "gpu-cluster: moscow: authorized-keys: changed /home/ops/.ssh/authorized_keys"
  assert_idempotent authorized-keys.sh
}

@test "authorized-keys: a key taken out of the config leaves the block, the rest stays in place" {
  run_script authorized-keys.sh
  assert_success
  printf '%s\n' 'ssh-rsa AAAAB3NzaC1yc2EAAAADAQABAAABAQAdded by hand' \
    >>"$GPU_CLUSTER_ROOT/home/ops/.ssh/authorized_keys"
  export AUTHORIZED_KEYS="$SECOND"
  run_script authorized-keys.sh
  assert_success
  assert_keys "$OWN" "$BEGIN" "$SECOND" "$END" "ssh-rsa AAAAB3NzaC1yc2EAAAADAQABAAABAQAdded by hand"
  assert_idempotent authorized-keys.sh
}

@test "authorized-keys: an empty list empties the block only" {
  run_script authorized-keys.sh
  assert_success
  export AUTHORIZED_KEYS=""
  run_script authorized-keys.sh
  assert_success
  assert_keys "$OWN" "$BEGIN" "$END"
  assert_idempotent authorized-keys.sh
}

@test "authorized-keys: makes ~/.ssh (0700) and the file when the user has none" {
  rm -r "$GPU_CLUSTER_ROOT/home/ops/.ssh"
  run_script authorized-keys.sh
  assert_success
  assert_mode /home/ops/.ssh 700
  assert_keys "$BEGIN" "$NEW" "$SECOND" "$END"
  assert_idempotent authorized-keys.sh
}

@test "authorized-keys: a file without a final newline keeps its last key" {
  printf '%s' "$OWN" >"$GPU_CLUSTER_ROOT/home/ops/.ssh/authorized_keys"
  run_script authorized-keys.sh
  assert_success
  assert_keys "$OWN" "$BEGIN" "$NEW" "$SECOND" "$END"
}

@test "authorized-keys: refuses bad inputs all at once, naming host and step, changing nothing" {
  remember_root
  unset SSH_USER
  export AUTHORIZED_KEYS="$NEW"$'\n'"ssh-dss AAAAB3"$'\n'"ssh-ed25519 not*base64"
  run_script authorized-keys.sh
  assert_failure
  assert_output_contains "gpu-cluster: moscow: authorized-keys:" \
    "missing required environment variable(s): SSH_USER" \
    "AUTHORIZED_KEYS line 2 is not an OpenSSH public key" \
    "AUTHORIZED_KEYS line 3 is not an OpenSSH public key"
  assert_root_unchanged
}

@test "authorized-keys: an unknown user fails naming host, step and user" {
  export SSH_USER=nobody-here
  run_script authorized-keys.sh
  assert_failure
  assert_output_contains "gpu-cluster: moscow: authorized-keys: user 'nobody-here' does not exist on this host"
}

@test "authorized-keys: a begin marker without its end is refused, the file left as it was" {
  printf '%s\n%s\n' "$OWN" "$BEGIN" >"$GPU_CLUSTER_ROOT/home/ops/.ssh/authorized_keys"
  run_script authorized-keys.sh
  assert_failure
  assert_output_contains "gpu-cluster: moscow: authorized-keys: $END is missing"
  assert_keys "$OWN" "$BEGIN"
}

@test "authorized-keys: a revoked key leaves the file wherever it is, with or without options; a second run changes nothing" {
  local with_options="from=\"10.0.0.0/8\",no-pty ${OWN% *} old key"
  printf '%s\n%s\n%s\n' "$OWN" "# a comment naming ${OWN}" "$with_options" \
    >>"$GPU_CLUSTER_ROOT/home/ops/.ssh/authorized_keys"
  export REVOKED_KEYS="${OWN% *} the old laptop key"
  run_script authorized-keys.sh
  assert_success
  assert_keys "# a comment naming ${OWN}" "$BEGIN" "$NEW" "$SECOND" "$END"
  assert_output_contains "gpu-cluster: moscow: authorized-keys: removing a revoked key: ${OWN:0:40}..."
  assert_idempotent authorized-keys.sh
}

@test "authorized-keys: a key merely sharing a prefix with a revoked one stays" {
  export REVOKED_KEYS="ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOwnKeyOfTheUser"
  run_script authorized-keys.sh
  assert_success
  assert_keys "$OWN" "$BEGIN" "$NEW" "$SECOND" "$END"
}

@test "authorized-keys: a bad revoked key is refused with the others, changing nothing" {
  remember_root
  export REVOKED_KEYS="ssh-ed25519 AAAAC3"$'\n'"ssh-dss AAAAB3"
  run_script authorized-keys.sh
  assert_failure
  assert_output_contains "REVOKED_KEYS line 2 is not an OpenSSH public key"
  assert_root_unchanged
}
