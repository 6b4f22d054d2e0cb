#!/usr/bin/env bash
# Installs RKE2 as the cluster's server with the cluster CA the program generated, its
# tokens and Canal settings, keeps config and service in sync with the inputs and waits
# until the Kubernetes API answers /readyz. Secrets only ever go to 0600 files.
set -euo pipefail
# shellcheck source=lib.sh
[[ -n "${GPU_CLUSTER_RKE2_LIB_LOADED:-}" ]] || source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
: "${GPU_CLUSTER_STEP:=install-server}"

# Inputs: RANCHER_RPM_KEY_FINGERPRINT RKE2_ADMISSION_CONFIG RKE2_AUDIT_POLICY RKE2_CA_CERT RKE2_CONFIG RKE2_KUBELET_CONFIG RKE2_SELINUX_VERSION RKE2_VERSION
# Optional inputs: AWS_REGION RKE2_AGENT_TOKEN RKE2_AGENT_TOKEN_SSM_PARAMETER RKE2_CANAL_CONFIG RKE2_CA_KEY RKE2_CA_KEY_SSM_PARAMETER RKE2_RELEASE_URL RKE2_SHA256_AMD64 RKE2_SHA256_ARM64 RKE2_TOKEN RKE2_TOKEN_SSM_PARAMETER SSM_READER RKE2_AIRGAP_SHA256_AMD64 RKE2_AIRGAP_SHA256_ARM64 RKE2_CLOUD_PROVIDER
#   RKE2_VERSION        release to install, e.g. v1.36.3+rke2r1.
#   RKE2_CONFIG         /etc/rancher/rke2/config.yaml (no secrets: it names the token files).
#   RKE2_KUBELET_CONFIG the kubelet drop-in (kubelet-arg, resolv-conf), written before the
#                       first start only; later changes are apply-agent-args.sh's.
#   RKE2_SELINUX_VERSION, RANCHER_RPM_KEY_FINGERPRINT  rke2-selinux's VERSION-RELEASE and
#                       its repository's key, installed where SELinux labels files
#                       (rke2_configure_selinux).
#   RKE2_CA_CERT        the cluster CA certificate (PEM).
#   RKE2_CANAL_CONFIG   optional: the rke2-canal HelmChartConfig; empty removes ours.
#   RKE2_ADMISSION_CONFIG  the API server's AdmissionConfiguration (Pod Security default) and
#   RKE2_AUDIT_POLICY      its audit policy: the files RKE2_CONFIG names.
#   RKE2_AIRGAP_SHA256_AMD64, RKE2_AIRGAP_SHA256_ARM64  optional: the image tarball's sha256
#                       (versions.airgapBundleSha256; rke2_install).
#   RKE2_CLOUD_PROVIDER optional: aws on an EC2 server where the AWS cloud controller
#                       manager runs: cloud provider external, RKE2's own cloud controller
#                       off, the providerID from IMDS read with SSM_READER
#                       (rke2_configure_cloud_provider).
#   A server whose RKE2_CONFIG names `server: https://ADDRESS:9345` joins the cluster
#   there (the first server's, at the control plane's address) and takes the CA from it.
# Secrets, each given directly or as <NAME>_SSM_PARAMETER (with AWS_REGION and SSM_READER),
# needed on every run (they stay in their 0600 files, which RKE2 reads at each start):
#   RKE2_CA_KEY         the CA's private key (PEM); used only while it is not in place;
#                       never given to a joining server.
#   RKE2_TOKEN          the server token: encrypts the datastore's bootstrap data.
#   RKE2_AGENT_TOKEN    the agents' join secret (agents get it as K10<CA hash>::node:<it>).

API_READY_TIMEOUT=900
# RKE2 uses a CA whose files it finds here at its first start instead of generating it;
# it generates each missing pair on its own (k3s pkg/daemons/control/deps/deps.go,
# createSigningCertKey; docs: security/certificates.md "Using Custom CA Certificates").
# The program's CA serves as server CA (kubeconfigs trust it) and client CA (it signs
# their client certificates); request-header, etcd and service-account keys stay RKE2's.
TLS_DIR=$RKE2_DATA_DIR/server/tls
CA_NAMES=(server-ca client-ca)
# The datastore exists once the server started: the tokens are fixed from then on (the
# bootstrap data is encrypted with the token; changing it takes `rke2 token rotate`).
DATASTORE_DIR=$RKE2_DATA_DIR/server/db
CANAL_CONFIG_FILE=$RKE2_DATA_DIR/server/manifests/rke2-canal-config.yaml
# What RKE2_CONFIG's pod-security-admission-config-file and audit-policy-file name
# (components/distributions/rke2.py); RKE2 mounts them into its kube-apiserver pod.
ADMISSION_CONFIG_FILE=/etc/rancher/rke2/gpu-cluster-pss.yaml
AUDIT_POLICY_FILE=/etc/rancher/rke2/gpu-cluster-audit-policy.yaml

# A joining server's `server` line: the supervisor port is fixed (SUPERVISOR_PORT in
# components/distributions/rke2.py).
JOIN_SERVER='^server: (https://[A-Za-z0-9.-]+:9345)$'
JOINS=""

# joins_at: sets JOINS to the URL RKE2_CONFIG's top-level `server` names (a server after the
# first: it joins there, rancher/rke2 v1.36.3+rke2r1 pkg/cli/cmds/server.go:159); empty for
# the first. A `server` line of another form is refused.
joins_at() {
  local line
  JOINS=""
  line="$(grep -E '^server:' <<<"${RKE2_CONFIG:-}" || true)"
  [[ -n "$line" ]] || return 0
  if [[ "$line" =~ $JOIN_SERVER ]]; then
    JOINS=${BASH_REMATCH[1]}
  else
    INPUT_PROBLEMS+=("RKE2_CONFIG's server is not one line 'server: https://ADDRESS:9345'")
  fi
}

check_inputs() {
  check_missing_env RKE2_VERSION RKE2_CONFIG RKE2_KUBELET_CONFIG RKE2_CA_CERT \
    RKE2_ADMISSION_CONFIG RKE2_AUDIT_POLICY
  : "${RKE2_CANAL_CONFIG:=}"
  rke2_check_selinux_inputs
  check_cloud_provider_input RKE2_CLOUD_PROVIDER
  if [[ -n "${RKE2_CA_CERT:-}" && "$RKE2_CA_CERT" != *"-----BEGIN CERTIFICATE-----"*"-----END CERTIFICATE-----"* ]]; then
    INPUT_PROBLEMS+=("RKE2_CA_CERT is not a PEM certificate")
  fi
  joins_at
  if [[ -n "$JOINS" ]]; then
    if [[ -n "${RKE2_CA_KEY:-}${RKE2_CA_KEY_SSM_PARAMETER:-}" ]]; then
      INPUT_PROBLEMS+=("a server that joins $JOINS takes the CA from the cluster: give it no RKE2_CA_KEY or RKE2_CA_KEY_SSM_PARAMETER")
    fi
  elif ca_key_needed; then
    rke2_check_secret RKE2_CA_KEY "the cluster CA key" /gpu-cluster/dev/cluster-ca-key
  fi
  rke2_check_secret RKE2_TOKEN "the server token" /gpu-cluster/dev/rke2-token
  rke2_check_secret RKE2_AGENT_TOKEN "the agent token" /gpu-cluster/dev/rke2-agent-token
  if [[ -n "${RKE2_CA_KEY:-}" && "$RKE2_CA_KEY" != *"-----BEGIN "*"PRIVATE KEY-----"* ]]; then
    INPUT_PROBLEMS+=("RKE2_CA_KEY is not a PEM private key")
  fi
  die_on_input_problems
}

# ca_key_needed: success while a CA key is not in place yet.
ca_key_needed() {
  local name
  for name in "${CA_NAMES[@]}"; do
    [[ -f "$ROOT$TLS_DIR/$name.crt" && -f "$ROOT$TLS_DIR/$name.key" ]] || return 0
  done
  return 1
}

# ensure_cluster_ca: RKE2_CA_CERT and its key as server and client CA before the first
# start. Sets CA_CHANGED=1 when it wrote any. Refuses a server that has another CA.
ensure_cluster_ca() {
  local name
  CA_CHANGED=0
  for name in "${CA_NAMES[@]}"; do
    if [[ -f "$ROOT$TLS_DIR/$name.crt" ]] && ! same_text "$(<"$ROOT$TLS_DIR/$name.crt")" "$RKE2_CA_CERT"; then
      die "the server already has a different cluster CA ($TLS_DIR/$name.crt is not" \
        "RKE2_CA_CERT) and RKE2 cannot swap its CA by a restart; nothing was changed. Give" \
        "the existing CA as RKE2_CA_CERT with its key, or rotate it with" \
        "\`rke2 certificate rotate-ca\` (docs: security/certificates.md)"
    fi
  done
  if ! ca_key_needed; then
    log "the cluster CA is already in place"
    return 0
  fi
  if [[ -n "$JOINS" ]]; then
    # Nothing of the CA beforehand: a joining server without certificate folders writes
    # the files of the bootstrap data it fetches from the server it joins, and one whose
    # files on disk are newer than that data exits with an error (k3s pkg/cluster/
    # bootstrap.go, ReconcileBootstrapData: certDirsExist, WriteToDiskFromStorage).
    # check_joined_ca compares them once it runs.
    log "joins $JOINS: the cluster CA comes from there"
    return 0
  fi
  rke2_read_secret RKE2_CA_KEY "the cluster CA key"
  if [[ "$RKE2_CA_KEY" != *"-----BEGIN "*"PRIVATE KEY-----"* ]]; then
    die "the cluster CA key read from SSM is not a PEM private key"
  fi
  for name in "${CA_NAMES[@]}"; do
    # The key first: once a certificate is in place, so is its key.
    write_text "$TLS_DIR/$name.key" 0600 "$RKE2_CA_KEY"
    ((FILE_CHANGED == 0)) || CA_CHANGED=1
    write_text "$TLS_DIR/$name.crt" 0644 "$RKE2_CA_CERT"
    ((FILE_CHANGED == 0)) || CA_CHANGED=1
  done
}

# ensure_token FILE VAR WHAT: writes secret VAR to FILE (0600); refuses to change it once
# the datastore exists. Sets FILE_CHANGED.
ensure_token() {
  local file=$1 var=$2 what=$3
  if [[ -d "$ROOT$DATASTORE_DIR" && -f "$ROOT$file" ]] && ! same_text "$(<"$ROOT$file")" "${!var}"; then
    die "$what differs from the one this server was started with ($file); RKE2 encrypts" \
      "its datastore with it, so it cannot be swapped by a restart; nothing was changed." \
      "Give the old value, or rotate it with \`rke2 token rotate\` (docs: security/token.md)"
  fi
  write_text "$file" 0600 "${!var}"
}

main() {
  local restart=0
  # Keep the secrets out of the environment of every command started from here on.
  export -n RKE2_CA_KEY RKE2_TOKEN RKE2_AGENT_TOKEN
  check_inputs
  # Before anything else changes: a different CA or token stops the run untouched.
  ensure_cluster_ca
  rke2_read_secret RKE2_TOKEN "the server token"
  rke2_read_secret RKE2_AGENT_TOKEN "the agent token"
  ensure_token "$RKE2_TOKEN_FILE" RKE2_TOKEN "the server token"
  ((FILE_CHANGED == 0)) || restart=1
  # The agent token may change (kubernetes.joinTokenGeneration): servers read it at start,
  # and agents that joined keep authenticating with their node credentials (k3s
  # docs/adrs/agent-join-token.md); new agents join with the new one.
  write_text "$RKE2_AGENT_TOKEN_FILE" 0600 "$RKE2_AGENT_TOKEN"
  ((FILE_CHANGED == 0)) || restart=1
  ((CA_CHANGED == 0)) || restart=1
  rke2_install "$RKE2_VERSION"
  ((RKE2_BINARY_CHANGED == 0)) || restart=1
  rke2_configure_selinux
  ((FILE_CHANGED == 0)) || restart=1
  write_text "$RKE2_CONFIG_FILE" 0600 "$RKE2_CONFIG"
  ((FILE_CHANGED == 0)) || restart=1
  rke2_write_kubelet_config "$RKE2_KUBELET_CONFIG"
  ((FILE_CHANGED == 0)) || restart=1
  rke2_configure_cloud_provider server
  ((FILE_CHANGED == 0)) || restart=1
  write_text "$ADMISSION_CONFIG_FILE" 0600 "$RKE2_ADMISSION_CONFIG"
  ((FILE_CHANGED == 0)) || restart=1
  write_text "$AUDIT_POLICY_FILE" 0600 "$RKE2_AUDIT_POLICY"
  ((FILE_CHANGED == 0)) || restart=1
  # RKE2's deploy controller applies what is in the manifests folder, at the first start
  # and when it changes (docs: networking/basic_network_options.md, Canal).
  if [[ -n "$RKE2_CANAL_CONFIG" ]]; then
    write_text "$CANAL_CONFIG_FILE" 0600 "$RKE2_CANAL_CONFIG"
  else
    remove_file "$CANAL_CONFIG_FILE"
  fi
  rke2_ensure_service rke2-server "$restart"
  wait_until "$API_READY_TIMEOUT" "the Kubernetes API to be ready" rke2_kubectl get --raw=/readyz
  [[ -z "$JOINS" ]] || check_joined_ca
}

# check_joined_ca: a joined server runs with the program's CA: what it fetched from the
# server it joined is RKE2_CA_CERT, or the join went to another cluster.
check_joined_ca() {
  local name
  for name in "${CA_NAMES[@]}"; do
    if [[ ! -f "$ROOT$TLS_DIR/$name.crt" ]] || ! same_text "$(<"$ROOT$TLS_DIR/$name.crt")" "$RKE2_CA_CERT"; then
      die "joined $JOINS, but its $TLS_DIR/$name.crt is not RKE2_CA_CERT: that address" \
        "serves another cluster. Stop rke2-server here, check the control plane's address," \
        "and run rke2-uninstall.sh before the next pulumi up"
    fi
  done
  log "joined $JOINS, whose CA is the cluster's"
}

main "$@"
