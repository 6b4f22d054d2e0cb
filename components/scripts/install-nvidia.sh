#!/usr/bin/env bash
# GPU hosts only: Ubuntu's NVIDIA server driver, the pinned NVIDIA Container Toolkit
# from NVIDIA's apt repository, and the containerd drop-in that k0s picks up to
# offer the nvidia runtime. Never reboots; flags /var/run/reboot-required instead.
set -euo pipefail
# shellcheck source=lib.sh
[[ -n "${GPU_CLUSTER_LIB_LOADED:-}" ]] || source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
: "${GPU_CLUSTER_STEP:=install-nvidia}"

NVIDIA_REPO_URL=https://nvidia.github.io/libnvidia-container
NVIDIA_KEYRING=/usr/share/keyrings/nvidia-container-toolkit-keyring.gpg
NVIDIA_SOURCES_LIST=/etc/apt/sources.list.d/nvidia-container-toolkit.list
NOUVEAU_BLACKLIST=/etc/modprobe.d/gpu-cluster-blacklist-nouveau.conf
TOOLKIT_PACKAGES=(nvidia-container-toolkit nvidia-container-toolkit-base
  libnvidia-container-tools libnvidia-container1)

check_inputs() {
  require_env NVIDIA_DRIVER_BRANCH NVIDIA_CONTAINER_TOOLKIT_VERSION CONTAINERD_DROPIN_PATH \
    CONTAINERD_DROPIN_CONTENT
  require_uint NVIDIA_DRIVER_BRANCH
  if [[ ! "$NVIDIA_CONTAINER_TOOLKIT_VERSION" =~ ^[0-9][0-9A-Za-z.+~:-]*$ ]]; then
    die "NVIDIA_CONTAINER_TOOLKIT_VERSION '$NVIDIA_CONTAINER_TOOLKIT_VERSION' is not an apt version"
  fi
  if [[ "$CONTAINERD_DROPIN_PATH" != /* || "$CONTAINERD_DROPIN_PATH" == *..* ]]; then
    die "CONTAINERD_DROPIN_PATH must be an absolute path without '..', got '$CONTAINERD_DROPIN_PATH'"
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

install_driver() {
  local branch=$NVIDIA_DRIVER_BRANCH version packages package missing=()
  packages=("nvidia-headless-${branch}-server" "nvidia-utils-${branch}-server")
  version="$(driver_version)"
  if [[ -n "$version" && "${version%%.*}" == "$branch" ]]; then
    log "NVIDIA driver $version is already installed and loaded (branch $branch)"
    return 0
  fi
  if [[ -n "$version" ]]; then
    log "NVIDIA driver $version is loaded; installing branch $branch"
  fi

  for package in "${packages[@]}"; do
    if ! package_installed "$package"; then
      missing+=("$package")
    fi
  done
  if ((${#missing[@]} > 0)); then
    apt_update_once
    apt_get install -y --allow-change-held-packages "${packages[@]}"
    log "changed: installed ${packages[*]}"
  else
    log "${packages[*]} already installed"
  fi
  hold_packages "${packages[@]}"
  load_driver
}

# hold_packages PKG...: keeps unattended upgrades from replacing the driver's user-space
# libraries under a loaded kernel module ("Driver/library version mismatch" in NVML).
hold_packages() {
  local held package missing=()
  held=" $(apt-mark showhold | tr '\n' ' ') "
  for package in "$@"; do
    if [[ "$held" != *" $package "* ]]; then
      missing+=("$package")
    fi
  done
  if ((${#missing[@]} == 0)); then
    log "already held: $*"
    return 0
  fi
  apt-mark hold "${missing[@]}" >/dev/null
  log "changed: held ${missing[*]} at their installed versions"
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
      update-initramfs -u
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

configure_toolkit_repo() {
  local list_changed
  if [[ -s "$ROOT$NVIDIA_KEYRING" ]]; then
    log "unchanged $NVIDIA_KEYRING"
  else
    make_temp_dir
    curl -fsSL --retry 5 -o "$TEMP_DIR/gpgkey" "$NVIDIA_REPO_URL/gpgkey"
    gpg --batch --yes --dearmor -o "$TEMP_DIR/keyring.gpg" "$TEMP_DIR/gpgkey"
    write_file "$NVIDIA_KEYRING" 0644 <"$TEMP_DIR/keyring.gpg"
  fi
  # apt substitutes $(ARCH) itself; it must stay literal in the file.
  # shellcheck disable=SC2016
  write_text "$NVIDIA_SOURCES_LIST" 0644 \
    "deb [signed-by=$NVIDIA_KEYRING] $NVIDIA_REPO_URL/stable/deb/"'$(ARCH)'" /"
  list_changed=$FILE_CHANGED
  if ((list_changed)); then
    apt_update_once
  fi
}

install_toolkit() {
  local want=$NVIDIA_CONTAINER_TOOLKIT_VERSION current="" package pinned=()
  if package_installed nvidia-container-toolkit; then
    current="$(package_version nvidia-container-toolkit)"
  fi
  if [[ "$current" == "$want" ]]; then
    log "NVIDIA Container Toolkit $want is already installed"
  else
    for package in "${TOOLKIT_PACKAGES[@]}"; do
      pinned+=("$package=$want")
    done
    apt_update_once
    apt_get install -y --allow-downgrades --allow-change-held-packages "${pinned[@]}"
    log "changed: installed NVIDIA Container Toolkit $want${current:+ (was $current)}"
  fi
  hold_packages "${TOOLKIT_PACKAGES[@]}"
}

configure_runtime() {
  # k0s watches this folder and reloads its containerd when a drop-in changes.
  write_text "$CONTAINERD_DROPIN_PATH" 0644 "$CONTAINERD_DROPIN_CONTENT"
}

main() {
  check_inputs
  # Cloud GPU images ship the driver; only the toolkit pin and the runtime are ours then.
  if is_true "${INSTALL_DRIVER:-true}"; then
    install_driver
  else
    log "the NVIDIA driver comes with the image (INSTALL_DRIVER=false)"
  fi
  configure_toolkit_repo
  install_toolkit
  configure_runtime
  log "NVIDIA driver, container toolkit and containerd runtime configured"
}

main "$@"
