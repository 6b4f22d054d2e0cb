# shellcheck shell=bash disable=SC2154,SC2034 # install-nvidia.sh's inputs; globals it reads
# install-nvidia on RHEL 9, Rocky Linux 9 and AlmaLinux 9 (os_do's el9_ functions): the driver
# from NVIDIA's CUDA repository for RHEL 9, its module stream of the branch with the open
# kernel modules built by DKMS; the container toolkit from NVIDIA's RPM repository; Fabric
# Manager and NSCQ at the driver's version. Each is locked at its installed version with dnf's
# versionlock plugin. Both repositories' keys are pinned by fingerprint and named by file, so
# dnf never fetches a key itself.

GPU_CLUSTER_NVIDIA_EL9_LOADED=1
EL9_CUDA_REPO_URL=https://developer.download.nvidia.com/compute/cuda/repos/rhel9
EL9_CUDA_REPO_FILE=/etc/yum.repos.d/cuda-rhel9.repo
EL9_CUDA_KEY_FILE=/etc/pki/rpm-gpg/RPM-GPG-KEY-NVIDIA-CUDA
EL9_TOOLKIT_REPO_FILE=/etc/yum.repos.d/nvidia-container-toolkit.repo
EL9_TOOLKIT_KEY_FILE=/etc/pki/rpm-gpg/RPM-GPG-KEY-NVIDIA-CONTAINER-TOOLKIT
# Where dnf keeps a module's enabled stream (libdnf ModulePersistor: [NAME] name, stream,
# profiles, state=enabled), and versionlock's list (its versionlock.conf's locklist).
EL9_MODULE_FILE=/etc/dnf/modules.d/nvidia-driver.module
EL9_VERSIONLOCK_LIST=/etc/dnf/plugins/versionlock.list
# The driver as NVIDIA's installation guide installs a branch with the open kernel modules on
# RHEL, Rocky Linux and AlmaLinux 8/9: `dnf module enable nvidia-driver:580-open`, then
# `dnf install nvidia-open` (driver-installation-guide, Kernel Modules, "Open GPU Kernel
# Modules Installation": "All releases beyond driver version 570 will use these packaging
# conventions"; "Starting in the 560 driver release series, the open kernel module flavor is
# the default and suggested installation", and it supports Turing and newer GPUs only).
# kmod-nvidia-open-dkms is its kernel module, built by DKMS for each kernel.
EL9_DRIVER_PACKAGE=nvidia-open
EL9_DRIVER_MODULE_PACKAGE=kmod-nvidia-open-dkms

# el9_cuda_arch: the folder of NVIDIA's CUDA repositories for this machine (x86_64; sbsa for
# Arm servers).
el9_cuda_arch() {
  local machine
  machine="$(uname -m)"
  case "$machine" in
    x86_64) echo x86_64 ;;
    aarch64) echo sbsa ;;
    *) die "NVIDIA's CUDA repository for RHEL 9 has no packages for $machine" ;;
  esac
}

# el9_cuda_repository: NVIDIA's CUDA repository for RHEL 9, as its cuda-rhel9.repo names it
# (id cuda-rhel9-ARCH), with the pinned key; NVIDIA signs both its packages and its
# metadata (NVIDIA/cuda-repo-management SIGNATURES.md, "RPM packages" and "RPM repo").
el9_cuda_repository() {
  local arch url
  arch="$(el9_cuda_arch)"
  url="$EL9_CUDA_REPO_URL/$arch"
  install_pinned_key "$url/D42D0685.pub" "$NVIDIA_CUDA_REPO_KEY_FINGERPRINT" "$EL9_CUDA_KEY_FILE"
  el9_repository "$EL9_CUDA_REPO_FILE" "cuda-rhel9-$arch" "cuda-rhel9-$arch" "$url" \
    "$EL9_CUDA_KEY_FILE" 1 1
}

# el9_configure_toolkit_repo: NVIDIA's container toolkit RPM repository with the pinned key.
# As NVIDIA's own nvidia-container-toolkit.repo (stable/rpm/): the metadata is signed, the
# packages are not (gpgcheck=0); the signed metadata holds each package's sha256.
el9_configure_toolkit_repo() {
  install_pinned_key "$NVIDIA_REPO_URL/gpgkey" "$NVIDIA_REPO_KEY_FINGERPRINT" \
    "$EL9_TOOLKIT_KEY_FILE"
  # dnf substitutes $basearch itself; it must stay literal in the file.
  # shellcheck disable=SC2016
  el9_repository "$EL9_TOOLKIT_REPO_FILE" nvidia-container-toolkit nvidia-container-toolkit \
    "$NVIDIA_REPO_URL/stable/rpm/"'$basearch' "$EL9_TOOLKIT_KEY_FILE" 0 1
}

# el9_module_stream: the enabled stream of the nvidia-driver module, nothing when none is.
el9_module_stream() {
  local line stream="" state=""
  [[ -f "$ROOT$EL9_MODULE_FILE" ]] || return 0
  while IFS= read -r line; do
    case "$line" in
      stream=*) stream=${line#stream=} ;;
      state=*) state=${line#state=} ;;
    esac
  done <"$ROOT$EL9_MODULE_FILE"
  if [[ "$state" == enabled ]]; then
    printf '%s\n' "$stream"
  fi
}

# el9_lock_spec PACKAGE: versionlock's entry for the installed PACKAGE
# (dnf-plugins-core 4.3 plugins/versionlock.py pkgtup2spec: NAME-EPOCH:VERSION-RELEASE.*,
# epoch 0 when it has none).
el9_lock_spec() {
  rpm -q --queryformat '%{NAME}-%{EPOCHNUM}:%{VERSION}-%{RELEASE}.*\n' "$1" 2>/dev/null | head -n 1
}

# el9_lock_packages PACKAGE...: each installed PACKAGE locked at its installed version, so no
# `dnf upgrade` replaces the driver's libraries under its loaded module ("Driver/library
# version mismatch" in NVML); a lock at another version is replaced.
el9_lock_packages() {
  local package spec stale=() missing=()
  os_install_packages versionlock
  for package in "$@"; do
    spec="$(el9_lock_spec "$package")"
    [[ -n "$spec" ]] || die "$package is not installed, so it cannot be locked at its version"
    if ! grep -Fxq -- "$spec" "$ROOT$EL9_VERSIONLOCK_LIST" 2>/dev/null; then
      missing+=("$package")
      if grep -q -- "^${package//./\\.}-[0-9]*:" "$ROOT$EL9_VERSIONLOCK_LIST" 2>/dev/null; then
        stale+=("$package")
      fi
    fi
  done
  if ((${#missing[@]} == 0)); then
    log "already locked at their versions: $*"
    return 0
  fi
  if ((${#stale[@]} > 0)); then
    dnf_run versionlock delete "${stale[@]}"
  fi
  dnf_run versionlock add "${missing[@]}"
  log "changed: locked ${missing[*]} at their installed versions"
}

# el9_unlock_packages PACKAGE...: no lock holds them at their installed versions any more,
# before they are installed at others.
el9_unlock_packages() {
  local package locked=()
  for package in "$@"; do
    if grep -q -- "^${package//./\\.}-[0-9]*:" "$ROOT$EL9_VERSIONLOCK_LIST" 2>/dev/null; then
      locked+=("$package")
    fi
  done
  if ((${#locked[@]} > 0)); then
    dnf_run versionlock delete "${locked[@]}"
    log "changed: unlocked ${locked[*]}"
  fi
}

# el9_kernel_packages: what DKMS builds the modules with: DKMS itself (EPEL's), the running
# kernel's kernel-devel (the tree it builds against, /usr/src/kernels/$(uname -r)), so that
# the modules load without a reboot, and kernel-headers. kernel-devel-matched as well, as
# NVIDIA's guide installs it on EL9 (driver-installation-guide, Oracle Linux: `dnf install
# kernel-devel-matched kernel-headers`): it requires the kernel and kernel-devel of one
# version, so a later kernel update brings the kernel-devel DKMS needs to build the module
# for it, without which that kernel boots without the driver.
el9_kernel_packages() {
  local kernel package missing=()
  kernel="$(uname -r)"
  if [[ ! "$kernel" =~ ^[0-9][0-9A-Za-z._+~-]*$ ]]; then
    die "uname -r gave '$kernel', not a kernel release"
  fi
  os_install_packages dkms
  for package in "kernel-devel-$kernel" kernel-devel-matched kernel-headers; do
    el9_package_installed "$package" || missing+=("$package")
  done
  if ((${#missing[@]} == 0)); then
    log "kernel-devel-$kernel, kernel-devel-matched and kernel-headers are already installed"
  elif dnf_run install "${missing[@]}"; then
    log "changed: installed ${missing[*]}"
  else
    die "could not install ${missing[*]}: DKMS builds the NVIDIA modules against the running" \
      "kernel's kernel-devel-$kernel; when the enabled repositories no longer have it, update" \
      "the kernel (dnf update kernel), reboot, and run the step again"
  fi
}

# el9_install_nvidia_driver: the nvidia-driver module's stream BRANCH-open enabled (or
# switched to from another branch's: driver-installation-guide, Advanced Options, "Switching
# between Driver Module Flavors", `dnf -y module switch-to nvidia-driver:<stream>
# --allowerasing`), its driver installed and every package of it locked.
el9_install_nvidia_driver() {
  local stream="${NVIDIA_DRIVER_BRANCH}-open" current package branch_missing=0 packages=()
  el9_cuda_repository
  el9_kernel_packages
  current="$(el9_module_stream)"
  if [[ "$current" == "$stream" ]]; then
    log "module stream nvidia-driver:$stream is already enabled"
  elif [[ -n "$current" ]]; then
    mapfile -t packages < <(el9_driver_packages "${current%%-*}")
    el9_unlock_packages "${packages[@]}"
    dnf_run module switch-to "nvidia-driver:$stream" --allowerasing
    log "changed: switched the nvidia-driver module from $current to $stream"
  else
    dnf_run module enable "nvidia-driver:$stream"
    log "changed: enabled the module stream nvidia-driver:$stream"
  fi
  for package in "$EL9_DRIVER_PACKAGE" "$EL9_DRIVER_MODULE_PACKAGE"; do
    if [[ "$(el9_package_branch "$package")" != "$NVIDIA_DRIVER_BRANCH" ]]; then
      branch_missing=1
    fi
  done
  if ((branch_missing)); then
    dnf_run install "$EL9_DRIVER_PACKAGE"
    log "changed: installed $EL9_DRIVER_PACKAGE (nvidia-driver:$stream)"
  else
    log "$EL9_DRIVER_PACKAGE of branch $NVIDIA_DRIVER_BRANCH is already installed"
  fi
  mapfile -t packages < <(el9_driver_packages "$NVIDIA_DRIVER_BRANCH")
  if ((${#packages[@]} == 0)); then
    die "no package of driver branch $NVIDIA_DRIVER_BRANCH is installed after $EL9_DRIVER_PACKAGE"
  fi
  el9_lock_packages "${packages[@]}"
}

# el9_driver_packages BRANCH: the names of the installed packages of driver BRANCH, those
# NVIDIA's version-locking page locks on RHEL 9 with `dnf4 versionlock \*nvidia\*575\*`
# (driver-installation-guide, Version locking, DNF 4): a name with "nvidia" in it, a
# version of the branch.
el9_driver_packages() {
  rpm -qa --queryformat '%{NAME} %{VERSION}\n' '*nvidia*' 2>/dev/null |
    awk -v branch="$1" 'index($2, branch ".") == 1 { print $1 }' | sort -u
}

# el9_package_upstream PACKAGE: the installed PACKAGE's VERSION, nothing when not installed.
el9_package_upstream() {
  rpm -q --queryformat '%{VERSION}\n' "$1" 2>/dev/null | head -n 1 || true
}

# el9_package_branch PACKAGE: the driver branch of the installed PACKAGE (580 of 580.95.05).
el9_package_branch() {
  local version
  version="$(el9_package_upstream "$1")"
  printf '%s\n' "${version%%.*}"
}

# el9_rebuild_initramfs: the running kernel's initramfs, rebuilt (dracut(8): --force
# replaces the existing image, by default /boot/initramfs-$(uname -r).img). NVIDIA's
# nvidia-kmod-common, which the driver pulls in, blacklists nouveau itself as well
# (/usr/lib/modprobe.d/nvidia.conf) and its %post adds rd.driver.blacklist=nouveau to every
# kernel's arguments with grubby (NVIDIA/yum-packaging-nvidia-kmod-common,
# nvidia-kmod-common.spec, 006f78e, the EL8+ _dracutopts): an argument of its own, which
# the host's kernel arguments set by prepare-host must leave in place.
el9_rebuild_initramfs() {
  dracut --force
}

# el9_install_versions VERSION PACKAGE...: dnf install of each PACKAGE-VERSION (VERSION-RELEASE,
# or VERSION alone), their locks dropped first; dnf installs a named version over another, up or
# down (dnf 4.14 doc/command_ref.rst, install: "If the package is already installed it will
# automatically try to downgrade or upgrade to the given version").
el9_install_versions() {
  local version=$1 package specs=()
  shift
  for package in "$@"; do
    specs+=("$package-$version")
  done
  el9_unlock_packages "$@"
  dnf_run install "${specs[@]}"
}

# el9_fabric_manager_packages: Fabric Manager's and NSCQ's package names in the CUDA
# repository for the branch: from 580 nvidia-fabricmanager and libnvidia-nscq, before it
# nvidia-fabric-manager and libnvidia-nscq-BRANCH (NVIDIA/gpu-driver-container rhel9/install.sh,
# 091f60d, `if [ "$DRIVER_BRANCH" -ge "580" ]`; installed there at the driver's version and
# locked with versionlock, as here).
el9_fabric_manager_packages() {
  if ((NVIDIA_DRIVER_BRANCH >= 580)); then
    echo nvidia-fabricmanager libnvidia-nscq
  else
    echo nvidia-fabric-manager "libnvidia-nscq-$NVIDIA_DRIVER_BRANCH"
  fi
}

# el9_fabric_manager_driver_version: DRIVER_VERSION_INSTALLED, the installed kernel module
# package's version.
el9_fabric_manager_driver_version() {
  DRIVER_VERSION_INSTALLED="$(el9_package_upstream "$EL9_DRIVER_MODULE_PACKAGE")"
  if [[ -z "$DRIVER_VERSION_INSTALLED" ]]; then
    die "Fabric Manager must be the driver's version, but $EL9_DRIVER_MODULE_PACKAGE (the" \
      "driver of NVIDIA's CUDA repository) is not installed; install that driver, or set" \
      "nvswitch to false and run a Fabric Manager of the driver's version yourself"
  fi
}

# el9_fabric_manager_spec PACKAGE VERSION: what el9_install_fabric_manager_at asks dnf for.
el9_fabric_manager_spec() {
  echo "$1-$2"
}

# el9_install_fabric_manager_at VERSION PACKAGE...: from the CUDA repository.
el9_install_fabric_manager_at() {
  el9_cuda_repository
  el9_install_versions "$@"
}

el9_fabric_manager_source() {
  echo "NVIDIA's CUDA repository for RHEL 9 publishes $*"
}

el9_hold_packages() {
  el9_lock_packages "$@"
}
