#!/usr/bin/env bash
# GPU hosts only: the NVIDIA driver branch (with Fabric Manager on NVSwitch hosts), the pinned
# NVIDIA Container Toolkit, the /dev/char links and the distribution's containerd drop-in for
# the nvidia runtime (if it needs one). Never reboots; flags reboot-required.
set -euo pipefail
# shellcheck source=lib.sh
[[ -n "${GPU_CLUSTER_LIB_LOADED:-}" ]] || source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
# shellcheck source=os/lib.sh
[[ -n "${GPU_CLUSTER_OS_LIB_LOADED:-}" ]] || source "$(dirname "${BASH_SOURCE[0]}")/os/lib.sh"
# The repositories' keys, pinned by fingerprint (both families).
# shellcheck source=keys/lib.sh
[[ -n "${GPU_CLUSTER_KEYS_LIB_LOADED:-}" ]] || source "$(dirname "${BASH_SOURCE[0]}")/keys/lib.sh"
# What differs by OS family, which os_do picks: where the packages come from, how they are
# held at their versions.
# shellcheck source=nvidia/ubuntu.sh
[[ -n "${GPU_CLUSTER_NVIDIA_UBUNTU_LOADED:-}" ]] || source "$(dirname "${BASH_SOURCE[0]}")/nvidia/ubuntu.sh"
# shellcheck source=nvidia/el9.sh
[[ -n "${GPU_CLUSTER_NVIDIA_EL9_LOADED:-}" ]] || source "$(dirname "${BASH_SOURCE[0]}")/nvidia/el9.sh"
# shellcheck source=os/selinux.sh
[[ -n "${GPU_CLUSTER_SELINUX_LIB_LOADED:-}" ]] || source "$(dirname "${BASH_SOURCE[0]}")/os/selinux.sh"
: "${GPU_CLUSTER_STEP:=install-nvidia}"

# Inputs: CONTAINERD_DROPIN_CONTENT CONTAINERD_DROPIN_PATH NVIDIA_CONTAINER_TOOLKIT_VERSION NVIDIA_CUDA_REPO_KEY_FINGERPRINT NVIDIA_DRIVER_BRANCH NVIDIA_REPO_KEY_FINGERPRINT
# Optional inputs: INSTALL_DRIVER NVIDIA_APT_MIRROR NVSWITCH
#   NVIDIA_REPO_KEY_FINGERPRINT       the container toolkit repository's key (apt and RPM)
#   NVIDIA_CUDA_REPO_KEY_FINGERPRINT  the CUDA repository's RPM key (EL9's driver)

# NVIDIA_APT_MIRROR (nvidia.aptMirror): a mirror of the same repository (gpgkey, stable/deb/,
# and for EL9 hosts stable/rpm/).
NVIDIA_REPO_URL=https://nvidia.github.io/libnvidia-container
NOUVEAU_BLACKLIST=/etc/modprobe.d/gpu-cluster-blacklist-nouveau.conf
TOOLKIT_PACKAGES=(nvidia-container-toolkit nvidia-container-toolkit-base
  libnvidia-container-tools libnvidia-container1)
# NVIDIA's rule (NVIDIA/nvidia-docker#1671, NVIDIA/gpu-operator#485): whenever the driver
# binds, at every boot, link its device nodes in /dev/char. Under /etc, where local rules
# go and override a packaged file of the same name (udev(7)).
DEV_CHAR_RULE_FILE=/etc/udev/rules.d/71-nvidia-dev-char.rules
FABRIC_MANAGER_UNIT=nvidia-fabricmanager.service
# The installed driver's version, as the family's fabric_manager_driver_version reads it.
DRIVER_VERSION_INSTALLED=""
# The toolkit's config (nvidia-container-toolkit v1.19.1 api/config/v1/config.go:35,
# RelativeFilePath under /etc), read by its runtime and hook at every container start.
TOOLKIT_CONFIG=/etc/nvidia-container-runtime/config.toml
# GPUs only as the device plugin allocates them: an unprivileged container's
# NVIDIA_VISIBLE_DEVICES is ignored, and the plugin's list comes as /dev/null mounts under
# /var/run/nvidia-container-devices (v1.19.1 api/config/v1/config.go:64-65, the keys;
# internal/config/image/cuda_image.go:258-292 VisibleDevices, :358-387 the mounts, which
# must come from the host's /dev/null). The defaults are true and false (api/config/v1/
# toml.go:255-256): any pod of the nvidia runtime could name every GPU of its node.
TOOLKIT_SETTINGS=(accept-nvidia-visible-devices-envvar-when-unprivileged=false
  accept-nvidia-visible-devices-as-volume-mounts=true)

check_inputs() {
  : "${INSTALL_DRIVER:=true}" "${NVSWITCH:=auto}"
  local required=(NVIDIA_DRIVER_BRANCH NVIDIA_CONTAINER_TOOLKIT_VERSION CONTAINERD_DROPIN_PATH
    NVIDIA_REPO_KEY_FINGERPRINT NVIDIA_CUDA_REPO_KEY_FINGERPRINT)
  # Given but empty: no drop-in (RKE2 adds the runtime when it finds the toolkit).
  [[ -v CONTAINERD_DROPIN_CONTENT ]] || required+=(CONTAINERD_DROPIN_CONTENT)
  require_env "${required[@]}"
  require_uint NVIDIA_DRIVER_BRANCH
  require_bool INSTALL_DRIVER
  if [[ ! "$NVSWITCH" =~ ^(auto|true|false)$ ]]; then
    die "NVSWITCH must be auto, true or false, got '$NVSWITCH'"
  fi
  if [[ ! "$NVIDIA_CONTAINER_TOOLKIT_VERSION" =~ ^[0-9][0-9A-Za-z.+~:-]*$ ]]; then
    die "NVIDIA_CONTAINER_TOOLKIT_VERSION '$NVIDIA_CONTAINER_TOOLKIT_VERSION' is not a package version"
  fi
  check_fingerprints NVIDIA_REPO_KEY_FINGERPRINT NVIDIA_CUDA_REPO_KEY_FINGERPRINT
  die_on_input_problems
  if [[ "$CONTAINERD_DROPIN_PATH" != /* || "$CONTAINERD_DROPIN_PATH" == *..* ]]; then
    die "CONTAINERD_DROPIN_PATH must be an absolute path without '..', got '$CONTAINERD_DROPIN_PATH'"
  fi
  if [[ -n "${NVIDIA_APT_MIRROR:-}" ]]; then
    check_download_url NVIDIA_APT_MIRROR
    NVIDIA_REPO_URL=${NVIDIA_APT_MIRROR%/}
  fi
}

# driver_version: the version nvidia-smi reports for the first GPU, or nothing
# when there is no working driver.
driver_version() {
  local version
  if ! command -v nvidia-smi >/dev/null 2>&1; then
    return 0
  fi
  if version="$(nvidia-smi --query-gpu=driver_version --format=csv,noheader 2>/dev/null)"; then
    printf '%s\n' "${version%%$'\n'*}"
  fi
}

# module_version: the version of the loaded nvidia kernel module (the driver sets it,
# MODULE_VERSION(NV_VERSION_STRING), and sysfs shows it), or nothing. Unlike nvidia-smi's,
# it is known while newer packages wait for a reboot.
module_version() {
  if [[ -r "$ROOT/sys/module/nvidia/version" ]]; then
    printf '%s\n' "$(<"$ROOT/sys/module/nvidia/version")"
  elif [[ -d "$ROOT/sys/module/nvidia" ]]; then
    driver_version
  fi
}

# install_driver: the family's driver of NVIDIA_DRIVER_BRANCH (nvidia/ubuntu.sh,
# nvidia/el9.sh), loaded now or after the reboot it flags.
install_driver() {
  local version
  version="$(driver_version)"
  if [[ -n "$version" && "${version%%.*}" == "$NVIDIA_DRIVER_BRANCH" ]]; then
    log "NVIDIA driver $version is already installed and loaded (branch $NVIDIA_DRIVER_BRANCH)"
    return 0
  fi
  if [[ -n "$version" ]]; then
    log "NVIDIA driver $version is loaded; installing branch $NVIDIA_DRIVER_BRANCH"
  fi
  os_do install_nvidia_driver
  load_driver
}

# load_driver: loads the freshly installed kernel module when possible, otherwise
# prepares for and flags the reboot that loads it.
load_driver() {
  local branch=$NVIDIA_DRIVER_BRANCH version
  if [[ -d "$ROOT/sys/module/nouveau" ]]; then
    write_file "$NOUVEAU_BLACKLIST" 0644 <<'EOF'
# Managed by gpu-cluster (install-nvidia): the NVIDIA driver cannot load while
# nouveau drives the GPUs.
blacklist nouveau
options nouveau modeset=0
EOF
    if needs_follow_up "$FILE_CHANGED" update-initramfs; then
      os_do rebuild_initramfs
      follow_up_done update-initramfs
      log "changed: rebuilt the initramfs without nouveau"
    fi
    mark_reboot_required "nouveau is loaded; the NVIDIA driver loads after the next reboot"
    return 0
  fi
  if [[ -d "$ROOT/sys/module/nvidia" ]]; then
    version="$(driver_version)"
    if [[ "${version%%.*}" != "$branch" ]]; then
      mark_reboot_required "an older NVIDIA kernel module is loaded; branch $branch loads after the next reboot"
    fi
    return 0
  fi
  if ! modprobe nvidia; then
    die "modprobe nvidia failed; check dmesg (Secure Boot may need the module signing key enrolled)"
  fi
  log "changed: loaded the nvidia kernel module"
}

# allow_device_access: where SELinux labels files, containers may use the device nodes they
# were given (the GPUs the device plugin allocated): container-selinux's container_use_devices
# boolean, which NVIDIA's RHEL 9 guide sets and finds sufficient for GPU workloads from
# toolkit 1.17.9 (NVIDIA/cloud-native-docs edge/nvidia-gpu-with-device-edge.rst, 52dcb7b8).
# Without it container_t may not open /dev/nvidia* (xserver_misc_device_t). A container still
# gets only the devices its runtime put in it.
allow_device_access() {
  if selinux_enabled; then
    selinux_boolean_on container_use_devices
  fi
}

configure_runtime() {
  if [[ -z "$CONTAINERD_DROPIN_CONTENT" ]]; then
    log "no containerd drop-in: the distribution adds the nvidia runtime itself"
    return 0
  fi
  # k0s watches this folder and reloads its containerd when a drop-in changes.
  write_text "$CONTAINERD_DROPIN_PATH" 0644 "$CONTAINERD_DROPIN_CONTENT"
}

# configure_toolkit: TOOLKIT_SETTINGS in the toolkit's config, the rest of it as it is. The
# toolkit's own editor writes it (`nvidia-ctk config`, as the package's postinst does,
# packaging/debian/nvidia-container-toolkit-base.postinst), into a temporary file first so an
# unchanged config is not rewritten. The runtime reads it at each container start: no restart.
configure_toolkit() {
  local setting args=()
  for setting in "${TOOLKIT_SETTINGS[@]}"; do
    args+=(--set "$setting")
  done
  make_temp_dir
  if ! nvidia-ctk --quiet config --config-file="$ROOT$TOOLKIT_CONFIG" "${args[@]}" \
    --output="$TEMP_DIR/config.toml"; then
    die "nvidia-ctk config could not set ${TOOLKIT_SETTINGS[*]} in $TOOLKIT_CONFIG"
  fi
  write_file "$TOOLKIT_CONFIG" 0644 <"$TEMP_DIR/config.toml"
}

# link_device_nodes: NVIDIA's udev rule for the boots to come and, with the driver loaded,
# the links now. nvidia-ctk --create-all also links the nodes the driver creates later
# (nvidia-uvm on first use), which a container started before the next boot may get; it
# only adds links that are missing.
link_device_nodes() {
  local before after
  write_file "$DEV_CHAR_RULE_FILE" 0644 <<'EOF'
# Managed by gpu-cluster (install-nvidia): NVIDIA's rule linking the driver's device
# nodes in /dev/char, so a systemd reload leaves running GPU containers their devices.
ACTION=="add", DEVPATH=="/bus/pci/drivers/nvidia", RUN+="/usr/bin/nvidia-ctk system create-dev-char-symlinks --create-all"
EOF
  if [[ ! -d "$ROOT/sys/module/nvidia" ]]; then
    log "the NVIDIA driver is not loaded yet; the udev rule links its device nodes when it is"
    return 0
  fi
  before="$(dev_char_links)"
  make_temp_dir
  # Its log names every possible link, made or already there: shown only on failure.
  if ! nvidia-ctk system create-dev-char-symlinks --create-all >"$TEMP_DIR/nvidia-ctk" 2>&1; then
    cat "$TEMP_DIR/nvidia-ctk" >&2
    die "nvidia-ctk system create-dev-char-symlinks --create-all failed"
  fi
  # Nodes it does not list (the NVSwitches' nvidia-nvswitch*) are linked directly.
  ensure_nvidia_dev_char_links
  after="$(dev_char_links)"
  if [[ "$before" == "$after" ]]; then
    log "unchanged: the NVIDIA device nodes are linked in /dev/char"
  else
    log "changed: linked the NVIDIA device nodes in /dev/char (nvidia-ctk --create-all)"
  fi
}

# dev_char_links: the /dev/char links to NVIDIA device nodes, "NAME -> TARGET" a line.
dev_char_links() {
  local link target
  for link in "$ROOT"/dev/char/*; do
    if [[ -L "$link" ]]; then
      target="$(readlink -- "$link")"
      if [[ "$target" == */nvidia* ]]; then
        printf '%s -> %s\n' "${link##*/}" "$target"
      fi
    fi
  done
}

# fabric_manager_needed: success when this host needs NVIDIA Fabric Manager: NVSWITCH is
# true, or auto and NVSwitches are on the PCI bus (see count_nvswitches).
fabric_manager_needed() {
  local switches
  switches="$(count_nvswitches)"
  case "$NVSWITCH" in
    true)
      if ((switches == 0)); then
        warn "nvswitch is true but no NVSwitch (NVIDIA, PCI class 0x068000) is on the PCI" \
          "bus; installing Fabric Manager as configured"
      fi
      ;;
    auto)
      if ((switches == 0)); then
        log "no NVSwitch on the PCI bus: no Fabric Manager needed"
        return 1
      fi
      log "$switches NVSwitch(es) on the PCI bus: CUDA needs Fabric Manager"
      ;;
    false)
      if ((switches > 0)); then
        warn "$switches NVSwitch(es) on the PCI bus but nvswitch is false: CUDA fails on this" \
          "host until a Fabric Manager of the driver's version runs"
      fi
      return 1
      ;;
  esac
}

# install_toolkit: TOOLKIT_PACKAGES at NVIDIA_CONTAINER_TOOLKIT_VERSION (apt's version, or RPM's
# VERSION-RELEASE: NVIDIA publishes both as <version>-1), installed over any other version,
# up or down, and held there. The family says how to install packages at a version
# (install_versions) and how to hold them (hold_packages).
install_toolkit() {
  local want=$NVIDIA_CONTAINER_TOOLKIT_VERSION current=""
  if os_do package_installed nvidia-container-toolkit; then
    current="$(os_do package_version nvidia-container-toolkit | head -n 1)"
  fi
  if [[ "$current" == "$want" ]]; then
    log "NVIDIA Container Toolkit $want is already installed"
  else
    os_do install_versions "$want" "${TOOLKIT_PACKAGES[@]}"
    log "changed: installed NVIDIA Container Toolkit $want${current:+ (was $current)}"
  fi
  os_do hold_packages "${TOOLKIT_PACKAGES[@]}"
}

# install_fabric_manager: Fabric Manager and NSCQ at exactly the driver's version, held there
# with the driver; then the service (run_fabric_manager). Fabric Manager must match the driver
# (canonical/apt-packaging-fabric-manager README: "the version of fabricmanager must match the
# NVIDIA driver installed"). The family says which packages (fabric_manager_packages), the
# installed driver's version (fabric_manager_driver_version, which dies without a driver of
# its own; in DRIVER_VERSION_INSTALLED), a package's version (package_upstream), how to ask for
# one at a version in messages (fabric_manager_spec), install them at a version
# (install_fabric_manager_at) and hold them (hold_packages).
install_fabric_manager() {
  local want packages package current outdated=() pinned=() was=() changed=0
  read -r -a packages <<<"$(os_do fabric_manager_packages)"
  os_do fabric_manager_driver_version
  want=$DRIVER_VERSION_INSTALLED
  for package in "${packages[@]}"; do
    current="$(os_do package_upstream "$package")"
    if [[ "$current" != "$want" ]]; then
      outdated+=("$package")
      pinned+=("$(os_do fabric_manager_spec "$package" "$want")")
      was+=("$package ${current:-none}")
    fi
  done
  if ((${#pinned[@]} > 0)); then
    if ! os_do install_fabric_manager_at "$want" "${outdated[@]}"; then
      die "could not install ${pinned[*]}: Fabric Manager must be the driver's version $want" \
        "($(os_do fabric_manager_source "${packages[@]}"))"
    fi
    for package in "${packages[@]}"; do
      current="$(os_do package_upstream "$package")"
      if [[ "$current" != "$want" ]]; then
        die "$package is at $current after installing it, not the driver's version $want"
      fi
    done
    changed=1
    log "changed: installed Fabric Manager and NSCQ $want, the driver's version" \
      "(was: $(IFS=,; echo "${was[*]}"))"
  else
    log "Fabric Manager and NSCQ $want are already installed (the driver's version)"
  fi
  os_do hold_packages "${packages[@]}"
  run_fabric_manager "$changed" "$want"
}

# run_fabric_manager CHANGED VERSION: the service enabled and, while the loaded driver is
# VERSION, running; restarted when CHANGED (a new version, or an earlier run's restart
# that did not finish). With another driver loaded (a reboot is pending) it starts at the
# next boot, with the driver it matches.
run_fabric_manager() {
  local changed=$1 want=$2 loaded
  if ! systemctl is-enabled --quiet "$FABRIC_MANAGER_UNIT"; then
    systemd_enable "$FABRIC_MANAGER_UNIT"
    log "changed: enabled $FABRIC_MANAGER_UNIT"
  fi
  loaded="$(module_version)"
  if [[ "$loaded" != "$want" ]]; then
    follow_up_done restart-fabric-manager
    log "Fabric Manager $want starts at the next boot, with the driver it matches" \
      "(loaded now: ${loaded:-none})"
    return 0
  fi
  if ! systemctl is-active --quiet "$FABRIC_MANAGER_UNIT"; then
    systemctl start "$FABRIC_MANAGER_UNIT"
    follow_up_done restart-fabric-manager
    log "changed: started $FABRIC_MANAGER_UNIT"
  elif needs_follow_up "$changed" restart-fabric-manager; then
    systemctl restart "$FABRIC_MANAGER_UNIT"
    follow_up_done restart-fabric-manager
    log "changed: restarted $FABRIC_MANAGER_UNIT for Fabric Manager $want"
  else
    log "$FABRIC_MANAGER_UNIT is already running"
  fi
  fabric_manager_running
}

# fabric_manager_running: dies unless the service is active.
fabric_manager_running() {
  if ! systemctl is-active --quiet "$FABRIC_MANAGER_UNIT"; then
    die "$FABRIC_MANAGER_UNIT is not running (journalctl -u $FABRIC_MANAGER_UNIT says why);" \
      "CUDA cannot use the GPUs of an NVSwitch host without it"
  fi
}

# unit_file_present UNIT: success when UNIT is in one of systemd's unit folders.
unit_file_present() {
  local dir
  for dir in /etc/systemd/system /run/systemd/system /usr/local/lib/systemd/system \
    /usr/lib/systemd/system /lib/systemd/system; do
    if [[ -e "$ROOT$dir/$1" ]]; then
      return 0
    fi
  done
  return 1
}

# image_fabric_manager: an image that ships the driver ships its Fabric Manager too (AWS's
# Deep Learning Base GPU AMI): it must be there, enabled and running.
image_fabric_manager() {
  if ! unit_file_present "$FABRIC_MANAGER_UNIT"; then
    die "this host needs Fabric Manager, but the image has none ($FABRIC_MANAGER_UNIT);" \
      "use an image that ships it with its driver, or installDriver: true"
  fi
  ensure_unit_running "$FABRIC_MANAGER_UNIT" 0
  fabric_manager_running
}

configure_fabric_manager() {
  if ! fabric_manager_needed; then
    return 0
  fi
  if is_true "$INSTALL_DRIVER"; then
    install_fabric_manager
  else
    image_fabric_manager
  fi
}

main() {
  check_inputs
  # Cloud GPU images and vGPU guests bring the driver; only the toolkit pin and the runtime
  # are ours then.
  if is_true "$INSTALL_DRIVER"; then
    install_driver
  else
    log "the NVIDIA driver is the host's own and is kept (INSTALL_DRIVER=false):" \
      "$(driver_version | grep . || echo 'none answers yet')"
  fi
  os_do configure_toolkit_repo
  install_toolkit
  configure_toolkit
  link_device_nodes
  allow_device_access
  configure_runtime
  configure_fabric_manager
  log "NVIDIA driver, container toolkit and containerd runtime configured"
}

main "$@"
