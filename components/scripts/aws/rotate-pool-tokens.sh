#!/usr/bin/env bash
# Runs on the controller as gpu-cluster-pool-tokens.service, started by its timer every
# ROTATE_EVERY (installed by watch-pools.sh): for each pool, a new worker join token that
# expires after TOKEN_TTL, stored in the pool's SSM SecureString, which only that pool's
# instance role may read. An instance reads the parameter once, at boot, and joins with
# it; the timer runs at least twice within a token's life, so a token read just before a
# rotation still has most of its life for the join. A joined node no longer needs it.
#
# Environment (from /etc/gpu-cluster/pool-tokens.env): AWS_REGION, AWS_CLIENT
# (ssm-parameter.py), TOKEN_COMMAND (the distribution's command that prints a new worker
# join token, the lifetime appended), TOKEN_TTL, POOL_TOKEN_PARAMETERS (space-separated).
set -euo pipefail

# Inputs: AWS_CLIENT AWS_REGION POOL_TOKEN_PARAMETERS TOKEN_COMMAND TOKEN_TTL

HOST="$(hostname)"

log() {
  printf 'gpu-cluster: %s: pool-tokens: %s\n' "$HOST" "$*" >&2
}

main() {
  local missing=() name parameter token
  for name in AWS_REGION AWS_CLIENT TOKEN_COMMAND TOKEN_TTL POOL_TOKEN_PARAMETERS; do
    [[ -n "${!name:-}" ]] || missing+=("$name")
  done
  if ((${#missing[@]} > 0)); then
    log "missing required environment variable(s): ${missing[*]}"
    exit 2
  fi
  for parameter in $POOL_TOKEN_PARAMETERS; do
    # TOKEN_COMMAND is a command with arguments: split on purpose.
    # shellcheck disable=SC2086
    if ! token="$($TOKEN_COMMAND "$TOKEN_TTL")" || [[ -z "$token" ]]; then
      log "could not create a join token for $parameter; the current one stays until it expires"
      exit 1
    fi
    if ! printf '%s\n' "$token" | python3 "$AWS_CLIENT" put-secret "$AWS_REGION" "$parameter"; then
      log "could not store the new join token in $parameter"
      exit 1
    fi
    log "stored a new join token in $parameter (it expires in $TOKEN_TTL)"
  done
}

main "$@"
