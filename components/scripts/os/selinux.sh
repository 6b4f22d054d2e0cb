# shellcheck shell=bash disable=SC2034 # its globals are read by the scripts that source it
# SELinux on the host, the one place steps ask about it and change it: its mode, the file
# contexts and booleans the container runtimes need. SELinux stays as the host has it
# (enforcing stays enforcing); hosts without it (Ubuntu: AppArmor) get nothing.

# shellcheck source=../lib.sh
[[ -n "${GPU_CLUSTER_LIB_LOADED:-}" ]] || source "$(dirname "${BASH_SOURCE[0]}")/../lib.sh"

GPU_CLUSTER_SELINUX_LIB_LOADED=1
# Set to 1 by selinux_restore when it relabeled a file, and by selinux_file_context when it
# added or changed a rule.
SELINUX_RELABELED=0
SELINUX_RULES_CHANGED=0

# selinux_mode: enforcing, permissive or disabled. getenforce (libselinux-utils) prints
# Enforcing, Permissive or Disabled (libselinux utils/getenforce.c); a host without it has no
# SELinux.
selinux_mode() {
  local mode
  if ! command -v getenforce >/dev/null 2>&1; then
    echo disabled
    return 0
  fi
  mode="$(getenforce)" || die "getenforce failed: cannot tell SELinux's mode"
  case "$mode" in
    Enforcing | Permissive | Disabled) echo "${mode,,}" ;;
    *) die "getenforce printed '$mode', not Enforcing, Permissive or Disabled" ;;
  esac
}

# selinux_enabled: success when SELinux labels files (enforcing or permissive): a permissive
# host only logs denials, but its labels must be right for the day it enforces.
selinux_enabled() {
  [[ "$(selinux_mode)" != disabled ]]
}

# selinux_file_context PATTERN TYPE: the local file-context rule PATTERN -> TYPE, added with
# semanage (policycoreutils-python-utils) unless `semanage fcontext -l -C` (the local
# customizations only) already has it; a rule of PATTERN with another type is modified.
selinux_file_context() {
  local pattern=$1 type=$2 line rule_pattern rule_context current=""
  while IFS= read -r line; do
    # "PATTERN   FILE-TYPE   user:role:TYPE:level" (seobject.py fcontextRecords.list).
    rule_pattern=${line%% *}
    rule_context=${line##* }
    if [[ "$rule_pattern" == "$pattern" ]]; then
      current=$rule_context
    fi
  done < <(semanage fcontext -l -C -n)
  if [[ "$current" == *":$type:"* ]]; then
    return 0
  elif [[ -n "$current" ]]; then
    semanage fcontext -m -t "$type" "$pattern"
  else
    semanage fcontext -a -t "$type" "$pattern"
  fi
  SELINUX_RULES_CHANGED=1
  log "changed: SELinux labels $pattern $type"
}

# selinux_restore PATH...: the policy's labels on each PATH that exists, recursively
# (restorecon -R; -v prints "Relabeled PATH from OLD to NEW" for each change,
# policycoreutils setfiles/restore.c). Sets SELINUX_RELABELED=1 when a label changed.
selinux_restore() {
  local path paths=() output
  for path in "$@"; do
    [[ ! -e "$ROOT$path" ]] || paths+=("$ROOT$path")
  done
  ((${#paths[@]} > 0)) || return 0
  output="$(restorecon -R -v -- "${paths[@]}")" || die "restorecon could not relabel ${paths[*]}"
  if [[ "$output" == *Relabeled* ]]; then
    SELINUX_RELABELED=1
    log "changed: relabeled $(grep -c Relabeled <<<"$output") file(s) below ${paths[*]}"
  fi
}

# selinux_boolean_on NAME: the SELinux boolean NAME on, persistently (setsebool -P); getsebool
# prints "NAME --> on" or "NAME --> off".
selinux_boolean_on() {
  if [[ "$(getsebool "$1")" == "$1 --> on" ]]; then
    return 0
  fi
  setsebool -P "$1" on
  log "changed: SELinux boolean $1 on"
}
