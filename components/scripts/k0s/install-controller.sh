#!/usr/bin/env bash
# Installs k0s as the cluster controller (optionally also a worker) with the cluster CA
# the program generated, keeps its service arguments and config in sync with the inputs
# and waits until the Kubernetes API answers /readyz.
set -euo pipefail
# shellcheck source=lib.sh
[[ -n "${GPU_CLUSTER_K0S_LIB_LOADED:-}" ]] || source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
: "${GPU_CLUSTER_STEP:=install-controller}"

# Inputs: API_PORT K0S_ADMISSION_CONFIG K0S_AUDIT_POLICY K0S_CA_CERT K0S_CONFIG K0S_ENABLE_WORKER K0S_VERSION NODE_IP
# Optional inputs: AWS_REGION K0S_CA_KEY K0S_CA_KEY_SSM_PARAMETER K0S_PROFILE K0S_RELEASE_URL K0S_SHA256_AMD64 K0S_SHA256_ARM64 KUBELET_EXTRA_ARGS KUBELET_ROOT_DIR NODE_LABELS NODE_TAINTS SSM_READER K0S_AIRGAP_SHA256_AMD64 K0S_AIRGAP_SHA256_ARM64 K0S_CONTROLLER_TOKEN K0S_CONTROLLER_TOKEN_SSM_PARAMETER K0S_JOIN_ISSUER_URN
#   K0S_VERSION, K0S_CONFIG, K0S_ENABLE_WORKER, NODE_IP, API_PORT  required.
#   K0S_CA_CERT        the cluster CA certificate (PEM), required.
#   K0S_CA_KEY         its private key (PEM), or
#   K0S_CA_KEY_SSM_PARAMETER, AWS_REGION and SSM_READER
#                      name of an SSM SecureString holding it, read by SSM_READER (the
#                      text of ssm-parameter.py) with the instance's own credentials
#                      (a cloud controller: the key is not in its user data). Exactly
#                      one of the two; either is used only while the key is not in place.
#   K0S_ADMISSION_CONFIG  the API server's AdmissionConfiguration (Pod Security default),
#   K0S_AUDIT_POLICY      its audit policy: files K0S_CONFIG's spec.api.extraArgs name.
#   KUBELET_EXTRA_ARGS, NODE_LABELS, NODE_TAINTS, K0S_PROFILE, KUBELET_ROOT_DIR  optional.
#   K0S_AIRGAP_SHA256_AMD64, K0S_AIRGAP_SHA256_ARM64  optional: the image bundle's sha256
#                      (versions.airgapBundleSha256; k0s_install).
#   K0S_CONTROLLER_TOKEN  a controller join token (k0s/create-controller-token.sh on the
#                      first controller): this controller joins that cluster and takes its
#                      CA from there, so it gets no CA key. Used only until it has joined.
#   K0S_CONTROLLER_TOKEN_SSM_PARAMETER  instead, the SSM SecureString holding it (with
#                      AWS_REGION and SSM_READER): a controller that joins at boot; read
#                      only while it has not joined.
#   K0S_JOIN_ISSUER_URN   optional: the URN of the step that made the token, named in the
#                      message when the token no longer works.

API_READY_TIMEOUT=600
# k0s uses a CA it finds here at its first start instead of generating one, so the
# program can sign kubeconfigs without reading anything from the controller
# (https://docs.k0sproject.io/stable/custom-ca/).
K0S_CA_CERT_FILE="$K0S_DATA_DIR/pki/ca.crt"
K0S_CA_KEY_FILE="$K0S_DATA_DIR/pki/ca.key"
# Where spec.api.extraArgs point kube-apiserver (components/distributions/k0s.py), which
# k0s runs as the system user kube-apiserver (k0s pkg/constant/constant.go ApiserverUser).
K0S_ADMISSION_CONFIG_FILE=/etc/k0s/admission-config.yaml
K0S_AUDIT_POLICY_FILE=/etc/k0s/audit-policy.yaml
K0S_AUDIT_LOG_DIR=/var/log/k0s-audit
K0S_APISERVER_USER=kube-apiserver
# A joining controller's token, which its unit's --token-file names; k0s reads it only
# while the controller has not joined: until its etcd database exists
# (cmd/controller/controller.go:227-237 and 748-760 at v1.36.3+k0s.2, needToJoin; the
# etcd data dir is <data-dir>/etcd, pkg/config/cfgvars.go:173). Without the file and the
# database, k0s would start a cluster of its own.
K0S_CONTROLLER_TOKEN_FILE=/etc/k0s/controller-token
K0S_ETCD_DB="$K0S_DATA_DIR/etcd/member/snap/db"
PULUMI_URN='^urn:pulumi:[A-Za-z0-9:._$/-]+$'

# ca_key_needed: success when the key input is used: the CA is not in place yet, or
# its key is missing.
ca_key_needed() {
  [[ ! -f "$ROOT$K0S_CA_CERT_FILE" || ! -f "$ROOT$K0S_CA_KEY_FILE" ]]
}

# joining: success when this controller joins another (K0S_CONTROLLER_TOKEN or its SSM
# parameter given).
joining() {
  [[ -n "$K0S_CONTROLLER_TOKEN$K0S_CONTROLLER_TOKEN_SSM_PARAMETER" ]]
}

# K0S_CONTROLLER_TOKEN's form (k0s pkg/token/joinencode.go: base64 of a gzipped
# kubeconfig); a value is never shown.
K0S_TOKEN_FORM='^[A-Za-z0-9+/=]+$'

# controller_joined: success once this controller's etcd database exists.
controller_joined() {
  [[ -f "$ROOT$K0S_ETCD_DB" ]]
}

check_inputs() {
  check_missing_env K0S_VERSION K0S_CONFIG K0S_ENABLE_WORKER NODE_IP API_PORT K0S_CA_CERT \
    K0S_ADMISSION_CONFIG K0S_AUDIT_POLICY
  : "${KUBELET_EXTRA_ARGS:=}" "${NODE_LABELS:=}" "${NODE_TAINTS:=}" "${K0S_PROFILE:=}"
  : "${KUBELET_ROOT_DIR:=}" "${K0S_CA_KEY:=}" "${K0S_CA_KEY_SSM_PARAMETER:=}"
  : "${K0S_CONTROLLER_TOKEN:=}" "${K0S_CONTROLLER_TOKEN_SSM_PARAMETER:=}" "${K0S_JOIN_ISSUER_URN:=}"
  if [[ -n "${K0S_CA_CERT:-}" && "$K0S_CA_CERT" != *"-----BEGIN CERTIFICATE-----"*"-----END CERTIFICATE-----"* ]]; then
    INPUT_PROBLEMS+=("K0S_CA_CERT is not a PEM certificate")
  fi
  if [[ -n "$K0S_JOIN_ISSUER_URN" && ! "$K0S_JOIN_ISSUER_URN" =~ $PULUMI_URN ]]; then
    INPUT_PROBLEMS+=("K0S_JOIN_ISSUER_URN must be a Pulumi URN (urn:pulumi:...), got '$K0S_JOIN_ISSUER_URN'")
  fi
  if joining; then
    if [[ -n "$K0S_CA_KEY$K0S_CA_KEY_SSM_PARAMETER" ]]; then
      INPUT_PROBLEMS+=("a controller that joins with K0S_CONTROLLER_TOKEN takes the CA from the cluster: give it no K0S_CA_KEY or K0S_CA_KEY_SSM_PARAMETER")
    fi
    if [[ -n "$K0S_CONTROLLER_TOKEN" && -n "$K0S_CONTROLLER_TOKEN_SSM_PARAMETER" ]]; then
      INPUT_PROBLEMS+=("give the controller join token either as K0S_CONTROLLER_TOKEN or as K0S_CONTROLLER_TOKEN_SSM_PARAMETER, not both")
    elif [[ -n "$K0S_CONTROLLER_TOKEN" && ! "$K0S_CONTROLLER_TOKEN" =~ $K0S_TOKEN_FORM ]]; then
      INPUT_PROBLEMS+=("K0S_CONTROLLER_TOKEN is not a k0s join token (base64)")
    elif [[ -n "$K0S_CONTROLLER_TOKEN_SSM_PARAMETER" ]] && ! controller_joined; then
      check_ssm_inputs K0S_CONTROLLER_TOKEN_SSM_PARAMETER "the controller join token" \
        /gpu-cluster/dev/controllers/controller-2/controller-token
    fi
  elif [[ -n "$K0S_CA_KEY" && -n "$K0S_CA_KEY_SSM_PARAMETER" ]]; then
    INPUT_PROBLEMS+=("give the cluster CA key either as K0S_CA_KEY or as K0S_CA_KEY_SSM_PARAMETER, not both")
  elif [[ -z "$K0S_CA_KEY" && -z "$K0S_CA_KEY_SSM_PARAMETER" ]]; then
    INPUT_PROBLEMS+=("missing the cluster CA key: K0S_CA_KEY, or K0S_CA_KEY_SSM_PARAMETER with AWS_REGION and SSM_READER naming an SSM SecureString holding it")
  elif [[ -n "$K0S_CA_KEY" ]]; then
    # Never shown: the message names the variable only.
    if [[ "$K0S_CA_KEY" != *"-----BEGIN "*"PRIVATE KEY-----"* ]]; then
      INPUT_PROBLEMS+=("K0S_CA_KEY is not a PEM private key")
    fi
  elif ca_key_needed; then
    check_ssm_inputs K0S_CA_KEY_SSM_PARAMETER "the cluster CA key" /gpu-cluster/dev/cluster-ca-key
  fi
  die_on_input_problems
  require_bool K0S_ENABLE_WORKER
  require_uint API_PORT
  k0s_check_kubelet_root_dir
}

# ensure_cluster_ca: puts K0S_CA_CERT and its key in place before k0s first starts. Sets
# CA_CHANGED=1 when it wrote either. Refuses a controller that already has another CA.
ensure_cluster_ca() {
  local cert_present=0
  CA_CHANGED=0
  if [[ -f "$ROOT$K0S_CA_CERT_FILE" ]]; then
    cert_present=1
    if ! same_text "$(<"$ROOT$K0S_CA_CERT_FILE")" "$K0S_CA_CERT"; then
      die "the controller already has a different cluster CA ($K0S_CA_CERT_FILE is not" \
        "K0S_CA_CERT) and k0s cannot swap its CA in place; nothing was changed. Give the" \
        "existing CA as K0S_CA_CERT with its key, or replace it as described in" \
        "https://docs.k0sproject.io/stable/troubleshooting/certificate-authorities/"
    fi
  fi
  if ! ca_key_needed; then
    log "the cluster CA is already in place"
    return 0
  fi
  if joining; then
    # k0s writes the CA it gets from the controller it joins over any in place
    # (controller.go:762-777, writeCerts); check_joined_ca compares it once it runs.
    log "joins with K0S_CONTROLLER_TOKEN: the cluster CA comes from the cluster"
    return 0
  fi
  if [[ -z "$K0S_CA_KEY" ]]; then
    read_ssm_parameter K0S_CA_KEY "$K0S_CA_KEY_SSM_PARAMETER" "the cluster CA key"
    if [[ "$K0S_CA_KEY" != *"-----BEGIN "*"PRIVATE KEY-----"* ]]; then
      die "the value of SSM parameter $K0S_CA_KEY_SSM_PARAMETER is not a PEM private key"
    fi
  fi
  # The key first: once ca.crt is in place, so is its key.
  write_text "$K0S_CA_KEY_FILE" 0600 "$K0S_CA_KEY"
  CA_CHANGED=$FILE_CHANGED
  if ((cert_present == 0)); then
    write_text "$K0S_CA_CERT_FILE" 0644 "$K0S_CA_CERT"
    CA_CHANGED=1
  fi
}

# ensure_audit_log_dir: the audit log's folder, 0700, owned by kube-apiserver once
# `k0s install controller` made that user (pkg/install/users_linux.go); until then root's,
# and the API server (restarted by k0s's supervisor) waits for the second call.
ensure_audit_log_dir() {
  local uid
  mkdir -p -- "$ROOT$K0S_AUDIT_LOG_DIR"
  chmod 0700 -- "$ROOT$K0S_AUDIT_LOG_DIR"
  if uid="$(id -u "$K0S_APISERVER_USER" 2>/dev/null)"; then
    if [[ "$(stat -c %u -- "$ROOT$K0S_AUDIT_LOG_DIR")" != "$uid" ]]; then
      chown -- "$uid" "$ROOT$K0S_AUDIT_LOG_DIR"
      log "changed: $K0S_AUDIT_LOG_DIR now belongs to $K0S_APISERVER_USER"
    fi
  fi
}

# controller_args: sets ARGS to the `k0s install controller` arguments.
controller_args() {
  ARGS=(-c "$K0S_CONFIG_FILE")
  ! joining || ARGS+=(--token-file "$K0S_CONTROLLER_TOKEN_FILE")
  if is_true "$K0S_ENABLE_WORKER"; then
    # --no-taints: this node also runs workloads, so no control-plane taint.
    ARGS+=(--enable-worker --no-taints)
    k0s_add_kubelet_args
  fi
}

# ensure_controller_token: the join token in place while this controller has not joined
# (a changed one restarts k0s to use it); once joined it is not needed, nor read.
ensure_controller_token() {
  FILE_CHANGED=0
  if controller_joined; then
    log "the controller has already joined; the join token is not needed"
    return 0
  fi
  if [[ -z "$K0S_CONTROLLER_TOKEN" ]]; then
    read_ssm_parameter K0S_CONTROLLER_TOKEN "$K0S_CONTROLLER_TOKEN_SSM_PARAMETER" \
      "the controller join token"
    if [[ ! "$K0S_CONTROLLER_TOKEN" =~ $K0S_TOKEN_FORM ]]; then
      die "the value of SSM parameter $K0S_CONTROLLER_TOKEN_SSM_PARAMETER is not a k0s join token"
    fi
  fi
  write_text "$K0S_CONTROLLER_TOKEN_FILE" 0600 "$K0S_CONTROLLER_TOKEN"
}

# check_joined_ca: a joined controller runs with the program's CA, or the token led into
# another cluster.
check_joined_ca() {
  local cure="issue a new token: pulumi up --replace on this host's create-controller-token step"
  [[ -z "$K0S_JOIN_ISSUER_URN" ]] || cure="issue a new token: pulumi up --replace '$K0S_JOIN_ISSUER_URN'"
  if [[ ! -f "$ROOT$K0S_CA_CERT_FILE" ]] || ! same_text "$(<"$ROOT$K0S_CA_CERT_FILE")" "$K0S_CA_CERT"; then
    die "joined a cluster whose CA ($K0S_CA_CERT_FILE) is not K0S_CA_CERT: the token came from" \
      "another cluster. Reset this controller (k0s stop; k0s reset) and $cure"
  fi
  log "joined the cluster; its CA is K0S_CA_CERT"
}

main() {
  local restart=0
  # Keep the secrets out of the environment of every command started from here on.
  export -n K0S_CA_KEY K0S_CONTROLLER_TOKEN
  check_inputs
  # Before anything else changes: a different CA stops the run untouched.
  ensure_cluster_ca
  if ((CA_CHANGED)); then
    # k0s reads its CA when it starts.
    restart=1
  fi
  k0s_install "$K0S_VERSION"
  if ((K0S_BINARY_CHANGED)); then
    restart=1
  fi
  k0s_configure_selinux
  write_text "$K0S_CONFIG_FILE" 0600 "$K0S_CONFIG"
  if ((FILE_CHANGED)); then
    restart=1
  fi
  # Read by kube-apiserver (not root): world-readable, and neither holds a secret.
  write_text "$K0S_ADMISSION_CONFIG_FILE" 0644 "$K0S_ADMISSION_CONFIG"
  ((FILE_CHANGED == 0)) || restart=1
  write_text "$K0S_AUDIT_POLICY_FILE" 0644 "$K0S_AUDIT_POLICY"
  ((FILE_CHANGED == 0)) || restart=1
  ensure_audit_log_dir
  if joining; then
    ensure_controller_token
    ((FILE_CHANGED == 0)) || restart=1
  fi
  controller_args
  k0s_ensure_service controller "$restart" "${ARGS[@]}"
  ensure_audit_log_dir
  wait_until "$API_READY_TIMEOUT" "the Kubernetes API (port $API_PORT) to be ready" \
    k0s kubectl get --raw=/readyz
  ! joining || check_joined_ca
}

main "$@"
