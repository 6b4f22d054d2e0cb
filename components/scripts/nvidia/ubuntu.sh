# shellcheck shell=bash disable=SC2154,SC2034 # install-nvidia.sh's inputs; globals it reads
# install-nvidia on Ubuntu (os_do's ubuntu_ functions): Ubuntu's NVIDIA server driver, the
# container toolkit from NVIDIA's apt repository, Fabric Manager from Ubuntu's archive; each
# held at its installed version with apt-mark.

GPU_CLUSTER_NVIDIA_UBUNTU_LOADED=1
UBUNTU_NVIDIA_KEYRING=/usr/share/keyrings/nvidia-container-toolkit-keyring.gpg
UBUNTU_NVIDIA_SOURCES_LIST=/etc/apt/sources.list.d/nvidia-container-toolkit.list

# ubuntu_install_nvidia_driver: nvidia-headless-BRANCH-server and its utilities, held.
ubuntu_install_nvidia_driver() {
  local branch=$NVIDIA_DRIVER_BRANCH packages package missing=()
  packages=("nvidia-headless-${branch}-server" "nvidia-utils-${branch}-server")
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
  ubuntu_hold_packages "${packages[@]}"
}

# ubuntu_hold_packages PKG...: keeps unattended upgrades from replacing the driver's
# user-space libraries under a loaded kernel module ("Driver/library version mismatch" in
# NVML).
ubuntu_hold_packages() {
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

# ubuntu_rebuild_initramfs: the running kernel's initramfs, rebuilt.
ubuntu_rebuild_initramfs() {
  update-initramfs -u
}

ubuntu_configure_toolkit_repo() {
  # The key apt trusts for the repository is the one pinned by fingerprint
  # (config/versions.py), checked before it is written and at every run after.
  if is_pinned_key "$ROOT$UBUNTU_NVIDIA_KEYRING" "$NVIDIA_REPO_KEY_FINGERPRINT"; then
    log "unchanged $UBUNTU_NVIDIA_KEYRING (key $NVIDIA_REPO_KEY_FINGERPRINT)"
  else
    if [[ -e "$ROOT$UBUNTU_NVIDIA_KEYRING" ]]; then
      warn "$UBUNTU_NVIDIA_KEYRING does not hold exactly the pinned key" \
        "$NVIDIA_REPO_KEY_FINGERPRINT; replacing it"
    fi
    fetch_pinned_key "$NVIDIA_REPO_URL/gpgkey" "$NVIDIA_REPO_KEY_FINGERPRINT"
    gpg --batch --yes --dearmor -o "$TEMP_DIR/keyring.gpg" "$TEMP_DIR/gpgkey"
    write_file "$UBUNTU_NVIDIA_KEYRING" 0644 <"$TEMP_DIR/keyring.gpg"
  fi
  # apt substitutes $(ARCH) itself; it must stay literal in the file.
  # shellcheck disable=SC2016
  write_text "$UBUNTU_NVIDIA_SOURCES_LIST" 0644 \
    "deb [signed-by=$UBUNTU_NVIDIA_KEYRING] $NVIDIA_REPO_URL/stable/deb/"'$(ARCH)'" /"
  if ((FILE_CHANGED)); then
    apt_update_once
  fi
}

# ubuntu_install_versions VERSION PACKAGE...: apt-get install of each PACKAGE=VERSION, over
# held packages and down as well as up.
ubuntu_install_versions() {
  local version=$1 package specs=()
  shift
  for package in "$@"; do
    specs+=("$package=$version")
  done
  apt_update_once
  apt_get install -y --allow-downgrades --allow-change-held-packages "${specs[@]}"
}

# Fabric Manager on Ubuntu (install-nvidia.sh install_fabric_manager): Ubuntu's
# nvidia-fabricmanager-BRANCH and libnvidia-nscq-BRANCH, at the upstream version of
# nvidia-kernel-common-BRANCH-server, on which Ubuntu's package depends (packages.ubuntu.com,
# noble, nvidia-fabricmanager-580). The separately built packages' Debian revisions may
# differ, hence VERSION-*: apt takes a trailing * as a version prefix
# (apt-pkg/versionmatch.cc), as NVIDIA's driver container pins them (gpu-driver-container,
# ubuntu22.04/precompiled/nvidia-driver, fabricmanager_install).
ubuntu_fabric_manager_packages() {
  echo "nvidia-fabricmanager-$NVIDIA_DRIVER_BRANCH" "libnvidia-nscq-$NVIDIA_DRIVER_BRANCH"
}

ubuntu_fabric_manager_driver_version() {
  local driver_package="nvidia-kernel-common-${NVIDIA_DRIVER_BRANCH}-server"
  if ! package_installed "$driver_package"; then
    die "Fabric Manager must be the driver's version, but $driver_package (Ubuntu's" \
      "$NVIDIA_DRIVER_BRANCH-server driver) is not installed; install that driver, or set" \
      "nvswitch to false and run a Fabric Manager of the driver's version yourself"
  fi
  DRIVER_VERSION_INSTALLED="$(upstream_version "$(package_version "$driver_package")")"
}

# ubuntu_package_upstream PACKAGE: the installed PACKAGE's upstream version, or nothing.
ubuntu_package_upstream() {
  if package_installed "$1"; then
    upstream_version "$(package_version "$1")"
  fi
}

# ubuntu_fabric_manager_spec PACKAGE VERSION: what ubuntu_install_fabric_manager_at asks apt for.
ubuntu_fabric_manager_spec() {
  echo "$1=$2-*"
}

# ubuntu_install_fabric_manager_at VERSION PACKAGE...: at VERSION-*, any Debian revision.
ubuntu_install_fabric_manager_at() {
  ubuntu_install_versions "$1-*" "${@:2}"
}

ubuntu_fabric_manager_source() {
  echo "Ubuntu publishes $* in its multiverse component"
}
