#!/usr/bin/env bash
# After reboot-if-needed: checks that the host rebooted if it was to, that its kernel runs
# with the arguments prepare-host configured, and that the NVIDIA driver answers, before
# the host may join the cluster.
set -euo pipefail
# shellcheck source=lib.sh
[[ -n "${GPU_CLUSTER_LIB_LOADED:-}" ]] || source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
: "${GPU_CLUSTER_STEP:=verify-boot}"

# Inputs: GPU_COUNT
# Optional inputs: CHECK_DRIVER_BRANCH DISABLE_CPU_MITIGATIONS DISABLE_IOMMU EXTRA_KERNEL_ARGS NVIDIA_DRIVER_BRANCH NVSWITCH
#   GPU_COUNT   NVIDIA GPUs nvidia-smi must list (0: no driver check).
#   NVSWITCH    true, false or auto (NVSwitches on the PCI bus): Fabric Manager must run,
#               or CUDA cannot use the GPUs of an NVSwitch system.
#   NVIDIA_DRIVER_BRANCH, DISABLE_IOMMU, DISABLE_CPU_MITIGATIONS, EXTRA_KERNEL_ARGS
#               as for reboot-if-needed: only recorded (a change re-runs both steps).
#   CHECK_DRIVER_BRANCH  true: the loaded driver must be of NVIDIA_DRIVER_BRANCH (hosts
#               whose driver install-nvidia installs; an image's own may differ).
#               Default false.

BOOT_ID_FILE=/var/lib/gpu-cluster/reboot/boot-id-before
GRUB_DROPIN=/etc/default/grub.d/90-gpu-cluster.cfg

check_inputs() {
  require_env GPU_COUNT
  require_uint GPU_COUNT
  : "${NVSWITCH:=auto}"
  case "$NVSWITCH" in
    true | false | auto) ;;
    *) die "NVSWITCH must be true, false or auto, got '$NVSWITCH'" ;;
  esac
  : "${NVIDIA_DRIVER_BRANCH:=}" "${DISABLE_IOMMU:=}" "${DISABLE_CPU_MITIGATIONS:=}"
  : "${EXTRA_KERNEL_ARGS:=}" "${CHECK_DRIVER_BRANCH:=false}"
}

# configured_kernel_args: what prepare-host put in its GRUB drop-in.
configured_kernel_args() {
  [[ -f "$ROOT$GRUB_DROPIN" ]] || return 0
  # shellcheck disable=SC2016 # the drop-in's literal ${GRUB_CMDLINE_LINUX_DEFAULT:-}
  sed -n 's/^GRUB_CMDLINE_LINUX_DEFAULT="\${GRUB_CMDLINE_LINUX_DEFAULT:-} \(.*\)"$/\1/p' \
    "$ROOT$GRUB_DROPIN"
}

main() {
  local before now args=() missing=() arg active problems=() listed loaded
  check_inputs
  now="$(<"$ROOT/proc/sys/kernel/random/boot_id")"
  if [[ -f "$ROOT$BOOT_ID_FILE" ]]; then
    before="$(<"$ROOT$BOOT_ID_FILE")"
    if [[ "$before" == "$now" ]]; then
      die "the host was to reboot but has not (boot id $now unchanged)"
    fi
    log "the host rebooted"
    remove_file "$BOOT_ID_FILE"
  fi
  if [[ -e "$ROOT$REBOOT_REQUIRED_FILE" ]]; then
    warn "a reboot is still pending ($REBOOT_REQUIRED_FILE): what needs it is not active yet"
    return 0
  fi
  read -r -a args <<<"$(configured_kernel_args)"
  active=" $(<"$ROOT/proc/cmdline") "
  for arg in "${args[@]}"; do
    [[ "$active" == *" $arg "* ]] || missing+=("$arg")
  done
  if ((${#missing[@]} > 0)); then
    problems+=("the kernel runs without the configured arguments: ${missing[*]}")
  fi
  if ((GPU_COUNT > 0)); then
    if [[ -d "$ROOT/sys/module/nouveau" ]]; then
      problems+=("the nouveau driver is loaded")
    fi
    if ! listed="$(nvidia-smi -L 2>&1)"; then
      problems+=("nvidia-smi fails: ${listed//$'\n'/ }")
    elif (($(grep -c '^GPU [0-9]' <<<"$listed") != GPU_COUNT)); then
      problems+=("nvidia-smi lists $(grep -c '^GPU [0-9]' <<<"$listed") GPUs, not $GPU_COUNT")
    elif [[ "$CHECK_DRIVER_BRANCH" == true ]] && loaded="$(nvidia-smi \
      --query-gpu=driver_version --format=csv,noheader)" && [[ "$loaded" != "$NVIDIA_DRIVER_BRANCH".* ]]; then
      # The loaded module's version, e.g. 580.95.05, one line per GPU.
      problems+=("the loaded NVIDIA driver is ${loaded%%$'\n'*}, not of branch $NVIDIA_DRIVER_BRANCH")
    fi
    if [[ "$NVSWITCH" == true || ("$NVSWITCH" == auto && "$(count_nvswitches)" -gt 0) ]] &&
      ! systemctl is-active --quiet nvidia-fabricmanager.service; then
      problems+=("nvidia-fabricmanager.service is not running: CUDA cannot use the GPUs of an NVSwitch system")
    fi
  fi
  if ((${#problems[@]} > 0)); then
    printf -v arg '; %s' "${problems[@]}"
    die "${arg#; }"
  fi
  log "boot verified: kernel arguments active${args[*]:+ (${args[*]})}$( ((GPU_COUNT > 0)) && printf ', %s GPUs answer' "$GPU_COUNT")"
}

main "$@"
