#!/usr/bin/env bats
# preflight.sh: read-only checks, all failures reported at once.

bats_require_minimum_version 1.5.0
load helpers

setup() {
  setup_host
  export HOST_NAME=moscow HOST_ADDRESS=192.0.2.10 HOST_INTERFACE=eth0 HOST_ROLE=worker \
    GPU_COUNT=2 CONTROL_PLANE_ADDRESS=192.0.2.1 CONTROL_PLANE_PORT=22 MIN_FREE_DISK_GB=100 \
    NVIDIA_DRIVER_BRANCH=580 SUPPORTED_OS="ubuntu:22.04 ubuntu:24.04"
}

@test "preflight: passes on a matching worker and changes nothing" {
  remember_root
  run_script preflight.sh
  assert_success
  assert_output_contains \
    "gpu-cluster: moscow: preflight: ok: OS is Ubuntu 24.04.3 LTS (ubuntu 24.04)" \
    "ok: running as root" \
    "ok: hostname is moscow" \
    "ok: address 192.0.2.10 is on eth0" \
    "ok: 2 NVIDIA GPU(s) on the PCI bus (expected 2)" \
    "ok: 500 GB free on /var/lib (need 100 GB)" \
    "ok: control plane 192.0.2.1:22 is reachable" \
    "gpu-cluster: moscow: preflight: all preflight checks passed"
  refute_output_contains "FAILED"
  assert_called '^timeout 5 bash -c .* _ 192\.0\.2\.1 22$'
  assert_called "^df -Pk $GPU_CLUSTER_ROOT/var/lib\$"
  assert_no_state_changes
  assert_root_unchanged
}

@test "preflight: reports every failure at once, one line each, naming host and step" {
  sed -i 's/24\.04/20.04/g' "$GPU_CLUSTER_ROOT/etc/os-release"
  export STUB_HOSTNAME=kazan.example.internal STUB_UID=1000 STUB_DF_AVAIL_KB=1048576 \
    STUB_EXIT_TIMEOUT=124 HOST_ADDRESS=198.51.100.7 GPU_COUNT=4
  run_script preflight.sh
  [ "$status" -eq 1 ]
  assert_output_contains \
    "gpu-cluster: moscow: preflight: FAILED: OS is Ubuntu 20.04.3 LTS (ubuntu 20.04); supported: Ubuntu 22.04, Ubuntu 24.04" \
    "gpu-cluster: moscow: preflight: FAILED: not running as root (uid 1000)" \
    "gpu-cluster: moscow: preflight: FAILED: hostname is 'kazan' but the host is configured as 'moscow'" \
    "gpu-cluster: moscow: preflight: FAILED: address 198.51.100.7 is not assigned on this host" \
    "gpu-cluster: moscow: preflight: FAILED: found 2 NVIDIA GPU(s) on the PCI bus, expected 4" \
    "gpu-cluster: moscow: preflight: FAILED: only 1 GB free on /var/lib, need 100 GB" \
    "gpu-cluster: moscow: preflight: FAILED: cannot open a TCP connection to the control plane at 192.0.2.1:22 within 5 s"
  [ "$(grep -c ': FAILED: ' <<<"$output")" -eq 7 ]
  [[ "${lines[-1]}" == "gpu-cluster: moscow: preflight: 7 preflight check(s) failed" ]]
}

@test "preflight: Ubuntu 22.04 and 24.04 pass as their os-release names them" {
  local release
  for release in ubuntu-22.04 ubuntu-24.04; do
    set_os_release "$release"
    run_script preflight.sh
    assert_success
  done
  assert_output_contains "preflight: ok: OS is Ubuntu 24.04.4 LTS (ubuntu 24.04)"
}

@test "preflight: Rocky Linux, AlmaLinux and RHEL 9 pass as the program supports them (contract/host_os.py)" {
  export SUPPORTED_OS="ubuntu:22.04 ubuntu:24.04 rocky:9 almalinux:9 rhel:9"
  local release
  for release in rocky-9.4 almalinux-9.4 rhel-9.4; do
    set_os_release "$release"
    run_script preflight.sh
    assert_success
  done
  assert_output_contains "preflight: ok: OS is Red Hat Enterprise Linux 9.4 (Plow) (rhel 9.4)"
  set_os_release ubuntu-22.04
  run_script preflight.sh
  assert_success
}

@test "preflight: RHEL 8 and CentOS Stream 9 are refused, naming what was found and what is supported" {
  export SUPPORTED_OS="ubuntu:22.04 ubuntu:24.04 rocky:9 almalinux:9 rhel:9"
  set_os_release rhel-8.10
  run_script preflight.sh
  assert_failure
  assert_output_contains "supported: Ubuntu 22.04, Ubuntu 24.04, Rocky Linux 9, AlmaLinux 9, RHEL 9"
  assert_output_contains "FAILED: OS is Red Hat Enterprise Linux 8.10"
  set_os_release centos-stream-9
  run_script preflight.sh
  assert_failure
  assert_output_contains "FAILED: OS is CentOS Stream 9 (centos 9); supported: Ubuntu 22.04"
}

@test "preflight: a running firewalld is refused, saying why, how to turn it off and what it would have to open; nothing is changed" {
  set_os_release rocky-9.4
  export SUPPORTED_OS="ubuntu:24.04 rocky:9" CLUSTER_PORTS="4789/udp 10250/tcp"
  touch "$STUB_STATE/active-firewalld.service"
  remember_root
  run_script preflight.sh
  assert_failure
  assert_output_contains "gpu-cluster: moscow: preflight: FAILED: firewalld is running: its zone rejects the nodes' traffic to each other and the pod network's, and RKE2 documents it conflicts with Canal (docs.rke2.io/known_issues, \"Firewalld conflicts with default networking\"); the program does not turn it off: stop and disable firewalld.service yourself. To keep it instead, its zone must accept the cluster's ports 4789/udp 10250/tcp from the nodes, the API's port and NodePorts, all traffic from the pod and service networks, and the CNI's interfaces (trusted); the program does not manage firewalld. host-firewall's table (hostFirewall.enabled) keeps the node ports to the cluster's addresses" \
    "1 preflight check(s) failed"
  refute_called '^systemctl (stop|disable|mask)'
  assert_root_unchanged
  rm "$STUB_STATE/active-firewalld.service"
  run_script preflight.sh
  assert_success
  assert_output_contains "ok: firewalld is not running"
}

@test "preflight: an enabled nm-cloud-setup is refused, naming its units; nothing is changed" {
  touch "$STUB_STATE/enabled-nm-cloud-setup.timer"
  remember_root
  run_script preflight.sh
  assert_failure
  assert_output_contains "FAILED: nm-cloud-setup.timer enabled: nm-cloud-setup adds a routing table that interferes with the CNI's (docs.rke2.io/known_issues, NetworkManager); the program does not turn it off: stop and disable nm-cloud-setup.service and nm-cloud-setup.timer yourself, then reboot"
  refute_called '^systemctl (stop|disable|mask)'
  assert_root_unchanged
}

@test "preflight: RHEL 8.10, CentOS Stream 9 and Debian 12 are refused with what is supported" {
  export SUPPORTED_OS="ubuntu:22.04 ubuntu:24.04 rocky:9 almalinux:9 rhel:9"
  set_os_release rhel-8.10
  run_script preflight.sh
  assert_failure
  assert_output_contains "gpu-cluster: moscow: preflight: FAILED: OS is Red Hat Enterprise Linux 8.10 (Ootpa) (rhel 8.10); supported: Ubuntu 22.04, Ubuntu 24.04, Rocky Linux 9, AlmaLinux 9, RHEL 9"
  set_os_release centos-stream-9
  run_script preflight.sh
  assert_failure
  assert_output_contains "gpu-cluster: moscow: preflight: FAILED: OS is CentOS Stream 9 (centos 9); supported: Ubuntu 22.04, Ubuntu 24.04, Rocky Linux 9, AlmaLinux 9, RHEL 9"
  set_os_release debian-12
  run_script preflight.sh
  assert_failure
  assert_output_contains "gpu-cluster: moscow: preflight: FAILED: OS is Debian GNU/Linux 12 (bookworm) (debian 12); supported: Ubuntu 22.04, Ubuntu 24.04, Rocky Linux 9, AlmaLinux 9, RHEL 9"
  rm -f "$GPU_CLUSTER_ROOT/etc/os-release" "$GPU_CLUSTER_ROOT/usr/lib/os-release"
  run_script preflight.sh
  assert_failure
  assert_output_contains "FAILED: cannot read /etc/os-release or /usr/lib/os-release; supported: Ubuntu 22.04"
}

@test "preflight: SUPPORTED_OS must be ID:VERSION words" {
  export SUPPORTED_OS="ubuntu 22.04"
  run_script preflight.sh
  assert_failure
  assert_output_contains "gpu-cluster: moscow: preflight: SUPPORTED_OS must be ID:VERSION words (ubuntu:24.04 rocky:9), got 'ubuntu 22.04'"
}

@test "preflight: reports the NVSwitches of an HGX board, which need Fabric Manager" {
  run_script preflight.sh
  assert_success
  refute_output_contains "NVSwitch"
  add_nvswitches 6
  run_script preflight.sh
  assert_success
  assert_output_contains "preflight: info: 6 NVSwitch(es) on the PCI bus: an HGX board, whose GPUs run CUDA only with Fabric Manager"
  assert_no_state_changes
}

@test "preflight: the address must be on HOST_INTERFACE when one is given" {
  export HOST_INTERFACE=eth1
  run_script preflight.sh
  assert_failure
  assert_output_contains "FAILED: address 192.0.2.10 is on eth0, not on interface eth1"
  export HOST_INTERFACE=""
  run_script preflight.sh
  assert_success
}

@test "preflight: an installed driver of another branch fails a GPU host" {
  echo 550.163.01 >"$STUB_STATE/nvidia-driver-version"
  mkdir -p "$GPU_CLUSTER_ROOT/sys/module/nvidia"
  run_script preflight.sh
  assert_failure
  assert_output_contains "FAILED: NVIDIA driver 550.163.01 is installed but branch 580 is configured"
  echo 580.95.05 >"$STUB_STATE/nvidia-driver-version"
  run_script preflight.sh
  assert_success
  assert_output_contains "ok: NVIDIA driver 580.95.05 (branch 580)"
}

@test "preflight: a vGPU guest's own driver of another branch is kept with INSTALL_DRIVER=false" {
  # NVIDIA's vGPU 16 guest driver (R535) on a VM whose GPUs are vGPUs of one physical GPU.
  echo 535.183.06 >"$STUB_STATE/nvidia-driver-version"
  mkdir -p "$GPU_CLUSTER_ROOT/sys/module/nvidia"
  export INSTALL_DRIVER=false
  run_script preflight.sh
  assert_success
  assert_output_contains "ok: NVIDIA driver 535.183.06 (branch 535) is the host's own and is kept (installDriver: false; nvidia.driverBranch 580 is not installed here)"
  refute_output_contains "FAILED"
  assert_no_state_changes
  # Managed by the program, the same driver is refused, naming the way to keep it.
  export INSTALL_DRIVER=true
  run_script preflight.sh
  assert_failure
  assert_output_contains "FAILED: NVIDIA driver 535.183.06 is installed but branch 580 is configured; remove it, configure branch 535, or keep it with installDriver: false"
}

@test "preflight: a GPU host that keeps its own driver must have one" {
  remove_stub nvidia-smi
  export INSTALL_DRIVER=false
  run_script preflight.sh
  assert_failure
  assert_output_contains "FAILED: no NVIDIA driver (no nvidia-smi), but installDriver is false for this host: install its own driver (a vGPU guest: NVIDIA's guest driver) or set installDriver: true"
  export GPU_COUNT=0
  run_script preflight.sh
  assert_success
  export INSTALL_DRIVER=maybe
  run_script preflight.sh
  assert_failure
  assert_output_contains "INSTALL_DRIVER"
}

@test "preflight: no nvidia-smi is fine; a broken one only warns" {
  run_script preflight.sh
  assert_success
  assert_output_contains "warning: nvidia-smi is installed but cannot talk to the driver"
  remove_stub nvidia-smi
  run_script preflight.sh
  assert_success
  assert_output_contains "info: no NVIDIA driver installed yet (no nvidia-smi)"
}

@test "preflight: reports the IOMMU state for information only" {
  echo "BOOT_IMAGE=/vmlinuz ro intel_iommu=off amd_iommu=off quiet" >"$GPU_CLUSTER_ROOT/proc/cmdline"
  mkdir -p "$GPU_CLUSTER_ROOT/sys/kernel/iommu_groups/0"
  run_script preflight.sh
  assert_success
  assert_output_contains "info: IOMMU kernel arguments: intel_iommu=off amd_iommu=off; 1 IOMMU group(s) active"
}

@test "preflight: a controller needs no GPUs and does not probe itself" {
  export HOST_ROLE=controller GPU_COUNT=0
  rm -rf "$GPU_CLUSTER_ROOT/sys/bus/pci/devices"
  run_script preflight.sh
  assert_success
  assert_output_contains "ok: no GPUs expected (0 NVIDIA GPU(s) on the PCI bus)"
  refute_called '^timeout'
}

@test "preflight: all missing environment variables are named at once" {
  unset HOST_NAME GPU_COUNT NVIDIA_DRIVER_BRANCH
  run_script preflight.sh
  [ "$status" -eq 1 ]
  assert_output_contains \
    "gpu-cluster: moscow: preflight: missing required environment variable(s): HOST_NAME GPU_COUNT NVIDIA_DRIVER_BRANCH"
}

@test "preflight: invalid inputs are rejected" {
  export GPU_COUNT=two MIN_FREE_DISK_GB=-5
  run_script preflight.sh
  assert_failure
  assert_output_contains "expected a non-negative integer: GPU_COUNT='two' MIN_FREE_DISK_GB='-5'"
  export GPU_COUNT=2 MIN_FREE_DISK_GB=100 HOST_ROLE=boss
  run_script preflight.sh
  assert_failure
  assert_output_contains "HOST_ROLE must be controller, worker or controller+worker, got 'boss'"
}

@test "preflight: without a control-plane address (reached later through the VPN) it skips that check" {
  export CONTROL_PLANE_ADDRESS=""
  export STUB_EXIT_TIMEOUT=1
  run_script preflight.sh
  assert_success
  assert_output_contains "control plane reachability is checked once the VPN tunnel is up"
  refute_called '^timeout '
}

@test "preflight: CLUSTER_PORTS that are not PORT/PROTOCOL words are refused by name" {
  export CLUSTER_PORTS="10250/tcp; reboot"
  run_script preflight.sh
  assert_refused
  assert_output_contains "CLUSTER_PORTS must be PORT/tcp or PORT/udp words (10250/tcp 8472/udp), got '10250/tcp; reboot'"
}

@test "preflight el9: a GPU older than Turing is refused where install-nvidia would install the open kernel modules" {
  export SUPPORTED_OS="ubuntu:24.04 rocky:9"
  set_os_release rocky-9.4
  # The fake host's two GPUs: a Tesla V100 (GV100, 10de:1db4) and an A100 (10de:20b0).
  echo 0x1db4 >"$GPU_CLUSTER_ROOT/sys/bus/pci/devices/0000:01:00.0/device"
  echo 0x20b0 >"$GPU_CLUSTER_ROOT/sys/bus/pci/devices/0000:02:00.0/device"
  run_script preflight.sh
  assert_failure
  assert_output_contains "FAILED: NVIDIA GPU(s) older than Turing: 0000:01:00.0 (10de:1db4); on the RHEL 9 family install-nvidia installs NVIDIA's open kernel modules, which drive Turing and later GPUs only"
  refute_output_contains "0000:02:00.0 (10de:20b0)"
  # The host's own driver, or Ubuntu's (proprietary modules), drives it.
  export INSTALL_DRIVER=false
  run_script preflight.sh
  refute_output_contains "older than Turing"
  unset INSTALL_DRIVER
  set_os_release ubuntu-24.04
  run_script preflight.sh
  assert_success
}
