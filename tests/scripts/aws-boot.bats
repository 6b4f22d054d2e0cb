#!/usr/bin/env bats
# What EC2 instances run at first boot: aws/install-ssh-host-key.sh, aws/watch-termination.sh,
# and the runner each user-data part ends with (boot/run-step.sh).

bats_require_minimum_version 1.5.0
load helpers

HOST_KEY=$'-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAABG5vbmUAAAAEbm9uZQAAAAAAAAABAAAAMwAAAAtzc2gtZW\n-----END OPENSSH PRIVATE KEY-----'
PUBLIC_KEY='ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIMb3pnsZ9cUU7W2PkbqsH2S6EkaZqj2ZcTzZkwMGl+0p'

setup() {
  setup_host
  export AWS_REGION=us-west-2
  export_ssm_reader
}

host_key_step() {
  export SSH_HOST_KEY_SSM_PARAMETER=/gpu-cluster/dev/control-plane/ssh-host-key \
    SSH_HOST_PUBLIC_KEY="$PUBLIC_KEY"
  ssm_parameter us-west-2 /gpu-cluster/dev/control-plane/ssh-host-key "$HOST_KEY"
}

@test "install-ssh-host-key: installs the key read from SSM and restarts sshd once" {
  host_key_step
  run_script aws/install-ssh-host-key.sh
  assert_success
  assert_file /etc/ssh/ssh_host_ed25519_key "$HOST_KEY"
  assert_mode /etc/ssh/ssh_host_ed25519_key 600
  assert_file /etc/ssh/ssh_host_ed25519_key.pub "$PUBLIC_KEY"
  assert_mode /etc/ssh/ssh_host_ed25519_key.pub 644
  assert_called '^systemctl try-restart ssh\.service$'
  assert_output_contains "SSH host key installed: ssh-ed25519"
  assert_idempotent aws/install-ssh-host-key.sh
}

@test "install-ssh-host-key: the private key never shows in output or command lines" {
  host_key_step
  export STUB_RECORD_ENV=1
  run --separate-stderr bash "$SCRIPTS_DIR/aws/install-ssh-host-key.sh"
  assert_success
  [[ "$output$stderr" != *"b3BlbnNzaC1rZXktdjEAAAAABG5vbmUA"* ]]
  refute_file_contains "$STUB_CALLS" "b3BlbnNzaC1rZXktdjEAAAAABG5vbmUA"
  refute_file_contains "$STUB_STATE/env.log" "b3BlbnNzaC1rZXktdjEAAAAABG5vbmUA"
}

@test "install-ssh-host-key: refuses what is not an OpenSSH key, changing nothing" {
  host_key_step
  ssm_parameter us-west-2 /gpu-cluster/dev/control-plane/ssh-host-key "not a key"
  run_script aws/install-ssh-host-key.sh
  assert_failure
  assert_output_contains "moscow: install-ssh-host-key: SSM parameter /gpu-cluster/dev/control-plane/ssh-host-key does not hold an OpenSSH private key"
  [ ! -e "$GPU_CLUSTER_ROOT/etc/ssh/ssh_host_ed25519_key" ]
  refute_called '^systemctl'
}

@test "install-ssh-host-key: names every bad input at once" {
  export SSH_HOST_KEY_SSM_PARAMETER='bad name' SSH_HOST_PUBLIC_KEY='ssh-rsa AAAA'
  run_script aws/install-ssh-host-key.sh
  assert_failure
  assert_output_contains "SSH_HOST_PUBLIC_KEY is not an ssh-ed25519 public key: 'ssh-rsa AAAA'" \
    "SSH_HOST_KEY_SSM_PARAMETER is not an SSM parameter name"
}

watch_step() {
  NODE_CLEANUP_AGENT="$(<"$SCRIPTS_DIR/aws/node-cleanup-agent.sh")"
  export NODE_CLEANUP_AGENT NODE_CLEANUP_KUBECONFIG_PARAMETER=/gpu-cluster/dev/node-cleanup/kubeconfig \
    BOOT_STATUS_PARAMETER=/gpu-cluster/dev/boot-status/a10g KUBECTL="k0s kubectl" \
    SSM_CLIENT=/var/lib/gpu-cluster/boot/ssm-parameter.py
}

@test "watch-termination: installs the agent, its settings and unit, and starts it" {
  watch_step
  run_script aws/watch-termination.sh
  assert_success
  assert_file /usr/local/libexec/gpu-cluster/node-cleanup-agent "$NODE_CLEANUP_AGENT"
  assert_mode /usr/local/libexec/gpu-cluster/node-cleanup-agent 755
  assert_mode /etc/gpu-cluster/node-cleanup.env 600
  grep -qx 'KUBECTL="k0s kubectl"' "$GPU_CLUSTER_ROOT/etc/gpu-cluster/node-cleanup.env"
  grep -qx 'ExecStart=/usr/local/libexec/gpu-cluster/node-cleanup-agent' \
    "$GPU_CLUSTER_ROOT/etc/systemd/system/gpu-cluster-node-cleanup.service"
  assert_call_order '^systemctl daemon-reload$' '^systemctl enable gpu-cluster-node-cleanup\.service$' \
    '^systemctl restart gpu-cluster-node-cleanup\.service$'
  assert_idempotent aws/watch-termination.sh
}

@test "watch-termination: a kubectl by absolute path (RKE2's) is kept quoted" {
  watch_step
  export KUBECTL=/var/lib/rancher/rke2/bin/kubectl
  run_script aws/watch-termination.sh
  assert_success
  grep -qx 'KUBECTL="/var/lib/rancher/rke2/bin/kubectl"' "$GPU_CLUSTER_ROOT/etc/gpu-cluster/node-cleanup.env"
}

@test "watch-termination: a kubectl path with a relative part or quotes is refused" {
  watch_step
  for bad in 'bin/kubectl' '/usr/bin/kubectl"x' '/opt/kube ctl/$x'; do
    export KUBECTL="$bad"
    run_script aws/watch-termination.sh
    assert_failure
    assert_output_contains "KUBECTL is not a command with plain words"
  done
}

@test "watch-termination: names every bad input at once" {
  watch_step
  export KUBECTL='k0s kubectl; reboot' SSM_CLIENT=relative/path AWS_REGION=mars
  unset NODE_CLEANUP_AGENT
  run_script aws/watch-termination.sh
  assert_failure
  assert_output_contains "missing required environment variable(s): NODE_CLEANUP_AGENT" \
    "KUBECTL is not a command with plain words: 'k0s kubectl; reboot'" \
    "SSM_CLIENT is not an absolute path: 'relative/path'" "AWS_REGION is not a region name: 'mars'"
  refute_called '^systemctl'
}

# part STEP PREVIOUS LAST BODY: a user-data part as the program renders it: the inputs,
# the step as gpu_cluster_create, then the runner.
part() {
  local file="$BATS_TEST_TMPDIR/$1.sh"
  {
    echo '#!/bin/bash'
    printf 'export GPU_CLUSTER_HOST=a10g GPU_CLUSTER_STEP=%s BOOT_PREVIOUS_STEP=%s BOOT_LAST_STEP=%s\n' \
      "$1" "$2" "$3"
    echo 'export BOOT_STATUS_PARAMETER=/gpu-cluster/dev/boot-status/a10g AWS_REGION=us-west-2'
    printf 'gpu_cluster_create() {\nset -Eeuo pipefail\n%s\n}\n' "$4"
    cat "$SCRIPTS_DIR/boot/run-step.sh"
    echo gpu_cluster_boot_step
  } >"$file"
  chmod +x "$file"
  echo "$file"
}

status() {
  cat "$STUB_STATE/ssm/us-west-2/%2Fgpu-cluster%2Fdev%2Fboot-status%2Fa10g%2Fi-0123456789abcdef0"
}

@test "boot runner: steps run in order, each records its completion, the last one ready" {
  local first second
  first="$(part prepare-host '' false 'echo prepared')"
  second="$(part join-worker prepare-host true 'echo joined')"
  run "$first"
  assert_success
  [ -e "$GPU_CLUSTER_ROOT/var/lib/gpu-cluster/boot/prepare-host.done" ]
  # The first part keeps the SSM client for the others, on the host, for root only.
  [ "$(<"$GPU_CLUSTER_ROOT/var/lib/gpu-cluster/boot/ssm-parameter.py")" == "$SSM_READER" ]
  [ "$(stat -c %a "$GPU_CLUSTER_ROOT/var/lib/gpu-cluster/boot")" == 700 ]
  [ "$(status)" == "prepare-host: running" ]
  unset SSM_READER
  run "$second"
  assert_success
  assert_output_contains "joined" "gpu-cluster: a10g: join-worker: boot step completed"
  [ "$(status)" == ready ]
}

@test "boot runner: a failed step says so, records it, and the next one refuses" {
  local first second
  first="$(part prepare-host '' false 'echo starting; false; echo never')"
  second="$(part join-worker prepare-host true 'echo joined')"
  run "$first"
  [ "$status" -eq 1 ]
  refute_output_contains never
  assert_output_contains "gpu-cluster: a10g: prepare-host: FAILED with exit code 1; the later boot steps will not run"
  [ "$(status)" == "prepare-host: failed with exit code 1" ]
  unset SSM_READER
  run "$second"
  [ "$status" -eq 1 ]
  refute_output_contains joined
  assert_output_contains "gpu-cluster: a10g: join-worker: not run: the step before it, prepare-host, did not complete"
  [ "$(status)" == "prepare-host: failed with exit code 1" ]
}

@test "boot runner: a status that cannot be written does not fail the step" {
  local first
  first="$(part prepare-host '' true 'echo prepared')"
  export STUB_FAIL_CALL='^python3 - put'
  run "$first"
  assert_success
  assert_output_contains "warning: could not record the boot status 'ready' in SSM"
}

@test "boot runner: a step that reboots defers the later ones to the next boot, which skips what was done" {
  local prepare reboot join
  export CLOUD_INIT_DIR="$BATS_TEST_TMPDIR/cloud"
  mkdir -p "$CLOUD_INIT_DIR/instance/sem"
  : >"$CLOUD_INIT_DIR/instance/sem/config_scripts_user"
  prepare="$(part prepare-host '' false 'echo prepared')"
  # As reboot-if-needed leaves it once the reboot is scheduled (expanded by the part).
  # shellcheck disable=SC2016
  reboot="$(part reboot-if-needed prepare-host false 'mkdir -p "$GPU_CLUSTER_ROOT/var/lib/gpu-cluster/reboot"; cat "$GPU_CLUSTER_ROOT/proc/sys/kernel/random/boot_id" >"$GPU_CLUSTER_ROOT/var/lib/gpu-cluster/reboot/boot-id-before"')"
  join="$(part join-worker reboot-if-needed true 'echo joined')"
  run "$prepare"
  assert_success
  unset SSM_READER
  run "$reboot"
  assert_success
  # cloud-init will run the parts again at the next boot.
  [ ! -e "$CLOUD_INIT_DIR/instance/sem/config_scripts_user" ]
  [ "$(status)" == "reboot-if-needed: rebooting; the next steps run after it" ]
  run "$join"
  assert_success
  refute_output_contains joined
  assert_output_contains "gpu-cluster: a10g: join-worker: runs after the reboot under way"

  # The next boot.
  echo 2b9e1c4d-5a6f-4e7d-8c9b-0a1b2c3d4e5f >"$GPU_CLUSTER_ROOT/proc/sys/kernel/random/boot_id"
  run "$prepare"
  assert_success
  refute_output_contains prepared
  assert_output_contains "gpu-cluster: a10g: prepare-host: completed in an earlier boot"
  run "$reboot"
  assert_output_contains "gpu-cluster: a10g: reboot-if-needed: completed in an earlier boot"
  run "$join"
  assert_success
  assert_output_contains joined
  [ "$(status)" == ready ]
}

@test "watch-termination: systemd accepts the unit as written" {
  watch_step
  run_script aws/watch-termination.sh
  assert_success
  assert_unit_verifies /etc/systemd/system/gpu-cluster-node-cleanup.service
}
