#!/usr/bin/env bash
# Installs and starts gpu-cluster-node-cleanup.service on a cloud pool instance: when the
# auto scaling group terminates the instance, it deletes the instance's node (see
# node-cleanup-agent.sh). Run as the last boot step, after the join.
set -euo pipefail
# shellcheck source=../lib.sh
[[ -n "${GPU_CLUSTER_LIB_LOADED:-}" ]] || source "$(dirname "${BASH_SOURCE[0]}")/../lib.sh"
: "${GPU_CLUSTER_STEP:=watch-termination}"

# Inputs (environment):
#   NODE_CLEANUP_AGENT   the text of node-cleanup-agent.sh.
#   NODE_CLEANUP_KUBECONFIG_PARAMETER  SSM SecureString with the kubeconfig that may delete nodes.
#   BOOT_STATUS_PARAMETER, AWS_REGION  where the instance's boot status is (deleted with it).
#   KUBECTL              the distribution's kubectl command, e.g. "k0s kubectl" or
#                        "/var/lib/rancher/rke2/bin/kubectl".
#   SSM_CLIENT           path of ssm-parameter.py on the instance (kept by the boot).

AGENT=/usr/local/libexec/gpu-cluster/node-cleanup-agent
ENV_FILE=/etc/gpu-cluster/node-cleanup.env
UNIT=gpu-cluster-node-cleanup.service
UNIT_FILE="/etc/systemd/system/$UNIT"
POLL_SECONDS=5

check_inputs() {
  check_missing_env NODE_CLEANUP_AGENT NODE_CLEANUP_KUBECONFIG_PARAMETER BOOT_STATUS_PARAMETER \
    AWS_REGION KUBECTL SSM_CLIENT
  local name
  for name in NODE_CLEANUP_KUBECONFIG_PARAMETER BOOT_STATUS_PARAMETER; do
    if [[ -n "${!name:-}" && ! "${!name}" =~ $SSM_PARAMETER_NAME ]]; then
      INPUT_PROBLEMS+=("$name is not an SSM parameter name: '${!name}'")
    fi
  done
  if [[ -n "${AWS_REGION:-}" && ! "$AWS_REGION" =~ $AWS_REGION_NAME ]]; then
    INPUT_PROBLEMS+=("AWS_REGION is not a region name: '$AWS_REGION'")
  fi
  if [[ -n "${KUBECTL:-}" && ! "$KUBECTL" =~ ^([a-z0-9]+|(/[A-Za-z0-9_.-]+)+)( [a-z0-9-]+)*$ ]]; then
    INPUT_PROBLEMS+=("KUBECTL is not a command with plain words: '$KUBECTL'")
  fi
  if [[ -n "${SSM_CLIENT:-}" && ! "$SSM_CLIENT" =~ ^(/[A-Za-z0-9_.-]+)+$ ]]; then
    INPUT_PROBLEMS+=("SSM_CLIENT is not an absolute path: '$SSM_CLIENT'")
  fi
  die_on_input_problems
}

main() {
  local changed=0
  check_inputs
  write_text "$AGENT" 0755 "$NODE_CLEANUP_AGENT"
  changed=$((changed | FILE_CHANGED))
  # systemd reads these as KEY=VALUE lines; the values are checked names without spaces
  # or quotes, except KUBECTL, which is quoted.
  write_file "$ENV_FILE" 0600 <<EOT
AWS_REGION=$AWS_REGION
NODE_CLEANUP_KUBECONFIG_PARAMETER=$NODE_CLEANUP_KUBECONFIG_PARAMETER
BOOT_STATUS_PARAMETER=$BOOT_STATUS_PARAMETER
KUBECTL="$KUBECTL"
SSM_CLIENT=$SSM_CLIENT
POLL_SECONDS=$POLL_SECONDS
EOT
  changed=$((changed | FILE_CHANGED))
  write_file "$UNIT_FILE" 0644 <<EOT
# Managed by gpu-cluster (watch-termination); changes are overwritten.
[Unit]
Description=gpu-cluster: delete this node when its auto scaling group terminates the instance
Wants=network-online.target
After=network-online.target

[Service]
EnvironmentFile=$ENV_FILE
ExecStart=$AGENT
Restart=on-failure
RestartSec=10

[Install]
WantedBy=multi-user.target
EOT
  changed=$((changed | FILE_CHANGED))
  if needs_follow_up "$changed" "restart-$UNIT"; then
    systemd_reload
    log "changed: reloaded systemd units (daemon-reload)"
    systemd_enable "$UNIT"
    systemctl restart "$UNIT"
    log "changed: started $UNIT"
  elif ! systemctl is-active --quiet "$UNIT"; then
    systemctl start "$UNIT"
    log "changed: started $UNIT"
  else
    log "$UNIT is already running"
  fi
  follow_up_done "restart-$UNIT"
  log "$UNIT watches for this instance's termination"
}

main "$@"
