#!/usr/bin/env bash
# prepare-host's check beyond what its create converges: the kernel arguments active in
# the running kernel, and the sysctls it writes live in the kernel.
# shellcheck shell=bash disable=SC2154 # DISABLE_IOMMU, SYSCTL_FILE, ...: prepare-host.sh's

# check_kernel_args_active: every configured kernel argument is on /proc/cmdline. The
# arguments as configure_kernel_args in prepare-host.sh makes them.
check_kernel_args_active() {
  local args=() extra=() missing=() arg active=" "
  if is_true "$DISABLE_IOMMU"; then
    args+=(intel_iommu=off amd_iommu=off)
  fi
  if is_true "$DISABLE_CPU_MITIGATIONS"; then
    args+=(mitigations=off)
  fi
  read -r -a extra <<<"$EXTRA_KERNEL_ARGS"
  args+=("${extra[@]}")
  if [[ -r "$ROOT/proc/cmdline" ]]; then
    active=" $(<"$ROOT/proc/cmdline") "
  fi
  for arg in "${args[@]}"; do
    [[ "$active" == *" $arg "* ]] || missing+=("$arg")
  done
  if ((${#missing[@]} > 0)); then
    drift "kernel arguments not active in the running kernel: ${missing[*]} (they take" \
      "effect at a reboot after update-grub)"
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
