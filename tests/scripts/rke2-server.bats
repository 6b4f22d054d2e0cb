#!/usr/bin/env bats
# rke2/install-server.sh: tarball install, CA and tokens before the first start, config,
# the Canal HelmChartConfig, the service and readiness.

bats_require_minimum_version 1.5.0
load helpers
load helpers/downloads
load helpers/secrets
load helpers/controller

RELEASE_URL='https://github\.com/rancher/rke2/releases/download/v1\.36\.3%2Brke2r1'
SERVER_CONFIG='node-name: moscow
node-ip: 192.0.2.10
token-file: /etc/rancher/rke2/server-token
agent-token-file: /etc/rancher/rke2/agent-token
cni:
- canal'
KUBELET_CONFIG='resolv-conf: /run/systemd/resolve/resolv.conf
kubelet-arg:
- cpu-manager-policy=static
- reserved-cpus=0-1'
CANAL_CONFIG='apiVersion: helm.cattle.io/v1
kind: HelmChartConfig
metadata:
  name: rke2-canal
  namespace: kube-system
spec:
  valuesContent: |
    flannel:
      iface: tun0
    calico:
      vethuMTU: 1350'
SERVER_TOKEN='server-token-secret-4f1c9e'
AGENT_TOKEN='agent-token-secret-7d2b0a'
SECRETS=("$CA_KEY_SECRET" "$SERVER_TOKEN" "$AGENT_TOKEN")
TLS=/var/lib/rancher/rke2/server/tls

setup() {
  setup_host
  rke2_kubectl_installed
  export RKE2_VERSION=v1.36.3+rke2r1 RKE2_CONFIG="$SERVER_CONFIG" \
    RKE2_KUBELET_CONFIG="$KUBELET_CONFIG" RKE2_CA_CERT="$CA_CERT" RKE2_CA_KEY="$CA_KEY" \
    RKE2_TOKEN="$SERVER_TOKEN" RKE2_AGENT_TOKEN="$AGENT_TOKEN" RKE2_CANAL_CONFIG="$CANAL_CONFIG" \
    RKE2_ADMISSION_CONFIG="$ADMISSION_CONFIG" RKE2_AUDIT_POLICY="$AUDIT_POLICY"
}

# server_started: what RKE2 leaves once the server ran: its datastore.
server_started() {
  mkdir -p "$GPU_CLUSTER_ROOT/var/lib/rancher/rke2/server/db" \
    "$GPU_CLUSTER_ROOT/var/lib/rancher/rke2/agent"
  touch "$GPU_CLUSTER_ROOT/var/lib/rancher/rke2/agent/kubelet.kubeconfig"
}

@test "install-server: installs RKE2 from the verified tarball, writes its files and starts the server" {
  run_script rke2/install-server.sh
  assert_success
  assert_called "^curl -fsSL --retry 5 -o .*/rke2\.linux-amd64\.tar\.gz $RELEASE_URL/rke2\.linux-amd64\.tar\.gz$"
  refute_called 'sha256sum-'
  assert_output_contains "verified sha256 of rke2.linux-amd64.tar.gz"
  [ -x "$GPU_CLUSTER_ROOT/usr/local/bin/rke2" ]
  [ -f "$GPU_CLUSTER_ROOT/usr/local/lib/systemd/system/rke2-server.service" ]
  assert_file /etc/rancher/rke2/config.yaml "$SERVER_CONFIG"
  assert_mode /etc/rancher/rke2/config.yaml 600
  assert_file /etc/rancher/rke2/config.yaml.d/50-gpu-cluster-kubelet.yaml "$KUBELET_CONFIG"
  assert_file /etc/rancher/rke2/server-token "$SERVER_TOKEN"
  assert_mode /etc/rancher/rke2/server-token 600
  assert_file /etc/rancher/rke2/agent-token "$AGENT_TOKEN"
  assert_mode /etc/rancher/rke2/agent-token 600
  assert_file /var/lib/rancher/rke2/server/manifests/rke2-canal-config.yaml "$CANAL_CONFIG"
  assert_call_order '^systemctl daemon-reload$' '^systemctl enable rke2-server$'
  assert_call_order '^systemctl enable rke2-server$' '^systemctl start --no-block rke2-server$'
  assert_called '^kubectl --kubeconfig .*/etc/rancher/rke2/rke2\.yaml get --raw=/readyz$'
  refute_gpu_detached
}

@test "install-server: kubernetes.releaseUrl: the tarball from the site's folder, still checked" {
  export RKE2_RELEASE_URL=https://files.example.internal/rke2
  run_script rke2/install-server.sh
  assert_success
  assert_called '^curl -fsSL --retry 5 -o .*/rke2\.linux-amd64\.tar\.gz https://files\.example\.internal/rke2/rke2\.linux-amd64\.tar\.gz$'
  refute_called 'github\.com'
  assert_output_contains "verified sha256 of rke2.linux-amd64.tar.gz"
}

@test "install-server: the program's CA is RKE2's server and client CA, RKE2 makes the rest" {
  run_script rke2/install-server.sh
  assert_success
  local name
  for name in server-ca client-ca; do
    assert_file "$TLS/$name.crt" "$CA_CERT"
    assert_mode "$TLS/$name.crt" 644
    assert_file "$TLS/$name.key" "$CA_KEY"
    assert_mode "$TLS/$name.key" 600
  done
  # RKE2 generates these itself when missing (k3s deps.go createSigningCertKey).
  [ ! -e "$GPU_CLUSTER_ROOT$TLS/request-header-ca.crt" ]
  [ ! -e "$GPU_CLUSTER_ROOT$TLS/service.key" ]
  # Before RKE2 is installed, so its first start finds them.
  assert_call_order '^curl ' '^systemctl start'
  [[ "$(grep -n 'changed /var/lib/rancher/rke2/server/tls/server-ca.crt' <<<"$output" | cut -d: -f1)" -lt \
    "$(grep -n 'changed: installed RKE2' <<<"$output" | cut -d: -f1)" ]]
}

@test "install-server: a second run changes nothing and says so" {
  run_script rke2/install-server.sh
  assert_success
  server_started
  export RKE2_CA_CERT="$CA_CERT"$'\n'
  assert_idempotent rke2/install-server.sh
  assert_output_contains "RKE2 v1.36.3+rke2r1 already installed" "the cluster CA is already in place" \
    "rke2-server is already running"
}

@test "install-server: secrets never show up in output, command lines or environments" {
  assert_secret_unseen rke2/install-server.sh /var/lib/rancher/rke2/server/tls/server-ca.key \
    "${SECRETS[@]}"
}

@test "install-server: a failing step does not reveal the secrets either" {
  assert_failure_unseen rke2/install-server.sh '^systemctl start' "${SECRETS[@]}"
}

@test "install-server: a checksum mismatch installs nothing" {
  assert_tampered_download_refused rke2/install-server.sh rke2.linux-amd64.tar.gz RKE2_SHA256_AMD64 \
    /usr/local/bin/rke2
  refute_called '^systemctl (daemon-reload|enable|start)'
}

@test "install-server: arm64 hosts get the arm64 tarball" {
  export STUB_UNAME_M=aarch64
  run_script rke2/install-server.sh
  assert_success
  assert_called "$RELEASE_URL/rke2\.linux-arm64\.tar\.gz$"
  refute_called 'sha256sum-'
}

@test "install-server: no pinned sha256 for the host's architecture downloads nothing" {
  export STUB_UNAME_M=aarch64 FAKE_PINS=off RKE2_SHA256_ARM64=""
  RKE2_SHA256_AMD64="$(fake_sha256 rke2 "$RKE2_VERSION")"
  export RKE2_SHA256_AMD64
  run_script rke2/install-server.sh
  assert_failure
  assert_output_contains "install-server: no pinned sha256 for rke2.linux-arm64.tar.gz of RKE2 v1.36.3+rke2r1: set gpu-cluster:versions releaseSha256.arm64"
  refute_called '^curl .*/releases/'
  [ ! -e "$GPU_CLUSTER_ROOT/usr/local/bin/rke2" ]
}

@test "install-server: a changed config restarts the server; a new version is installed" {
  run_script rke2/install-server.sh
  assert_success
  server_started
  reset_calls
  export RKE2_CONFIG="$SERVER_CONFIG"$'\nnode-label:\n- gpu=true'
  run_script rke2/install-server.sh
  assert_success
  assert_called '^systemctl restart --no-block rke2-server$'
  refute_called '^curl '
  reset_calls
  export RKE2_VERSION=v1.36.4+rke2r1
  run_script rke2/install-server.sh
  assert_success
  assert_called 'v1\.36\.4%2Brke2r1/rke2\.linux-amd64\.tar\.gz$'
  assert_called '^systemctl restart --no-block rke2-server$'
}

@test "install-server: kubelet settings of a server in service are left to apply-agent-args" {
  run_script rke2/install-server.sh
  assert_success
  server_started
  export RKE2_KUBELET_CONFIG='resolv-conf: /run/systemd/resolve/resolv.conf'
  assert_idempotent rke2/install-server.sh
  assert_output_contains "the kubelet settings changed; the apply-agent-args step applies them"
  assert_file /etc/rancher/rke2/config.yaml.d/50-gpu-cluster-kubelet.yaml "$KUBELET_CONFIG"
}

@test "install-server: no Canal settings removes ours" {
  run_script rke2/install-server.sh
  assert_success
  export RKE2_CANAL_CONFIG=""
  run_script rke2/install-server.sh
  assert_success
  [ ! -e "$GPU_CLUSTER_ROOT/var/lib/rancher/rke2/server/manifests/rke2-canal-config.yaml" ]
}

@test "install-server: a server with another CA is refused before anything changes" {
  mkdir -p "$GPU_CLUSTER_ROOT$TLS"
  printf '%s\n' '-----BEGIN CERTIFICATE-----' 'other' '-----END CERTIFICATE-----' \
    >"$GPU_CLUSTER_ROOT$TLS/server-ca.crt"
  run_script rke2/install-server.sh
  assert_failure
  assert_output_contains "install-server: the server already has a different cluster CA"
  refute_called '^(curl|systemctl)'
  [ ! -e "$GPU_CLUSTER_ROOT/etc/rancher/rke2/server-token" ]
}

@test "install-server: a token change on a started server is refused, unshown" {
  run_script rke2/install-server.sh
  assert_success
  server_started
  reset_calls
  export RKE2_TOKEN='another-server-token-91ab'
  run_script rke2/install-server.sh
  assert_failure
  assert_output_contains "the server token differs from the one this server was started with"
  refute_output_contains "another-server-token-91ab" "$SERVER_TOKEN"
  assert_file /etc/rancher/rke2/server-token "$SERVER_TOKEN"
  refute_called '^systemctl'
}

@test "install-server: a new agent token on a started server is written and restarts it, unshown" {
  run_script rke2/install-server.sh
  assert_success
  server_started
  reset_calls
  export RKE2_AGENT_TOKEN='a-renewed-agent-token-5c3e'
  run_script rke2/install-server.sh
  assert_success
  assert_file /etc/rancher/rke2/agent-token 'a-renewed-agent-token-5c3e'
  assert_file /etc/rancher/rke2/server-token "$SERVER_TOKEN"
  assert_called '^systemctl restart --no-block rke2-server$'
  refute_output_contains 'a-renewed-agent-token-5c3e' "$AGENT_TOKEN"
  assert_idempotent rke2/install-server.sh
}

@test "install-server: secrets come from SSM when given as parameters" {
  unset RKE2_CA_KEY RKE2_TOKEN RKE2_AGENT_TOKEN
  export RKE2_CA_KEY_SSM_PARAMETER=/gpu-cluster/dev/ca-key RKE2_TOKEN_SSM_PARAMETER=/gpu-cluster/dev/token \
    RKE2_AGENT_TOKEN_SSM_PARAMETER=/gpu-cluster/dev/agent-token AWS_REGION=eu-central-1
  export_ssm_reader
  ssm_parameter eu-central-1 /gpu-cluster/dev/ca-key "$CA_KEY"
  ssm_parameter eu-central-1 /gpu-cluster/dev/token "$SERVER_TOKEN"
  ssm_parameter eu-central-1 /gpu-cluster/dev/agent-token "$AGENT_TOKEN"
  run_script rke2/install-server.sh
  assert_success
  assert_file "$TLS/server-ca.key" "$CA_KEY"
  assert_file /etc/rancher/rke2/server-token "$SERVER_TOKEN"
  assert_file /etc/rancher/rke2/agent-token "$AGENT_TOKEN"
  refute_leaked "${SECRETS[@]}"
}

@test "install-server: input problems are named at once, without secrets" {
  unset RKE2_VERSION RKE2_TOKEN
  export RKE2_CA_CERT=not-a-cert RKE2_CA_KEY="not a key $CA_KEY_SECRET" \
    RKE2_AGENT_TOKEN_SSM_PARAMETER=/x
  run_script rke2/install-server.sh
  assert_failure
  assert_output_contains "missing required environment variable(s): RKE2_VERSION" \
    "RKE2_CA_CERT is not a PEM certificate" "RKE2_CA_KEY is not a PEM private key" \
    "missing the server token: RKE2_TOKEN, or RKE2_TOKEN_SSM_PARAMETER" \
    "give the agent token either as RKE2_AGENT_TOKEN or as RKE2_AGENT_TOKEN_SSM_PARAMETER, not both"
  refute_leaked "${SECRETS[@]}"
  refute_called '^(curl|systemctl)'
}

@test "install-server: gives up when the API never gets ready" {
  export STUB_READYZ_EXIT=1
  run_script rke2/install-server.sh
  assert_failure
  assert_output_contains "install-server: timed out after 900s waiting for the Kubernetes API to be ready"
}

@test "install-server: a systemd reload on a GPU server keeps running containers their devices" {
  nvidia_driver_loaded 580.95.05
  run_script rke2/install-server.sh
  assert_success
  refute_gpu_detached
}

@test "install-server: writes the Pod Security default and the audit policy its config names" {
  run_script rke2/install-server.sh
  assert_success
  assert_file /etc/rancher/rke2/gpu-cluster-pss.yaml "$ADMISSION_CONFIG"
  assert_file /etc/rancher/rke2/gpu-cluster-audit-policy.yaml "$AUDIT_POLICY"
  assert_mode /etc/rancher/rke2/gpu-cluster-pss.yaml 600
  assert_mode /etc/rancher/rke2/gpu-cluster-audit-policy.yaml 600
  assert_idempotent rke2/install-server.sh
  export RKE2_ADMISSION_CONFIG="$ADMISSION_CONFIG
plugins: []"
  run_script rke2/install-server.sh
  assert_success
  assert_called '^systemctl restart --no-block rke2-server$'
}

# joining: the config of a server after the first (components/distributions/rke2.py), no CA
# key, and an RKE2 that writes the CA of the cluster it joins (STUB_CA_SERVED, and a key) as
# it starts: the bootstrap data holds both (k3s pkg/daemons/config ControlRuntimeBootstrap).
joining() {
  export RKE2_CONFIG="server: https://192.0.2.100:9345
$SERVER_CONFIG" STUB_CA_SERVED="${1:-$CA_CERT}"
  unset RKE2_CA_KEY
  export STUB_ON_START='[[ "$1" == rke2-server ]] || exit 0
    tls="$GPU_CLUSTER_ROOT/var/lib/rancher/rke2/server/tls"; mkdir -p "$tls"
    for name in server-ca client-ca; do printf "%s\n" "$STUB_CA_SERVED" >"$tls/$name.crt"
      echo "the joined cluster CA key" >"$tls/$name.key"; done'
}

@test "install-server: a server after the first joins at the server its config names, taking the CA from there" {
  joining
  run_script rke2/install-server.sh
  assert_success
  assert_output_contains "install-server: joins https://192.0.2.100:9345: the cluster CA comes from there" \
    "install-server: joined https://192.0.2.100:9345, whose CA is the cluster's"
  # Nothing of the CA written beforehand (k3s would refuse files newer than its datastore's).
  refute_output_contains "changed /var/lib/rancher/rke2/server/tls/server-ca"
  [ "$(<"$GPU_CLUSTER_ROOT$TLS/server-ca.key")" = "the joined cluster CA key" ]
  assert_file /etc/rancher/rke2/config.yaml "$RKE2_CONFIG"
  assert_file /etc/rancher/rke2/server-token "$SERVER_TOKEN"
  server_started
  assert_idempotent rke2/install-server.sh
  assert_output_contains "the cluster CA is already in place"
}

@test "install-server: a joined server with another cluster's CA fails, naming host and step" {
  joining "${CA_CERT/gpu-cluster-ca/another-clusters-ca}"
  run_script rke2/install-server.sh
  assert_failure
  assert_output_contains "gpu-cluster: $GPU_CLUSTER_HOST: install-server: joined https://192.0.2.100:9345, but its /var/lib/rancher/rke2/server/tls/server-ca.crt is not RKE2_CA_CERT"
}

@test "install-server: a joining server refuses a CA key, naming the variable only" {
  joining
  export RKE2_CA_KEY="$CA_KEY"
  run_script rke2/install-server.sh
  assert_failure
  assert_output_contains "a server that joins https://192.0.2.100:9345 takes the CA from the cluster: give it no RKE2_CA_KEY or RKE2_CA_KEY_SSM_PARAMETER"
  refute_output_contains "$CA_KEY_SECRET"
  refute_called '^systemctl start'
  export RKE2_CONFIG="server: http://192.0.2.100:9345
$SERVER_CONFIG"
  unset RKE2_CA_KEY
  run_script rke2/install-server.sh
  assert_failure
  assert_output_contains "RKE2_CONFIG's server is not one line 'server: https://ADDRESS:9345'"
}

@test "install-server: an EC2 server: cloud provider external, RKE2's own cloud controller off, its providerID" {
  export RKE2_CLOUD_PROVIDER=aws SSM_READER="$(<"$SCRIPTS_DIR/ssm-parameter.py")"
  run_script rke2/install-server.sh
  assert_success
  assert_file /etc/rancher/rke2/config.yaml.d/60-gpu-cluster-cloud-provider.yaml \
    'cloud-provider-name: external
disable-cloud-controller: true
kubelet-arg+:
- provider-id=aws:///us-west-2a/i-0123456789abcdef0'
}
