#!/usr/bin/env bash
# prepare-host's check beyond what its create converges: the kernel arguments active in
# the running kernel, and the sysctls it writes live in the kernel.
# shellcheck shell=bash disable=SC2154 # DISABLE_IOMMU, SYSCTL_FILE, ...: prepare-host.sh's

# check_kernel_args_active: every configured kernel argument is on /proc/cmdline
# (prepare-host.sh wanted_kernel_args).
check_kernel_args_active() {
  local missing=()
  wanted_kernel_args
  missing=("${MISSING_KERNEL_ARGS[@]}")
  if ((${#missing[@]} > 0)); then
    drift "kernel arguments not active in the running kernel: ${missing[*]} (they take" \
      "effect at the next reboot)"
  fi
}

# check_live_sysctls: each `key = value` of the sysctl file the step writes is the
# kernel's value now (sysctl -n).
check_live_sysctls() {
  local key value live
  while IFS='=' read -r key value; do
    key="${key//[[:space:]]/}"
    value="${value#"${value%%[![:space:]]*}"}"
    [[ -n "$key" && "$key" != \#* ]] || continue
    live="$(sysctl -n "$key" 2>/dev/null)" || live=""
    if [[ "$live" != "$value" ]]; then
      drift "sysctl $key is ${live:-unreadable} in the kernel, not $value"
    fi
  done <"$(check_wanted_file "$SYSCTL_FILE")"
}

check_kernel_args_active
check_live_sysctls
