#!/usr/bin/env bats
# k0s/install-controller.sh: binary, config, service arguments, readiness.

bats_require_minimum_version 1.5.0
load helpers
load helpers/secrets
load helpers/downloads
load helpers/controller

K0S_YAML='apiVersion: k0s.k0sproject.io/v1beta1
kind: ClusterConfig
metadata:
  name: gpu-cluster
spec:
  api:
    address: 192.0.2.10
    port: 6443'
RELEASE_URL='https://github\.com/k0sproject/k0s/releases/download/v1\.34\.1%2Bk0s\.0'

CA_PARAMETER=/gpu-cluster/dev/cluster-ca-key

setup() {
  setup_host
  export K0S_VERSION=v1.34.1+k0s.0 K0S_CONFIG="$K0S_YAML" K0S_ENABLE_WORKER=false \
    NODE_IP=192.0.2.10 KUBELET_EXTRA_ARGS="" NODE_LABELS="" NODE_TAINTS="" API_PORT=6443 \
    KUBELET_ROOT_DIR=/var/lib/kubelet K0S_CA_CERT="$CA_CERT" K0S_CA_KEY="$CA_KEY" \
    K0S_ADMISSION_CONFIG="$ADMISSION_CONFIG" K0S_AUDIT_POLICY="$AUDIT_POLICY"
}

# ca_key_in_ssm: as on a cloud controller: the CA key in an SSM SecureString the stubbed
# reader returns, not in the inputs.
ca_key_in_ssm() {
  unset K0S_CA_KEY
  export K0S_CA_KEY_SSM_PARAMETER=$CA_PARAMETER AWS_REGION=eu-central-1
  export_ssm_reader
  ssm_parameter eu-central-1 "$CA_PARAMETER" "$CA_KEY"
}

# installed_with_ssm_key: the controller installed with the CA key from SSM (ca_key_in_ssm).
installed_with_ssm_key() {
  ca_key_in_ssm
  run_script k0s/install-controller.sh
  assert_success
}

# existing_ca CERT KEY: the controller already has a CA in k0s's pki folder.
existing_ca() {
  mkdir -p "$GPU_CLUSTER_ROOT/var/lib/k0s/pki"
  printf '%s\n' "$1" >"$GPU_CLUSTER_ROOT/var/lib/k0s/pki/ca.crt"
  printf '%s\n' "$2" >"$GPU_CLUSTER_ROOT/var/lib/k0s/pki/ca.key"
  chmod 0644 "$GPU_CLUSTER_ROOT/var/lib/k0s/pki/ca.crt"
  chmod 0600 "$GPU_CLUSTER_ROOT/var/lib/k0s/pki/ca.key"
}

# assert_logged_before TEXT1 TEXT2: the first output line with TEXT1 comes before the
# first with TEXT2 (fixed strings).
assert_logged_before() {
  local first second
  first="$(grep -nF -- "$1" <<<"$output" | head -n 1 | cut -d: -f1)"
  second="$(grep -nF -- "$2" <<<"$output" | head -n 1 | cut -d: -f1)"
  if [[ -z "$first" || -z "$second" || "$first" -ge "$second" ]]; then
    printf 'expected "%s" before "%s"; output:\n%s\n' "$1" "$2" "$output" >&2
    return 1
  fi
}

@test "install-controller: installs k0s, writes the config and starts the controller" {
  run_script k0s/install-controller.sh
  assert_success
  assert_called "^curl -fsSL --retry 5 -o [^ ]+/k0s-v1\\.34\\.1\\+k0s\\.0-amd64 $RELEASE_URL/k0s-v1\\.34\\.1%2Bk0s\\.0-amd64\$"
  # The pinned sha256 is the check, never a checksum file of the same release.
  refute_called 'sha256sums'
  assert_output_contains "verified sha256 of k0s-v1.34.1+k0s.0-amd64" "changed /usr/local/bin/k0s"
  assert_mode /usr/local/bin/k0s 755
  assert_file /etc/k0s/k0s.yaml "$K0S_YAML"
  assert_mode /etc/k0s/k0s.yaml 600
  assert_called '^k0s install controller -c /etc/k0s/k0s.yaml$'
  assert_called '^k0s start$'
  assert_called '^k0s kubectl get --raw=/readyz$'
  assert_call_order '^k0s start$' '^k0s kubectl get --raw=/readyz$'
  assert_output_contains "ready: the Kubernetes API (port 6443) to be ready"
  refute_called '^systemctl restart'
}

@test "install-controller: kubernetes.releaseUrl: the release from the site's folder, still checked" {
  export K0S_RELEASE_URL=https://files.example.internal/k0s/
  run_script k0s/install-controller.sh
  assert_success
  assert_called '^curl -fsSL --retry 5 -o [^ ]+/k0s-v1\.34\.1\+k0s\.0-amd64 https://files\.example\.internal/k0s/k0s-v1\.34\.1\+k0s\.0-amd64$'
  refute_called 'github\.com'
  assert_output_contains "verified sha256 of k0s-v1.34.1+k0s.0-amd64"
  reset_calls
  rm -f "$GPU_CLUSTER_ROOT/usr/local/bin/k0s"
  export K0S_RELEASE_URL='https://files.example.internal/k0s?x=$(id)'
  run_script k0s/install-controller.sh
  assert_failure
  assert_output_contains "K0S_RELEASE_URL is not a download location"
  refute_called '^curl'
}

@test "install-controller: a second run changes nothing and says so" {
  run_twice k0s/install-controller.sh
  assert_output_contains "k0s v1.34.1+k0s.0 already installed" "unchanged /etc/k0s/k0s.yaml" \
    "the k0scontroller service is already installed with the same arguments" \
    "k0scontroller is already running"
}

@test "install-controller: controller+worker passes the worker flags" {
  export K0S_ENABLE_WORKER=true KUBELET_EXTRA_ARGS="--max-pods=250" \
    NODE_LABELS="gpu-cluster.io/gpu=true,topology.kubernetes.io/zone=rack-1" \
    NODE_TAINTS="nvidia.com/gpu=present:NoSchedule" K0S_PROFILE=gpu-cluster
  run_script k0s/install-controller.sh
  assert_success
  assert_called '^k0s install controller -c /etc/k0s/k0s.yaml --enable-worker --no-taints --kubelet-extra-args=--node-ip=192.0.2.10 --max-pods=250 --labels=gpu-cluster.io/gpu=true,topology.kubernetes.io/zone=rack-1 --taints=nvidia.com/gpu=present:NoSchedule --profile=gpu-cluster --kubelet-root-dir=/var/lib/kubelet$'
  assert_idempotent k0s/install-controller.sh
}

@test "install-controller: worker-only inputs are ignored for a pure controller" {
  export NODE_LABELS="gpu-cluster.io/gpu=true" NODE_TAINTS="a=b:NoSchedule" K0S_PROFILE=gpu-cluster
  run_script k0s/install-controller.sh
  assert_success
  assert_called '^k0s install controller -c /etc/k0s/k0s.yaml$'
  refute_called 'kubelet-root-dir'
  # No kubelet on a pure controller: a new kubelet root dir changes nothing.
  export KUBELET_ROOT_DIR=/var/lib/kubelet-gpu
  assert_idempotent k0s/install-controller.sh
}

@test "install-controller: a changed kubelet root dir reinstalls a controller+worker" {
  export K0S_ENABLE_WORKER=true KUBELET_ROOT_DIR=""
  run_script k0s/install-controller.sh
  assert_success
  assert_called '^k0s install controller -c /etc/k0s/k0s.yaml --enable-worker --no-taints --kubelet-extra-args=--node-ip=192\.0\.2\.10$'
  reset_calls
  export KUBELET_ROOT_DIR=/var/lib/kubelet
  run_script k0s/install-controller.sh
  assert_success
  assert_called '^k0s install controller --force -c /etc/k0s/k0s.yaml --enable-worker --no-taints --kubelet-extra-args=--node-ip=192\.0\.2\.10 --kubelet-root-dir=/var/lib/kubelet$'
  assert_called '^systemctl daemon-reload$'
  assert_called '^systemctl restart k0scontroller$'
  assert_idempotent k0s/install-controller.sh
}

@test "install-controller: an unsafe kubelet root dir is refused before anything runs" {
  export KUBELET_ROOT_DIR=/var/lib/../lib
  run_script k0s/install-controller.sh
  assert_refused "gpu-cluster: moscow: install-controller: KUBELET_ROOT_DIR must be an absolute path" "got '/var/lib/../lib'"
}

@test "install-controller: changed flags reinstall the service with --force and restart it" {
  run_again_with k0s/install-controller.sh K0S_ENABLE_WORKER=true
  assert_success
  assert_called '^k0s install controller --force -c /etc/k0s/k0s.yaml --enable-worker --no-taints --kubelet-extra-args=--node-ip=192.0.2.10 --kubelet-root-dir=/var/lib/kubelet$'
  assert_called '^systemctl daemon-reload$'
  assert_called '^systemctl restart k0scontroller$'
  refute_called '^k0s install controller -c'
  refute_called '^curl'
  assert_idempotent k0s/install-controller.sh
}

@test "install-controller: a changed config restarts the controller without reinstalling" {
  first_run k0s/install-controller.sh
  export K0S_CONFIG="$K0S_YAML
  network:
    provider: calico"
  run_script k0s/install-controller.sh
  assert_success
  assert_output_contains "changed /etc/k0s/k0s.yaml"
  assert_called '^systemctl restart k0scontroller$'
  refute_called '^k0s install'
}

@test "install-controller: a new k0s version is downloaded and the service restarted" {
  run_again_with k0s/install-controller.sh K0S_VERSION=v1.34.2+k0s.0
  assert_success
  assert_called 'download/v1\.34\.2%2Bk0s\.0/k0s-v1\.34\.2%2Bk0s\.0-amd64$'
  assert_output_contains "installed: v1.34.1+k0s.0"
  assert_called '^systemctl restart k0scontroller$'
  refute_called '^k0s install'
}

@test "install-controller: arm64 hosts get the arm64 binary" {
  export STUB_UNAME_M=aarch64
  run_script k0s/install-controller.sh
  assert_success
  assert_called "$RELEASE_URL/k0s-v1\\.34\\.1%2Bk0s\\.0-arm64\$"
}

@test "install-controller: a checksum mismatch installs nothing" {
  assert_tampered_download_refused k0s/install-controller.sh k0s-v1.34.1+k0s.0-amd64 K0S_SHA256_AMD64 \
    /usr/local/bin/k0s
  refute_called '^k0s (install|start)'
}

@test "install-controller: the binary is checked against the pin of the host's architecture" {
  export STUB_UNAME_M=aarch64 FAKE_PINS=off K0S_SHA256_AMD64="" K0S_SHA256_ARM64
  K0S_SHA256_ARM64="$(fake_sha256 k0s "$K0S_VERSION")"
  run_script k0s/install-controller.sh
  assert_success
  assert_output_contains "verified sha256 of k0s-v1.34.1+k0s.0-arm64"
}

@test "install-controller: no pinned sha256 for the host's architecture downloads nothing" {
  export FAKE_PINS=off K0S_SHA256_AMD64="" K0S_SHA256_ARM64="$(printf 'a%.0s' {1..64})"
  run_script k0s/install-controller.sh
  [ "$status" -eq 1 ]
  assert_output_contains "install-controller: no pinned sha256 for k0s-v1.34.1+k0s.0-amd64 of k0s v1.34.1+k0s.0: set gpu-cluster:versions releaseSha256.amd64"
  refute_called '^curl .*/releases/'
  [ ! -e "$GPU_CLUSTER_ROOT/usr/local/bin/k0s" ]
}

@test "install-controller: a pin that is not a sha256 is refused" {
  export FAKE_PINS=off K0S_SHA256_AMD64="$(printf 'A%.0s' {1..64})"
  run_script k0s/install-controller.sh
  [ "$status" -eq 1 ]
  assert_output_contains "K0S_SHA256_AMD64 must be 64 lower-case hex digits"
  refute_called '^curl .*/releases/'
}

@test "install-controller: gives up when the API never gets ready" {
  export STUB_READYZ_EXIT=1
  run_script k0s/install-controller.sh
  [ "$status" -eq 1 ]
  assert_output_contains "gpu-cluster: moscow: install-controller: timed out after 600s waiting for the Kubernetes API (port 6443) to be ready"
  [ "$(grep -c '^sleep 2$' "$STUB_CALLS")" -eq 300 ]
}

@test "install-controller: an interrupted restart is retried by the next run" {
  run_script k0s/install-controller.sh
  assert_success
  export K0S_CONFIG="$K0S_YAML
# new"
  STUB_FAIL_CALL='^systemctl restart' run_script k0s/install-controller.sh
  assert_failure
  reset_calls
  run_script k0s/install-controller.sh
  assert_success
  assert_output_contains "retrying restart-k0scontroller, which an earlier run did not finish"
  assert_called '^systemctl restart k0scontroller$'
  assert_idempotent k0s/install-controller.sh
}

@test "install-controller: all missing environment variables are named at once" {
  unset K0S_VERSION K0S_CONFIG API_PORT
  run_script k0s/install-controller.sh
  assert_refused "gpu-cluster: moscow: install-controller: missing required environment variable(s): K0S_VERSION K0S_CONFIG API_PORT"
}

@test "install-controller: writes the cluster CA before k0s is installed and started" {
  run_script k0s/install-controller.sh
  assert_success
  assert_file /var/lib/k0s/pki/ca.crt "$CA_CERT"
  assert_mode /var/lib/k0s/pki/ca.crt 644
  assert_file /var/lib/k0s/pki/ca.key "$CA_KEY"
  assert_mode /var/lib/k0s/pki/ca.key 600
  # The stubbed k0s, like k0s, generates a CA at its start unless one is in place.
  assert_logged_before "changed /var/lib/k0s/pki/ca.crt" "installing the k0scontroller service"
  assert_logged_before "changed /var/lib/k0s/pki/ca.key" "changed /var/lib/k0s/pki/ca.crt"
  assert_logged_before "changed /var/lib/k0s/pki/ca.crt" "changed /usr/local/bin/k0s"
  refute_called '^python3 '
  refute_leaked "$CA_KEY_SECRET"
}

@test "install-controller: the CA key never shows up in output, command lines or environments" {
  assert_secret_unseen k0s/install-controller.sh /var/lib/k0s/pki/ca.key "$CA_KEY_SECRET"
  assert_file /var/lib/k0s/pki/ca.key "$CA_KEY"
}

@test "install-controller: a failing install does not reveal the CA key either" {
  assert_failure_unseen k0s/install-controller.sh '^k0s install' "$CA_KEY_SECRET"
}

@test "install-controller: a second run leaves the CA alone" {
  run_script k0s/install-controller.sh
  assert_success
  # Trailing newlines do not make another certificate.
  export K0S_CA_CERT="$CA_CERT"$'\n'
  assert_idempotent k0s/install-controller.sh
  assert_output_contains "the cluster CA is already in place"
}

@test "install-controller: reads the CA key from SSM before anything changes" {
  ca_key_in_ssm
  run_script_watched k0s/install-controller.sh
  assert_success
  assert_called '^python3 - get eu-central-1 /gpu-cluster/dev/cluster-ca-key$'
  [ "$(grep -c '^python3 ' "$STUB_CALLS")" -eq 1 ]
  assert_call_order '^python3 ' '^curl '
  [[ "$stderr" == *"reading the cluster CA key from SSM parameter $CA_PARAMETER in eu-central-1"* ]]
  [[ "$stderr" == *"read the cluster CA key from SSM parameter $CA_PARAMETER"* ]]
  assert_file /var/lib/k0s/pki/ca.crt "$CA_CERT"
  assert_file /var/lib/k0s/pki/ca.key "$CA_KEY"
  assert_mode /var/lib/k0s/pki/ca.key 600
  refute_leaked "$CA_KEY_SECRET"
}

@test "install-controller: SSM reads of the CA key are retried" {
  ca_key_in_ssm
  export STUB_FAIL_SSM_TIMES=3
  run_script k0s/install-controller.sh
  assert_ssm_retried 3 "$CA_PARAMETER"
  assert_file /var/lib/k0s/pki/ca.key "$CA_KEY"
}

@test "install-controller: an unreadable CA key in SSM changes nothing" {
  ca_key_in_ssm
  export STUB_FAIL_SSM_TIMES=100 STUB_SSM_ERROR=denied
  run_script k0s/install-controller.sh
  assert_ssm_denied install-controller "the cluster CA key" "$CA_PARAMETER"
  [ ! -e "$GPU_CLUSTER_ROOT/var/lib/k0s" ]
  refute_called '^k0s '
}

@test "install-controller: an SSM value that is no PEM key is refused unshown" {
  ca_key_in_ssm
  ssm_parameter eu-central-1 "$CA_PARAMETER" "not-a-key-$CA_KEY_SECRET"
  run_script k0s/install-controller.sh
  [ "$status" -eq 1 ]
  assert_output_contains "the value of SSM parameter $CA_PARAMETER is not a PEM private key"
  [ ! -e "$GPU_CLUSTER_ROOT/var/lib/k0s" ]
  refute_leaked "$CA_KEY_SECRET"
}

@test "install-controller: a CA in place is not read from SSM again" {
  installed_with_ssm_key
  rm -r "$STUB_STATE/ssm" # the parameter may be gone, or unreadable by now
  hide_command python3
  unset AWS_REGION SSM_READER
  assert_idempotent k0s/install-controller.sh
  refute_called '^python3 '
}

@test "install-controller: a missing CA key is written again, and the controller restarted" {
  installed_with_ssm_key
  rm "$GPU_CLUSTER_ROOT/var/lib/k0s/pki/ca.key"
  reset_calls
  run_script k0s/install-controller.sh
  assert_success
  assert_called '^python3 - get eu-central-1 /gpu-cluster/dev/cluster-ca-key$'
  assert_output_contains "changed /var/lib/k0s/pki/ca.key"
  refute_output_contains "changed /var/lib/k0s/pki/ca.crt"
  assert_file /var/lib/k0s/pki/ca.key "$CA_KEY"
  assert_mode /var/lib/k0s/pki/ca.key 600
  assert_called '^systemctl restart k0scontroller$'
  assert_idempotent k0s/install-controller.sh
}

@test "install-controller: a matching CA already in place is kept as it is" {
  existing_ca "$CA_CERT" "$CA_KEY"
  ca_key_in_ssm
  run_script k0s/install-controller.sh
  assert_success
  refute_called '^python3 '
  refute_output_contains "changed /var/lib/k0s/pki"
  assert_output_contains "the cluster CA is already in place"
}

@test "install-controller: a controller with another CA is refused before anything changes" {
  local other=$'-----BEGIN CERTIFICATE-----\nMIIBk0s-generated-ca\n-----END CERTIFICATE-----'
  existing_ca "$other" $'-----BEGIN EC PRIVATE KEY-----\nMHcold\n-----END EC PRIVATE KEY-----'
  ca_key_in_ssm
  remember_root
  run_script k0s/install-controller.sh
  assert_refused "gpu-cluster: moscow: install-controller: the controller already has a different cluster CA (/var/lib/k0s/pki/ca.crt is not K0S_CA_CERT) and k0s cannot swap its CA in place; nothing was changed." \
    "https://docs.k0sproject.io/stable/troubleshooting/certificate-authorities/"
  assert_root_unchanged
}

@test "install-controller: the CA key is needed exactly once, as K0S_CA_KEY or from SSM" {
  unset K0S_CA_KEY
  run_script k0s/install-controller.sh
  assert_refused "gpu-cluster: moscow: install-controller: missing the cluster CA key: K0S_CA_KEY, or K0S_CA_KEY_SSM_PARAMETER with AWS_REGION and SSM_READER naming an SSM SecureString holding it"

  export K0S_CA_KEY="$CA_KEY" K0S_CA_KEY_SSM_PARAMETER=$CA_PARAMETER AWS_REGION=eu-central-1
  run_script k0s/install-controller.sh
  assert_refused "gpu-cluster: moscow: install-controller: give the cluster CA key either as K0S_CA_KEY or as K0S_CA_KEY_SSM_PARAMETER, not both"
  refute_leaked "$CA_KEY_SECRET"
}

@test "install-controller: CA input problems are named at once, without the key" {
  unset K0S_VERSION
  export K0S_CA_CERT="" K0S_CA_KEY="$CA_KEY_SECRET"
  run_script k0s/install-controller.sh
  [ "$status" -eq 1 ]
  assert_output_contains "missing required environment variable(s): K0S_VERSION K0S_CA_CERT; K0S_CA_KEY is not a PEM private key"
  refute_leaked "$CA_KEY_SECRET"

  export K0S_VERSION=v1.34.1+k0s.0 K0S_CA_CERT="MIIB"
  run_script k0s/install-controller.sh
  assert_refused "install-controller: K0S_CA_CERT is not a PEM certificate; K0S_CA_KEY is not a PEM private key"
}

@test "install-controller: problems with the SSM way are named at once" {
  ca_key_in_ssm
  export K0S_CA_KEY_SSM_PARAMETER="ca key" AWS_REGION=""
  hide_command python3
  run_script k0s/install-controller.sh
  assert_refused "K0S_CA_KEY_SSM_PARAMETER is not an SSM parameter name (e.g. /gpu-cluster/dev/cluster-ca-key): 'ca key'; missing required environment variable(s): AWS_REGION (needed to read the cluster CA key from SSM parameter ca key); the python3 command is not installed; it is needed to read the cluster CA key from SSM parameter ca key"
}

@test "install-controller: writes the API server's admission and audit files, readable by kube-apiserver" {
  run_script k0s/install-controller.sh
  assert_success
  assert_file /etc/k0s/admission-config.yaml "$ADMISSION_CONFIG"
  assert_file /etc/k0s/audit-policy.yaml "$AUDIT_POLICY"
  assert_mode /etc/k0s/admission-config.yaml 644
  assert_mode /etc/k0s/audit-policy.yaml 644
  assert_mode /var/log/k0s-audit 700
  assert_called '^id -u kube-apiserver$'
  assert_idempotent k0s/install-controller.sh
}

@test "install-controller: a changed audit policy restarts the controller" {
  run_script k0s/install-controller.sh
  assert_success
  export K0S_AUDIT_POLICY="$AUDIT_POLICY
rules: []"
  run_script k0s/install-controller.sh
  assert_success
  assert_called '^systemctl restart k0scontroller$'
}

@test "install-controller: refuses to run without the API server's admission configuration" {
  unset K0S_ADMISSION_CONFIG
  run_script k0s/install-controller.sh
  assert_failure
  assert_output_contains K0S_ADMISSION_CONFIG
}

# joining: a controller after the first: a controller token from the first (made up; the
# secrets scan knows it from this file), no CA key, and a cluster whose CA is the program's.
CONTROLLER_TOKEN=H4sIAAAAAAAAcontrollerJoinToken0123456789
joining() {
  unset K0S_CA_KEY
  export K0S_CONTROLLER_TOKEN="$CONTROLLER_TOKEN" STUB_CLUSTER_CA="$CA_CERT" \
    K0S_JOIN_ISSUER_URN='urn:pulumi:lab::gpu-cluster::command:remote:Command::c2-create-controller-token'
}

@test "install-controller: a controller after the first joins with its token and takes the CA from the cluster" {
  joining
  run_script_watched k0s/install-controller.sh
  assert_success
  [[ "$stderr" == *"install-controller: joins with K0S_CONTROLLER_TOKEN: the cluster CA comes from the cluster"* ]]
  [[ "$stderr" == *"install-controller: joined the cluster; its CA is K0S_CA_CERT"* ]]
  # Nothing of the CA written before k0s joined; the token in a file only root reads,
  # named by the unit.
  [[ "$stderr" != *"changed /var/lib/k0s/pki/ca"* ]]
  assert_file /etc/k0s/controller-token "$CONTROLLER_TOKEN"
  assert_mode /etc/k0s/controller-token 600
  grep -q -- '--token-file /etc/k0s/controller-token' "$GPU_CLUSTER_ROOT/etc/systemd/system/k0scontroller.service"
  [ "$(wc -l <"$STUB_STATE/k0s-joins")" = 1 ]
  refute_leaked "$CONTROLLER_TOKEN"
}

@test "install-controller: a joined controller needs no token again and never joins twice" {
  joining
  run_script k0s/install-controller.sh
  assert_success
  assert_idempotent k0s/install-controller.sh
  assert_output_contains "the controller has already joined; the join token is not needed"
  # The token in the state has expired by the next run, or is another: still no new join.
  export K0S_CONTROLLER_TOKEN=H4sIAAAAAAAAanotherExpiredToken
  run_script k0s/install-controller.sh
  assert_success
  assert_file /etc/k0s/controller-token "$CONTROLLER_TOKEN"
  [ "$(wc -l <"$STUB_STATE/k0s-joins")" = 1 ]
}

@test "install-controller: a joined controller is upgraded like the first, without joining again" {
  joining
  run_again_with k0s/install-controller.sh K0S_VERSION=v1.34.2+k0s.0
  assert_success
  assert_called '^systemctl restart k0scontroller$'
  [ "$(wc -l <"$STUB_STATE/k0s-joins")" = 1 ]
}

@test "install-controller: a token into a cluster with another CA fails, naming the step that made it" {
  joining
  export STUB_CLUSTER_CA="${CA_CERT/gpu-cluster-ca/another-clusters-ca}"
  run_script k0s/install-controller.sh
  assert_failure
  assert_output_contains "gpu-cluster: moscow: install-controller: joined a cluster whose CA (/var/lib/k0s/pki/ca.crt) is not K0S_CA_CERT" \
    "pulumi up --replace 'urn:pulumi:lab::gpu-cluster::command:remote:Command::c2-create-controller-token'"
}

@test "install-controller: a joining controller refuses a CA key, and a token that is not one" {
  joining
  export K0S_CA_KEY="$CA_KEY"
  run_script k0s/install-controller.sh
  assert_failure
  assert_output_contains "a controller that joins with K0S_CONTROLLER_TOKEN takes the CA from the cluster: give it no K0S_CA_KEY or K0S_CA_KEY_SSM_PARAMETER"
  refute_output_contains "$CA_KEY_SECRET"
  export K0S_CONTROLLER_TOKEN='not a token; rm -rf /' K0S_JOIN_ISSUER_URN='x'
  unset K0S_CA_KEY
  run_script k0s/install-controller.sh
  assert_failure
  assert_output_contains "K0S_CONTROLLER_TOKEN is not a k0s join token (base64)" \
    "K0S_JOIN_ISSUER_URN must be a Pulumi URN (urn:pulumi:...), got 'x'"
  refute_output_contains "rm -rf"
  refute_called '^k0s install'
}

@test "install-controller: a controller whose state was put aside joins again with a new token" {
  joining
  run_script k0s/install-controller.sh
  assert_success
  # gpu-cluster-restore --leave: k0s stopped, its data dir aside.
  rm -f "$STUB_STATE/active-k0scontroller"
  mv "$GPU_CLUSTER_ROOT/var/lib/k0s" "$GPU_CLUSTER_ROOT/var/lib/k0s.before-restore"
  export K0S_CONTROLLER_TOKEN=H4sIAAAAAAAAnewControllerToken
  run_script k0s/install-controller.sh
  assert_success
  assert_file /etc/k0s/controller-token "$K0S_CONTROLLER_TOKEN"
  [ "$(wc -l <"$STUB_STATE/k0s-joins")" = 2 ]
  grep -q 'joined with H4sIAAAAAAAAnewControllerToken' "$STUB_STATE/k0s-joins"
}

# joining_from_ssm: a controller that joins at boot (cloud): its token in its SSM
# SecureString, read with the instance's role.
TOKEN_PARAMETER=/gpu-cluster/dev/controllers/controller-2/controller-token
joining_from_ssm() {
  joining
  unset K0S_CONTROLLER_TOKEN K0S_JOIN_ISSUER_URN
  export K0S_CONTROLLER_TOKEN_SSM_PARAMETER=$TOKEN_PARAMETER AWS_REGION=eu-central-1
  export_ssm_reader
  ssm_parameter eu-central-1 "$TOKEN_PARAMETER" "$CONTROLLER_TOKEN"
}

@test "install-controller: a controller that joins at boot reads its token from SSM, once" {
  joining_from_ssm
  run_script_watched k0s/install-controller.sh
  assert_success
  [[ "$stderr" == *"install-controller: read the controller join token from SSM parameter $TOKEN_PARAMETER"* ]]
  [[ "$stderr" == *"install-controller: joined the cluster; its CA is K0S_CA_CERT"* ]]
  assert_file /etc/k0s/controller-token "$CONTROLLER_TOKEN"
  assert_mode /etc/k0s/controller-token 600
  refute_leaked "$CONTROLLER_TOKEN"
  # Joined: the parameter is not read again (its token has expired by then), nothing
  # changes.
  rm -rf "$STUB_STATE/ssm"
  assert_idempotent k0s/install-controller.sh
  refute_called '^python3 '
  [ "$(wc -l <"$STUB_STATE/k0s-joins")" = 1 ]
}

@test "install-controller: a token in SSM that is not one is refused unshown, before k0s is installed" {
  joining_from_ssm
  ssm_parameter eu-central-1 "$TOKEN_PARAMETER" "not a token; $CA_KEY_SECRET"
  run_script k0s/install-controller.sh
  assert_failure
  assert_output_contains "the value of SSM parameter $TOKEN_PARAMETER is not a k0s join token"
  refute_output_contains "$CA_KEY_SECRET"
  refute_called '^k0s install'
}

@test "install-controller: the controller token comes either directly or from SSM, not both" {
  joining_from_ssm
  export K0S_CONTROLLER_TOKEN="$CONTROLLER_TOKEN"
  run_script k0s/install-controller.sh
  assert_failure
  assert_output_contains "give the controller join token either as K0S_CONTROLLER_TOKEN or as K0S_CONTROLLER_TOKEN_SSM_PARAMETER, not both"
  refute_output_contains "$CONTROLLER_TOKEN"
}

# EC2 controllers (cloud and hybrid layouts) run the AWS cloud controller manager and the
# cluster autoscaler, so their k0s runs a worker with k0s's control-plane taint
# (cmd/controller/controller.go:721-730 at v1.36.3+k0s.2), the external cloud provider and
# the instance's providerID, and their node gets a label only an admin can set.
LABEL=node-restriction.kubernetes.io/gpu-cluster-controller=true
LABEL_RE='node-restriction\.kubernetes\.io/gpu-cluster-controller=true'

# on_ec2: the inputs of an EC2 controller with its own kubelet: the taint kept, the AWS
# cloud provider (the stubbed IMDS gives aws:///eu-central-1b/i-0fedcba9876543210).
on_ec2() {
  export K0S_ENABLE_WORKER=true K0S_CONTROL_PLANE_TAINT=true K0S_CLOUD_PROVIDER=aws \
    STUB_ZONE=eu-central-1b STUB_INSTANCE_ID=i-0fedcba9876543210
  export_ssm_reader
}

# labelled_controller: on_ec2 with CONTROLLER_NODE_LABEL for node control-plane (its host
# name), which the API knows from its third read on.
labelled_controller() {
  on_ec2
  export CONTROLLER_NODE_LABEL=$LABEL NODE_NAME=control-plane STUB_NODES=control-plane \
    STUB_NODE_REGISTERS_AFTER=3 STUB_HOSTNAME=control-plane
}

@test "install-controller: an EC2 controller's worker keeps the taint, with the cloud provider and its providerID" {
  on_ec2
  run_script k0s/install-controller.sh
  assert_success
  assert_called '^k0s install controller -c /etc/k0s/k0s.yaml --enable-worker --enable-cloud-provider --kubelet-extra-args=--node-ip=192\.0\.2\.10 --provider-id=aws:///eu-central-1b/i-0fedcba9876543210 --kubelet-root-dir=/var/lib/kubelet$'
  refute_called 'no-taints'
  # Read from IMDS (ssm-parameter.py provider-id) before anything is installed.
  assert_call_order '^python3 - provider-id$' '^curl '
  assert_output_contains "this instance's providerID is aws:///eu-central-1b/i-0fedcba9876543210"
  assert_idempotent k0s/install-controller.sh
}

@test "install-controller: an EC2 controller's worker without the taint keeps --no-taints" {
  on_ec2
  export K0S_CONTROL_PLANE_TAINT=false KUBELET_EXTRA_ARGS="--max-pods=250 --provider-id=aws:///x/i-00000000"
  run_script k0s/install-controller.sh
  assert_success
  # The providerID from IMDS comes last: k0s merges the extra args into a map, the last wins.
  assert_called '^k0s install controller -c /etc/k0s/k0s.yaml --enable-worker --no-taints --enable-cloud-provider --kubelet-extra-args=--node-ip=192\.0\.2\.10 --max-pods=250 --provider-id=aws:///x/i-00000000 --provider-id=aws:///eu-central-1b/i-0fedcba9876543210 --kubelet-root-dir=/var/lib/kubelet$'
}

@test "install-controller: a providerID EC2 metadata does not give stops the run before anything changes" {
  on_ec2
  remember_root
  export STUB_INSTANCE_ID='i-0123; touch /tmp/x'
  run_script k0s/install-controller.sh
  [ "$status" -eq 1 ]
  assert_output_contains "gpu-cluster: moscow: install-controller: EC2 metadata gave 'aws:///eu-central-1b/i-0123; touch /tmp/x', not a providerID aws:///ZONE/INSTANCE-ID"
  assert_no_state_changes
  assert_root_unchanged
  export STUB_INSTANCE_ID=i-0fedcba9876543210 STUB_EXIT_PYTHON3=1
  run_script k0s/install-controller.sh
  [ "$status" -eq 1 ]
  assert_output_contains "gpu-cluster: moscow: install-controller: could not read this instance's zone and id from EC2 metadata (IMDSv2)"
  assert_no_state_changes
  assert_root_unchanged
}

@test "install-controller: a pure controller reads no providerID" {
  export K0S_CLOUD_PROVIDER=aws
  export_ssm_reader
  run_script k0s/install-controller.sh
  assert_success
  assert_called '^k0s install controller -c /etc/k0s/k0s.yaml$'
  refute_called '^python3 '
  # Its value is checked all the same.
  export K0S_CLOUD_PROVIDER=gce
  reset_calls
  run_script k0s/install-controller.sh
  assert_refused "gpu-cluster: moscow: install-controller: K0S_CLOUD_PROVIDER must be empty or aws, got 'gce'"
}

@test "install-controller: the controller's node gets CONTROLLER_NODE_LABEL once it registers, and only once" {
  labelled_controller
  run_script k0s/install-controller.sh
  assert_success
  assert_called "^k0s kubectl label node control-plane --overwrite $LABEL_RE\$"
  assert_call_order '^k0s kubectl get --raw=/readyz$' '^k0s kubectl get node control-plane$'
  # Asked until the node was there (the third read), then labelled.
  [ "$(grep -cx 'k0s kubectl get node control-plane' "$STUB_CALLS")" = 3 ]
  assert_call_order '^k0s kubectl get node control-plane -o jsonpath=' '^k0s kubectl label node'
  assert_output_contains "ready: node control-plane to register" \
    "changed: node control-plane now has the label $LABEL"
  assert_file "/../state/labels-control-plane" "$LABEL"
  assert_idempotent k0s/install-controller.sh
  assert_output_contains "node control-plane already has the label $LABEL"
}

@test "install-controller: a node label with another value is set again" {
  labelled_controller
  first_run k0s/install-controller.sh
  printf 'node-restriction.kubernetes.io/gpu-cluster-controller=false\n' >"$STUB_STATE/labels-control-plane"
  run_script k0s/install-controller.sh
  assert_success
  assert_called "^k0s kubectl label node control-plane --overwrite $LABEL_RE\$"
  assert_file "/../state/labels-control-plane" "$LABEL"
}

@test "install-controller: the label query is one kubectl's JSONPath answers" {
  local kubectl query
  kubectl="$(cd "$REPO_ROOT" && "$PYTHON" -c 'from tests.k8s_tools import tool; print(tool("kubectl") or "")')"
  [[ -n "$kubectl" ]] || skip "no official kubectl (requirements-tools.txt)"
  labelled_controller
  run_script k0s/install-controller.sh
  assert_success
  query="$(grep -o -- '-o jsonpath=[^ ]*' "$STUB_CALLS" | head -n 1)"
  query=${query#-o }
  # A Node as the API serves it, with the label and without; kubectl reads it offline.
  printf '{"apiVersion":"v1","kind":"Node","metadata":{"name":"control-plane","labels":{"kubernetes.io/hostname":"control-plane","%s":"%s"}}}\n' \
    "${LABEL%%=*}" "${LABEL#*=}" >"$BATS_TEST_TMPDIR/labelled.json"
  printf '{"apiVersion":"v1","kind":"Node","metadata":{"name":"control-plane","labels":{"kubernetes.io/hostname":"control-plane"}}}\n' \
    >"$BATS_TEST_TMPDIR/unlabelled.json"
  run unshare -rn "$kubectl" label --local -f "$BATS_TEST_TMPDIR/labelled.json" gpu-cluster-none- -o "$query"
  assert_success
  [ "$output" = true ]
  run unshare -rn "$kubectl" label --local -f "$BATS_TEST_TMPDIR/unlabelled.json" gpu-cluster-none- -o "$query"
  assert_success
  [ "$output" = "" ]
}

@test "install-controller: a NODE_NAME that is not the name k0s gives the node stops the run before anything changes" {
  labelled_controller
  remember_root
  export STUB_HOSTNAME=Control-Plane-2
  run_script k0s/install-controller.sh
  [ "$status" -eq 1 ]
  assert_output_contains "gpu-cluster: moscow: install-controller: k0s names this node 'control-plane-2' (its host name, lower-cased), not NODE_NAME 'control-plane'; nothing was changed"
  assert_no_state_changes
  assert_root_unchanged
  # The kubelet's --hostname-override names it instead (k0s pins it: kubelet.go:164-165).
  export KUBELET_EXTRA_ARGS="--max-pods=250 --hostname-override=Control-Plane"
  run_script k0s/install-controller.sh
  assert_success
  assert_called "^k0s kubectl label node control-plane --overwrite $LABEL_RE\$"
}

@test "install-controller: a node that never registers fails naming it" {
  labelled_controller
  export STUB_NODES=""
  run_script k0s/install-controller.sh
  [ "$status" -eq 1 ]
  assert_output_contains "gpu-cluster: moscow: install-controller: timed out after 300s waiting for node control-plane to register"
  refute_called '^k0s kubectl label'
}

@test "install-controller: the worker inputs' problems are named at once" {
  export K0S_CONTROL_PLANE_TAINT=true K0S_CLOUD_PROVIDER=gce \
    CONTROLLER_NODE_LABEL=gpu-cluster.io/controller=true
  run_script k0s/install-controller.sh
  assert_refused "gpu-cluster: moscow: install-controller: K0S_CLOUD_PROVIDER must be empty or aws, got 'gce'; K0S_CONTROL_PLANE_TAINT=true keeps the control-plane taint of this controller's worker: it needs K0S_ENABLE_WORKER=true; CONTROLLER_NODE_LABEL and NODE_NAME label this controller's node: they need K0S_ENABLE_WORKER=true; give CONTROLLER_NODE_LABEL and NODE_NAME together, or neither; CONTROLLER_NODE_LABEL must be under node-restriction.kubernetes.io/ (or a subdomain of it), which no kubelet may set on its own node; got the key 'gpu-cluster.io/controller'"
  reset_calls
  export K0S_ENABLE_WORKER=true K0S_CLOUD_PROVIDER=aws NODE_NAME=Control_Plane \
    CONTROLLER_NODE_LABEL='node-restriction.kubernetes.io/gpu-cluster-controller=$(id)'
  run_script k0s/install-controller.sh
  assert_refused "K0S_CLOUD_PROVIDER=aws needs SSM_READER (ssm-parameter.py) to read the instance's zone and id; NODE_NAME is not a node name (a lower-case DNS-1123 subdomain): 'Control_Plane'; CONTROLLER_NODE_LABEL is not a node label PREFIX/NAME=VALUE (VALUE not empty): 'node-restriction.kubernetes.io/gpu-cluster-controller=\$(id)'"
}

@test "install-controller: CONTROLLER_NODE_LABEL is a whole label, NODE_NAME a whole node name" {
  export K0S_ENABLE_WORKER=true NODE_NAME=control-plane
  local bad
  for bad in 'node-restriction.kubernetes.io/gpu-cluster-controller' \
    'node-restriction.kubernetes.io/gpu-cluster-controller=' \
    'node-restriction.kubernetes.io/=true' \
    'node-restriction.kubernetes.io/a=true b' \
    $'node-restriction.kubernetes.io/a=true\nx=y' \
    "node-restriction.kubernetes.io/$(printf 'a%.0s' {1..64})=true" \
    "node-restriction.kubernetes.io/a=$(printf 'a%.0s' {1..64})"; do
    CONTROLLER_NODE_LABEL=$bad run_script k0s/install-controller.sh
    assert_refused "CONTROLLER_NODE_LABEL is not a node label PREFIX/NAME=VALUE"
  done
  # A key a kubelet may set on itself, under a prefix that merely looks alike.
  for bad in xnode-restriction.kubernetes.io/a=true node-restriction.kubernetes.io.example.com/a=true; do
    CONTROLLER_NODE_LABEL=$bad run_script k0s/install-controller.sh
    assert_refused "CONTROLLER_NODE_LABEL must be under node-restriction.kubernetes.io/"
  done
  for bad in 'control-plane.' '-control-plane' 'control-plane;id' "$(printf 'a%.0s' {1..254})"; do
    CONTROLLER_NODE_LABEL=$LABEL NODE_NAME=$bad run_script k0s/install-controller.sh
    assert_refused "NODE_NAME is not a node name"
  done
  # Kubernetes' longest: a 63-character name and value, a node name of 253; a subdomain of
  # the prefix (the run gets past its input checks to the download, which fails here).
  local longest
  longest="$(printf 'a%.0s' {1..63}).$(printf 'b%.0s' {1..63}).$(printf 'c%.0s' {1..63}).$(printf 'd%.0s' {1..61})"
  CONTROLLER_NODE_LABEL="gpu-cluster.node-restriction.kubernetes.io/$(printf 'a%.0s' {1..63})=$(printf 'b%.0s' {1..63})" \
    NODE_NAME=$longest STUB_HOSTNAME=$longest STUB_FAIL_CALL='^curl' run_script k0s/install-controller.sh
  [ "$status" -eq 1 ]
  refute_output_contains "is not a node"
  assert_called '^curl '
}

@test "install-controller: K0S_CONTROL_PLANE_TAINT is true or false" {
  export K0S_ENABLE_WORKER=true K0S_CONTROL_PLANE_TAINT=yes
  run_script k0s/install-controller.sh
  assert_refused "gpu-cluster: moscow: install-controller: expected \"true\" or \"false\": K0S_CONTROL_PLANE_TAINT='yes'"
}

@test "install-controller: a controller without its worker is switched to the EC2 worker, once" {
  first_run k0s/install-controller.sh
  assert_file /etc/k0s/gpu-cluster-k0scontroller.args $'controller\n-c\n/etc/k0s/k0s.yaml'
  labelled_controller
  run_script k0s/install-controller.sh
  assert_success
  assert_called '^k0s install controller --force -c /etc/k0s/k0s.yaml --enable-worker --enable-cloud-provider --kubelet-extra-args=--node-ip=192\.0\.2\.10 --provider-id=aws:///eu-central-1b/i-0fedcba9876543210 --kubelet-root-dir=/var/lib/kubelet$'
  assert_call_order '^k0s install controller --force' '^systemctl daemon-reload$'
  assert_call_order '^systemctl daemon-reload$' '^systemctl restart k0scontroller$'
  assert_call_order '^systemctl restart k0scontroller$' "^k0s kubectl label node control-plane --overwrite $LABEL_RE\$"
  assert_idempotent k0s/install-controller.sh
}

@test "install-controller: a controller+worker without taints is switched to keep the taint, once" {
  export K0S_ENABLE_WORKER=true
  first_run k0s/install-controller.sh
  assert_file /etc/k0s/gpu-cluster-k0scontroller.args $'controller\n-c\n/etc/k0s/k0s.yaml\n--enable-worker\n--no-taints\n--kubelet-extra-args=--node-ip=192.0.2.10\n--kubelet-root-dir=/var/lib/kubelet'
  on_ec2
  run_script k0s/install-controller.sh
  assert_success
  assert_called '^k0s install controller --force -c /etc/k0s/k0s.yaml --enable-worker --enable-cloud-provider --kubelet-extra-args=--node-ip=192\.0\.2\.10 --provider-id=aws:///eu-central-1b/i-0fedcba9876543210 --kubelet-root-dir=/var/lib/kubelet$'
  assert_called '^systemctl restart k0scontroller$'
  assert_output_contains "changed: reinstalled the k0scontroller service"
  assert_idempotent k0s/install-controller.sh
}
