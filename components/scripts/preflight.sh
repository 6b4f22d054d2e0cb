#!/usr/bin/env bash
# Read-only checks before anything on the host is changed (OS, identity, address,
# GPUs, driver branch, disk, control-plane reachability). Reports every failed
# check at once, one line each, so a single run shows everything to fix.
set -euo pipefail
# shellcheck source=lib.sh
[[ -n "${GPU_CLUSTER_LIB_LOADED:-}" ]] || source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
# shellcheck source=os/lib.sh
[[ -n "${GPU_CLUSTER_OS_LIB_LOADED:-}" ]] || source "$(dirname "${BASH_SOURCE[0]}")/os/lib.sh"
: "${GPU_CLUSTER_STEP:=preflight}"

# Inputs: CONTROL_PLANE_PORT GPU_COUNT HOST_ADDRESS HOST_NAME HOST_ROLE MIN_FREE_DISK_GB NVIDIA_DRIVER_BRANCH SUPPORTED_OS
# Optional inputs: CLUSTER_PORTS CONTROL_PLANE_ADDRESS HOST_INTERFACE INSTALL_DRIVER
#   CLUSTER_PORTS  the ports the cluster's nodes reach this host at (PORT/tcp or PORT/udp
#                  words; host-firewall's), which firewalld's refusal names

FAILURES=()

fail() {
  FAILURES+=("$*")
}

ok() {
  log "ok: $*"
}

check_inputs() {
  require_env HOST_NAME HOST_ADDRESS HOST_ROLE GPU_COUNT CONTROL_PLANE_PORT MIN_FREE_DISK_GB \
    NVIDIA_DRIVER_BRANCH SUPPORTED_OS
  : "${HOST_INTERFACE:=}" "${CONTROL_PLANE_ADDRESS:=}" "${INSTALL_DRIVER:=true}" "${CLUSTER_PORTS:=}"
  require_uint GPU_COUNT CONTROL_PLANE_PORT MIN_FREE_DISK_GB NVIDIA_DRIVER_BRANCH
  require_bool INSTALL_DRIVER
  case "$HOST_ROLE" in
    controller | worker | controller+worker) ;;
    *) die "HOST_ROLE must be controller, worker or controller+worker, got '$HOST_ROLE'" ;;
  esac
  if [[ -n "$CLUSTER_PORTS" && ! "$CLUSTER_PORTS" =~ ^[0-9]{1,5}/(tcp|udp)( [0-9]{1,5}/(tcp|udp))*$ ]]; then
    die "CLUSTER_PORTS must be PORT/tcp or PORT/udp words (10250/tcp 8472/udp), got '$CLUSTER_PORTS'"
  fi
  # config/versions.py SUPPORTED_OS: os-release ID:VERSION_ID words.
  if [[ ! "$SUPPORTED_OS" =~ ^[a-z0-9._-]+:[0-9.]+( [a-z0-9._-]+:[0-9.]+)*$ ]]; then
    die "SUPPORTED_OS must be ID:VERSION words (ubuntu:24.04 rocky:9), got '$SUPPORTED_OS'"
  fi
}

# check_os: the host's os-release names an OS of SUPPORTED_OS (a version also accepts its
# point releases: rocky:9 accepts 9.4).
check_os() {
  local id version entry supported=()
  if ! os_release_file >/dev/null; then
    fail "cannot read /etc/os-release or /usr/lib/os-release; supported: $(supported_os_names)"
    return 0
  fi
  id="$(os_release_field ID)"
  version="$(os_release_field VERSION_ID)"
  read -r -a supported <<<"$SUPPORTED_OS"
  for entry in "${supported[@]}"; do
    if [[ "$id" == "${entry%%:*}" && ("$version" == "${entry#*:}" || "$version" == "${entry#*:}".*) ]]; then
      ok "OS is $(os_found)"
      return 0
    fi
  done
  fail "OS is $(os_found); supported: $(supported_os_names)"
}

# supported_os_names: SUPPORTED_OS as messages name it: "Ubuntu 22.04, Ubuntu 24.04".
supported_os_names() {
  local entry text=""
  for entry in $SUPPORTED_OS; do
    text+="${text:+, }$(os_name "${entry%%:*}") ${entry#*:}"
  done
  printf '%s\n' "$text"
}

check_root() {
  local uid
  uid="$(id -u)"
  if [[ "$uid" == 0 ]]; then
    ok "running as root"
  else
    fail "not running as root (uid $uid); the steps need root (sudo -n)"
  fi
}

check_hostname() {
  local name
  name="$(hostname)"
  name="${name%%.*}"
  if [[ "$name" == "$HOST_NAME" ]]; then
    ok "hostname is $name"
  else
    fail "hostname is '$name' but the host is configured as '$HOST_NAME'; the kubelet registers" \
      "nodes by hostname, so clones with one name collide (fix: hostnamectl set-hostname $HOST_NAME)"
  fi
}

check_address() {
  local output ifname address interfaces=()
  if ! output="$(ip -o -4 addr show)"; then
    fail "could not list IPv4 addresses (ip -o -4 addr show failed)"
    return 0
  fi
  # Lines look like: "2: eth0    inet 192.0.2.10/24 brd 192.0.2.255 scope global eth0 ..."
  while read -r _ ifname _ address _; do
    if [[ "${address%/*}" == "$HOST_ADDRESS" ]]; then
      interfaces+=("${ifname%%@*}")
    fi
  done <<<"$output"
  if ((${#interfaces[@]} == 0)); then
    fail "address $HOST_ADDRESS is not assigned on this host"
  elif [[ -n "$HOST_INTERFACE" && " ${interfaces[*]} " != *" $HOST_INTERFACE "* ]]; then
    fail "address $HOST_ADDRESS is on ${interfaces[*]}, not on interface $HOST_INTERFACE"
  else
    ok "address $HOST_ADDRESS is on ${interfaces[*]}"
  fi
}

check_gpus() {
  local found switches
  found="$(count_nvidia_gpus)"
  if ((GPU_COUNT == 0)); then
    ok "no GPUs expected ($found NVIDIA GPU(s) on the PCI bus)"
  elif ((found >= GPU_COUNT)); then
    ok "$found NVIDIA GPU(s) on the PCI bus (expected $GPU_COUNT)"
  else
    fail "found $found NVIDIA GPU(s) on the PCI bus, expected $GPU_COUNT"
  fi
  switches="$(count_nvswitches)"
  if ((switches > 0)); then
    log "info: $switches NVSwitch(es) on the PCI bus: an HGX board, whose GPUs run CUDA only" \
      "with Fabric Manager (install-nvidia installs it unless hosts[].nvswitch is false)"
  fi
}

# check_driver: with INSTALL_DRIVER=true the driver install-nvidia installs must be the only
# one (another branch is refused); with false the host's own is kept, of any branch (a vGPU
# guest's GRID driver), and a GPU host must have one that answers.
check_driver() {
  local version
  if ! command -v nvidia-smi >/dev/null 2>&1; then
    if ((GPU_COUNT > 0)) && ! is_true "$INSTALL_DRIVER"; then
      fail "no NVIDIA driver (no nvidia-smi), but installDriver is false for this host:" \
        "install its own driver (a vGPU guest: NVIDIA's guest driver) or set installDriver: true"
    else
      log "info: no NVIDIA driver installed yet (no nvidia-smi)"
    fi
    return 0
  fi
  if ! version="$(nvidia-smi --query-gpu=driver_version --format=csv,noheader 2>/dev/null)" ||
    [[ -z "$version" ]]; then
    warn "nvidia-smi is installed but cannot talk to the driver (reboot pending?)"
    return 0
  fi
  version="${version%%$'\n'*}"
  if ! is_true "$INSTALL_DRIVER"; then
    ok "NVIDIA driver $version (branch ${version%%.*}) is the host's own and is kept" \
      "(installDriver: false; nvidia.driverBranch $NVIDIA_DRIVER_BRANCH is not installed here)"
  elif [[ "${version%%.*}" == "$NVIDIA_DRIVER_BRANCH" ]]; then
    ok "NVIDIA driver $version (branch $NVIDIA_DRIVER_BRANCH)"
  elif ((GPU_COUNT > 0)); then
    fail "NVIDIA driver $version is installed but branch $NVIDIA_DRIVER_BRANCH is configured;" \
      "remove it, configure branch ${version%%.*}, or keep it with installDriver: false"
  else
    log "info: NVIDIA driver $version installed (no GPUs configured for this host)"
  fi
}

check_iommu() {
  local words=() word settings=() groups=0 group
  if [[ -r "$ROOT/proc/cmdline" ]]; then
    read -r -a words <"$ROOT/proc/cmdline"
    for word in "${words[@]}"; do
      case "$word" in
        intel_iommu=* | amd_iommu=* | iommu=* | iommu.*=*) settings+=("$word") ;;
      esac
    done
  fi
  for group in "$ROOT"/sys/kernel/iommu_groups/*; do
    if [[ -e "$group" ]]; then
      groups=$((groups + 1))
    fi
  done
  log "info: IOMMU kernel arguments: ${settings[*]:-none}; $groups IOMMU group(s) active"
}

check_disk() {
  local output available need_kb
  need_kb=$((MIN_FREE_DISK_GB * 1024 * 1024))
  if ! output="$(df -Pk "$ROOT/var/lib")"; then
    fail "could not determine free space on /var/lib (df failed)"
    return 0
  fi
  available="$(awk 'NR == 2 { print $4 }' <<<"$output")"
  if [[ ! "$available" =~ ^[0-9]+$ ]]; then
    fail "could not parse free space on /var/lib from df"
  elif ((available >= need_kb)); then
    ok "$((available / 1024 / 1024)) GB free on /var/lib (need $MIN_FREE_DISK_GB GB)"
  else
    fail "only $((available / 1024 / 1024)) GB free on /var/lib, need $MIN_FREE_DISK_GB GB"
  fi
}

check_control_plane() {
  local target="$CONTROL_PLANE_ADDRESS:$CONTROL_PLANE_PORT"
  if [[ "$HOST_ROLE" != worker ]]; then
    return 0
  fi
  if [[ -z "$CONTROL_PLANE_ADDRESS" ]]; then
    # Hybrid: the control plane is reached through the VPN, which is not up yet; the
    # join step waits for the tunnel instead.
    log "info: control plane reachability is checked once the VPN tunnel is up"
    return 0
  fi
  # The address and port are arguments of the inner bash, never part of its code.
  # shellcheck disable=SC2016 # $1/$2 are expanded by the inner bash
  if timeout 5 bash -c 'exec 3<>"/dev/tcp/$1/$2"' _ "$CONTROL_PLANE_ADDRESS" "$CONTROL_PLANE_PORT" \
    2>/dev/null; then
    ok "control plane $target is reachable"
  else
    fail "cannot open a TCP connection to the control plane at $target within 5 s"
  fi
}

# check_open_modules: on the RHEL 9 family, where install-nvidia installs NVIDIA's open kernel
# modules (nvidia/el9.sh), every NVIDIA GPU is one they drive: "The NVIDIA open kernel modules
# can be used on any Turing or later GPU", and the table of those GPUs, sorted by PCI device
# ID, starts at 1E02, the TITAN RTX (NVIDIA/open-gpu-kernel-modules README.md, "Compatible
# GPUs"). A GPU of a lower ID (Volta, Pascal and older) is refused, naming it.
check_open_modules() {
  local device id old=()
  is_true "$INSTALL_DRIVER" || return 0
  [[ "$(os_family_of "$(os_release_field ID)" "$(os_release_field VERSION_ID)" || true)" == el9 ]] ||
    return 0
  while IFS= read -r device; do
    [[ -r "$device/device" ]] || continue
    id="$(<"$device/device")"
    if [[ "$id" =~ ^0x[0-9a-fA-F]{4}$ ]] && ((id < 0x1e02)); then
      old+=("${device##*/} (10de:${id#0x})")
    fi
  done < <(nvidia_gpu_devices)
  if ((${#old[@]} > 0)); then
    fail "NVIDIA GPU(s) older than Turing: ${old[*]}; on the RHEL 9 family install-nvidia installs" \
      "NVIDIA's open kernel modules, which drive Turing and later GPUs only: give the host its" \
      "own driver and set hosts[].installDriver: false for it, or run it on Ubuntu"
  fi
}

# check_firewalld: firewalld is not running. Its zones reject what they do not allow (the
# nodes' ports and the pod network's traffic among the nodes), and RKE2 documents that it
# conflicts with Canal: "To avoid unexpected behavior, firewalld should be disabled on systems
# running RKE2" (https://docs.rke2.io/known_issues, "Firewalld conflicts with default
# networking"). The program never turns it off itself; the refusal says how, what a zone
# would have to open were firewalld to stay, and what keeps the node ports to the cluster
# instead (host-firewall's own nftables table).
check_firewalld() {
  local ports=""
  [[ -z "$CLUSTER_PORTS" ]] || ports="the cluster's ports $CLUSTER_PORTS from the nodes, "
  if command -v systemctl >/dev/null 2>&1 && systemctl is-active --quiet firewalld.service; then
    fail "firewalld is running: its zone rejects the nodes' traffic to each other and the pod" \
      "network's, and RKE2 documents it conflicts with Canal (docs.rke2.io/known_issues," \
      "\"Firewalld conflicts with default networking\"); the program does not turn it off:" \
      "stop and disable firewalld.service yourself. To keep it instead, its zone must accept" \
      "${ports}the API's port and NodePorts, all traffic from the pod and service networks," \
      "and the CNI's interfaces (trusted); the program does not manage firewalld." \
      "host-firewall's table (hostFirewall.enabled) keeps the node ports to the cluster's addresses"
  else
    ok "firewalld is not running"
  fi
}

# check_nm_cloud_setup: NetworkManager's nm-cloud-setup is not enabled. "These services add a
# routing table that interfere with the CNI plugin's configuration ... if those services
# exist, they should be disabled and the node must be rebooted" (docs.rke2.io/known_issues,
# NetworkManager; rancher/rke2#1053). Refused, never turned off here.
check_nm_cloud_setup() {
  local unit enabled=()
  command -v systemctl >/dev/null 2>&1 || return 0
  for unit in nm-cloud-setup.service nm-cloud-setup.timer; do
    if systemctl is-enabled --quiet "$unit" 2>/dev/null; then
      enabled+=("$unit")
    fi
  done
  if ((${#enabled[@]} > 0)); then
    fail "${enabled[*]} enabled: nm-cloud-setup adds a routing table that interferes with the" \
      "CNI's (docs.rke2.io/known_issues, NetworkManager); the program does not turn it off:" \
      "stop and disable nm-cloud-setup.service and nm-cloud-setup.timer yourself, then reboot"
  fi
}

check_commands() {
  local command
  for command in curl systemctl; do
    if command -v "$command" >/dev/null 2>&1; then
      ok "$command is available"
    else
      fail "required command $command is not installed"
    fi
  done
}

main() {
  local failure
  check_inputs
  check_os
  check_root
  check_hostname
  check_address
  check_gpus
  check_driver
  check_iommu
  check_disk
  check_control_plane
  check_open_modules
  check_firewalld
  check_nm_cloud_setup
  check_commands
  if ((${#FAILURES[@]} > 0)); then
    for failure in "${FAILURES[@]}"; do
      printf '%s FAILED: %s\n' "$(log_prefix)" "$failure" >&2
    done
    die "${#FAILURES[@]} preflight check(s) failed"
  fi
  log "all preflight checks passed"
}

main "$@"
