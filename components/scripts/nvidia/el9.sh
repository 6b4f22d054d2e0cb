# shellcheck shell=bash disable=SC2154,SC2034 # install-nvidia.sh's inputs; globals it reads
# install-nvidia on RHEL 9, Rocky Linux 9 and AlmaLinux 9 (os_do's el9_ functions).

GPU_CLUSTER_NVIDIA_EL9_LOADED=1
