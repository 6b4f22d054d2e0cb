#!/usr/bin/env bash
# install-nvidia's check beyond what its create converges: the loaded driver is of the
# configured branch.
# shellcheck shell=bash disable=SC2154 # NVIDIA_DRIVER_BRANCH, INSTALL_DRIVER: the step's inputs

# check_driver_loaded: the driver nvidia-smi reports is of NVIDIA_DRIVER_BRANCH (when the
# step installs it; an image's driver is the image's).
check_driver_loaded() {
  local version
  is_true "$INSTALL_DRIVER" || return 0
  version="$(driver_version)"
  if [[ "${version%%.*}" != "$NVIDIA_DRIVER_BRANCH" ]]; then
    drift "NVIDIA driver ${version:-none} is loaded, not branch $NVIDIA_DRIVER_BRANCH"
  fi
}

check_driver_loaded
