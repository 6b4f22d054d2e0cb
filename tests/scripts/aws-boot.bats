#!/usr/bin/env bats
# What EC2 instances run at first boot: aws/install-ssh-host-key.sh
# and the runner of a machine's boot plan (boot/run-boot.sh).

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

# plan NAME=SCRIPT...: a boot plan (components/aws/boot.py boot_plan), each SCRIPT standing
# for a step's stdin; run_boot PLAN: boot/run-boot.sh on it, as the bootstrap runs it.
plan() {
  local file="$BATS_TEST_TMPDIR/plan" entry
  : >"$file"
  for entry in "$@"; do
    printf '%s %s\n' "${entry%%=*}" "$(printf '%s\n' "${entry#*=}" | base64 -w0)" >>"$file"
  done
  echo "$file"
}

run_boot() {
  GPU_CLUSTER_HOST=a10g BOOT_STATUS_PARAMETER=/gpu-cluster/dev/boot-status/a10g \
    bash "$SCRIPTS_DIR/boot/run-boot.sh" "$1"
}

status() {
  cat "$STUB_STATE/ssm/us-west-2/%2Fgpu-cluster%2Fdev%2Fboot-status%2Fa10g%2Fi-0123456789abcdef0"
}

@test "boot runner: steps run in order, each records its completion, the last one ready" {
  local steps
  # shellcheck disable=SC2016 # expanded by the step
  steps="$(plan 'prepare-host=echo "prepared $1"' 'join-worker=echo joined')"
  run run_boot "$steps"
  assert_success
  assert_output_contains "prepared create" "joined" \
    "gpu-cluster: a10g: prepare-host: boot step completed" \
    "gpu-cluster: a10g: join-worker: boot step completed"
  [[ "$output" == *prepared*joined* ]]
  [ -e "$GPU_CLUSTER_ROOT/var/lib/gpu-cluster/boot/prepare-host.done" ]
  # The SSM client the boot's services run, on the host, for root only.
  [ "$(<"$GPU_CLUSTER_ROOT/var/lib/gpu-cluster/boot/ssm-parameter.py")" == \
    "$(<"$SCRIPTS_DIR/ssm-parameter.py")" ]
  [ "$(stat -c %a "$GPU_CLUSTER_ROOT/var/lib/gpu-cluster/boot")" == 700 ]
  [ "$(status)" == ready ]
}

@test "boot runner: a failed step says so, records it, and the later ones do not run" {
  local steps
  steps="$(plan 'prepare-host=echo starting; exit 1; echo never' 'join-worker=echo joined')"
  run run_boot "$steps"
  [ "$status" -eq 1 ]
  refute_output_contains never
  refute_output_contains joined
  assert_output_contains "gpu-cluster: a10g: prepare-host: FAILED with exit code 1; the later boot steps will not run"
  [ "$(status)" == "prepare-host: failed with exit code 1" ]
  [ ! -e "$GPU_CLUSTER_ROOT/var/lib/gpu-cluster/boot/prepare-host.done" ]
}

@test "boot runner: a status that cannot be written does not fail the step" {
  export STUB_FAIL_CALL='^python3 - put'
  run run_boot "$(plan 'prepare-host=echo prepared')"
  assert_success
  assert_output_contains "warning: could not record the boot status 'ready' in SSM"
}

@test "boot runner: a step that reboots defers the later ones to the next boot, which skips what was done" {
  local steps
  export CLOUD_INIT_DIR="$BATS_TEST_TMPDIR/cloud"
  mkdir -p "$CLOUD_INIT_DIR/instance/sem"
  : >"$CLOUD_INIT_DIR/instance/sem/config_scripts_user"
  # As reboot-if-needed leaves it once the reboot is scheduled.
  # shellcheck disable=SC2016 # expanded by the step
  steps="$(plan 'prepare-host=echo prepared' \
    'reboot-if-needed=mkdir -p "$GPU_CLUSTER_ROOT/var/lib/gpu-cluster/reboot"; cat "$GPU_CLUSTER_ROOT/proc/sys/kernel/random/boot_id" >"$GPU_CLUSTER_ROOT/var/lib/gpu-cluster/reboot/boot-id-before"' \
    'join-worker=echo joined')"
  run run_boot "$steps"
  assert_success
  refute_output_contains joined
  # cloud-init will run the user data again at the next boot.
  [ ! -e "$CLOUD_INIT_DIR/instance/sem/config_scripts_user" ]
  [ "$(status)" == "reboot-if-needed: rebooting; the next steps run after it" ]

  # The next boot.
  echo 2b9e1c4d-5a6f-4e7d-8c9b-0a1b2c3d4e5f >"$GPU_CLUSTER_ROOT/proc/sys/kernel/random/boot_id"
  run run_boot "$steps"
  assert_success
  refute_output_contains prepared
  assert_output_contains "gpu-cluster: a10g: prepare-host: completed in an earlier boot" \
    "gpu-cluster: a10g: reboot-if-needed: completed in an earlier boot" joined
  [ "$(status)" == ready ]
}

# refuse_second_cluster_step: the first of three k0s controllers on the cloud layout.
refuse_second_cluster_step() {
  export API_ADDRESS=10.20.0.11 API_PORT=6443 CONTROLLER_FILE=/etc/systemd/system/k0scontroller.service
}

@test "refuse-second-cluster: a new stack's first controller goes on to initialise, and again" {
  refuse_second_cluster_step
  run_script aws/refuse-second-cluster.sh
  assert_success
  assert_output_contains "refuse-second-cluster: nothing answers at 10.20.0.11:6443 yet: this controller initialises the cluster"
  assert_called '^curl --silent --insecure --max-time 5 -o /dev/null --write-out %\{http_code\} https://10\.20\.0\.11:6443/livez$'
  # It asks again (curl is all it calls), and changes nothing.
  remember_root
  run_script aws/refuse-second-cluster.sh
  assert_success
  assert_root_unchanged
  refute_changes_logged
}

@test "refuse-second-cluster: a new instance under the first's name refuses while the others run" {
  refuse_second_cluster_step
  export STUB_API_ANSWERS=401
  remember_root
  run_script aws/refuse-second-cluster.sh
  assert_failure
  assert_output_contains "gpu-cluster: $GPU_CLUSTER_HOST: refuse-second-cluster: a control plane already answers at 10.20.0.11:6443 (the load balancer): this instance is a new one under the first controller's name, and initialising here would start a second cluster beside the running one. Nothing was changed"
  assert_root_unchanged
}

@test "refuse-second-cluster: the controller that runs the cluster asks nothing" {
  refuse_second_cluster_step
  mkdir -p "$GPU_CLUSTER_ROOT/etc/systemd/system"
  touch "$GPU_CLUSTER_ROOT$CONTROLLER_FILE"
  export STUB_API_ANSWERS=200
  run_script aws/refuse-second-cluster.sh
  assert_success
  assert_output_contains "refuse-second-cluster: unchanged: this controller runs the cluster (/etc/systemd/system/k0scontroller.service)"
  refute_called '^curl '
}

@test "refuse-second-cluster: bad inputs are named at once, before any call" {
  export API_ADDRESS='10.20.0.11; reboot' API_PORT=6443 CONTROLLER_FILE='relative/file'
  run_script aws/refuse-second-cluster.sh
  assert_refused "gpu-cluster: $GPU_CLUSTER_HOST: refuse-second-cluster: API_ADDRESS is not an IPv4 address: '10.20.0.11; reboot'" \
    "CONTROLLER_FILE is not an absolute path: 'relative/file'"
  refute_called '^curl '
}
