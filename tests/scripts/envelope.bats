#!/usr/bin/env bats
# The scripts as the program runs them: pasted with their libraries into shell
# functions of one "envelope" that arrives on stdin of `bash -s -- create|delete`.

bats_require_minimum_version 1.5.0
load helpers
load helpers/envelopes

setup() {
  setup_envelope
  export STUB_RECORD_STDIN=1
}

# sourced_libraries FILE: the libraries FILE sources through their include guards, each
# after those it sources itself (as components/common/step_text.py Script.libraries).
sourced_libraries() {
  local dir lib
  dir="$(dirname "$1")"
  while IFS= read -r lib; do
    sourced_libraries "$(realpath -m "$dir/$lib")"
    realpath -m "$dir/$lib"
  done < <(sed -n 's#.*|| source "$(dirname "${BASH_SOURCE\[0\]}")/\(.*\)"$#\1#p' "$1")
}

# envelope_function NAME SCRIPT: SCRIPT and the libraries it sources as the body of NAME().
envelope_function() {
  local lib seen=" "
  printf '%s() {\n' "$1"
  while IFS= read -r lib; do
    [[ "$seen" != *" $lib "* ]] || continue
    seen+="$lib "
    cat "$lib"
  done < <(sourced_libraries "$SCRIPTS_DIR/$2")
  cat "$SCRIPTS_DIR/$2"
  printf '}\n'
}

# build_envelope STEP CREATE_SCRIPT DELETE_SCRIPT|"" NAME=VALUE...
build_envelope() {
  local step=$1 create=$2 delete=$3 assignment
  shift 3
  {
    printf 'export GPU_CLUSTER_HOST=%s\n' "$(sh_quote moscow)"
    printf 'export GPU_CLUSTER_STEP=%s\n' "$(sh_quote "$step")"
    for assignment in "$@"; do
      printf 'export %s=%s\n' "${assignment%%=*}" "$(sh_quote "${assignment#*=}")"
    done
    envelope_function gpu_cluster_create "$create"
    if [[ -n "$delete" ]]; then
      envelope_function gpu_cluster_delete "$delete"
    fi
    # shellcheck disable=SC2016 # literal text of the envelope
    printf '%s\n' 'case "${1:-create}" in create) gpu_cluster_create </dev/null ;; delete) gpu_cluster_delete </dev/null ;; esac'
    # Test-only sentinel: it only runs if no command swallowed the rest of stdin.
    printf '%s\n' 'echo "envelope: end of script reached" >&2'
  } >"$ENVELOPE"
}

assert_stubs_read_no_stdin() {
  if [[ "$output${stderr:-}" != *"envelope: end of script reached"* ]]; then
    echo "the envelope did not run to its end" >&2
    return 1
  fi
  if [[ -s "$STUB_STATE/stdin.log" ]]; then
    printf 'a command read the envelope from stdin:\n%s\n' "$(<"$STUB_STATE/stdin.log")" >&2
    return 1
  fi
}

@test "envelope: prepare-host works inside a function with stdin at EOF" {
  build_envelope prepare-host prepare-host.sh "" \
    DISABLE_IOMMU=true DISABLE_CPU_MITIGATIONS=false EXTRA_KERNEL_ARGS="pci=realloc iommu=pt" \
    INOTIFY_MAX_USER_INSTANCES=8192 INOTIFY_MAX_USER_WATCHES=1048576 INSTALL_NFS_CLIENT=true
  run_envelope create
  assert_success
  assert_output_contains "gpu-cluster: moscow: prepare-host: changed /etc/sysctl.d/90-gpu-cluster.conf" \
    "gpu-cluster: moscow: prepare-host: host prepared"
  grep -q 'amd_iommu=off pci=realloc iommu=pt"$' "$GPU_CLUSTER_ROOT/etc/default/grub.d/90-gpu-cluster.cfg"
  assert_called "^$APT "'install -y nfs-common$'
  assert_stubs_read_no_stdin
  [ ! -e "$BATS_TEST_TMPDIR/empty/lib.sh" ]

  assert_envelope_idempotent
}

@test "envelope: join-worker create and reset-node delete, with awkward values" {
  # A real k0s join token (base64: + / =), checked with the API the stub plays.
  local token
  token="$(k0s_join_token abcdef.0123456789abcdef)"
  build_envelope join-worker k0s/join-worker.sh k0s/reset-node.sh \
    K0S_VERSION=v1.34.1+k0s.0 K0S_SHA256_AMD64="$(fake_sha256 k0s v1.34.1+k0s.0)" K0S_SHA256_ARM64="" \
    K0S_JOIN_TOKEN="$token" NODE_IP=10.20.0.21 \
    KUBELET_EXTRA_ARGS="--system-reserved=cpu=500m,memory=1Gi --v=2" \
    NODE_LABELS="gpu-cluster.io/gpu=true" NODE_TAINTS="" K0S_PROFILE="" KUBELET_ROOT_DIR=/var/lib/kubelet
  export STUB_RECORD_ENV=1
  run_envelope create
  assert_success
  assert_file /etc/k0s/worker-token "$token"
  assert_mode /etc/k0s/worker-token 600
  assert_called '^k0s install worker --token-file /etc/k0s/worker-token --kubelet-extra-args=--node-ip=10\.20\.0\.21 --system-reserved=cpu=500m,memory=1Gi --v=2 --labels=gpu-cluster\.io/gpu=true --kubelet-root-dir=/var/lib/kubelet$'
  [[ "$output" != *"$token"* ]]
  refute_file_contains "$STUB_CALLS" "$token"
  refute_file_contains "$STUB_STATE/env.log" "$token"
  assert_stubs_read_no_stdin

  run_envelope create
  assert_success
  assert_output_contains "gpu-cluster: moscow: join-worker: k0sworker is already running"
  refute_changes_logged

  reset_calls
  run_envelope delete
  assert_success
  assert_output_contains "gpu-cluster: moscow: join-worker: changed: reset k0s (k0sworker)"
  assert_call_order '^k0s stop$' '^k0s reset --kubelet-root-dir=/var/lib/kubelet$'
  [ ! -e "$GPU_CLUSTER_ROOT/etc/k0s/worker-token" ]

  reset_calls
  run_envelope delete
  assert_success
  assert_output_contains "nothing to reset"
  assert_no_state_changes
  assert_stubs_read_no_stdin
}

@test "envelope: install-controller with a config containing quotes" {
  local config="# it's \"the\" controller
apiVersion: k0s.k0sproject.io/v1beta1
kind: ClusterConfig"
  local ca_key=$'-----BEGIN EC PRIVATE KEY-----\nMHcCAQEEIA-envelope-ca-key\n-----END EC PRIVATE KEY-----'
  build_envelope install-controller k0s/install-controller.sh k0s/reset-node.sh \
    K0S_VERSION=v1.34.1+k0s.0 K0S_SHA256_AMD64="$(fake_sha256 k0s v1.34.1+k0s.0)" K0S_SHA256_ARM64="" \
    K0S_CONFIG="$config" K0S_ENABLE_WORKER=true NODE_IP=192.0.2.10 \
    KUBELET_EXTRA_ARGS="" NODE_LABELS="" NODE_TAINTS="" API_PORT=6443 KUBELET_ROOT_DIR=/var/lib/kubelet \
    K0S_CA_CERT=$'-----BEGIN CERTIFICATE-----\nMIIBca\n-----END CERTIFICATE-----' K0S_CA_KEY="$ca_key" \
    K0S_CA_KEY_SSM_PARAMETER="" AWS_REGION="" SSM_READER="" \
    K0S_ADMISSION_CONFIG="kind: AdmissionConfiguration" K0S_AUDIT_POLICY="kind: Policy"
  export STUB_RECORD_ENV=1
  run_envelope create
  assert_success
  assert_file /etc/k0s/k0s.yaml "$config"
  assert_file /var/lib/k0s/pki/ca.key "$ca_key"
  assert_called '^k0s install controller -c /etc/k0s/k0s.yaml --enable-worker --no-taints --kubelet-extra-args=--node-ip=192\.0\.2\.10 --kubelet-root-dir=/var/lib/kubelet$'
  refute_output_contains envelope-ca-key
  refute_file_contains "$STUB_STATE/env.log" envelope-ca-key
  assert_stubs_read_no_stdin
}

@test "envelope: the CA key read from SSM inside an envelope" {
  local ca_key=$'-----BEGIN EC PRIVATE KEY-----\nMHcCAQEEIA-ssm-envelope-ca-key\n-----END EC PRIVATE KEY-----'
  ssm_parameter eu-central-1 /gpu-cluster/dev/cluster-ca-key "$ca_key"
  build_envelope install-controller k0s/install-controller.sh k0s/reset-node.sh \
    K0S_VERSION=v1.34.1+k0s.0 K0S_SHA256_AMD64="$(fake_sha256 k0s v1.34.1+k0s.0)" K0S_SHA256_ARM64="" \
    K0S_CONFIG="kind: ClusterConfig" K0S_ENABLE_WORKER=false \
    NODE_IP=192.0.2.10 KUBELET_EXTRA_ARGS="" NODE_LABELS="" NODE_TAINTS="" API_PORT=6443 \
    KUBELET_ROOT_DIR="" K0S_CA_CERT=$'-----BEGIN CERTIFICATE-----\nMIIBca\n-----END CERTIFICATE-----' \
    K0S_CA_KEY="" K0S_CA_KEY_SSM_PARAMETER=/gpu-cluster/dev/cluster-ca-key AWS_REGION=eu-central-1 \
    SSM_READER="$(<"$SCRIPTS_DIR/ssm-parameter.py")" \
    K0S_ADMISSION_CONFIG="kind: AdmissionConfiguration" K0S_AUDIT_POLICY="kind: Policy"
  export STUB_RECORD_ENV=1
  run_envelope create
  assert_success
  assert_called '^python3 - get eu-central-1 /gpu-cluster/dev/cluster-ca-key$'
  assert_file /var/lib/k0s/pki/ca.key "$ca_key"
  refute_output_contains ssm-envelope-ca-key
  refute_file_contains "$STUB_STATE/env.log" ssm-envelope-ca-key
  assert_stubs_read_no_stdin
}

@test "envelope: wait-for-api runs as the operator, leaving nothing behind" {
  local key=$'-----BEGIN EC PRIVATE KEY-----\nMHcCAQEEIA-envelope-admin-key\n-----END EC PRIVATE KEY-----'
  local pem=$'-----BEGIN CERTIFICATE-----\nMIIBcert\n-----END CERTIFICATE-----'
  build_envelope wait-for-api local/wait-for-api.sh "" API_SERVER=https://192.0.2.10:6443 \
    API_CA_CERT="$pem" API_CLIENT_CERT="$pem" API_CLIENT_KEY="$key" API_READY_TIMEOUT=60
  export TMPDIR="$BATS_TEST_TMPDIR/tmp" STUB_RECORD_ENV=1 STUB_READYZ_FAIL_TIMES=1
  mkdir -p "$TMPDIR"
  run_envelope create
  assert_success
  assert_output_contains "gpu-cluster: moscow: wait-for-api: ready: the Kubernetes API at https://192.0.2.10:6443 to be ready"
  [ "$(grep -c '/readyz$' "$STUB_CALLS")" -eq 2 ]
  [ -z "$(ls -A "$TMPDIR")" ]
  refute_output_contains envelope-admin-key
  refute_file_contains "$STUB_CALLS" envelope-admin-key
  refute_file_contains "$STUB_STATE/env.log" envelope-admin-key
  assert_stubs_read_no_stdin
}

@test "envelope: openvpn server create and remove delete, with the openvpn library" {
  local key=$'-----BEGIN EC PRIVATE KEY-----\nc2VydmVyLWtleQ\n-----END EC PRIVATE KEY-----'
  build_envelope install-openvpn-server openvpn/server.sh openvpn/remove.sh \
    OPENVPN_CONFIG=$'dev tun\nca gpu-cluster/ca.crt' \
    OPENVPN_CA=$'-----BEGIN CERTIFICATE-----\nMIIBca\n-----END CERTIFICATE-----' \
    OPENVPN_CERT=$'-----BEGIN CERTIFICATE-----\nMIIBserver\n-----END CERTIFICATE-----' \
    OPENVPN_KEY="$key" \
    OPENVPN_TLS_CRYPT=$'-----BEGIN OpenVPN Static key V1-----\n00\n-----END OpenVPN Static key V1-----' \
    OPENVPN_CCD="# Managed by gpu-cluster (install-openvpn-server): client-config-dir entry of lab-onprem-gateway"$'\n'"iroute 192.168.2.0 255.255.255.0" OPENVPN_CRL=$'-----BEGIN X509 CRL-----\nMIIB\n-----END X509 CRL-----' OPENVPN_FILTER=$'*filter\nCOMMIT' \
    OPENVPN_UNIT=openvpn-server@gpu-cluster
  run_envelope create
  assert_success
  assert_file /etc/openvpn/server/gpu-cluster/server.key "$key"
  assert_mode /etc/openvpn/server/gpu-cluster/server.key 600
  assert_called '^systemctl start openvpn-server@gpu-cluster$'
  assert_output_contains \
    "gpu-cluster: moscow: install-openvpn-server: OpenVPN server openvpn-server@gpu-cluster is running"
  assert_stubs_read_no_stdin

  reset_calls
  run_envelope delete
  assert_success
  assert_called '^systemctl stop openvpn-server@gpu-cluster$'
  [ ! -e "$GPU_CLUSTER_ROOT/etc/openvpn/server/gpu-cluster" ]
  assert_output_contains "gpu-cluster: moscow: install-openvpn-server: removed the OpenVPN server gpu-cluster"
  assert_stubs_read_no_stdin
}

@test "envelope: serve-nfs works inside a function with stdin at EOF" {
  build_envelope serve-nfs serve-nfs.sh "" NFS_EXPORT_PATH=/srv/nfs/gpu-cluster \
    NFS_CLIENT_CIDRS="192.168.10.11/32 192.168.10.12/32" NFS_EXPORT_OPTIONS="$(nfs_export_options)"
  run_envelope create
  assert_success
  assert_output_contains "gpu-cluster: moscow: serve-nfs: changed /etc/exports.d/gpu-cluster.exports"
  [ -d "$GPU_CLUSTER_ROOT/srv/nfs/gpu-cluster" ]
  assert_called '^exportfs -ra$'
  assert_called '^systemctl enable --now nfs-server$'
  assert_stubs_read_no_stdin

  assert_envelope_idempotent
}

@test "envelope: create-join-token keeps stdout to the token alone" {
  mkdir -p "$GPU_CLUSTER_ROOT/usr/local/bin"
  printf '#!/bin/sh\n# fake k0s v1.34.1+k0s.0\n' >"$GPU_CLUSTER_ROOT/usr/local/bin/k0s"
  build_envelope create-join-token k0s/create-join-token.sh "" TOKEN_EXPIRY=2h
  export STUB_JOIN_TOKEN=H4sIAAAAAAAC_envelope
  run_envelope create --separate-stderr
  assert_success
  [ "$output" = H4sIAAAAAAAC_envelope ]
  [[ "$stderr" == *"gpu-cluster: moscow: create-join-token: created a worker join token"* ]]
}

@test "envelope: failures exit 1 and name host and step" {
  build_envelope preflight preflight.sh "" \
    HOST_NAME=moscow HOST_ADDRESS=203.0.113.9 HOST_INTERFACE="" HOST_ROLE=worker GPU_COUNT=8 \
    CONTROL_PLANE_ADDRESS=192.0.2.1 CONTROL_PLANE_PORT=22 MIN_FREE_DISK_GB=100 \
    NVIDIA_DRIVER_BRANCH=580 SUPPORTED_OS="ubuntu:22.04 ubuntu:24.04"
  run_envelope create
  [ "$status" -eq 1 ]
  assert_output_contains \
    "gpu-cluster: moscow: preflight: FAILED: address 203.0.113.9 is not assigned on this host" \
    "gpu-cluster: moscow: preflight: FAILED: found 2 NVIDIA GPU(s) on the PCI bus, expected 8" \
    "gpu-cluster: moscow: preflight: 2 preflight check(s) failed"

  build_envelope prepare-host prepare-host.sh "" \
    DISABLE_IOMMU=false DISABLE_CPU_MITIGATIONS=false EXTRA_KERNEL_ARGS="" \
    INOTIFY_MAX_USER_INSTANCES=8192 INOTIFY_MAX_USER_WATCHES=1048576 INSTALL_NFS_CLIENT=false
  export STUB_EXIT_SWAPOFF=1
  run_envelope create
  assert_failed_at_command prepare-host
  [[ "$output" =~ prepare-host:\ command\ failed\ with\ exit\ code\ 1\ at\ line\ [0-9]+:\ swapoff\ -a ]]
}
