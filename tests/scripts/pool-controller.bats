#!/usr/bin/env bats
# What looks after the EC2 pools from the controller: the install step aws/watch-pools.sh,
# and the two services it installs, aws/pool-node-watcher.sh (forgets gone pool instances'
# boot statuses; the AWS cloud controller manager deletes their nodes) and
# aws/rotate-pool-tokens.sh (expiring join tokens into SSM). The services run here with
# their own small stubs of python3 (the AWS clients) and k0s.

bats_require_minimum_version 1.5.0
load helpers

setup() {
  setup_host
}

install_step() {
  POOL_NODE_WATCHER="$(<"$SCRIPTS_DIR/aws/pool-node-watcher.sh")"
  ROTATE_POOL_TOKENS="$(<"$SCRIPTS_DIR/aws/rotate-pool-tokens.sh")"
  EC2_INSTANCES="$(<"$SCRIPTS_DIR/aws/ec2-instances.py")"
  FORGET_BOOT_STATUSES="$(<"$SCRIPTS_DIR/aws/forget-boot-statuses.py")"
  AWS_CLIENT_TEXT="$(<"$SCRIPTS_DIR/ssm-parameter.py")"
  export POOL_NODE_WATCHER ROTATE_POOL_TOKENS EC2_INSTANCES FORGET_BOOT_STATUSES AWS_CLIENT_TEXT \
    BOOT_STATUS_PATH=/gpu-cluster/dev/boot-status \
    AWS_REGION=us-west-2 CLUSTER_NAME=dev \
    TOKEN_COMMAND="/usr/local/bin/k0s token create --role=worker --expiry" TOKEN_TTL=24h \
    ROTATE_EVERY=6h POOL_TOKEN_PARAMETERS="/gpu-cluster/dev/a10g/join-token /gpu-cluster/dev/cpu/join-token"
}

@test "watch-pools: installs both services and timers, and stores tokens before starting the timers" {
  install_step
  run_script aws/watch-pools.sh
  assert_success
  assert_file /usr/local/libexec/gpu-cluster/pool-node-watcher "$POOL_NODE_WATCHER"
  assert_mode /usr/local/libexec/gpu-cluster/pool-node-watcher 755
  assert_file /usr/local/libexec/gpu-cluster/pool-tokens "$ROTATE_POOL_TOKENS"
  assert_file /usr/local/libexec/gpu-cluster/forget-boot-statuses.py "$FORGET_BOOT_STATUSES"
  grep -qx 'BOOT_STATUS_PATH=/gpu-cluster/dev/boot-status' \
    "$GPU_CLUSTER_ROOT/etc/gpu-cluster/pool-node-watcher.env"
  assert_mode /etc/gpu-cluster/pool-node-watcher.env 600
  # No Kubernetes credential for the watcher, nor anything that would use one.
  [ ! -e "$GPU_CLUSTER_ROOT/etc/gpu-cluster/pool-node-watcher.kubeconfig" ]
  refute_file_contains "$GPU_CLUSTER_ROOT/etc/gpu-cluster/pool-node-watcher.env" 'KUBE'
  assert_mode /etc/gpu-cluster/pool-tokens.env 600
  grep -qx 'TOKEN_TTL=24h' "$GPU_CLUSTER_ROOT/etc/gpu-cluster/pool-tokens.env"
  grep -qx 'OnUnitActiveSec=6h' "$GPU_CLUSTER_ROOT/etc/systemd/system/gpu-cluster-pool-tokens.timer"
  grep -qx 'OnUnitActiveSec=60s' "$GPU_CLUSTER_ROOT/etc/systemd/system/gpu-cluster-pool-node-watcher.timer"
  assert_call_order '^systemctl start gpu-cluster-pool-tokens\.service$' \
    '^systemctl enable gpu-cluster-pool-node-watcher\.timer gpu-cluster-pool-tokens\.timer$'
  assert_output_contains \
    "the AWS cloud controller manager deletes the pool nodes of gone instances; pool join tokens expire after 24h"
  assert_idempotent aws/watch-pools.sh
}

@test "watch-pools: systemd accepts the units as written" {
  install_step
  run_script aws/watch-pools.sh
  assert_success
  local unit
  for unit in gpu-cluster-pool-node-watcher gpu-cluster-pool-tokens; do
    assert_unit_verifies "/etc/systemd/system/$unit.service"
    assert_unit_verifies "/etc/systemd/system/$unit.timer"
  done
}

@test "watch-pools: names every bad input at once" {
  install_step
  export TOKEN_TTL=forever TOKEN_COMMAND='k0s token; reboot' POOL_TOKEN_PARAMETERS='/ok bad$name' \
    BOOT_STATUS_PATH='/gpu-cluster/dev/boot status'
  unset CLUSTER_NAME
  run_script aws/watch-pools.sh
  assert_failure
  assert_output_contains "missing required environment variable(s): CLUSTER_NAME" \
    "TOKEN_TTL is not a duration such as 24h or 90m: 'forever'" \
    "TOKEN_COMMAND is not a command with plain words: 'k0s token; reboot'" \
    "POOL_TOKEN_PARAMETERS holds a name that is not an SSM parameter name: 'bad\$name'" \
    "BOOT_STATUS_PATH is not an SSM parameter path: '/gpu-cluster/dev/boot status'"
  refute_called '^systemctl'
}

@test "watch-pools: removes the watcher's kubeconfig an older release left on the controller" {
  install_step
  # What an older release left on a k0s controller: the watcher's own credential (its
  # client certificate, bound to get, list and delete nodes) and an env file naming it.
  mkdir -p "$GPU_CLUSTER_ROOT/etc/gpu-cluster"
  printf 'apiVersion: v1\nkind: Config\nusers:\n- name: pool-node-watcher\n' \
    >"$GPU_CLUSTER_ROOT/etc/gpu-cluster/pool-node-watcher.kubeconfig"
  chmod 0600 "$GPU_CLUSTER_ROOT/etc/gpu-cluster/pool-node-watcher.kubeconfig"
  printf '%s\n' AWS_REGION=us-west-2 CLUSTER_NAME=dev POOL_LABEL=gpu-cluster/pool \
    'KUBECTL="k0s kubectl"' KUBECONFIG_FILE=/etc/gpu-cluster/pool-node-watcher.kubeconfig \
    >"$GPU_CLUSTER_ROOT/etc/gpu-cluster/pool-node-watcher.env"
  run_script aws/watch-pools.sh
  assert_success
  [ ! -e "$GPU_CLUSTER_ROOT/etc/gpu-cluster/pool-node-watcher.kubeconfig" ]
  assert_output_contains "changed: removed /etc/gpu-cluster/pool-node-watcher.kubeconfig"
  refute_file_contains "$GPU_CLUSTER_ROOT/etc/gpu-cluster/pool-node-watcher.env" 'KUBE'
  # The second run changes nothing: the file stays absent, no unit restarts.
  assert_idempotent aws/watch-pools.sh
  assert_output_contains "unchanged: /etc/gpu-cluster/pool-node-watcher.kubeconfig is absent"
}

# agent_stubs: python3 (forget-boot-statuses.py: the statuses it deleted, or a failure;
# ssm-parameter.py put-secret: stdin recorded; anything else recorded only) and k0s
# (token create; anything else fails).
agent_stubs() {
  AGENT_BIN="$BATS_TEST_TMPDIR/agent-bin"
  mkdir -p "$AGENT_BIN"
  cat >"$AGENT_BIN/python3" <<'STUB'
#!/bin/bash
printf 'python3 %s\n' "$*" >>"$STUB_CALLS"
case "$1" in
  */forget-boot-statuses.py) [[ -z "${FORGET_FAIL:-}" ]] || exit 1; printf '%s' "${FORGOTTEN:-}" ;;
  */ssm-parameter.py) [[ "$2" == put-secret ]] && printf '%s %s\n' "$4" "$(cat)" >>"$STUB_STATE/stored" ;;
esac
STUB
  cat >"$AGENT_BIN/k0s" <<'STUB'
#!/bin/bash
printf 'k0s %s\n' "$*" >>"$STUB_CALLS"
case "$*" in
  "token create --role=worker --expiry 24h") echo "H4sItoken$RANDOM" ;;
  *) exit 3 ;;
esac
STUB
  chmod 0755 "$AGENT_BIN/python3" "$AGENT_BIN/k0s"
  export PATH="$AGENT_BIN:$PATH" AWS_REGION=us-west-2 CLUSTER_NAME=dev \
    AWS_CLIENT=/usr/local/libexec/gpu-cluster/ssm-parameter.py \
    EC2_CLIENT=/usr/local/libexec/gpu-cluster/ec2-instances.py \
    BOOT_STATUS_CLIENT=/usr/local/libexec/gpu-cluster/forget-boot-statuses.py \
    BOOT_STATUS_PATH=/gpu-cluster/dev/boot-status
}

@test "pool-node-watcher: deletes the boot statuses of gone instances, and nothing in Kubernetes" {
  agent_stubs
  export FORGOTTEN=$'/gpu-cluster/dev/boot-status/a10g/i-0123456789abcdef0\n/gpu-cluster/dev/boot-status/cpu/i-0fedcba9876543210\n'
  run bash "$SCRIPTS_DIR/aws/pool-node-watcher.sh"
  assert_success
  assert_called '^python3 /usr/local/libexec/gpu-cluster/forget-boot-statuses\.py /usr/local/libexec/gpu-cluster/ssm-parameter\.py /usr/local/libexec/gpu-cluster/ec2-instances\.py us-west-2 dev /gpu-cluster/dev/boot-status$'
  assert_output_contains "2 boot status(es) of gone instances deleted"
  # The boot statuses' client is its only AWS call, and it calls no Kubernetes client.
  [ "$(grep -c '^python3 ' "$STUB_CALLS")" -eq 1 ]
  refute_called 'k0s |kubectl'
}

@test "pool-node-watcher: says so and fails when the boot statuses cannot be cleared" {
  agent_stubs
  export FORGET_FAIL=1
  run bash "$SCRIPTS_DIR/aws/pool-node-watcher.sh"
  assert_failure
  assert_output_contains \
    "could not delete the boot statuses of gone instances below /gpu-cluster/dev/boot-status"
}

@test "pool-tokens: a new expiring token for each pool, into its SSM parameter" {
  agent_stubs
  export TOKEN_COMMAND="k0s token create --role=worker --expiry" TOKEN_TTL=24h \
    POOL_TOKEN_PARAMETERS="/gpu-cluster/dev/a10g/join-token /gpu-cluster/dev/cpu/join-token"
  run bash "$SCRIPTS_DIR/aws/rotate-pool-tokens.sh"
  assert_success
  [ "$(grep -c '^k0s token create --role=worker --expiry 24h$' "$STUB_CALLS")" -eq 2 ]
  assert_called '^python3 /usr/local/libexec/gpu-cluster/ssm-parameter\.py put-secret us-west-2 /gpu-cluster/dev/a10g/join-token$'
  grep -Eq '^/gpu-cluster/dev/a10g/join-token H4sItoken[0-9]+$' "$STUB_STATE/stored"
  grep -Eq '^/gpu-cluster/dev/cpu/join-token H4sItoken[0-9]+$' "$STUB_STATE/stored"
  # The token goes on stdin, never on a command line or in the log.
  refute_called 'H4sItoken'
  [[ "$output" != *H4sItoken* ]]
  assert_output_contains "stored a new join token in /gpu-cluster/dev/cpu/join-token (it expires in 24h)"
}

@test "pool-tokens: a token that cannot be made leaves the current one" {
  agent_stubs
  export TOKEN_COMMAND="k0s token create --role=worker --expiry" TOKEN_TTL=1h \
    POOL_TOKEN_PARAMETERS=/gpu-cluster/dev/a10g/join-token
  run bash "$SCRIPTS_DIR/aws/rotate-pool-tokens.sh"
  assert_failure
  assert_output_contains "could not create a join token for /gpu-cluster/dev/a10g/join-token"
  [ ! -e "$STUB_STATE/stored" ]
}
