#!/usr/bin/env bash
# Joins this host to the cluster as an RKE2 agent with its config (server, node IP,
# labels, taints) and waits until the rke2-agent service is active. The agent token goes
# to a 0600 file only, never to a command line; RKE2 reads it at every start.
set -euo pipefail
# shellcheck source=lib.sh
[[ -n "${GPU_CLUSTER_RKE2_LIB_LOADED:-}" ]] || source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
: "${GPU_CLUSTER_STEP:=join-agent}"

# Inputs: RANCHER_RPM_KEY_FINGERPRINT RKE2_CONFIG RKE2_KUBELET_CONFIG RKE2_SELINUX_VERSION
# Optional inputs: AWS_REGION RKE2_AGENT_TOKEN RKE2_AGENT_TOKEN_SSM_PARAMETER RKE2_RELEASE_URL RKE2_SHA256_AMD64 RKE2_SHA256_ARM64 RKE2_VERSION SSM_READER WORKER_PROFILE_VALUES RKE2_AIRGAP_SHA256_AMD64 RKE2_AIRGAP_SHA256_ARM64 RKE2_CLOUD_PROVIDER
#   RKE2_VERSION        release to install, e.g. v1.36.3+rke2r1; empty: the one an earlier
#                       step installed (upgrade-node, on hosts over SSH).
#   RKE2_CONFIG         /etc/rancher/rke2/config.yaml of the agent (server URL, token-file,
#                       node-ip, node-name, node-label, node-taint; no secrets).
#   RKE2_KUBELET_CONFIG the kubelet drop-in, written before the first start only.
#   RKE2_SELINUX_VERSION, RANCHER_RPM_KEY_FINGERPRINT  rke2-selinux's VERSION-RELEASE and
#                       its repository's key, installed where SELinux labels files
#                       (rke2_configure_selinux).
#   RKE2_AIRGAP_SHA256_AMD64, RKE2_AIRGAP_SHA256_ARM64  optional: the image tarball's sha256
#                       (versions.airgapBundleSha256; rke2_install).
#   RKE2_AGENT_TOKEN    the agent token K10<sha256 of the server CA>::node:<secret>, or a
#                       bootstrap token K10<sha256 of the server CA>::<id>.<secret> (pools:
#                       `rke2 token create` on the controller), or
#   RKE2_AGENT_TOKEN_SSM_PARAMETER, AWS_REGION and SSM_READER naming an SSM SecureString
#                       holding it (cloud instances).
#   RKE2_CLOUD_PROVIDER  optional: aws on an EC2 node where the AWS cloud controller
#                       manager runs: the kubelet's cloud provider external and its
#                       providerID from IMDS, read with SSM_READER
#                       (rke2_configure_cloud_provider).

SERVICE_ACTIVE_TIMEOUT=300
# k3s pkg/clientaccess/token.go: "K10" + hex SHA-256 of the server's CA bundle + "::" +
# user:password, or a bootstrap token's <id>.<secret> (k3s pkg/cli/token/token.go create,
# clientaccess.FormatTokenBytes). The CA hash makes the agent refuse a server with another CA.
AGENT_TOKEN_FORMAT='^K10[0-9a-f]{64}::(node:[^[:space:]]+|[a-z0-9]{6}\.[a-z0-9]{16})$'

check_inputs() {
  check_missing_env RKE2_CONFIG RKE2_KUBELET_CONFIG
  : "${RKE2_VERSION:=}"
  rke2_check_selinux_inputs
  check_cloud_provider_input RKE2_CLOUD_PROVIDER
  # Only in a pool's boot data, where new kubelet settings roll the pool.
  : "${WORKER_PROFILE_VALUES:=}"
  rke2_check_secret RKE2_AGENT_TOKEN "the agent token" /gpu-cluster/dev/rke2-agent-token/a100
  if [[ -n "${RKE2_AGENT_TOKEN:-}" ]] && ! [[ "$RKE2_AGENT_TOKEN" =~ $AGENT_TOKEN_FORMAT ]]; then
    INPUT_PROBLEMS+=("RKE2_AGENT_TOKEN is not an agent token with the server's CA hash (K10<64 hex digits>::node:<secret> or ::<id>.<secret>)")
  fi
  if [[ -n "${RKE2_CONFIG:-}" && "$RKE2_CONFIG" != *"token-file: $RKE2_AGENT_TOKEN_FILE"* ]]; then
    INPUT_PROBLEMS+=("RKE2_CONFIG does not read the agent token from $RKE2_AGENT_TOKEN_FILE (token-file)")
  fi
  die_on_input_problems
}

main() {
  local restart=0
  # Keep the secret out of the environment of every command started from here on.
  export -n RKE2_AGENT_TOKEN
  check_inputs
  rke2_read_secret RKE2_AGENT_TOKEN "the agent token"
  if ! [[ "$RKE2_AGENT_TOKEN" =~ $AGENT_TOKEN_FORMAT ]]; then
    die "the agent token read from SSM is not an agent token with the server's CA hash"
  fi
  # Empty on hosts: upgrade-node installed it.
  [[ -z "$RKE2_VERSION" ]] || rke2_install "$RKE2_VERSION"
  ((RKE2_BINARY_CHANGED == 0)) || restart=1
  rke2_configure_selinux
  ((FILE_CHANGED == 0)) || restart=1
  write_text "$RKE2_AGENT_TOKEN_FILE" 0600 "$RKE2_AGENT_TOKEN"
  ((FILE_CHANGED == 0)) || restart=1
  write_text "$RKE2_CONFIG_FILE" 0600 "$RKE2_CONFIG"
  ((FILE_CHANGED == 0)) || restart=1
  rke2_write_kubelet_config "$RKE2_KUBELET_CONFIG"
  ((FILE_CHANGED == 0)) || restart=1
  rke2_configure_cloud_provider agent
  ((FILE_CHANGED == 0)) || restart=1
  rke2_ensure_service rke2-agent "$restart"
  wait_until "$SERVICE_ACTIVE_TIMEOUT" "the rke2-agent service to be active" \
    systemctl is-active --quiet rke2-agent
}

main "$@"
