#!/usr/bin/env bats
# rke2/join-agent.sh and rke2/apply-agent-args.sh: joining, the token's secrecy, and
# kubelet settings changes (the CPU manager rule).

bats_require_minimum_version 1.5.0
load helpers
load helpers/downloads
load helpers/secrets

AGENT_SECRET='agent-token-secret-7d2b0a'
AGENT_TOKEN="K10$(printf '%064d' 7)::node:$AGENT_SECRET"
AGENT_CONFIG='server: https://10.20.0.10:9345
token-file: /etc/rancher/rke2/agent-token
node-name: moscow
node-ip: 192.0.2.10'
STATIC='kubelet-arg:
- cpu-manager-policy=static
- reserved-cpus=0-1
resolv-conf: /run/systemd/resolve/resolv.conf'
NONE='resolv-conf: /run/systemd/resolve/resolv.conf'
DROPIN=/etc/rancher/rke2/config.yaml.d/50-gpu-cluster-kubelet.yaml
STATE=/var/lib/kubelet/cpu_manager_state

setup() {
  setup_host
  export RKE2_VERSION=v1.36.3+rke2r1 RKE2_CONFIG="$AGENT_CONFIG" RKE2_KUBELET_CONFIG="$NONE" \
    RKE2_AGENT_TOKEN="$AGENT_TOKEN"
}

# agent_joined POLICY SETTINGS: the agent ran (its kubelet kubeconfig) with a CPU manager
# state of POLICY, started with the kubelet SETTINGS (the drop-in join-agent wrote).
agent_joined() {
  rke2_kubectl_installed
  mkdir -p "$GPU_CLUSTER_ROOT/var/lib/rancher/rke2/agent" "$GPU_CLUSTER_ROOT/var/lib/kubelet" \
    "$GPU_CLUSTER_ROOT${DROPIN%/*}"
  touch "$GPU_CLUSTER_ROOT/var/lib/rancher/rke2/agent/kubelet.kubeconfig"
  printf '{"policyName":"%s","defaultCpuSet":"","checksum":1}\n' "$1" >"$GPU_CLUSTER_ROOT$STATE"
  printf '%s\n' "$2" >"$GPU_CLUSTER_ROOT$DROPIN"
}

# apply_agent_args POLICY SETTINGS [SERVICE]: apply-agent-args on node moscow with the CPU
# manager POLICY, the kubelet SETTINGS and RKE2's SERVICE (default rke2-agent).
apply_agent_args() {
  export CPU_MANAGER_POLICY=$1 RKE2_KUBELET_CONFIG=$2 NODE_NAME=moscow RKE2_SERVICE=${3:-rke2-agent}
  run_script rke2/apply-agent-args.sh
}

@test "join-agent: installs RKE2, writes token, config and kubelet settings, starts the agent" {
  run_script_watched rke2/join-agent.sh
  assert_success
  assert_file /etc/rancher/rke2/agent-token "$AGENT_TOKEN"
  assert_mode /etc/rancher/rke2/agent-token 600
  assert_file /etc/rancher/rke2/config.yaml "$AGENT_CONFIG"
  assert_file "$DROPIN" "$NONE"
  assert_call_order '^systemctl enable rke2-agent$' '^systemctl start --no-block rke2-agent$'
  refute_called 'rke2-server'
  [ -s "$STUB_STATE/env.log" ]
  refute_leaked "$AGENT_SECRET"
}

@test "join-agent: a second run changes nothing and says so" {
  run_twice rke2/join-agent.sh
  assert_output_contains "rke2-agent is already running"
}

@test "join-agent: a new token restarts the agent" {
  run_again_with rke2/join-agent.sh RKE2_AGENT_TOKEN="K10$(printf '%064d' 8)::node:$AGENT_SECRET"
  assert_success
  assert_called '^systemctl restart --no-block rke2-agent$'
}

@test "join-agent: a pool's bootstrap token (rke2 token create on the controller) joins too" {
  local token
  token="K10$(printf '%064d' 7)::abcdef.0123456789abcdef"
  export RKE2_AGENT_TOKEN="$token"
  run_script rke2/join-agent.sh
  assert_success
  assert_file /etc/rancher/rke2/agent-token "$token"
  export RKE2_AGENT_TOKEN="K10$(printf '%064d' 7)::abcdef.0123456789ABCDEF"
  run_script rke2/join-agent.sh
  assert_failure
  assert_output_contains "RKE2_AGENT_TOKEN is not an agent token with the server's CA hash"
}

@test "join-agent: a token without the CA hash or a config without token-file is refused, unshown" {
  export RKE2_AGENT_TOKEN="$AGENT_SECRET" RKE2_CONFIG='server: https://10.20.0.10:9345'
  unset RKE2_KUBELET_CONFIG
  run_script rke2/join-agent.sh
  assert_failure
  assert_output_contains "missing required environment variable(s): RKE2_KUBELET_CONFIG" \
    "RKE2_AGENT_TOKEN is not an agent token with the server's CA hash" \
    "RKE2_CONFIG does not read the agent token from /etc/rancher/rke2/agent-token"
  refute_output_contains "$AGENT_SECRET"
  refute_called '^(curl|systemctl)'
}

@test "join-agent: a checksum mismatch installs nothing" {
  assert_tampered_download_refused rke2/join-agent.sh rke2.linux-amd64.tar.gz RKE2_SHA256_AMD64 \
    /usr/local/bin/rke2
}

@test "apply-agent-args: unchanged settings leave the agent alone" {
  agent_joined none "$NONE"
  apply_agent_args none "$NONE"
  assert_success
  assert_output_contains "unchanged: the kubelet runs with the configured settings"
  assert_no_state_changes
}

@test "apply-agent-args: a new CPU manager policy on a node in service is refused, nothing touched" {
  agent_joined none "$NONE"
  apply_agent_args static "$STATIC"
  assert_failure
  assert_output_contains "apply-agent-args: the CPU manager policy changes from none to static, which needs the node drained: kubectl drain moscow"
  assert_called '^kubectl --kubeconfig .*/var/lib/rancher/rke2/agent/kubelet\.kubeconfig get node moscow -o jsonpath=\{\.spec\.unschedulable\}$'
  assert_no_state_changes
  assert_file "$DROPIN" "$NONE"
  [ -f "$GPU_CLUSTER_ROOT$STATE" ]
}

@test "apply-agent-args: on a drained node the old CPU manager state goes before RKE2 starts" {
  agent_joined none "$NONE"
  export STUB_NODE_UNSCHEDULABLE=true
  apply_agent_args static "$STATIC"
  assert_success
  [ ! -e "$GPU_CLUSTER_ROOT$STATE" ]
  assert_file "$DROPIN" "$STATIC"
  assert_call_order '^systemctl stop rke2-agent$' '^systemctl start --no-block rke2-agent$'
  assert_output_contains "uncordon the node: kubectl uncordon moscow"
  assert_idempotent rke2/apply-agent-args.sh
}

@test "apply-agent-args: other settings restart RKE2 without touching the CPU manager state" {
  agent_joined static "$STATIC"
  apply_agent_args static "${STATIC/0-1/0-3}" rke2-server
  assert_success
  [ -f "$GPU_CLUSTER_ROOT$STATE" ]
  assert_called '^systemctl stop rke2-server$'
  assert_output_contains "changed: rke2-server restarted with the new kubelet settings"
}

@test "apply-agent-args: inputs are checked, all at once" {
  export CPU_MANAGER_POLICY=dynamic NODE_NAME=Moscow RKE2_SERVICE=rke2
  unset RKE2_KUBELET_CONFIG
  run_script rke2/apply-agent-args.sh
  assert_failure
  assert_output_contains "missing required environment variable(s): RKE2_KUBELET_CONFIG" \
    "CPU_MANAGER_POLICY must be none or static" "NODE_NAME is not a node name" \
    "RKE2_SERVICE must be rke2-agent or rke2-server"
}

CLOUD_DROPIN=/etc/rancher/rke2/config.yaml.d/60-gpu-cluster-cloud-provider.yaml

@test "join-agent: an EC2 node runs with cloud provider external and its providerID from IMDS" {
  # What cloud-provider-aws v1.35.2 finds an instance by (pkg/providers/v1/instances_v2.go:
  # 35-46: node.spec.providerID first); the kubelet sets it only when it registers.
  export RKE2_CLOUD_PROVIDER=aws SSM_READER="$(<"$SCRIPTS_DIR/ssm-parameter.py")" \
    STUB_ZONE=us-west-2c STUB_INSTANCE_ID=i-0fedcba9876543210
  run_twice rke2/join-agent.sh
  assert_file "$CLOUD_DROPIN" 'cloud-provider-name: external
kubelet-arg+:
- provider-id=aws:///us-west-2c/i-0fedcba9876543210'
  assert_mode "$CLOUD_DROPIN" 600
  # Read after the kubelet drop-in, whose plain kubelet-arg would replace what came before
  # (docs install/configuration.md, "Multiple Config Files": name order, `+` appends).
  [[ "$(printf '%s\n' "${DROPIN##*/}" "${CLOUD_DROPIN##*/}" | LC_ALL=C sort | tail -1)" == "${CLOUD_DROPIN##*/}" ]]
}

@test "join-agent: an on-prem node keeps the kubelet's default cloud provider, and loses ours" {
  mkdir -p "$GPU_CLUSTER_ROOT${CLOUD_DROPIN%/*}"
  printf 'cloud-provider-name: external\n' >"$GPU_CLUSTER_ROOT$CLOUD_DROPIN"
  run_script rke2/join-agent.sh
  assert_success
  [ ! -e "$GPU_CLUSTER_ROOT$CLOUD_DROPIN" ]
}

@test "join-agent: an answer of IMDS that is no providerID stops the join before RKE2 starts" {
  export RKE2_CLOUD_PROVIDER=aws SSM_READER="$(<"$SCRIPTS_DIR/ssm-parameter.py")" \
    STUB_INSTANCE_ID='i-0abc/../x'
  run_script rke2/join-agent.sh
  assert_failure
  assert_output_contains "not a providerID aws:///ZONE/INSTANCE-ID"
  refute_called 'systemctl (enable|start)'
}

@test "join-agent: RKE2_CLOUD_PROVIDER takes aws alone, and aws needs SSM_READER" {
  RKE2_CLOUD_PROVIDER=gce run_script rke2/join-agent.sh
  assert_failure
  assert_output_contains "RKE2_CLOUD_PROVIDER must be empty or aws, got 'gce'"
  unset SSM_READER
  RKE2_CLOUD_PROVIDER=aws run_script rke2/join-agent.sh
  assert_failure
  assert_output_contains "RKE2_CLOUD_PROVIDER=aws needs SSM_READER"
}
