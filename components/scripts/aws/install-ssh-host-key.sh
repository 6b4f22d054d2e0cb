#!/usr/bin/env bash
# Installs the SSH host key the program made for this EC2 instance, read from an SSM
# SecureString (never user data), so whoever connects can verify it against the public key
# the program pins. Restarts sshd when the key changed.
set -euo pipefail
# shellcheck source=../lib.sh
[[ -n "${GPU_CLUSTER_LIB_LOADED:-}" ]] || source "$(dirname "${BASH_SOURCE[0]}")/../lib.sh"
: "${GPU_CLUSTER_STEP:=install-ssh-host-key}"

# Inputs: SSH_HOST_PUBLIC_KEY
# Optional inputs: AWS_REGION SSH_HOST_KEY_SSM_PARAMETER SSM_READER
#   SSH_HOST_KEY_SSM_PARAMETER, AWS_REGION, SSM_READER  the SecureString with the private key
#                          (OpenSSH format) and how to read it (see read_ssm_parameter).
#   SSH_HOST_PUBLIC_KEY    its public half, as the program pins it ("ssh-ed25519 AAAA...").

KEY_FILE=/etc/ssh/ssh_host_ed25519_key
SSH_UNIT=ssh.service

check_inputs() {
  check_missing_env SSH_HOST_PUBLIC_KEY
  if [[ -n "${SSH_HOST_PUBLIC_KEY:-}" && ! "$SSH_HOST_PUBLIC_KEY" =~ ^ssh-ed25519\ [A-Za-z0-9+/]+=*$ ]]; then
    INPUT_PROBLEMS+=("SSH_HOST_PUBLIC_KEY is not an ssh-ed25519 public key: '$SSH_HOST_PUBLIC_KEY'")
  fi
  check_ssm_inputs SSH_HOST_KEY_SSM_PARAMETER "the SSH host key" \
    /gpu-cluster/dev/control-plane/ssh-host-key
  die_on_input_problems
}

main() {
  local key changed=0
  check_inputs
  read_ssm_parameter key "$SSH_HOST_KEY_SSM_PARAMETER" "the SSH host key"
  if [[ "$key" != *"OPENSSH PRIVATE KEY"* ]]; then
    die "SSM parameter $SSH_HOST_KEY_SSM_PARAMETER does not hold an OpenSSH private key"
  fi
  write_text "$KEY_FILE" 0600 "$key"
  changed=$((changed | FILE_CHANGED))
  write_text "$KEY_FILE.pub" 0644 "$SSH_HOST_PUBLIC_KEY"
  changed=$((changed | FILE_CHANGED))
  if needs_follow_up "$changed" "restart-$SSH_UNIT"; then
    systemctl try-restart "$SSH_UNIT"
    log "changed: restarted $SSH_UNIT to serve the new host key"
  fi
  follow_up_done "restart-$SSH_UNIT"
  log "SSH host key installed: ${SSH_HOST_PUBLIC_KEY%% *}"
}

main "$@"
