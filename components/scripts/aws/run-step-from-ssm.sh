#!/usr/bin/env bash
# Runs, at an instance's boot, a step whose script has no room in the user data (EC2 caps
# it at 16 KiB): its envelope, the very text SSH would send, gzipped, base64-encoded and
# split in order over the SSM SecureStrings STEP_ENVELOPE_SSM_PARAMETERS.
set -euo pipefail
# shellcheck source=../lib.sh
[[ -n "${GPU_CLUSTER_LIB_LOADED:-}" ]] || source "$(dirname "${BASH_SOURCE[0]}")/../lib.sh"
: "${GPU_CLUSTER_STEP:=run-step-from-ssm}"

# Inputs: STEP_ENVELOPE_SSM_PARAMETERS
# Optional inputs: AWS_REGION SSM_READER
# What they hold: STEP_ENVELOPE_SSM_PARAMETERS (names, space-separated),
# AWS_REGION, SSM_READER.
main() {
  local name piece encoded="" names=()
  read -r -a names <<<"${STEP_ENVELOPE_SSM_PARAMETERS:-}"
  check_missing_env STEP_ENVELOPE_SSM_PARAMETERS
  for name in "${names[@]}"; do
    STEP_ENVELOPE_PARAMETER=$name check_ssm_inputs STEP_ENVELOPE_PARAMETER \
      "the step's envelope" /gpu-cluster/dev/control-plane/backup-step-0
  done
  die_on_input_problems
  for name in "${names[@]}"; do
    read_ssm_parameter piece "$name" "part of the step's envelope"
    encoded+=$piece
  done
  make_temp_dir
  base64 -d <<<"$encoded" | gunzip >"$TEMP_DIR/envelope" ||
    die "the step's envelope in SSM is not gzipped base64"
  bash "$TEMP_DIR/envelope" create
}

main "$@"
