#!/usr/bin/env bats
# Running GPU containers keep their devices when a step makes systemd reload: every NVIDIA
# device node is linked in /dev/char first (lib.sh, ensure_nvidia_dev_char_links). With the
# systemd cgroup driver a reload re-applies device rules that leave unlinked nodes out, and
# the containers fail with "Failed to initialize NVML: Unknown Error"
# (NVIDIA/gpu-operator#485, NVIDIA/nvidia-container-toolkit#48). The stubs record a reload
# (daemon-reload, enable, disable, apt-get install, k0s install) made while a node has no
# link; see stubs/stub, note_reload.

bats_require_minimum_version 1.5.0
load helpers

setup() {
  setup_host
}

# on_lib CODE: runs CODE in bash with lib.sh loaded, as a step would.
on_lib() {
  run bash -c "source \"$SCRIPTS_DIR/lib.sh\"; $1"
}

@test "dev-char: no script makes systemd reload but through the helpers that link first" {
  local hits
  # systemctl enable and disable reload too (systemctl(1), --no-reload); apt-get runs
  # package scripts that reload. Only lib.sh calls them, from its helpers (check/lib.sh
  # names them in what a check reports, never runs them).
  hits="$(cd "$REPO_ROOT" && grep -rnE --include='*.sh' \
    'systemctl +(--[a-z-]+ +)*(daemon-reload|daemon-reexec|enable|disable|reenable)|(^|[^_])apt-get ' \
    components | grep -vE '^components/scripts/(check/)?lib.sh:' | grep -vE '^[^:]+:[0-9]+: *#' || true)"
  if [[ -n "$hits" ]]; then
    printf 'calls outside lib.sh that make systemd reload:\n%s\n' "$hits" >&2
    return 1
  fi
  # k0s installs its unit with enable and daemon-reload (kardianos/service, Install).
  run grep -B3 -E '^\s*k0s install ' "$SCRIPTS_DIR/k0s/lib.sh"
  [ "$(grep -c 'k0s install ' <<<"$output")" -eq 2 ]
  run awk '/^k0s_ensure_service\(\)/,/^}/' "$SCRIPTS_DIR/k0s/lib.sh"
  assert_call_free_order "$output" 'ensure_nvidia_dev_char_links' 'k0s install '
}

# assert_call_free_order TEXT FIRST SECOND: in TEXT, the first line with FIRST comes before
# the first line with SECOND.
assert_call_free_order() {
  local first second
  first="$(grep -nF -- "$2" <<<"$1" | head -n 1 | cut -d: -f1)"
  second="$(grep -nF -- "$3" <<<"$1" | head -n 1 | cut -d: -f1)"
  [[ -n "$first" && -n "$second" && "$first" -lt "$second" ]]
}

@test "dev-char: systemd_reload on a GPU host links every NVIDIA device node first" {
  nvidia_driver_loaded 580.95.05
  on_lib systemd_reload
  assert_success
  [ "$(readlink "$GPU_CLUSTER_ROOT/dev/char/195:255")" = /dev/nvidiactl ]
  [ "$(readlink "$GPU_CLUSTER_ROOT/dev/char/195:0")" = /dev/nvidia0 ]
  [ "$(readlink "$GPU_CLUSTER_ROOT/dev/char/195:1")" = /dev/nvidia1 ]
  assert_called '^systemctl daemon-reload$'
  refute_gpu_detached
  assert_output_contains "changed: linked the NVIDIA device nodes in /dev/char"
  # Linked once; the next reload has nothing to do first.
  reset_calls
  on_lib 'systemd_enable --now x.service; systemd_disable y.service'
  assert_success
  refute_output_contains "linked the NVIDIA"
  assert_called '^systemctl enable --now x\.service$'
  assert_called '^systemctl disable y\.service$'
  refute_gpu_detached
}

@test "dev-char: NVIDIA's nvidia-ctk links them when the toolkit is installed" {
  nvidia_driver_loaded 580.95.05
  installed_package nvidia-container-toolkit-base 1.19.1-1
  on_lib 'apt_get install -y nfs-common'
  assert_success
  assert_call_order '^nvidia-ctk system create-dev-char-symlinks --create-all$' "^$APT install"
  [ -L "$GPU_CLUSTER_ROOT/dev/char/195:254" ] # --create-all: nvidia-modeset too
  refute_gpu_detached
}

@test "dev-char: nodes nvidia-ctk leaves out, or a failing nvidia-ctk, are linked directly" {
  nvidia_driver_loaded 580.95.05
  mkdir -p "$GPU_CLUSTER_ROOT/dev/nvidia-caps"
  mknod "$GPU_CLUSTER_ROOT/dev/nvidia-caps/nvidia-cap1" c 511 1
  installed_package nvidia-container-toolkit-base 1.19.1-1
  export STUB_EXIT_NVIDIA_CTK=1
  on_lib systemd_reload
  assert_success
  assert_output_contains "warning: nvidia-ctk could not create the /dev/char links; linking the device nodes directly"
  [ "$(readlink "$GPU_CLUSTER_ROOT/dev/char/511:1")" = /dev/nvidia-caps/nvidia-cap1 ]
  [ -L "$GPU_CLUSTER_ROOT/dev/char/195:0" ]
  refute_gpu_detached
}

@test "dev-char: a host without NVIDIA device nodes is left as it is" {
  installed_package nvidia-container-toolkit-base 1.19.1-1
  on_lib 'systemd_reload; apt_get install -y nfs-common'
  assert_success
  [ ! -e "$GPU_CLUSTER_ROOT/dev/char" ]
  refute_called '^nvidia-ctk'
  refute_output_contains "linked the NVIDIA"
}

@test "dev-char: links that cannot be made stop the step before systemd reloads" {
  nvidia_driver_loaded 580.95.05
  mkdir -p "$GPU_CLUSTER_ROOT/dev"
  touch "$GPU_CLUSTER_ROOT/dev/char" # a file where the folder should be
  on_lib systemd_reload
  assert_failure
  assert_output_contains 'gpu-cluster: moscow: script: command failed with exit code 1' \
    'mkdir -p -- "$ROOT/dev/char"'
  refute_called '^systemctl daemon-reload'
}

# Each step that makes systemd reload, run on a GPU node with containers running: the
# stubs must see the reload (so the test can fail) and no device left unlinked at that time.

@test "dev-char: route-to-vpc on a GPU node" {
  nvidia_driver_loaded 580.95.05
  export VPC_CIDR=10.20.0.0/16 GATEWAY_ADDRESS=192.168.2.4 TUNNEL_CIDR=10.8.0.0/24
  run_script route-to-vpc.sh
  assert_success
  assert_called '^systemctl daemon-reload$'
  refute_gpu_detached
  rm -rf "$GPU_CLUSTER_ROOT/dev/char"
  run_script route-to-vpc-remove.sh
  assert_success
  assert_called '^systemctl disable '
  refute_gpu_detached
}

@test "dev-char: join-worker (k0s install) on a GPU node, and its reinstall" {
  nvidia_driver_loaded 580.95.05
  export K0S_VERSION=v1.34.1+k0s.0 K0S_JOIN_TOKEN="$(k0s_join_token abcdef.0123456789abcdef)" NODE_IP=192.0.2.21 \
    KUBELET_EXTRA_ARGS="--max-pods=250" NODE_LABELS="gpu-cluster.io/gpu=true" NODE_TAINTS= \
    K0S_PROFILE=gpu KUBELET_ROOT_DIR=/var/lib/kubelet
  run_script k0s/join-worker.sh
  assert_success
  assert_called '^k0s install worker '
  refute_gpu_detached
  # Changed labels on a running node: k0s install --force and a daemon-reload.
  rm -rf "$GPU_CLUSTER_ROOT/dev/char"
  export NODE_LABELS="gpu-cluster.io/gpu=true team=ml"
  run_script k0s/join-worker.sh
  assert_success
  assert_called '^k0s install worker --force '
  assert_called '^systemctl daemon-reload$'
  refute_gpu_detached
}

@test "dev-char: prepare-host (apt-get install) on a GPU node" {
  nvidia_driver_loaded 580.95.05
  export DISABLE_IOMMU=true DISABLE_CPU_MITIGATIONS=false EXTRA_KERNEL_ARGS= \
    INOTIFY_MAX_USER_INSTANCES=8192 INOTIFY_MAX_USER_WATCHES=1048576 INSTALL_NFS_CLIENT=true
  run_script prepare-host.sh
  assert_success
  assert_called "^$APT install"
  refute_gpu_detached
}

@test "dev-char: serve-nfs on a GPU node" {
  nvidia_driver_loaded 580.95.05
  export NFS_EXPORT_PATH=/srv/nfs/gpu-cluster NFS_CLIENT_CIDRS=192.168.10.11/32 \
    NFS_EXPORT_OPTIONS="$(nfs_export_options)"
  run_script serve-nfs.sh
  assert_success
  assert_called '^systemctl enable --now nfs-server'
  refute_gpu_detached
}

@test "dev-char: the OpenVPN client on a GPU node" {
  nvidia_driver_loaded 580.95.05
  export OPENVPN_CONFIG=$'client\nremote 203.0.113.1 1194 udp' REMOTE_CIDR=10.20.0.0/16 \
    TUNNEL_CHECK_ADDRESS=10.8.0.1
  export OPENVPN_CA=$'-----BEGIN CERTIFICATE-----\nMIIBca\n-----END CERTIFICATE-----'
  export OPENVPN_CERT=$'-----BEGIN CERTIFICATE-----\nMIIBcert\n-----END CERTIFICATE-----'
  export OPENVPN_KEY=$'-----BEGIN EC PRIVATE KEY-----\nkey\n-----END EC PRIVATE KEY-----'
  export OPENVPN_TLS_CRYPT=$'-----BEGIN OpenVPN Static key V1-----\n00\n-----END OpenVPN Static key V1-----'
  add_route 10.20.0.0/16 10.8.0.1
  run_script openvpn/client.sh
  assert_success
  assert_called '^systemctl daemon-reload$'
  refute_gpu_detached
  rm -rf "$GPU_CLUSTER_ROOT/dev/char"
  export OPENVPN_UNIT=openvpn-client@gpu-cluster
  run_script openvpn/remove.sh
  assert_success
  assert_called '^systemctl disable openvpn-client@gpu-cluster$'
  refute_gpu_detached
}

@test "dev-char: the Kubeflow port-forward on a controller+worker GPU node" {
  nvidia_driver_loaded 580.95.05
  export LISTEN_ADDRESS=127.0.0.1 LISTEN_PORT=8080 GATEWAY_NAMESPACE=istio-system \
    GATEWAY_SERVICE=istio-ingressgateway GATEWAY_PORT=443 \
    KUBECTL="/usr/local/bin/k0s kubectl" CONTROLLER_SERVICE=k0scontroller.service
  run_script kubeflow/port-forward.sh
  assert_success
  assert_called '^systemctl daemon-reload$'
  refute_gpu_detached
  rm -rf "$GPU_CLUSTER_ROOT/dev/char"
  run_script kubeflow/port-forward-remove.sh
  assert_success
  assert_called '^systemctl disable gpu-cluster-kubeflow-port-forward$'
  refute_gpu_detached
}
