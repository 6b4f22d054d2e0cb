#!/usr/bin/env bash
# Sends every image pull of this node through the image mirror (images.mirror): writes the
# files containerd reads (components/distributions/registry_mirror.py) with the password put
# in, and restarts the distribution where it reads them only when it starts.
set -euo pipefail
# shellcheck source=lib.sh
[[ -n "${GPU_CLUSTER_LIB_LOADED:-}" ]] || source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
: "${GPU_CLUSTER_STEP:=configure-registries}"

# Inputs: REGISTRY_FILE_COUNT
# Optional inputs: REGISTRY_FILE_<n>_PATH REGISTRY_FILE_<n>_MODE REGISTRY_FILE_<n>_CONTENT REGISTRY_HOSTS_DIR REGISTRY_SERVICES REGISTRY_PASSWORD REGISTRY_PASSWORD_SSM_PARAMETER AWS_REGION SSM_READER
#   REGISTRY_FILE_COUNT        how many files follow (1 or more).
#   REGISTRY_FILE_<n>_PATH     absolute path of file n (1-based), without '..'.
#   REGISTRY_FILE_<n>_MODE     its octal mode (0644, or 0600 for a file with the password).
#   REGISTRY_FILE_<n>_CONTENT  its text; PASSWORD_MARK in it becomes the password.
#   REGISTRY_HOSTS_DIR         optional: a folder of containerd host namespaces
#                              (<registry>/hosts.toml) the step owns; a hosts.toml there
#                              that is not among the files is removed.
#   REGISTRY_PASSWORD          the mirror login's password (over SSH; secret), or
#   REGISTRY_PASSWORD_SSM_PARAMETER with AWS_REGION and SSM_READER: read at boot from SSM.
#   REGISTRY_SERVICES          units restarted when a file changed, if they run
#                              (space-separated; empty: the runtime rereads the files).

PASSWORD_MARK='@GPU_CLUSTER_REGISTRY_PASSWORD@'

check_inputs() {
  local n path mode var
  INPUT_PROBLEMS=()
  check_missing_env REGISTRY_FILE_COUNT
  : "${REGISTRY_HOSTS_DIR:=}" "${REGISTRY_PASSWORD:=}" "${REGISTRY_PASSWORD_SSM_PARAMETER:=}"
  : "${REGISTRY_SERVICES:=}"
  if [[ -n "${REGISTRY_FILE_COUNT:-}" && ! "$REGISTRY_FILE_COUNT" =~ ^[1-9][0-9]{0,2}$ ]]; then
    INPUT_PROBLEMS+=("REGISTRY_FILE_COUNT is not a count of files: '$REGISTRY_FILE_COUNT'")
    REGISTRY_FILE_COUNT=0
  fi
  for ((n = 1; n <= ${REGISTRY_FILE_COUNT:-0}; n++)); do
    var="REGISTRY_FILE_${n}_PATH"
    path=${!var:-}
    var="REGISTRY_FILE_${n}_MODE"
    mode=${!var:-}
    if [[ "$path" != /* || "$path" == *..* ]]; then
      INPUT_PROBLEMS+=("REGISTRY_FILE_${n}_PATH must be an absolute path without '..', got '$path'")
    fi
    if [[ ! "$mode" =~ ^0[0-7]{3}$ ]]; then
      INPUT_PROBLEMS+=("REGISTRY_FILE_${n}_MODE must be an octal mode like 0644, got '$mode'")
    fi
    var="REGISTRY_FILE_${n}_CONTENT"
    if [[ -z "${!var:-}" ]]; then
      INPUT_PROBLEMS+=("missing required environment variable(s): $var")
    elif [[ "${!var}" == *"$PASSWORD_MARK"* && -z "$REGISTRY_PASSWORD" && -z "$REGISTRY_PASSWORD_SSM_PARAMETER" ]]; then
      INPUT_PROBLEMS+=("file $path needs the mirror's password: REGISTRY_PASSWORD, or REGISTRY_PASSWORD_SSM_PARAMETER with AWS_REGION and SSM_READER")
    fi
  done
  if [[ -n "$REGISTRY_HOSTS_DIR" && ("$REGISTRY_HOSTS_DIR" != /* || "$REGISTRY_HOSTS_DIR" == *..*) ]]; then
    INPUT_PROBLEMS+=("REGISTRY_HOSTS_DIR must be an absolute path without '..', got '$REGISTRY_HOSTS_DIR'")
  fi
  if [[ -n "$REGISTRY_PASSWORD" && -n "$REGISTRY_PASSWORD_SSM_PARAMETER" ]]; then
    INPUT_PROBLEMS+=("give the mirror's password either as REGISTRY_PASSWORD or as REGISTRY_PASSWORD_SSM_PARAMETER, not both")
  elif [[ -n "$REGISTRY_PASSWORD_SSM_PARAMETER" ]]; then
    check_ssm_inputs REGISTRY_PASSWORD_SSM_PARAMETER "the image mirror's password" /gpu-cluster/dev/image-mirror-password
  fi
  if [[ -n "$REGISTRY_SERVICES" && ! "$REGISTRY_SERVICES" =~ ^[a-z0-9-]+\.service( [a-z0-9-]+\.service)*$ ]]; then
    INPUT_PROBLEMS+=("REGISTRY_SERVICES must be systemd unit names like rke2-agent.service, got '$REGISTRY_SERVICES'")
  fi
  die_on_input_problems
}

main() {
  local n var path mode content changed=0 wanted=() existing
  check_inputs
  if [[ -n "$REGISTRY_PASSWORD_SSM_PARAMETER" ]]; then
    read_ssm_parameter REGISTRY_PASSWORD "$REGISTRY_PASSWORD_SSM_PARAMETER" "the image mirror's password"
  fi
  for ((n = 1; n <= REGISTRY_FILE_COUNT; n++)); do
    var="REGISTRY_FILE_${n}_PATH"
    path=${!var}
    var="REGISTRY_FILE_${n}_MODE"
    mode=${!var}
    var="REGISTRY_FILE_${n}_CONTENT"
    # Quoted, so '&' in the password is itself (bash 5.2 patsub_replacement).
    content=${!var//"$PASSWORD_MARK"/"$REGISTRY_PASSWORD"}
    write_text "$path" "$mode" "$content"
    ((changed |= FILE_CHANGED)) || true
    wanted+=("$path")
  done
  if [[ -n "$REGISTRY_HOSTS_DIR" && -d "$ROOT$REGISTRY_HOSTS_DIR" ]]; then
    while IFS= read -r -d '' existing; do
      existing=${existing#"$ROOT"}
      if [[ " ${wanted[*]} " != *" $existing "* ]]; then
        remove_file "$existing"
        ((changed |= FILE_CHANGED)) || true
      fi
    done < <(find "$ROOT$REGISTRY_HOSTS_DIR" -mindepth 2 -maxdepth 2 -name hosts.toml -print0)
  fi
  if ((changed)) && [[ -n "$REGISTRY_SERVICES" ]]; then
    local unit
    for unit in $REGISTRY_SERVICES; do
      if systemctl is-active --quiet "$unit"; then
        log "restarting $unit: it reads the registry configuration when it starts"
        systemctl restart "$unit" || die "could not restart $unit after changing the registry configuration"
      fi
    done
  fi
  log "image mirror configured: $REGISTRY_FILE_COUNT files$( ((changed)) || printf ', none changed')"
}

main "$@"
