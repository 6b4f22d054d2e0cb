#!/usr/bin/env bash
# Installs k0s as the cluster controller (optionally also a worker) with the cluster CA
# the program generated, keeps its service arguments and config in sync with the inputs
# and waits until the Kubernetes API answers /readyz.
set -euo pipefail
# shellcheck source=lib.sh
[[ -n "${GPU_CLUSTER_K0S_LIB_LOADED:-}" ]] || source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
: "${GPU_CLUSTER_STEP:=install-controller}"

# Inputs: API_PORT K0S_ADMISSION_CONFIG K0S_AUDIT_POLICY K0S_CA_CERT K0S_CONFIG K0S_ENABLE_WORKER K0S_VERSION NODE_IP
# Optional inputs: AWS_REGION K0S_CA_KEY K0S_CA_KEY_SSM_PARAMETER K0S_PROFILE K0S_RELEASE_URL K0S_SHA256_AMD64 K0S_SHA256_ARM64 KUBELET_EXTRA_ARGS KUBELET_ROOT_DIR NODE_LABELS NODE_TAINTS SSM_READER K0S_AIRGAP_SHA256_AMD64 K0S_AIRGAP_SHA256_ARM64 K0S_CONTROLLER_TOKEN K0S_CONTROLLER_TOKEN_SSM_PARAMETER K0S_JOIN_ISSUER_URN K0S_CONTROL_PLANE_TAINT K0S_CLOUD_PROVIDER CONTROLLER_NODE_LABEL NODE_NAME
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
#   K0S_CONTROL_PLANE_TAINT  optional bool (default false), with K0S_ENABLE_WORKER=true
#                      only: true keeps k0s's control-plane taint on this node (no
#                      --no-taints), so only what tolerates it runs here.
#   K0S_CLOUD_PROVIDER  optional: empty, or aws (with SSM_READER) on an EC2 controller
#                      whose kubelet (K0S_ENABLE_WORKER=true) runs with the external cloud
#                      provider and this instance's providerID from IMDSv2
#                      (k0s_add_kubelet_args); ignored without the worker.
#   CONTROLLER_NODE_LABEL, NODE_NAME  optional, both or neither, with K0S_ENABLE_WORKER=true
#                      only: a label KEY=VALUE (VALUE not empty, KEY under
#                      [*.]node-restriction.kubernetes.io/) that this controller's node NODE_NAME
#                      (its host name, lower-cased, as k0s names it) is given with the
#                      admin credential once it registered.

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
# How long the controller's own kubelet may take to register its Node.
NODE_REGISTERED_TIMEOUT=300
# Kubernetes' label forms (k8s.io/apimachinery v0.36.3 pkg/util/validation/validation.go:
# a key's prefix is a DNS-1123 subdomain of at most 253 characters, its name and the value
# qualified names of at most 63; a node's name is a DNS-1123 subdomain too).
DNS_SUBDOMAIN='[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*'
QUALIFIED_NAME='[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?'
NODE_LABEL_FORM="^$DNS_SUBDOMAIN/$QUALIFIED_NAME=$QUALIFIED_NAME\$"
# The prefix of node labels (it or a subdomain of it) that no kubelet may set or change
# on its own Node, so that a pool node cannot pass for a controller: the NodeRestriction
# admission plugin
# (https://kubernetes.io/docs/reference/access-authn-authz/admission-controllers/#noderestriction,
# https://kubernetes.io/docs/concepts/scheduling-eviction/assign-pod-node/#node-isolation-restriction).
# Labels a kubelet may set (node.k0sproject.io/role among them, which k0s's node-role
# component turns into node-role.kubernetes.io/<role> on any node:
# pkg/component/controller/noderole.go:82-100 at v1.36.3+k0s.2) would not do.
RESTRICTED_LABEL_PREFIX="node-restriction.kubernetes.io"

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
  check_worker_inputs
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
  require_bool K0S_ENABLE_WORKER K0S_CONTROL_PLANE_TAINT
  require_uint API_PORT
  k0s_check_kubelet_root_dir
}

# check_worker_inputs: adds to INPUT_PROBLEMS what is wrong with the inputs of this
# controller's worker: K0S_CONTROL_PLANE_TAINT, K0S_CLOUD_PROVIDER, CONTROLLER_NODE_LABEL
# and NODE_NAME.
check_worker_inputs() {
  local worker=0 key prefix
  : "${K0S_CONTROL_PLANE_TAINT:=false}" "${CONTROLLER_NODE_LABEL:=}" "${NODE_NAME:=}"
  [[ "${K0S_ENABLE_WORKER:-}" != true ]] || worker=1
  check_cloud_provider_input K0S_CLOUD_PROVIDER
  if [[ "$K0S_CONTROL_PLANE_TAINT" == true ]] && ((worker == 0)); then
    INPUT_PROBLEMS+=("K0S_CONTROL_PLANE_TAINT=true keeps the control-plane taint of this controller's worker: it needs K0S_ENABLE_WORKER=true")
  fi
  if [[ -z "$CONTROLLER_NODE_LABEL$NODE_NAME" ]]; then
    return 0
  fi
  if ((worker == 0)); then
    INPUT_PROBLEMS+=("CONTROLLER_NODE_LABEL and NODE_NAME label this controller's node: they need K0S_ENABLE_WORKER=true")
  fi
  if [[ -z "$CONTROLLER_NODE_LABEL" || -z "$NODE_NAME" ]]; then
    INPUT_PROBLEMS+=("give CONTROLLER_NODE_LABEL and NODE_NAME together, or neither")
  fi
  if [[ -n "$NODE_NAME" ]] && { ((${#NODE_NAME} > 253)) || [[ ! "$NODE_NAME" =~ ^$DNS_SUBDOMAIN$ ]]; }; then
    INPUT_PROBLEMS+=("NODE_NAME is not a node name (a lower-case DNS-1123 subdomain): '$NODE_NAME'")
  fi
  if [[ -z "$CONTROLLER_NODE_LABEL" ]]; then
    return 0
  fi
  key=${CONTROLLER_NODE_LABEL%%=*} prefix=${CONTROLLER_NODE_LABEL%%/*}
  if [[ ! "$CONTROLLER_NODE_LABEL" =~ $NODE_LABEL_FORM ]] || ((${#prefix} > 253)); then
    INPUT_PROBLEMS+=("CONTROLLER_NODE_LABEL is not a node label PREFIX/NAME=VALUE (VALUE not empty): '$CONTROLLER_NODE_LABEL'")
  elif [[ "$prefix" != "$RESTRICTED_LABEL_PREFIX" && "$prefix" != *".$RESTRICTED_LABEL_PREFIX" ]]; then
    INPUT_PROBLEMS+=("CONTROLLER_NODE_LABEL must be under $RESTRICTED_LABEL_PREFIX/ (or a subdomain of it), which no kubelet may set on its own node; got the key '$key'")
  fi
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
    ARGS+=(--enable-worker)
    # Without --no-taints, k0s gives this node the control-plane taint
    # (node-role.kubernetes.io/control-plane:NoSchedule) and, either way, the label
    # node.k0sproject.io/role=control-plane (cmd/controller/controller.go:721-730 at
    # v1.36.3+k0s.2). --no-taints: this node also runs workloads.
    is_true "$K0S_CONTROL_PLANE_TAINT" || ARGS+=(--no-taints)
    k0s_add_kubelet_args
  fi
}

# node_label_value: the value of CONTROLLER_NODE_LABEL's key on node NODE_NAME (nothing
# when it has none; the value is never empty). kubectl's JSONPath takes a key's dots
# escaped (https://kubernetes.io/docs/reference/kubectl/jsonpath/).
node_label_value() {
  local key=${CONTROLLER_NODE_LABEL%%=*}
  k0s kubectl get node "$NODE_NAME" -o "jsonpath={.metadata.labels.${key//./\\.}}"
}

# check_node_name: dies unless NODE_NAME is the name k0s gives this node: the kubelet's
# --hostname-override in KUBELET_EXTRA_ARGS, else the host name, trimmed and lower-cased
# (at v1.36.3+k0s.2 cmd/controller/controller.go:342, cmd/worker/worker.go:147-165,
# pkg/node/nodename.go:15-32 with no other default on Linux, nodename_other.go, which call
# k8s.io/component-helpers v0.36.3 node/util/hostname.go GetHostname), so that a wrong
# name fails here rather than after waiting for a node that never registers.
check_node_name() {
  local name
  if [[ " $KUBELET_EXTRA_ARGS " =~ \ --hostname-override=([^ ]*)\  ]]; then
    name=${BASH_REMATCH[1]}
  else
    name="$(hostname)"
  fi
  name="${name,,}"
  if [[ "$name" != "$NODE_NAME" ]]; then
    die "k0s names this node '$name' (its host name, lower-cased), not NODE_NAME '$NODE_NAME'; nothing was changed"
  fi
}

# ensure_controller_node_label: once this controller's kubelet registered node NODE_NAME,
# gives it CONTROLLER_NODE_LABEL with the admin credential, unless it has it already.
ensure_controller_node_label() {
  local key=${CONTROLLER_NODE_LABEL%%=*} value=${CONTROLLER_NODE_LABEL#*=} current
  wait_until "$NODE_REGISTERED_TIMEOUT" "node $NODE_NAME to register" \
    k0s kubectl get node "$NODE_NAME"
  current="$(node_label_value)"
  if [[ "$current" == "$value" ]]; then
    log "node $NODE_NAME already has the label $key=$value"
    return 0
  fi
  k0s kubectl label node "$NODE_NAME" --overwrite "$CONTROLLER_NODE_LABEL" >&2
  log "changed: node $NODE_NAME now has the label $key=$value"
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
  # This node's name and EC2 identity, before anything changes (k0s/lib.sh).
  [[ -z "$NODE_NAME" ]] || check_node_name
  ! is_true "$K0S_ENABLE_WORKER" || k0s_read_provider_id
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
  [[ -z "$CONTROLLER_NODE_LABEL" ]] || ensure_controller_node_label
}

main "$@"
