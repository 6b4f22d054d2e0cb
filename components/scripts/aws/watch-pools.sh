#!/usr/bin/env bash
# Runs on the cloud layout's controller (over SSH, after the control plane): installs the
# services that look after the EC2 pools from the control plane (below).
set -euo pipefail
# shellcheck source=../lib.sh
[[ -n "${GPU_CLUSTER_LIB_LOADED:-}" ]] || source "$(dirname "${BASH_SOURCE[0]}")/../lib.sh"
: "${GPU_CLUSTER_STEP:=watch-pools}"

# Inputs: AWS_CLIENT_TEXT AWS_REGION BOOT_STATUS_PATH CLUSTER_NAME EC2_INSTANCES FORGET_BOOT_STATUSES POOL_NODE_WATCHER POOL_TOKEN_PARAMETERS ROTATE_EVERY ROTATE_POOL_TOKENS TOKEN_COMMAND TOKEN_TTL
#   POOL_NODE_WATCHER, ROTATE_POOL_TOKENS, EC2_INSTANCES, FORGET_BOOT_STATUSES,
#   AWS_CLIENT_TEXT       the texts of pool-node-watcher.sh, rotate-pool-tokens.sh,
#                         ec2-instances.py, forget-boot-statuses.py and ssm-parameter.py.
#   BOOT_STATUS_PATH      the SSM path the instances' boot statuses are below.
#   AWS_REGION, CLUSTER_NAME
#   TOKEN_COMMAND         the distribution's command printing a new worker join token,
#                         the lifetime appended.
#   TOKEN_TTL, ROTATE_EVERY  durations (systemd and Go both read 24h, 6h, 90m).
#   POOL_TOKEN_PARAMETERS the pools' join-token SSM parameters, space-separated.
#
# Each service is run by its timer:
#   gpu-cluster-pool-node-watcher  deletes the boot statuses of pool instances that are
#                                  gone (pool-node-watcher.sh), every minute;
#   gpu-cluster-pool-tokens        stores a new expiring join token for each pool in SSM
#                                  (rotate-pool-tokens.sh), every ROTATE_EVERY.
# When anything changed, it rotates the tokens at once, before it returns: the pools'
# instances, which start only after this step, find a valid token.
# The watcher holds no Kubernetes credential: the AWS cloud controller manager deletes the
# nodes of gone instances. The kubeconfig older releases gave it (k0s) is removed.

LIBEXEC=/usr/local/libexec/gpu-cluster
ETC=/etc/gpu-cluster
WATCHER_UNIT=gpu-cluster-pool-node-watcher
TOKENS_UNIT=gpu-cluster-pool-tokens
WATCH_EVERY=60s
DURATION='^[0-9]+(s|m|h)$'

check_inputs() {
  check_missing_env POOL_NODE_WATCHER ROTATE_POOL_TOKENS EC2_INSTANCES FORGET_BOOT_STATUSES \
    AWS_CLIENT_TEXT AWS_REGION CLUSTER_NAME TOKEN_COMMAND TOKEN_TTL ROTATE_EVERY \
    POOL_TOKEN_PARAMETERS BOOT_STATUS_PATH
  local name parameter
  if [[ -n "${AWS_REGION:-}" && ! "$AWS_REGION" =~ $AWS_REGION_NAME ]]; then
    INPUT_PROBLEMS+=("AWS_REGION is not a region name: '$AWS_REGION'")
  fi
  if [[ -n "${CLUSTER_NAME:-}" && ! "$CLUSTER_NAME" =~ ^[a-z0-9]([a-z0-9-]*[a-z0-9])?$ ]]; then
    INPUT_PROBLEMS+=("CLUSTER_NAME is not a cluster name: '$CLUSTER_NAME'")
  fi
  if [[ -n "${TOKEN_COMMAND:-}" \
    && ! "$TOKEN_COMMAND" =~ ^([a-z0-9]+|(/[A-Za-z0-9_.-]+)+)( [a-z0-9/.:=-]+)*$ ]]; then
    INPUT_PROBLEMS+=("TOKEN_COMMAND is not a command with plain words: '$TOKEN_COMMAND'")
  fi
  for name in TOKEN_TTL ROTATE_EVERY; do
    if [[ -n "${!name:-}" && ! "${!name}" =~ $DURATION ]]; then
      INPUT_PROBLEMS+=("$name is not a duration such as 24h or 90m: '${!name}'")
    fi
  done
  if [[ -n "${BOOT_STATUS_PATH:-}" && ! "$BOOT_STATUS_PATH" =~ $SSM_PARAMETER_NAME ]]; then
    INPUT_PROBLEMS+=("BOOT_STATUS_PATH is not an SSM parameter path: '$BOOT_STATUS_PATH'")
  fi
  for parameter in ${POOL_TOKEN_PARAMETERS:-}; do
    if [[ ! "$parameter" =~ $SSM_PARAMETER_NAME ]]; then
      INPUT_PROBLEMS+=("POOL_TOKEN_PARAMETERS holds a name that is not an SSM parameter name: '$parameter'")
    fi
  done
  die_on_input_problems
}

# timer UNIT DESCRIPTION EVERY: a service run by UNIT.timer every EVERY, first soon after boot.
install_timer() {
  write_file "/etc/systemd/system/$1.service" 0644 <<EOT
# Managed by gpu-cluster (watch-pools); changes are overwritten.
[Unit]
Description=gpu-cluster: $2
Wants=network-online.target
After=network-online.target

[Service]
Type=oneshot
EnvironmentFile=$ETC/$4.env
ExecStart=$LIBEXEC/$4
EOT
  changed=$((changed | FILE_CHANGED))
  write_file "/etc/systemd/system/$1.timer" 0644 <<EOT
# Managed by gpu-cluster (watch-pools); changes are overwritten.
[Unit]
Description=gpu-cluster: $2, every $3

[Timer]
OnBootSec=2min
OnUnitActiveSec=$3

[Install]
WantedBy=timers.target
EOT
  changed=$((changed | FILE_CHANGED))
}

main() {
  local changed=0
  check_inputs
  local file mode input
  # Each file, its mode and the input holding its text; a change to any restarts the units.
  while read -r file mode input; do
    write_text "$file" "$mode" "${!input}"
    changed=$((changed | FILE_CHANGED))
  done <<EOT
$LIBEXEC/pool-node-watcher 0755 POOL_NODE_WATCHER
$LIBEXEC/pool-tokens 0755 ROTATE_POOL_TOKENS
$LIBEXEC/ec2-instances.py 0644 EC2_INSTANCES
$LIBEXEC/forget-boot-statuses.py 0644 FORGET_BOOT_STATUSES
$LIBEXEC/ssm-parameter.py 0644 AWS_CLIENT_TEXT
EOT
  # The watcher's own kubeconfig (get, list, delete nodes), kept by older releases on k0s,
  # goes: its ClusterRoleBinding is deleted, and the file should not outlive it.
  remove_file "$ETC/pool-node-watcher.kubeconfig"
  changed=$((changed | FILE_CHANGED))
  # systemd reads these as KEY=VALUE lines; values with spaces are quoted, all are checked
  # words without quotes.
  write_file "$ETC/pool-node-watcher.env" 0600 <<EOT
AWS_REGION=$AWS_REGION
CLUSTER_NAME=$CLUSTER_NAME
AWS_CLIENT=$LIBEXEC/ssm-parameter.py
EC2_CLIENT=$LIBEXEC/ec2-instances.py
BOOT_STATUS_CLIENT=$LIBEXEC/forget-boot-statuses.py
BOOT_STATUS_PATH=$BOOT_STATUS_PATH
EOT
  changed=$((changed | FILE_CHANGED))
  write_file "$ETC/pool-tokens.env" 0600 <<EOT
AWS_REGION=$AWS_REGION
AWS_CLIENT=$LIBEXEC/ssm-parameter.py
TOKEN_COMMAND="$TOKEN_COMMAND"
TOKEN_TTL=$TOKEN_TTL
POOL_TOKEN_PARAMETERS="$POOL_TOKEN_PARAMETERS"
EOT
  changed=$((changed | FILE_CHANGED))
  install_timer "$WATCHER_UNIT" "forget the pool instances that are gone" \
    "$WATCH_EVERY" pool-node-watcher
  install_timer "$TOKENS_UNIT" "new expiring join tokens for the pools" "$ROTATE_EVERY" \
    pool-tokens
  if needs_follow_up "$changed" "start-$TOKENS_UNIT"; then
    systemd_reload
    log "changed: reloaded systemd units (daemon-reload)"
    # A oneshot service: start returns once the tokens are stored (or fails the step).
    systemctl start "$TOKENS_UNIT.service"
    log "changed: stored new join tokens for the pools (valid for $TOKEN_TTL)"
    systemd_enable "$WATCHER_UNIT.timer" "$TOKENS_UNIT.timer"
    systemctl restart "$WATCHER_UNIT.timer" "$TOKENS_UNIT.timer"
    log "changed: started $WATCHER_UNIT.timer and $TOKENS_UNIT.timer"
  else
    log "$WATCHER_UNIT.timer and $TOKENS_UNIT.timer are installed"
  fi
  follow_up_done "start-$TOKENS_UNIT"
  log "the AWS cloud controller manager deletes the pool nodes of gone instances; pool join tokens expire after $TOKEN_TTL"
}

main "$@"
