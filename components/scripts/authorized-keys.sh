#!/usr/bin/env bash
# Keeps ssh.authorizedKeys in the SSH user's authorized_keys between two marker lines (a key
# taken out of the config leaves the block) and takes out every line holding a key of
# ssh.revokedKeys; other lines (the user's own keys, cloud-init's) are left as they are.
set -euo pipefail
# shellcheck source=lib.sh
[[ -n "${GPU_CLUSTER_LIB_LOADED:-}" ]] || source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
: "${GPU_CLUSTER_STEP:=authorized-keys}"

# Inputs: SSH_USER
# Optional inputs: AUTHORIZED_KEYS REVOKED_KEYS
#   SSH_USER         the user the program logs in as (ssh.user, hosts[].sshUser).
#   AUTHORIZED_KEYS  the keys, one a line, as config validated them; empty: an empty block.
#   REVOKED_KEYS     keys (same form) whose lines are removed wherever they are; optional.

BEGIN_MARKER="# BEGIN gpu-cluster ssh.authorizedKeys: managed by gpu-cluster, changes are overwritten"
END_MARKER="# END gpu-cluster ssh.authorizedKeys"
# The key types config accepts (config/types.py, _AUTHORIZED_KEY).
KEY_PATTERN='^(ssh-ed25519|ssh-rsa|ecdsa-sha2-nistp(256|384|521)|sk-ssh-ed25519@openssh\.com|sk-ecdsa-sha2-nistp256@openssh\.com) [A-Za-z0-9+/]+={0,2}( [^[:cntrl:]]*)?$'

REVOKED=() # the base64 bodies of REVOKED_KEYS: a line holding one as a word is dropped

check_inputs() {
  check_missing_env SSH_USER
  : "${AUTHORIZED_KEYS:=}" "${REVOKED_KEYS:=}"
  local name key number words=()
  for name in AUTHORIZED_KEYS REVOKED_KEYS; do
    number=0
    while IFS= read -r key; do
      number=$((number + 1))
      [[ -z "$key" || "$key" =~ $KEY_PATTERN ]] ||
        INPUT_PROBLEMS+=("$name line $number is not an OpenSSH public key")
      if [[ "$name" == REVOKED_KEYS && -n "$key" ]]; then
        read -r -a words <<<"$key"
        REVOKED+=("${words[1]}")
      fi
    done <<<"${!name}"
  done
  die_on_input_problems
}

# revoked LINE: LINE holds a revoked key (after any options, before any comment: a word).
revoked() {
  local word body words=()
  read -r -a words <<<"$1"
  for word in "${words[@]}"; do
    for body in "${REVOKED[@]}"; do
      [[ "$word" != "$body" ]] || return 0
    done
  done
  return 1
}

# home_of USER: the user's home directory from the passwd database.
home_of() {
  local entry
  entry="$(getent passwd "$1")" || die "user '$1' does not exist on this host"
  cut -d: -f6 <<<"$entry"
}

# owned_by PATH USER: chown PATH to USER (and the user's group) when it is not theirs;
# sshd reads authorized_keys as the user (StrictModes, sshd_config(5)).
owned_by() {
  if [[ "$(stat -c %U -- "$ROOT$1")" != "$2" ]]; then
    chown -- "$2:" "$ROOT$1"
    log "changed owner of $1 to $2"
  fi
}

# managed_file CURRENT: CURRENT's lines with the block (or, when there is none, the end)
# holding the configured keys, less the lines holding a revoked key.
managed_file() {
  local line inside=0 placed=0 key
  block() {
    printf '%s\n' "$BEGIN_MARKER"
    while IFS= read -r key; do
      [[ -z "$key" ]] || printf '%s\n' "$key"
    done <<<"$AUTHORIZED_KEYS"
    printf '%s\n' "$END_MARKER"
  }
  while IFS= read -r line || [[ -n "$line" ]]; do
    if ((inside)); then
      [[ "$line" != "$END_MARKER" ]] || inside=0
    elif [[ "$line" == "$BEGIN_MARKER" ]]; then
      inside=1
      if ((!placed)); then
        block
        placed=1
      fi
    elif [[ "$line" != \#* ]] && revoked "$line"; then
      log "removing a revoked key: ${line:0:40}..."
    else
      printf '%s\n' "$line"
    fi
  done <"$1"
  ((inside == 0)) || die "$END_MARKER is missing after $BEGIN_MARKER; fix the file by hand"
  ((placed)) || block
}

main() {
  check_inputs
  local home dir file current
  home="$(home_of "$SSH_USER")"
  dir="$home/.ssh"
  file="$dir/authorized_keys"
  if [[ ! -d "$ROOT$dir" ]]; then
    mkdir -m 700 -- "$ROOT$dir" || die "could not create $dir"
    log "changed: created $dir"
  fi
  owned_by "$dir" "$SSH_USER"
  make_temp_dir
  current="$TEMP_DIR/current"
  if [[ -f "$ROOT$file" ]]; then
    cat -- "$ROOT$file" >"$current"
  else
    : >"$current"
  fi
  managed_file "$current" >"$TEMP_DIR/wanted"
  write_file "$file" 600 <"$TEMP_DIR/wanted"
  owned_by "$file" "$SSH_USER"
}

main "$@"
