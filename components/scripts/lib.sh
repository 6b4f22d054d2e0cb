#!/usr/bin/env bash
# Shared helpers for the gpu-cluster step scripts: logging, failures that name the
# host and step, input checks and idempotent file writes below a root prefix.
# shellcheck shell=bash disable=SC2034 # its globals are read by the scripts that source it
#
# Sourced by a step script when run standalone; pasted ahead of the step script
# inside the envelope function otherwise, so it must not rely on its own path.
#
# Globals it defines:
#   ROOT          prefix for every host path read or written ("" on a real host;
#                 tests point GPU_CLUSTER_ROOT at a temporary directory).
#   FILE_CHANGED  set by write_file/write_text/remove_file: 1 when the call
#                 changed the file, 0 when it was already as wanted.
#   TEMP_DIR      set by make_temp_dir; removed when the shell exits.
#   INPUT_PROBLEMS  problems found in the inputs, to be named all at once;
#                 see check_missing_env.
#   SSM_READ_ATTEMPTS, SSM_READ_RETRY_DELAY  see read_ssm_parameter.
# All log output goes to stderr, so stdout stays free for the scripts whose
# output is data (a join token).

set -Eeuo pipefail
shopt -s inherit_errexit

GPU_CLUSTER_LIB_LOADED=1
ROOT="${GPU_CLUSTER_ROOT:-}"
GPU_CLUSTER_HOST="${GPU_CLUSTER_HOST:-$(hostname 2>/dev/null || echo localhost)}"
GPU_CLUSTER_STEP="${GPU_CLUSTER_STEP:-}" # each step script sets its own default
FILE_CHANGED=0
TEMP_DIR=""
INPUT_PROBLEMS=()
_GPU_CLUSTER_TEMP_DIRS=()
_GPU_CLUSTER_APT_UPDATED=0

REBOOT_REQUIRED_FILE=/var/run/reboot-required
FOLLOW_UP_DIR=/var/lib/gpu-cluster/pending

# log_prefix: "gpu-cluster: HOST: STEP:", the start of every message.
log_prefix() {
  printf 'gpu-cluster: %s: %s:' "${GPU_CLUSTER_HOST}" "${GPU_CLUSTER_STEP:-script}"
}

# checking: failure: the step changes the host (check/lib.sh's answers success in `check`).
checking() {
  return 1
}

# log MESSAGE..., warn MESSAGE..., die MESSAGE... (exits 1): to stderr.
log() {
  printf '%s %s\n' "$(log_prefix)" "$*" >&2
}

warn() {
  printf '%s warning: %s\n' "$(log_prefix)" "$*" >&2
}

die() {
  printf '%s %s\n' "$(log_prefix)" "$*" >&2
  exit 1
}

# Any command failing under `set -e` reports itself with host and step. The
# command is shown unexpanded ($BASH_COMMAND), so secrets in variables stay hidden.
_gc_on_error() {
  printf '%s command failed with exit code %s at line %s: %s\n' \
    "$(log_prefix)" "$1" "$2" "$3" >&2
}
trap '_gc_on_error "$?" "$LINENO" "$BASH_COMMAND"' ERR

_gc_cleanup() {
  local dir
  for dir in "${_GPU_CLUSTER_TEMP_DIRS[@]}"; do
    rm -rf -- "$dir"
  done
}
trap _gc_cleanup EXIT

# make_temp_dir: creates a private temporary directory, stores it in TEMP_DIR.
make_temp_dir() {
  TEMP_DIR="$(mktemp -d)"
  _GPU_CLUSTER_TEMP_DIRS+=("$TEMP_DIR")
}

# check_missing_env VAR...: adds to INPUT_PROBLEMS one problem naming every VAR
# that is unset or empty. A script that checks its inputs names all their problems
# in one failure: check_missing_env, then INPUT_PROBLEMS+=("...") for every other
# problem found, then die_on_input_problems.
check_missing_env() {
  local name missing=()
  for name in "$@"; do
    if [[ -z "${!name:-}" ]]; then
      missing+=("$name")
    fi
  done
  if ((${#missing[@]} > 0)); then
    INPUT_PROBLEMS+=("missing required environment variable(s): ${missing[*]}")
  fi
}

# die_on_input_problems: dies naming every problem in INPUT_PROBLEMS, separated by
# "; ". Does nothing when there are none.
die_on_input_problems() {
  local text
  if ((${#INPUT_PROBLEMS[@]} > 0)); then
    printf -v text '; %s' "${INPUT_PROBLEMS[@]}"
    die "${text#; }"
  fi
}

# require_env VAR...: dies naming every VAR that is unset or empty.
require_env() {
  # Its own list, whatever the caller has collected.
  local INPUT_PROBLEMS=()
  check_missing_env "$@"
  die_on_input_problems
}

# require_bool VAR...: dies naming every VAR that is not "true" or "false".
require_bool() {
  local name bad=()
  for name in "$@"; do
    case "${!name:-}" in
      true | false) ;;
      *) bad+=("$name='${!name:-}'") ;;
    esac
  done
  if ((${#bad[@]} > 0)); then
    die "expected \"true\" or \"false\": ${bad[*]}"
  fi
}

# require_uint VAR...: dies naming every VAR that is not a non-negative integer.
require_uint() {
  local name bad=()
  for name in "$@"; do
    if [[ ! "${!name:-}" =~ ^[0-9]+$ ]]; then
      bad+=("$name='${!name:-}'")
    fi
  done
  if ((${#bad[@]} > 0)); then
    die "expected a non-negative integer: ${bad[*]}"
  fi
}

# is_true VALUE: success for "true", failure for "false", dies otherwise.
is_true() {
  case "$1" in
    true) return 0 ;;
    false) return 1 ;;
    *) die "expected \"true\" or \"false\", got \"$1\"" ;;
  esac
}

# valid_ipv4 ADDRESS: success for a dotted quad a.b.c.d with octets 0-255, written
# without leading zeros (which some parsers read as octal).
valid_ipv4() {
  local part='(0|[1-9][0-9]{0,2})' octet
  [[ "$1" =~ ^$part\.$part\.$part\.$part$ ]] || return 1
  for octet in "${BASH_REMATCH[@]:1:4}"; do
    ((octet <= 255)) || return 1
  done
}

# valid_ipv4_cidr CIDR: success for ADDRESS/N with a valid_ipv4 ADDRESS and a prefix
# length N of 0-32, also without leading zeros.
valid_ipv4_cidr() {
  [[ "$1" == */* ]] && valid_ipv4 "${1%/*}" && [[ "${1#*/}" =~ ^(0|[1-9][0-9]?)$ ]] &&
    ((${1#*/} <= 32))
}

# write_file PATH MODE: writes stdin to host path PATH (below ROOT) with octal
# MODE, only when content or mode differ. Creates parent directories, replaces
# the file atomically (the temporary copy is 0600 from the start, so secrets are
# never readable by others) and logs "changed PATH" or "unchanged PATH".
# Feed it with a redirection or here-document, not a pipe: at the end of a
# pipeline it runs in a subshell and FILE_CHANGED would not reach the caller.
write_file() {
  local path=$1 mode=$2 target dir tmp want_mode
  target="$ROOT$path"
  dir="${target%/*}"
  if [[ -d "$target" ]]; then
    die "cannot write $path: it is a directory"
  fi
  want_mode="$(printf '%o' "$((8#$mode))")"
  FILE_CHANGED=0
  mkdir -p -- "${dir:-/}"
  tmp="$(mktemp "${dir:-}/.gpu-cluster.XXXXXX")"
  if ! cat >"$tmp"; then
    rm -f -- "$tmp"
    die "could not write $path"
  fi
  if [[ -f "$target" ]] && cmp -s -- "$tmp" "$target"; then
    rm -f -- "$tmp"
    if [[ "$(stat -c %a -- "$target")" == "$want_mode" ]]; then
      log "unchanged $path"
    else
      chmod "$mode" -- "$target"
      FILE_CHANGED=1
      log "changed mode of $path to $mode"
    fi
    return 0
  fi
  chmod "$mode" -- "$tmp"
  mv -f -- "$tmp" "$target"
  FILE_CHANGED=1
  log "changed $path"
}

# write_text PATH MODE TEXT: write_file with TEXT as content, ending in exactly
# one newline. TEXT never reaches a command line.
write_text() {
  local text=$3
  while [[ "$text" == *$'\n' ]]; do
    text=${text%$'\n'}
  done
  write_file "$1" "$2" <<<"$text"
}

# remove_file PATH: removes host path PATH (below ROOT) when present.
remove_file() {
  FILE_CHANGED=0
  if [[ -e "$ROOT$1" || -L "$ROOT$1" ]]; then
    rm -f -- "$ROOT$1"
    FILE_CHANGED=1
    log "changed: removed $1"
  else
    log "unchanged: $1 is absent"
  fi
}

# keep_original PATH DIR MARK: before a step replaces host path PATH, keeps it as it was,
# once, as DIR/<its name>; not when it is absent or already the step's own (its first line
# starts with MARK).
keep_original() {
  local copy="$2/${1##*/}"
  if [[ -f "$ROOT$1" && ! -e "$ROOT$copy" ]] && [[ "$(head -n 1 -- "$ROOT$1")" != "$3"* ]]; then
    write_file "$copy" 0644 <"$ROOT$1"
  fi
}

# restore_original PATH DIR MARK: puts back at PATH what keep_original kept and forgets the
# copy; without a copy, removes PATH when it is the step's own (nothing was there before).
# FILE_CHANGED: 1 when PATH changed.
restore_original() {
  local copy="$2/${1##*/}" changed
  if [[ -f "$ROOT$copy" ]]; then
    write_file "$1" 0644 <"$ROOT$copy"
    changed=$FILE_CHANGED
    remove_file "$copy"
    FILE_CHANGED=$changed
  elif [[ -f "$ROOT$1" && "$(head -n 1 -- "$ROOT$1")" == "$3"* ]]; then
    remove_file "$1"
  else
    FILE_CHANGED=0
    log "unchanged: $1 is not the step's"
  fi
}

# mark_reboot_required REASON: sets Ubuntu's reboot-required marker. Never reboots.
mark_reboot_required() {
  write_text "$REBOOT_REQUIRED_FILE" 0644 "*** System restart required ***"
  log "reboot required: $1"
}

# needs_follow_up CHANGED NAME: success when follow-up action NAME (update-grub,
# a service restart, ...) must run: its input changed in this run (CHANGED=1) or
# an earlier run changed it but did not finish NAME. Remembers NAME as pending
# until follow_up_done NAME, so a failed action is retried by the next run.
# Use it as an `if` condition and run the action in the body (set -e applies there).
needs_follow_up() {
  local marker="$ROOT$FOLLOW_UP_DIR/$2"
  if [[ "$1" != 1 && ! -e "$marker" ]]; then
    return 1
  fi
  if [[ "$1" != 1 ]]; then
    log "retrying $2, which an earlier run did not finish"
  fi
  mkdir -p -- "${marker%/*}"
  : >"$marker"
}

# follow_up_done NAME: NAME completed; see needs_follow_up.
follow_up_done() {
  rm -f -- "$ROOT$FOLLOW_UP_DIR/$1"
}

# wait_until TIMEOUT_SECONDS DESCRIPTION CMD...: runs CMD every 2 s until it
# succeeds; dies with CMD's last output after TIMEOUT_SECONDS.
wait_until() {
  local timeout=$1 description=$2 deadline attempts=0 max_attempts output=""
  shift 2
  deadline=$((SECONDS + timeout))
  max_attempts=$((timeout / 2 + 1))
  while true; do
    if output="$("$@" 2>&1)"; then
      log "ready: $description"
      return 0
    fi
    attempts=$((attempts + 1))
    if ((attempts >= max_attempts || SECONDS >= deadline)); then
      die "timed out after ${timeout}s waiting for $description; last output: ${output:-<none>}"
    fi
    if ((attempts == 1)); then
      log "waiting up to ${timeout}s for $description"
    fi
    sleep 2
  done
}

# SSM Parameter Store names (plain, or as an ARN) and AWS region names.
SSM_PARAMETER_NAME='^(arn:aws[a-z-]*:ssm:[a-z0-9-]+:[0-9]{12}:parameter)?/?[A-Za-z0-9_.-]+(/[A-Za-z0-9_.-]+)*$'
AWS_REGION_NAME='^[a-z]{2}(-[a-z]+)+-[0-9]+$'
# The instance role can take a while to be usable after boot: up to
# SSM_READ_ATTEMPTS reads, SSM_READ_RETRY_DELAY seconds apart.
SSM_READ_ATTEMPTS=10
SSM_READ_RETRY_DELAY=6

# check_ssm_inputs VAR WHAT EXAMPLE: adds to INPUT_PROBLEMS what would keep
# read_ssm_parameter from reading WHAT from the SSM parameter named by VAR (a variable
# name; EXAMPLE is a valid parameter name for the message): a malformed name, AWS_REGION
# missing or not a region, SSM_READER (the text of ssm-parameter.py) missing, or
# no python3 to run it.
check_ssm_inputs() {
  local var=$1 what=$2 example=$3 name=${!1:-} missing=()
  if [[ ! "$name" =~ $SSM_PARAMETER_NAME ]]; then
    INPUT_PROBLEMS+=("$var is not an SSM parameter name (e.g. $example): '$name'")
  fi
  if [[ -z "${AWS_REGION:-}" ]]; then
    missing+=(AWS_REGION)
  elif [[ ! "$AWS_REGION" =~ $AWS_REGION_NAME ]]; then
    INPUT_PROBLEMS+=("AWS_REGION is not an AWS region (e.g. eu-central-1): '$AWS_REGION'")
  fi
  if [[ -z "${SSM_READER:-}" ]]; then
    missing+=(SSM_READER)
  fi
  if ((${#missing[@]} > 0)); then
    INPUT_PROBLEMS+=("missing required environment variable(s): ${missing[*]} (needed to read $what from SSM parameter $name)")
  fi
  if ! command -v python3 >/dev/null 2>&1; then
    INPUT_PROBLEMS+=("the python3 command is not installed; it is needed to read $what from SSM parameter $name")
  fi
}

# read_ssm_parameter VAR NAME WHAT: sets VAR (not exported) to the value of the SSM
# parameter NAME (SecureStrings decrypted) in AWS_REGION, read by SSM_READER's `get` with
# the instance's own credentials. Retries while the reader fails or the value is empty
# (credentials or permissions not usable yet); dies after the last attempt. Only the
# reader's error output is ever shown; the value goes from its stdout into VAR alone.
read_ssm_parameter() {
  # Prefixed locals, so VAR cannot name one of them.
  local _ssm_var=$1 _ssm_name=$2 _ssm_what=$3 _ssm_attempt _ssm_value="" _ssm_error=""
  local TEMP_DIR # its own, leaving the caller's TEMP_DIR alone
  make_temp_dir
  log "reading $_ssm_what from SSM parameter $_ssm_name in $AWS_REGION"
  for ((_ssm_attempt = 1; ; _ssm_attempt++)); do
    if _ssm_value="$(python3 - get "$AWS_REGION" "$_ssm_name" <<<"$SSM_READER" 2>"$TEMP_DIR/error")"; then
      if [[ -n "$_ssm_value" ]]; then
        break
      fi
      _ssm_error="the parameter value is empty"
    else
      _ssm_error="$(tr -s '\n' ' ' <"$TEMP_DIR/error")"
      _ssm_error="${_ssm_error% }"
    fi
    if ((_ssm_attempt >= SSM_READ_ATTEMPTS)); then
      die "could not read $_ssm_what from SSM parameter $_ssm_name in $AWS_REGION" \
        "after $_ssm_attempt attempts; last error: ${_ssm_error:-<none>}"
    fi
    warn "reading SSM parameter $_ssm_name failed (attempt $_ssm_attempt of $SSM_READ_ATTEMPTS)," \
      "retrying in ${SSM_READ_RETRY_DELAY}s: ${_ssm_error:-<no error output>}"
    sleep "$SSM_READ_RETRY_DELAY"
  done
  # VAR may come exported (an envelope exports every input, empty ones too).
  export -n "${_ssm_var:?}"
  printf -v "$_ssm_var" '%s' "$_ssm_value"
  log "read $_ssm_what from SSM parameter $_ssm_name"
}

# A download location the program passes (config/types.py DownloadUrl, the same form):
# an http(s) URL or file:///path, no query or credentials.
DOWNLOAD_URL='^(https?://[a-z0-9]([a-z0-9.-]*[a-z0-9])?(:[1-9][0-9]{0,4})?|file://)(/[A-Za-z0-9._~%+-]+)*/?$'

# check_download_url VAR: dies unless VAR holds a download location (and no '..').
check_download_url() {
  local value=${!1:-}
  if [[ ! "$value" =~ $DOWNLOAD_URL || "$value/" == */../* ]]; then
    die "$1 is not a download location like https://files.example.internal/k0s or file:///srv/k0s: '$value'"
  fi
}

# remove_unit UNIT FOLLOW_UP: the systemd unit UNIT, written to
# /etc/systemd/system/UNIT.service by a step, stopped, disabled and removed (systemd
# reloaded when its file went); the step's pending follow-up FOLLOW_UP (see
# needs_follow_up) is dropped with it.
remove_unit() {
  local unit=$1
  if systemctl is-active --quiet "$unit"; then
    systemctl stop "$unit"
    log "changed: stopped $unit"
  fi
  if systemctl is-enabled --quiet "$unit"; then
    systemd_disable "$unit"
    log "changed: disabled $unit"
  fi
  remove_file "/etc/systemd/system/$unit.service"
  if ((FILE_CHANGED)); then
    systemd_reload
    log "changed: reloaded systemd units (daemon-reload)"
  fi
  follow_up_done "$2"
}

# ensure_unit_running UNIT CHANGED: the systemd unit UNIT enabled and running. When
# CHANGED=1 (its unit file, or what it reads, changed in this run) or a restart an earlier
# run did not finish (see needs_follow_up), systemd reloads its units first and a running
# UNIT is restarted.
ensure_unit_running() {
  local unit=$1 restart=0
  if needs_follow_up "$2" "restart-$unit"; then
    systemd_reload
    log "changed: reloaded systemd units (daemon-reload)"
    restart=1
  fi
  if ! systemctl is-enabled --quiet "$unit"; then
    systemd_enable "$unit" >&2
    log "changed: enabled $unit"
  fi
  if ! systemctl is-active --quiet "$unit"; then
    systemctl start "$unit"
    log "changed: started $unit"
  elif ((restart)); then
    systemctl restart "$unit"
    log "changed: restarted $unit"
  else
    log "unchanged: $unit is enabled and running"
  fi
  follow_up_done "restart-$unit"
}

# apt_get ARGS...: non-interactive apt-get that waits for the dpkg lock (cloud
# images often run unattended-upgrades right after boot) and keeps locally
# changed config files instead of asking. Package scripts run `systemctl daemon-reload`
# (debhelper's postinst snippets), so everything but `update` links the NVIDIA devices
# first (see ensure_nvidia_dev_char_links).
apt_get() {
  if [[ "${1:-}" != update ]]; then
    ensure_nvidia_dev_char_links
  fi
  DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=300 \
    -o Dpkg::Options::=--force-confdef -o Dpkg::Options::=--force-confold "$@"
}

# apt_update_once: apt-get update, at most once per run.
apt_update_once() {
  if ((_GPU_CLUSTER_APT_UPDATED == 0)); then
    apt_get update
    _GPU_CLUSTER_APT_UPDATED=1
  fi
}

# package_installed PKG: success when dpkg reports PKG as installed.
package_installed() {
  local status
  # shellcheck disable=SC2016 # ${Status} is a dpkg-query field, not a shell variable
  status="$(dpkg-query -W -f='${Status}' "$1" 2>/dev/null)" || return 1
  [[ "$status" == "install ok installed" ]]
}

# package_version PKG: prints the installed version of PKG, or nothing.
package_version() {
  # shellcheck disable=SC2016 # ${Version} is a dpkg-query field, not a shell variable
  dpkg-query -W -f='${Version}' "$1" 2>/dev/null || true
}

# upstream_version VERSION: the upstream part of a Debian version (no epoch, no
# Debian revision): 1:580.95.05-0ubuntu0.24.04.2 -> 580.95.05.
upstream_version() {
  local version=${1#*:}
  printf '%s\n' "${version%-*}"
}

# count_nvidia_gpus: NVIDIA (vendor 0x10de) display-class (0x03xxxx) PCI devices.
count_nvidia_gpus() {
  local gpu_dirs=()
  mapfile -t gpu_dirs < <(nvidia_gpu_devices)
  echo "${#gpu_dirs[@]}"
}

# nvidia_gpu_devices: the sysfs folder of each NVIDIA GPU on the PCI bus (vendor 0x10de,
# display class 0x03), one a line.
nvidia_gpu_devices() {
  local device
  for device in "$ROOT"/sys/bus/pci/devices/*; do
    if [[ -r "$device/vendor" && -r "$device/class" && "$(<"$device/vendor")" == 0x10de &&
      "$(<"$device/class")" == 0x03* ]]; then
      printf '%s\n' "$device"
    fi
  done
}

# count_nvswitches: NVSwitch devices on the PCI bus: NVIDIA (vendor 0x10de) devices of
# class 0x068000 (bridge, other), the class the NVIDIA driver's nvidia-nvswitch binds
# (open-gpu-kernel-modules, kernel-open/nvidia/linux_nvswitch.c, nvswitch_pci_table:
# PCI_VENDOR_ID_NVIDIA, PCI_CLASS_BRIDGE_OTHER << 8). HGX A100/H100/H200 boards have them;
# their GPUs run CUDA only once Fabric Manager has set up the NVSwitch fabric.
count_nvswitches() {
  local device count=0
  for device in "$ROOT"/sys/bus/pci/devices/*; do
    if [[ -r "$device/vendor" && -r "$device/class" && "$(<"$device/vendor")" == 0x10de &&
      "$(<"$device/class")" == 0x068000 ]]; then
      count=$((count + 1))
    fi
  done
  echo "$count"
}

# Running GPU containers keep their devices across a systemd reload only when every
# NVIDIA device node has its /dev/char/MAJOR:MINOR link: with the systemd cgroup driver,
# runc hands systemd a container's device rules as /dev/char paths and leaves out the
# paths that do not exist (opencontainers/runc#3708); NVIDIA's driver creates no such
# links, so when systemd next reloads its units it re-applies the shorter list and the
# containers fail with "Failed to initialize NVML: Unknown Error" (NVIDIA/gpu-operator#485,
# NVIDIA/nvidia-container-toolkit#48). Every step that makes systemd reload
# (daemon-reload; enable and disable reload implicitly, systemctl(1) --no-reload; package
# scripts; `k0s install`) therefore calls ensure_nvidia_dev_char_links first, through
# systemd_reload, systemd_enable, systemd_disable and apt_get.

# nvidia_dev_char_missing: "MAJOR:MINOR PATH" for every NVIDIA device node (under /dev and
# /dev/nvidia-caps) whose /dev/char link is missing.
nvidia_dev_char_missing() {
  local node numbers link
  for node in "$ROOT"/dev/nvidia* "$ROOT"/dev/nvidia-caps/*; do
    [[ -c "$node" ]] || continue
    numbers="$(stat -c '%t %T' -- "$node")"
    link="$((16#${numbers% *})):$((16#${numbers#* }))"
    if [[ ! -L "$ROOT/dev/char/$link" && ! -e "$ROOT/dev/char/$link" ]]; then
      printf '%s %s\n' "$link" "${node#"$ROOT"}"
    fi
  done
}

# ensure_nvidia_dev_char_links: every NVIDIA device node has its /dev/char link. Does
# nothing on hosts without NVIDIA device nodes (no driver loaded: no GPU containers).
# Uses NVIDIA's `nvidia-ctk system create-dev-char-symlinks --create-all` when the
# toolkit is installed, then links whatever is still missing itself (no toolkit yet, or
# an nvidia-ctk too old for the driver).
ensure_nvidia_dev_char_links() {
  local missing link path
  missing="$(nvidia_dev_char_missing)"
  if [[ -z "$missing" ]]; then
    return 0
  fi
  if command -v nvidia-ctk >/dev/null 2>&1; then
    if ! nvidia-ctk system create-dev-char-symlinks --create-all >&2; then
      warn "nvidia-ctk could not create the /dev/char links; linking the device nodes directly"
    fi
    missing="$(nvidia_dev_char_missing)"
  fi
  if [[ -n "$missing" ]]; then
    mkdir -p -- "$ROOT/dev/char"
    while read -r link path; do
      ln -s -- "$path" "$ROOT/dev/char/$link"
    done <<<"$missing"
  fi
  missing="$(nvidia_dev_char_missing)"
  if [[ -n "$missing" ]]; then
    die "could not link the NVIDIA device nodes in /dev/char (${missing//$'\n'/, });" \
      "a systemd reload now would take the GPUs from running containers"
  fi
  log "changed: linked the NVIDIA device nodes in /dev/char, so systemd reloads leave" \
    "running GPU containers their devices"
}

# systemd_reload: `systemctl daemon-reload`, once the NVIDIA devices are linked.
systemd_reload() {
  ensure_nvidia_dev_char_links
  systemctl daemon-reload
}

# systemd_enable ARGS... / systemd_disable ARGS...: `systemctl enable|disable ARGS`, which
# reload systemd too, once the NVIDIA devices are linked.
systemd_enable() {
  ensure_nvidia_dev_char_links
  systemctl enable "$@"
}

systemd_disable() {
  ensure_nvidia_dev_char_links
  systemctl disable "$@"
}
