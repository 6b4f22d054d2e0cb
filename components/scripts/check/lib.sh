#!/usr/bin/env bash
# Check mode of a step (`bash -s -- check` of its envelope): the step's own code runs, but
# reports what it would change as drift instead of changing it.
# shellcheck shell=bash disable=SC2317,SC2034 # called and read by the step script
#
# The envelope pastes it into gpu_cluster_check after lib.sh (and the folder's lib.sh)
# and before the step script, then the step's additions (check/<script>, what create
# does not act on but the config still decides: kernel arguments active, live sysctls,
# the loaded driver) and check_result. Boot user data never holds it (16 KiB limit).
#
# Nothing the check runs may change the host:
#   - PATH holds only CHECK_COMMANDS. A command not listed fails (exit 127), so a step
#     that later calls a new command fails its check ("could not check") instead of
#     running it.
#   - The listed commands that can also change things (systemctl, ip, sysctl, apt-mark,
#     rpm, grubby, nmcli) are functions here that pass their reading forms through and report
#     the others; so is setsebool, which is not listed.
#   - The commands and library functions that change things (write_file, remove_file,
#     apt_get, dnf_run, modprobe, chown, rm outside the temporary folders, ...) are
#     functions here that compare or report (os/lib.sh asks dpkg-query or rpm whether a
#     package is installed, and installs through apt_get or dnf_run). Redirections are not
#     intercepted: a checked step writes files through write_file and redirects only into
#     its TEMP_DIR.
# Each difference is one `drift: MESSAGE` line on stdout; logs stay on stderr. A step
# that fails after a drift was found (a verification after a change the check did not
# make) stops there: its message is one more drift line.
#
# Exit codes of check_result: 0 in sync, 3 drifted (the drift lines say what), anything
# else: could not check (the log on stderr says why).

CHECK_EXIT_DRIFT=3
# Commands the checked steps read with; mkdir, ln and mktemp only set up this library.
CHECK_COMMANDS=(apt-mark awk cat cmp cut diff dpkg-query getenforce getent getsebool gpg grep
  grubby head ip mktemp nft nmcli nvidia-smi paste readlink rm rpm sort stat sysctl systemctl tr
  uname)
# The first lines of a difference shown for a file others may read (no secret in it).
CHECK_DIFF_LINES=12

_check_dir="$(mktemp -d)"
_check_rm="$(command -v rm)"
# install-nvidia's `nvidia-ctk config --output=<temporary file>` (nvidia-ctk below).
_check_nvidia_ctk="$(command -v nvidia-ctk || true)"
# host-firewall's listing of the table it wants, made in a network namespace of its own.
_check_unshare="$(command -v unshare || true)"
CHECK_DRIFT_FILE="$_check_dir/drift"
: >"$CHECK_DRIFT_FILE"
command mkdir -- "$_check_dir/bin" "$_check_dir/wanted"
for _check_command in "${CHECK_COMMANDS[@]}"; do
  if _check_path="$(command -v -- "$_check_command")" && [[ "$_check_path" == /* ]]; then
    ln -s -- "$_check_path" "$_check_dir/bin/$_check_command"
  fi
done
PATH="$_check_dir/bin"
hash -r
# Drift lines reach stdout from command substitutions too.
exec {CHECK_STDOUT}>&1
_CHECK_STOPPED_BY=""

# checking: success (the step runs in check mode).
checking() {
  return 0
}

# drift MESSAGE...: records one difference from the config.
drift() {
  printf 'drift: %s\n' "$*" >>"$CHECK_DRIFT_FILE"
  printf 'drift: %s\n' "$*" >&"$CHECK_STDOUT"
}

# check_would_run COMMAND ARGS...: the step would run COMMAND here.
check_would_run() {
  drift "the step would run: $*"
}

# check_result: exits 0 when nothing drifted, CHECK_EXIT_DRIFT when something did.
check_result() {
  if [[ -s "$CHECK_DRIFT_FILE" ]]; then
    log "drifted from the config: $(grep -c '' "$CHECK_DRIFT_FILE") difference(s)"
    exit "$CHECK_EXIT_DRIFT"
  fi
  log "in sync with the config"
  exit 0
}

_check_on_exit() {
  local status=$1
  if [[ "$status" != 0 && "$status" != "$CHECK_EXIT_DRIFT" && -s "$CHECK_DRIFT_FILE" ]]; then
    drift "${_CHECK_STOPPED_BY:-the step failed (exit code $status)} (after the drift above;" \
      "the rest of the step was not checked)"
    status=$CHECK_EXIT_DRIFT
  fi
  _gc_cleanup
  # Last: it holds the PATH the cleanup ran with.
  "$_check_rm" -rf -- "$_check_dir"
  exit "$status"
}
trap '_check_on_exit "$?"' EXIT

die() {
  _CHECK_STOPPED_BY="$*"
  printf '%s %s\n' "$(log_prefix)" "$*" >&2
  exit 1
}

# write_file PATH MODE: compares stdin with host path PATH and its mode; FILE_CHANGED=1
# when create would write it. The wanted text stays readable for the step's additions
# (check_wanted_file).
write_file() {
  local path=$1 mode=$2 target wanted want_mode have_mode
  target="$ROOT$path"
  want_mode="$(printf '%o' "$((8#$mode))")"
  wanted="$(check_wanted_file "$path")"
  cat >"$wanted"
  FILE_CHANGED=1
  if [[ -d "$target" ]]; then
    die "cannot write $path: it is a directory"
  elif [[ ! -f "$target" ]]; then
    drift "$path is missing"
  elif ! cmp -s -- "$wanted" "$target"; then
    drift "$path differs from what the step writes"
    # Lines only of a file anyone may read: never a secret's.
    if ((8#$mode & 4)); then
      diff -U0 -- "$target" "$wanted" | grep -E '^[-+]([^-+]|$)' | head -n "$CHECK_DIFF_LINES" |
        while IFS= read -r line; do
          drift "  $path: ${line:0:1} ${line:1}"
        done || true
    fi
  elif [[ "$(stat -c %a -- "$target")" != "$want_mode" ]]; then
    have_mode="$(stat -c %a -- "$target")"
    drift "$path has mode $have_mode, not $want_mode"
  else
    FILE_CHANGED=0
    log "unchanged $path"
  fi
}

# check_wanted_file PATH: where write_file keeps the text the step wants at PATH.
check_wanted_file() {
  local name=${1//\//%}
  printf '%s/wanted/%s\n' "$_check_dir" "$name"
}

remove_file() {
  FILE_CHANGED=0
  if [[ -e "$ROOT$1" || -L "$ROOT$1" ]]; then
    FILE_CHANGED=1
    drift "$1 is present; the step removes it"
  else
    log "unchanged: $1 is absent"
  fi
}

mark_reboot_required() {
  drift "a reboot would be required: $1"
}

# needs_follow_up CHANGED NAME: as lib.sh's, without remembering NAME; an earlier run's
# unfinished NAME is drift.
needs_follow_up() {
  if [[ -e "$ROOT$FOLLOW_UP_DIR/$2" ]]; then
    drift "$2 is pending: an earlier run did not finish it"
    return 0
  fi
  [[ "$1" == 1 ]]
}

follow_up_done() {
  :
}

ensure_nvidia_dev_char_links() {
  local missing
  missing="$(nvidia_dev_char_missing)"
  if [[ -n "$missing" ]]; then
    drift "NVIDIA device nodes not linked in /dev/char: ${missing//$'\n'/, }"
  fi
}

apt_update_once() {
  :
}

apt_get() {
  check_would_run apt-get "$@"
}

# os/lib.sh's dnf on EL9 hosts: what the step would install.
dnf_run() {
  check_would_run dnf "$@"
}

# rpm: queries (-q, --query) pass; anything else (-i, -U, -e, --import) is reported.
rpm() {
  case "${1:-}" in
    -q | --query | -q?*) command rpm "$@" ;;
    *) check_would_run rpm "$@" ;;
  esac
}

# grubby: --info lists the boot entries; anything else (--update-kernel) is reported.
grubby() {
  case "${1:-}" in
    --info=*) command grubby "$@" ;;
    *) check_would_run grubby "$@" ;;
  esac
}

# SELinux (os/selinux.sh, install-nvidia): a boolean the step would set.
setsebool() {
  check_would_run setsebool "$@"
}

# Reading forms pass; the others are what the step would change.
systemctl() {
  case "${1:-}" in
    is-active | is-enabled | is-failed | show | cat | status) command systemctl "$@" ;;
    *) check_would_run systemctl "$@" ;;
  esac
}

ip() {
  local args=("$@")
  while [[ "${args[0]:-}" == -* ]]; do
    args=("${args[@]:1}")
  done
  if [[ "${args[1]:-show}" =~ ^(show|list|get)$ ]]; then
    command ip "$@"
  else
    check_would_run ip "$@"
  fi
}

# nmcli: what -g and -t show passes (route-to-vpc on EL9 reads a device's profile and its
# routes); anything else (connection modify, device reapply) is reported.
nmcli() {
  if [[ "${1:-}" =~ ^-(g|t)$ && " $* " == *" show "* ]]; then
    command nmcli "$@"
  else
    check_would_run nmcli "$@"
  fi
}

sysctl() {
  if [[ "${1:-}" == -n && " $* " != *=* ]]; then
    command sysctl "$@"
  else
    check_would_run sysctl "$@"
  fi
}

apt-mark() {
  case "${1:-}" in
    showhold | showmanual | showauto) command apt-mark "$@" ;;
    hold) drift "not held at their installed versions: ${*:2}" ;;
    *) check_would_run apt-mark "$@" ;;
  esac
}

modprobe() {
  drift "kernel module ${*: -1} is not loaded (the step would run: modprobe $*)"
}

swapoff() {
  drift "swap is on (the step would run: swapoff $*)"
}

# nvidia-ctk: linking the device nodes, which the check compares itself; `config` writing
# into a temporary folder (install-nvidia's toolkit config, which write_file then compares)
# runs, anything else is reported.
nvidia-ctk() {
  local arg output=""
  if [[ " $* " == *" system create-dev-char-symlinks "* ]]; then
    ensure_nvidia_dev_char_links
    return 0
  fi
  for arg in "$@"; do
    [[ "$arg" != --output=* ]] || output=${arg#--output=}
  done
  if [[ " $* " != *" config "* || " $* " == *" --in-place "* ]] || ! check_temporary "$output"; then
    check_would_run nvidia-ctk "$@"
    return 0
  fi
  if [[ -z "$_check_nvidia_ctk" ]]; then
    drift "nvidia-ctk is not installed (the NVIDIA Container Toolkit)"
    : >"$output"
    return 0
  fi
  "$_check_nvidia_ctk" "$@"
}

# check_temporary PATH: success when PATH is below one of the step's temporary folders.
check_temporary() {
  local dir
  for dir in "${_GPU_CLUSTER_TEMP_DIRS[@]}"; do
    [[ -z "$1" || "$1" != "$dir"/* ]] || return 0
  done
  return 1
}

# rm: only below the temporary folders (lib.sh's cleanup); anything else is reported.
rm() {
  local arg dir inside
  for arg in "$@"; do
    [[ "$arg" != -* ]] || continue
    inside=0
    for dir in "${_GPU_CLUSTER_TEMP_DIRS[@]}"; do
      [[ "$arg" != "$dir" && "$arg" != "$dir"/* ]] || inside=1
    done
    if ((!inside)); then
      check_would_run rm "$@"
      return 0
    fi
  done
  command rm "$@"
}

mkdir() {
  drift "folder ${*: -1} is missing (the step would run: mkdir $*)"
}

chown() {
  drift "${*: -1} is not owned by ${*: -2:1} (the step would run: chown $*)"
}

# nft: listing and `-c` (check only: nothing is committed) pass; anything else is reported.
nft() {
  local arg
  for arg in "$@"; do
    case "$arg" in
      -c | --check | list) command nft "$@"; return ;;
      -*) ;;
      *) break ;;
    esac
  done
  check_would_run nft "$@"
}

# unshare --net -- COMMAND...: a command of CHECK_COMMANDS in a new, empty network
# namespace, gone when it exits, so what it changes there changes nothing on the host
# (host-firewall's listing of the table it loads). Any other form is reported.
unshare() {
  if [[ "${1:-}" == --net && "${2:-}" == -- && -n "$_check_unshare" &&
    " ${CHECK_COMMANDS[*]} " == *" ${3:-} "* && -e "$_check_dir/bin/$3" ]]; then
    "$_check_unshare" --net -- "$_check_dir/bin/$3" "${@:4}"
  else
    check_would_run unshare "$@"
  fi
}

# gpg lists a key file's keys without importing them (--show-keys); it changes nothing else.
gpg() {
  if [[ " $* " == *" --show-keys "* ]]; then
    command gpg "$@"
  else
    check_would_run gpg "$@"
  fi
}

for _check_command in chmod curl dracut ln mv update-grub update-initramfs; do
  eval "$_check_command() { check_would_run $_check_command \"\$@\"; }"
done
unset _check_command _check_path
