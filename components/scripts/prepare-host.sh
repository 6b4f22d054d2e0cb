#!/usr/bin/env bash
# Host settings Kubernetes and GPU workloads need: kernel arguments (GRUB drop-in),
# swap off, overlay/br_netfilter modules, sysctls and optionally the NFS client.
# Never reboots; kernel argument changes are flagged in /var/run/reboot-required.
set -euo pipefail
# shellcheck source=lib.sh
[[ -n "${GPU_CLUSTER_LIB_LOADED:-}" ]] || source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
# shellcheck source=os/lib.sh
[[ -n "${GPU_CLUSTER_OS_LIB_LOADED:-}" ]] || source "$(dirname "${BASH_SOURCE[0]}")/os/lib.sh"
: "${GPU_CLUSTER_STEP:=prepare-host}"

# Inputs: DISABLE_CPU_MITIGATIONS DISABLE_IOMMU INOTIFY_MAX_USER_INSTANCES INOTIFY_MAX_USER_WATCHES INSTALL_NFS_CLIENT
# Optional inputs: EXTRA_KERNEL_ARGS

GRUB_DROPIN=/etc/default/grub.d/90-gpu-cluster.cfg
MODULES_FILE=/etc/modules-load.d/gpu-cluster.conf
SYSCTL_FILE=/etc/sysctl.d/90-gpu-cluster.conf
FSTAB_SWAP_MARKER="# gpu-cluster: swap disabled for Kubernetes:"
MODULES=(overlay br_netfilter)

check_inputs() {
  require_env DISABLE_IOMMU DISABLE_CPU_MITIGATIONS INOTIFY_MAX_USER_INSTANCES \
    INOTIFY_MAX_USER_WATCHES INSTALL_NFS_CLIENT
  : "${EXTRA_KERNEL_ARGS:=}"
  require_bool DISABLE_IOMMU DISABLE_CPU_MITIGATIONS INSTALL_NFS_CLIENT
  require_uint INOTIFY_MAX_USER_INSTANCES INOTIFY_MAX_USER_WATCHES
  local arg args=() bad=()
  read -r -a args <<<"$EXTRA_KERNEL_ARGS"
  for arg in "${args[@]}"; do
    # The arguments end up inside a double-quoted shell assignment read by grub-mkconfig.
    if [[ ! "$arg" =~ ^[A-Za-z0-9_.,:=/+@~-]+$ ]]; then
      bad+=("$arg")
    fi
  done
  if ((${#bad[@]} > 0)); then
    die "EXTRA_KERNEL_ARGS has unsupported characters in: ${bad[*]}"
  fi
}

# wanted_kernel_args: sets KERNEL_ARGS to the kernel arguments the config asks for, and
# MISSING_KERNEL_ARGS to those not on /proc/cmdline (the running kernel's); the check
# (check/prepare-host.sh) reads them too.
wanted_kernel_args() {
  local extra=() arg active=" "
  KERNEL_ARGS=()
  MISSING_KERNEL_ARGS=()
  if is_true "$DISABLE_IOMMU"; then
    # GPU peer-to-peer (NCCL over PCIe) needs the IOMMU off.
    KERNEL_ARGS+=(intel_iommu=off amd_iommu=off)
  fi
  if is_true "$DISABLE_CPU_MITIGATIONS"; then
    KERNEL_ARGS+=(mitigations=off)
  fi
  read -r -a extra <<<"$EXTRA_KERNEL_ARGS"
  KERNEL_ARGS+=("${extra[@]}")
  if [[ -r "$ROOT/proc/cmdline" ]]; then
    active=" $(<"$ROOT/proc/cmdline") "
  fi
  for arg in "${KERNEL_ARGS[@]}"; do
    [[ "$active" == *" $arg "* ]] || MISSING_KERNEL_ARGS+=("$arg")
  done
}

configure_kernel_args() {
  local args=() missing=()
  wanted_kernel_args
  args=("${KERNEL_ARGS[@]}")
  missing=("${MISSING_KERNEL_ARGS[@]}")

  if ((${#args[@]} == 0)); then
    remove_file "$GRUB_DROPIN"
  else
    write_file "$GRUB_DROPIN" 0644 <<EOF
# Managed by gpu-cluster (prepare-host); changes are overwritten.
# Kernel arguments for GPU nodes, appended to the distribution defaults.
GRUB_CMDLINE_LINUX_DEFAULT="\${GRUB_CMDLINE_LINUX_DEFAULT:-} ${args[*]}"
EOF
  fi
  if needs_follow_up "$FILE_CHANGED" update-grub; then
    update-grub
    follow_up_done update-grub
    log "changed: ran update-grub; the kernel arguments take effect after the next reboot"
    mark_reboot_required "kernel arguments changed (${args[*]:-none added})"
    return 0
  fi

  if ((${#missing[@]} > 0)); then
    log "kernel arguments already configured, active after the next reboot: ${missing[*]}"
  else
    log "kernel arguments already configured and active: ${args[*]:-none}"
  fi
}

disable_swap() {
  local swaps=()
  if [[ -r "$ROOT/proc/swaps" ]]; then
    mapfile -t swaps <"$ROOT/proc/swaps"
  fi
  # The first line of /proc/swaps is a header.
  if ((${#swaps[@]} > 1)); then
    swapoff -a
    log "changed: turned swap off (swapoff -a)"
  else
    log "swap is already off"
  fi

  if [[ ! -f "$ROOT/etc/fstab" ]]; then
    log "no /etc/fstab"
    return 0
  fi
  # Comment out active swap entries; already commented lines stay as they are.
  make_temp_dir
  awk -v marker="$FSTAB_SWAP_MARKER" '
    $0 !~ /^[[:space:]]*#/ && $3 == "swap" { print marker " " $0; next }
    { print }' "$ROOT/etc/fstab" >"$TEMP_DIR/fstab"
  write_file /etc/fstab "$(stat -c %a "$ROOT/etc/fstab")" <"$TEMP_DIR/fstab"
}

load_modules() {
  local module changed
  write_file "$MODULES_FILE" 0644 <<EOF
# Managed by gpu-cluster (prepare-host): needed by containerd and pod networking.
$(printf '%s\n' "${MODULES[@]}")
EOF
  changed=$FILE_CHANGED
  for module in "${MODULES[@]}"; do
    if ((changed)) || [[ ! -d "$ROOT/sys/module/$module" ]]; then
      modprobe "$module"
      log "changed: loaded kernel module $module"
    else
      log "kernel module $module is already loaded"
    fi
  done
}

configure_sysctls() {
  write_file "$SYSCTL_FILE" 0644 <<EOF
# Managed by gpu-cluster (prepare-host): Kubernetes networking and inotify limits.
net.bridge.bridge-nf-call-iptables = 1
net.bridge.bridge-nf-call-ip6tables = 1
net.ipv4.ip_forward = 1
fs.inotify.max_user_instances = $INOTIFY_MAX_USER_INSTANCES
fs.inotify.max_user_watches = $INOTIFY_MAX_USER_WATCHES
EOF
  if needs_follow_up "$FILE_CHANGED" sysctl; then
    sysctl --system >/dev/null
    follow_up_done sysctl
    log "changed: applied sysctls (sysctl --system)"
  fi
}

install_nfs_client() {
  if ! is_true "$INSTALL_NFS_CLIENT"; then
    log "NFS client not requested"
    return 0
  fi
  os_install_packages nfs-client
}

main() {
  check_inputs
  configure_kernel_args
  disable_swap
  load_modules
  configure_sysctls
  install_nfs_client
  log "host prepared"
}

main "$@"
