#!/usr/bin/env bash
# Read-only: what `gpu-cluster init` needs to write a host's entry, one fact per line,
# tab-separated (the key first), to stdout. Changes nothing and needs no root.
set -euo pipefail
# It reads /proc, /sys and /etc/os-release, asks `ip` for addresses and `nvidia-smi` for GPU
# names when a driver is installed, and tries `sudo -n true` (what every step runs under).
# The step library's host readers (ROOT, count_nvidia_gpus, ..., and os/lib.sh's
# os_release_field); init sends them ahead of this script.
# shellcheck source=../components/scripts/lib.sh
[[ -n "${GPU_CLUSTER_LIB_LOADED:-}" ]] ||
  source "$(dirname "${BASH_SOURCE[0]}")/../components/scripts/lib.sh"
# shellcheck source=../components/scripts/os/lib.sh
[[ -n "${GPU_CLUSTER_OS_LIB_LOADED:-}" ]] ||
  source "$(dirname "${BASH_SOURCE[0]}")/../components/scripts/os/lib.sh"
: "${GPU_CLUSTER_STEP:=discover}"

fact() {
  local IFS=$'\t'
  printf '%s\n' "$*"
}

os_release() {
  os_release_file >/dev/null || return 0
  fact os_id "$(os_release_field ID)"
  fact os_version "$(os_release_field VERSION_ID)"
  fact os_name "$(os_release_field PRETTY_NAME)"
}

# Physical NICs (those with a device behind them) and their IPv4 addresses; `ip -o`
# prints one address per line: "2: eno1    inet 192.168.2.2/24 brd ... scope global eno1".
nics() {
  local nic name _index _name family address _rest
  for nic in "$ROOT"/sys/class/net/*; do
    [[ -e "$nic/device" ]] || continue
    name="${nic##*/}"
    fact nic "$name" "$(<"$nic/address")"
    while read -r _index _name family address _rest; do
      if [[ "$family" == inet ]]; then
        fact nic_address "$name" "$address"
      fi
    done < <(ip -o -4 addr show dev "$name" 2>/dev/null || true)
  done
}

gpus() {
  local names name
  fact gpus "$(count_nvidia_gpus)"
  fact nvswitches "$(count_nvswitches)"
  # "NVRM version: NVIDIA UNIX x86_64 Kernel Module  580.95.05  Thu Sep ..." once the
  # driver is loaded.
  if [[ -r "$ROOT/proc/driver/nvidia/version" ]]; then
    fact driver "$(sed -n 's/^NVRM version:.* Kernel Module *\([0-9.]*\).*/\1/p' \
      "$ROOT/proc/driver/nvidia/version")"
  fi
  if command -v nvidia-smi >/dev/null &&
    names="$(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null)"; then
    while IFS= read -r name; do
      if [[ -n "$name" ]]; then
        fact gpu_name "$name"
      fi
    done <<<"$names"
  fi
}

memory_and_disks() {
  local key value disk
  while read -r key value _; do
    [[ "$key" == MemTotal: ]] && fact memory_kib "$value"
  done <"$ROOT/proc/meminfo"
  for disk in "$ROOT"/sys/block/*; do
    # Whole disks have a device behind them; loop, ram and dm devices do not.
    if [[ -e "$disk/device" ]]; then
      fact disk "${disk##*/}" "$(($(<"$disk/size") * 512))"
    fi
  done
}

main() {
  fact hostname "$(<"$ROOT/proc/sys/kernel/hostname")"
  os_release
  nics
  gpus
  memory_and_disks
  if sudo -n true 2>/dev/null; then
    fact sudo yes
  else
    fact sudo no
  fi
}

main "$@"
