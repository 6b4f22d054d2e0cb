#!/usr/bin/env bash
# Host settings Kubernetes and GPU workloads need: kernel arguments (Ubuntu: a GRUB drop-in;
# EL9: grubby), swap off, overlay/br_netfilter modules, sysctls, SELinux's container policy
# and optionally the NFS client. Never reboots; kernel argument changes are flagged in /var/run/reboot-required.
set -euo pipefail
# shellcheck source=lib.sh
[[ -n "${GPU_CLUSTER_LIB_LOADED:-}" ]] || source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
# shellcheck source=os/lib.sh
[[ -n "${GPU_CLUSTER_OS_LIB_LOADED:-}" ]] || source "$(dirname "${BASH_SOURCE[0]}")/os/lib.sh"
# shellcheck source=os/selinux.sh
[[ -n "${GPU_CLUSTER_SELINUX_LIB_LOADED:-}" ]] || source "$(dirname "${BASH_SOURCE[0]}")/os/selinux.sh"
: "${GPU_CLUSTER_STEP:=prepare-host}"

# Inputs: DISABLE_CPU_MITIGATIONS DISABLE_IOMMU INOTIFY_MAX_USER_INSTANCES INOTIFY_MAX_USER_WATCHES INSTALL_NFS_CLIENT
# Optional inputs: EXTRA_KERNEL_ARGS NM_UNMANAGED_INTERFACES
#   NM_UNMANAGED_INTERFACES  the CNI's interface names (globs, space-separated) that
#                            NetworkManager, where it runs, must leave alone

GRUB_DROPIN=/etc/default/grub.d/90-gpu-cluster.cfg
# EL9: the arguments the program set, so that those it no longer wants are taken out again
# (grubby keeps no record of who added an argument), and the file kernels installed later take
# their arguments from.
KERNEL_ARGS_RECORD=/var/lib/gpu-cluster/kernel-args
KERNEL_CMDLINE=/etc/kernel/cmdline
NM_CONF=/etc/NetworkManager/conf.d/90-gpu-cluster-cni.conf
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
  : "${NM_UNMANAGED_INTERFACES:=}"
  read -r -a args <<<"$NM_UNMANAGED_INTERFACES"
  for arg in "${args[@]}"; do
    # An interface name with NetworkManager's globs, * and ? (NetworkManager.conf(5),
    # "Device List Format": interface-name:IFNAME, "Simple globbing is supported with * and ?").
    if [[ ! "$arg" =~ ^[A-Za-z0-9_.*?-]{1,15}$ ]]; then
      die "NM_UNMANAGED_INTERFACES has a word that is not an interface name: '$arg'"
    fi
  done
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

# configure_kernel_args: KERNEL_ARGS in the boot configuration, the family's way (below);
# a change takes effect at the next reboot, which it flags.
configure_kernel_args() {
  local missing=()
  wanted_kernel_args
  missing=("${MISSING_KERNEL_ARGS[@]}")
  KERNEL_ARGS_CHANGED=0
  os_do configure_kernel_args
  if ((KERNEL_ARGS_CHANGED)); then
    mark_reboot_required "kernel arguments changed (${KERNEL_ARGS[*]:-none added})"
  elif ((${#missing[@]} > 0)); then
    log "kernel arguments already configured, active after the next reboot: ${missing[*]}"
  else
    log "kernel arguments already configured and active: ${KERNEL_ARGS[*]:-none}"
  fi
}

# ubuntu_configure_kernel_args: KERNEL_ARGS appended to GRUB_CMDLINE_LINUX_DEFAULT in a drop-in
# that grub-mkconfig reads (Ubuntu's /etc/default/grub.d), then update-grub; the drop-in is
# the whole record, so an argument no longer wanted goes with it.
ubuntu_configure_kernel_args() {
  if ((${#KERNEL_ARGS[@]} == 0)); then
    remove_file "$GRUB_DROPIN"
  else
    write_file "$GRUB_DROPIN" 0644 <<EOF
# Managed by gpu-cluster (prepare-host); changes are overwritten.
# Kernel arguments for GPU nodes, appended to the distribution defaults.
GRUB_CMDLINE_LINUX_DEFAULT="\${GRUB_CMDLINE_LINUX_DEFAULT:-} ${KERNEL_ARGS[*]}"
EOF
  fi
  if needs_follow_up "$FILE_CHANGED" update-grub; then
    update-grub
    follow_up_done update-grub
    KERNEL_ARGS_CHANGED=1
    log "changed: ran update-grub; the kernel arguments take effect after the next reboot"
  fi
}

# el9_configure_kernel_args: KERNEL_ARGS on every installed kernel's boot entry and in
# /etc/kernel/cmdline, and the arguments the program set before but no longer wants out of
# both. On RHEL 9 each kernel's Boot Loader Specification entry holds its own options, which
# `grubby --update-kernel=ALL --args/--remove-args` changes (RHEL 9 "Managing, monitoring and
# updating the kernel", Configuring kernel command-line parameters); a kernel installed later
# gets its entry's options from /etc/kernel/cmdline (grub2's 20-grub.install,
# osbuild/osbuild-composer#1828), which grubby leaves alone (rhboot/grubby grubby-bls
# update_bls_fragment: entries only) and without which a later kernel loses them
# (rhboot/grubby#55). grubby's own --info=ALL says what the entries hold. An argument
# KEY=VALUE replaces the same KEY's other value, as grubby does (grubby-bls update_args).
# Arguments anything else set (NVIDIA's nvidia-kmod-common: rd.driver.blacklist=nouveau) stay.
el9_configure_kernel_args() {
  local previous=() dropped=() arg entries line need=0 found=0
  if [[ -f "$ROOT$KERNEL_ARGS_RECORD" ]]; then
    read -r -a previous <"$ROOT$KERNEL_ARGS_RECORD"
  fi
  for arg in "${previous[@]}"; do
    [[ " ${KERNEL_ARGS[*]} " == *" $arg "* ]] || dropped+=("$arg")
  done
  entries="$(grubby --info=ALL)"
  while IFS= read -r line; do
    # grubby-bls display_info_values: args="OPTIONS" for each entry.
    [[ "$line" == 'args="'*'"' ]] || continue
    found=1
    line=${line#args=\"}
    line=${line%\"}
    for arg in "${KERNEL_ARGS[@]}"; do
      [[ " $line " == *" $arg "* ]] || need=1
    done
    for arg in "${dropped[@]}"; do
      [[ " $line " != *" $arg "* ]] || need=1
    done
  done <<<"$entries"
  ((found)) || die "grubby --info=ALL lists no boot entry with arguments"
  if ((need)); then
    grubby --update-kernel=ALL ${KERNEL_ARGS[0]+"--args=${KERNEL_ARGS[*]}"} \
      ${dropped[0]+"--remove-args=${dropped[*]}"}
    KERNEL_ARGS_CHANGED=1
    log "changed: set the kernel arguments of every boot entry (grubby):" \
      "${KERNEL_ARGS[*]:-none}${dropped[0]+; removed ${dropped[*]}}"
  fi
  if [[ -f "$ROOT$KERNEL_CMDLINE" ]]; then
    make_temp_dir
    kernel_cmdline_with "$(<"$ROOT$KERNEL_CMDLINE")" "${dropped[*]}" >"$TEMP_DIR/cmdline"
    write_file "$KERNEL_CMDLINE" "$(stat -c %a "$ROOT$KERNEL_CMDLINE")" <"$TEMP_DIR/cmdline"
    ((FILE_CHANGED == 0)) || KERNEL_ARGS_CHANGED=1
  else
    log "no $KERNEL_CMDLINE: kernels installed later take the running kernel's arguments"
  fi
  if ((${#KERNEL_ARGS[@]} > 0)); then
    write_text "$KERNEL_ARGS_RECORD" 0644 "${KERNEL_ARGS[*]}"
  else
    remove_file "$KERNEL_ARGS_RECORD"
  fi
}

# kernel_cmdline_with LINE DROPPED: LINE (kernel arguments) without the words of DROPPED and
# with KERNEL_ARGS, each KEY=VALUE of KERNEL_ARGS in place of the same KEY's other values.
kernel_cmdline_with() {
  local words=() kept=() word arg drop
  read -r -a words <<<"$1"
  for word in "${words[@]}"; do
    drop=0
    [[ " $2 " != *" $word "* ]] || drop=1
    for arg in "${KERNEL_ARGS[@]}"; do
      if [[ "$word" == "$arg" || ("$arg" == *=* && "$word" == "${arg%%=*}="*) ]]; then
        drop=1
      fi
    done
    ((drop)) || kept+=("$word")
  done
  printf '%s\n' "${kept[*]}${KERNEL_ARGS[0]+ ${KERNEL_ARGS[*]}}"
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

# leave_cni_interfaces: where NetworkManager runs, a conf.d file that tells it to leave the
# CNI's interfaces alone, "unmanaged-devices" in [keyfile] (NetworkManager.conf(5)); its own
# routes on them would otherwise interfere with the CNI's (docs.rke2.io/known_issues,
# NetworkManager). Read at a reload, which "will suffice" before the CNI has made them; where
# they exist already the same page asks for a reboot, which this flags. Without NetworkManager
# (Ubuntu servers: netplan and systemd-networkd) nothing is written.
leave_cni_interfaces() {
  local names=() name devices=""
  read -r -a names <<<"$NM_UNMANAGED_INTERFACES"
  if ((${#names[@]} == 0)) || [[ ! -x "$ROOT/usr/sbin/NetworkManager" ]]; then
    remove_file "$NM_CONF"
    return 0
  fi
  for name in "${names[@]}"; do
    devices+="${devices:+;}interface-name:$name"
  done
  write_file "$NM_CONF" 0644 <<EOF
# Managed by gpu-cluster (prepare-host): NetworkManager leaves the CNI's interfaces alone.
[keyfile]
unmanaged-devices=$devices
EOF
  if needs_follow_up "$FILE_CHANGED" reload-network-manager; then
    if systemctl is-active --quiet NetworkManager.service; then
      systemctl reload NetworkManager.service
      log "changed: NetworkManager reloaded; it leaves ${names[*]} alone"
    fi
    follow_up_done reload-network-manager
    if cni_interfaces_present "${names[@]}"; then
      mark_reboot_required "NetworkManager managed the CNI's interfaces until now"
    fi
  fi
}

# cni_interfaces_present GLOB...: some network interface's name matches a GLOB.
cni_interfaces_present() {
  local interface glob
  for interface in "$ROOT"/sys/class/net/*; do
    for glob in "$@"; do
      # shellcheck disable=SC2053 # GLOB is a pattern
      [[ "${interface##*/}" != $glob ]] || return 0
    done
  done
  return 1
}

# prepare_selinux: where SELinux labels files, the policy containers run under
# (container-selinux: container_t, the container_file_t labels; k0s docs/selinux.md and
# docs.rke2.io/security/selinux require it) and semanage, with which the distribution's steps
# label their own paths. SELinux stays in the mode the host has; nothing turns it off.
prepare_selinux() {
  local mode
  mode="$(selinux_mode)"
  if [[ "$mode" == disabled ]]; then
    log "SELinux is not enabled: no container policy needed"
    return 0
  fi
  os_install_packages container-selinux semanage
  log "SELinux is $mode; containers run under container-selinux's policy"
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
  leave_cni_interfaces
  prepare_selinux
  install_nfs_client
  log "host prepared"
}

main "$@"
