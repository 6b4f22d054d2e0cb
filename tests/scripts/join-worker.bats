#!/usr/bin/env bats
# k0s/join-worker.sh: token handling, worker service arguments, secrecy.

bats_require_minimum_version 1.5.0
load helpers
load helpers/secrets

BEARER=abcdef.0123456789abcdef
TOKEN="$(k0s_join_token "$BEARER")"

setup() {
  setup_host
  export K0S_VERSION=v1.34.1+k0s.0 K0S_JOIN_TOKEN="$TOKEN" NODE_IP=192.0.2.21 \
    KUBELET_EXTRA_ARGS="--max-pods=250" NODE_LABELS="gpu-cluster.io/gpu=true" \
    NODE_TAINTS="nvidia.com/gpu=present:NoSchedule" K0S_PROFILE=gpu KUBELET_ROOT_DIR=/var/lib/kubelet
}

@test "join-worker: installs k0s, writes the token 0600 and starts the worker" {
  run_script k0s/join-worker.sh
  assert_success
  assert_file /etc/k0s/worker-token "$TOKEN"
  assert_mode /etc/k0s/worker-token 600
  assert_called '^k0s install worker --token-file /etc/k0s/worker-token --kubelet-extra-args=--node-ip=192\.0\.2\.21 --max-pods=250 --labels=gpu-cluster\.io/gpu=true --taints=nvidia\.com/gpu=present:NoSchedule --profile=gpu --kubelet-root-dir=/var/lib/kubelet$'
  assert_called '^k0s start$'
  assert_called '^systemctl is-active --quiet k0sworker$'
  assert_output_contains "ready: the k0sworker service to be active"
}

@test "join-worker: optional inputs may be empty" {
  export KUBELET_EXTRA_ARGS="" NODE_LABELS="" NODE_TAINTS="" K0S_PROFILE="" KUBELET_ROOT_DIR=""
  run_script k0s/join-worker.sh
  assert_success
  assert_called '^k0s install worker --token-file /etc/k0s/worker-token --kubelet-extra-args=--node-ip=192\.0\.2\.21$'
}

@test "join-worker: the token never shows up in output, command lines or environments" {
  assert_secret_unseen k0s/join-worker.sh /etc/k0s/worker-token "$TOKEN"
}

@test "join-worker: a failing join does not reveal the token either" {
  assert_failure_unseen k0s/join-worker.sh '^k0s install' "$TOKEN"
}

@test "join-worker: a second run changes nothing and says so" {
  run_twice k0s/join-worker.sh
  assert_output_contains "the worker has already joined; the join token is not needed" \
    "the k0sworker service is already installed with the same arguments" \
    "k0sworker is already running"
}

@test "join-worker: a joined worker needs no token" {
  run_script k0s/join-worker.sh
  assert_success
  unset K0S_JOIN_TOKEN
  assert_idempotent k0s/join-worker.sh
}

@test "join-worker: a new token before the join completed is written and the worker restarted" {
  run_script k0s/join-worker.sh
  assert_success
  rm "$GPU_CLUSTER_ROOT/var/lib/k0s/kubelet.conf" # joining has not finished
  reset_calls
  RENEWED="$(k0s_join_token 123456.abcdefghijklmnop)"
  export K0S_JOIN_TOKEN="$RENEWED"
  run_script k0s/join-worker.sh
  assert_success
  assert_file /etc/k0s/worker-token "$RENEWED"
  assert_mode /etc/k0s/worker-token 600
  assert_called '^systemctl restart k0sworker$'
  refute_called '^k0s install'
}

# assert_reinstalled ARGS: the run reinstalled the k0sworker service with --force and ARGS
# (a regular expression of what follows the token file) and restarted it; a second run
# changes nothing.
assert_reinstalled() {
  assert_success || return 1
  assert_called "^k0s install worker --force --token-file /etc/k0s/worker-token $1" || return 1
  assert_called '^systemctl restart k0sworker$' || return 1
  assert_output_contains "changed: reinstalled the k0sworker service" || return 1
  assert_idempotent k0s/join-worker.sh
}

@test "join-worker: changed labels reinstall the service with --force and restart it" {
  first_run k0s/join-worker.sh
  export NODE_LABELS="gpu-cluster.io/gpu=true,gpu-cluster.io/pool=a100"
  unset K0S_JOIN_TOKEN
  run_script k0s/join-worker.sh
  assert_called '^systemctl daemon-reload$'
  assert_reinstalled '.* --labels=gpu-cluster\.io/gpu=true,gpu-cluster\.io/pool=a100 '
}

@test "join-worker: a changed kubelet root dir reinstalls the service and restarts it" {
  export KUBELET_ROOT_DIR=""
  run_script k0s/join-worker.sh
  assert_success
  refute_called 'kubelet-root-dir'
  reset_calls
  export KUBELET_ROOT_DIR=/var/lib/kubelet
  unset K0S_JOIN_TOKEN
  run_script k0s/join-worker.sh
  grep -qx -- '--kubelet-root-dir=/var/lib/kubelet' "$GPU_CLUSTER_ROOT/etc/k0s/gpu-cluster-k0sworker.args"
  assert_reinstalled '.* --profile=gpu --kubelet-root-dir=/var/lib/kubelet$'
}

@test "join-worker: an unsafe kubelet root dir is refused before anything runs" {
  export KUBELET_ROOT_DIR=/var
  run_script k0s/join-worker.sh
  assert_refused "gpu-cluster: moscow: join-worker: KUBELET_ROOT_DIR must be an absolute path at least two levels deep" "got '/var'"
}

@test "join-worker: all missing environment variables are named at once" {
  unset K0S_VERSION K0S_JOIN_TOKEN NODE_IP
  run_script k0s/join-worker.sh
  assert_refused "gpu-cluster: moscow: join-worker: missing required environment variable(s): NODE_IP K0S_JOIN_TOKEN"
}

SSM_TOKEN="$(k0s_join_token fedcba.fedcba9876543210)"
PARAMETER=/gpu-cluster/dev/join-token/a100

# token_in_ssm: as on a cloud instance: no K0S_JOIN_TOKEN, the token in an SSM
# SecureString the stubbed reader returns, and no node IP.
token_in_ssm() {
  unset K0S_JOIN_TOKEN
  export K0S_JOIN_TOKEN_SSM_PARAMETER=$PARAMETER AWS_REGION=eu-central-1 NODE_IP=""
  export_ssm_reader
  ssm_parameter eu-central-1 "$PARAMETER" "$SSM_TOKEN"
}

# joined_with_ssm_token: the worker joined with the token from SSM (token_in_ssm).
joined_with_ssm_token() {
  token_in_ssm
  run_script k0s/join-worker.sh
  assert_success
}

SSM_CALL='^python3 - get eu-central-1 /gpu-cluster/dev/join-token/a100$'

@test "join-worker: reads the token from SSM when only the parameter is given" {
  token_in_ssm
  run_script k0s/join-worker.sh
  assert_success
  assert_file /etc/k0s/worker-token "$SSM_TOKEN"
  assert_mode /etc/k0s/worker-token 600
  assert_called "$SSM_CALL"
  [ "$(grep -c '^python3 ' "$STUB_CALLS")" -eq 1 ]
  refute_called '^sleep'
  # Read before anything on the host changes.
  assert_call_order '^python3 ' '^curl '
  assert_called '^k0s install worker --token-file /etc/k0s/worker-token --kubelet-extra-args=--max-pods=250 --labels=gpu-cluster\.io/gpu=true --taints=nvidia\.com/gpu=present:NoSchedule --profile=gpu --kubelet-root-dir=/var/lib/kubelet$'
  assert_output_contains "reading the join token from SSM parameter $PARAMETER in eu-central-1" \
    "read the join token from SSM parameter $PARAMETER" "ready: the k0sworker service to be active"
}

@test "join-worker: the token from SSM never shows up in output, command lines or environments" {
  token_in_ssm
  # As in an envelope that exports every input, an empty one included.
  export K0S_JOIN_TOKEN=""
  assert_secret_unseen k0s/join-worker.sh /etc/k0s/worker-token "$SSM_TOKEN"
  [ "$(<"$GPU_CLUSTER_ROOT/etc/k0s/worker-token")" = "$SSM_TOKEN" ]
}

@test "join-worker: a failing join does not reveal the token from SSM either" {
  token_in_ssm
  assert_failure_unseen k0s/join-worker.sh '^k0s install' "$SSM_TOKEN"
}

@test "join-worker: a joined worker does not read SSM again" {
  joined_with_ssm_token
  rm -r "$STUB_STATE/ssm" # the parameter may be gone, or unreadable by now
  assert_idempotent k0s/join-worker.sh
  refute_called '^python3 '
  assert_output_contains "the worker has already joined; the join token is not needed"
}

@test "join-worker: K0S_JOIN_TOKEN wins over the SSM parameter" {
  export K0S_JOIN_TOKEN_SSM_PARAMETER=$PARAMETER AWS_REGION=eu-central-1
  run_script k0s/join-worker.sh
  assert_success
  assert_file /etc/k0s/worker-token "$TOKEN"
  refute_called '^python3 '
}

@test "join-worker: SSM reads are retried while the instance role is not usable yet" {
  token_in_ssm
  export STUB_FAIL_SSM_TIMES=2
  run_script k0s/join-worker.sh
  assert_ssm_retried 2 "$PARAMETER"
  assert_output_contains "warning: reading SSM parameter $PARAMETER failed (attempt 1 of 10), retrying in 6s: URLError: <urlopen error [Errno 111] Connection refused>" \
    "(attempt 2 of 10)" "read the join token from SSM parameter $PARAMETER"
  assert_file /etc/k0s/worker-token "$SSM_TOKEN"
}

@test "join-worker: SSM still unreadable after every retry fails naming the parameter" {
  token_in_ssm
  export STUB_FAIL_SSM_TIMES=100 STUB_SSM_ERROR=denied
  run_script k0s/join-worker.sh
  assert_ssm_denied join-worker "the join token" "$PARAMETER"
  assert_output_contains "\"Message\":\"User: arn:aws:sts::123456789012:assumed-role/gpu-cluster-node/i-0abc is not authorized to perform: ssm:GetParameter"
  [ ! -e "$GPU_CLUSTER_ROOT/etc/k0s/worker-token" ]
  refute_called '^k0s '
}

@test "join-worker: a missing SSM parameter fails with AWS's answer" {
  token_in_ssm
  export K0S_JOIN_TOKEN_SSM_PARAMETER=/gpu-cluster/dev/join-token/h100
  run_script k0s/join-worker.sh
  [ "$status" -eq 1 ]
  assert_output_contains "could not read the join token from SSM parameter /gpu-cluster/dev/join-token/h100 in eu-central-1 after 10 attempts; last error: HTTP 400: {\"__type\":\"ParameterNotFound\""
  assert_no_state_changes
}

@test "join-worker: an empty SSM value is not a token" {
  token_in_ssm
  ssm_parameter eu-central-1 "$PARAMETER" ""
  run_script k0s/join-worker.sh
  [ "$status" -eq 1 ]
  assert_output_contains "after 10 attempts; last error: the parameter value is empty"
  [ ! -e "$GPU_CLUSTER_ROOT/etc/k0s/worker-token" ]
}

@test "join-worker: without python3 the SSM parameter cannot be read" {
  token_in_ssm
  hide_command python3
  run_script k0s/join-worker.sh
  assert_refused "gpu-cluster: moscow: join-worker: the python3 command is not installed; it is needed to read the join token from SSM parameter $PARAMETER"
}

@test "join-worker: python3 and the reader are not needed once the worker has joined" {
  joined_with_ssm_token
  hide_command python3
  unset SSM_READER
  assert_idempotent k0s/join-worker.sh
}

@test "join-worker: an empty NODE_IP passes no --node-ip" {
  export NODE_IP=""
  run_script k0s/join-worker.sh
  assert_success
  assert_called '^k0s install worker --token-file /etc/k0s/worker-token --kubelet-extra-args=--max-pods=250 --labels='
  refute_called 'node-ip'
}

@test "join-worker: no node IP and no extra kubelet args pass no --kubelet-extra-args" {
  export NODE_IP="" KUBELET_EXTRA_ARGS=""
  run_script k0s/join-worker.sh
  assert_success
  assert_called '^k0s install worker --token-file /etc/k0s/worker-token --labels=gpu-cluster\.io/gpu=true --taints=nvidia\.com/gpu=present:NoSchedule --profile=gpu --kubelet-root-dir=/var/lib/kubelet$'
  refute_called 'kubelet-extra-args'
  assert_idempotent k0s/join-worker.sh
}

@test "join-worker: dropping the node IP reinstalls the service without it" {
  run_again_with k0s/join-worker.sh NODE_IP=""
  assert_reinstalled '--kubelet-extra-args=--max-pods=250 --labels='
}

@test "join-worker: missing inputs of the SSM way are named at once" {
  unset K0S_VERSION K0S_JOIN_TOKEN NODE_IP AWS_REGION SSM_READER
  export K0S_JOIN_TOKEN_SSM_PARAMETER=$PARAMETER
  run_script k0s/join-worker.sh
  assert_refused "gpu-cluster: moscow: join-worker: missing required environment variable(s): NODE_IP; missing required environment variable(s): AWS_REGION SSM_READER (needed to read the join token from SSM parameter $PARAMETER)"
  refute_output_contains "K0S_JOIN_TOKEN "
}

@test "join-worker: without a token or a parameter both ways are named" {
  unset K0S_JOIN_TOKEN K0S_JOIN_TOKEN_SSM_PARAMETER AWS_REGION
  run_script k0s/join-worker.sh
  assert_refused "missing required environment variable(s): K0S_JOIN_TOKEN; instead of K0S_JOIN_TOKEN, K0S_JOIN_TOKEN_SSM_PARAMETER with AWS_REGION and SSM_READER may name an SSM SecureString holding the token"
}

@test "join-worker: a malformed parameter name and region are named at once" {
  token_in_ssm
  export K0S_JOIN_TOKEN_SSM_PARAMETER="gpu cluster/token" AWS_REGION=Frankfurt SSM_READER=""
  hide_command python3
  run_script k0s/join-worker.sh
  assert_refused "K0S_JOIN_TOKEN_SSM_PARAMETER is not an SSM parameter name (e.g. /gpu-cluster/dev/join-token/a100): 'gpu cluster/token'; AWS_REGION is not an AWS region (e.g. eu-central-1): 'Frankfurt'; missing required environment variable(s): SSM_READER (needed to read the join token from SSM parameter gpu cluster/token); the python3 command is not installed"
}

@test "join-worker: a joined worker needs neither a token nor a parameter" {
  joined_with_ssm_token
  unset K0S_JOIN_TOKEN_SSM_PARAMETER AWS_REGION SSM_READER
  assert_idempotent k0s/join-worker.sh
  refute_called '^python3 '
}

@test "join-worker: an unset NODE_IP is still a missing input" {
  token_in_ssm
  unset NODE_IP
  run_script k0s/join-worker.sh
  assert_refused "missing required environment variable(s): NODE_IP"
}

@test "join-worker: asks the API in the token whether it accepts the token before joining" {
  run_script_watched k0s/join-worker.sh
  assert_success
  assert_called '^curl --silent --show-error --max-time 10 --output /dev/null --write-out %\{http_code\} --cacert /tmp/[^ ]+/ca\.crt --header @/tmp/[^ ]+/authorization https://10\.20\.0\.10:6443/version$'
  # Before anything on the host changes: the k0s download is the first change.
  assert_call_order '^curl .*/version$' '^curl .*/k0s-v1\.34\.1%2Bk0s\.0-amd64$'
  [[ "$stderr" == *"the API at https://10.20.0.10:6443 accepts the join token"* ]]
  # The bootstrap token travels in a private file, never on a command line.
  [ -s "$STUB_STATE/env.log" ]
  refute_leaked "$BEARER"
}

@test "join-worker: an expired or deleted token fails before the join, naming the cure" {
  export STUB_API_TOKEN_STATUS=401 \
    K0S_JOIN_ISSUER_URN='urn:pulumi:dev::gpu-cluster::gpu-cluster:cluster:ControlPlane$gpu-cluster:host:RemoteStep::moscow-create-join-token'
  run_script k0s/join-worker.sh
  [ "$status" -eq 1 ]
  assert_output_contains "gpu-cluster: moscow: join-worker: the API at https://10.20.0.10:6443 refuses the join token (HTTP 401): it has expired or was deleted; issue a new one: pulumi up --replace '$K0S_JOIN_ISSUER_URN'"
  refute_called '^curl .*/releases/'
  [ ! -e "$GPU_CLUSTER_ROOT/usr/local/bin/k0s" ]
  [ ! -e "$GPU_CLUSTER_ROOT/etc/k0s/worker-token" ]
  [[ "$output" != *"$BEARER"* ]]
}

@test "join-worker: without the URN, the cure points to the README" {
  export STUB_API_TOKEN_STATUS=401
  run_script k0s/join-worker.sh
  [ "$status" -eq 1 ]
  assert_output_contains "(HTTP 401): it has expired or was deleted; issue a new one: pulumi up --replace on the resource that made it (docs/layouts.md: Join tokens)"
}

@test "join-worker: waits for an API that does not answer yet" {
  export STUB_API_DOWN_TIMES=2
  run_script k0s/join-worker.sh
  assert_success
  [ "$(grep -c '^curl .*/version$' "$STUB_CALLS")" -eq 3 ]
  assert_output_contains "waiting up to 120s for the API at https://10.20.0.10:6443 to answer" \
    "the API at https://10.20.0.10:6443 accepts the join token"
}

@test "join-worker: a value that is not a k0s join token is refused" {
  export K0S_JOIN_TOKEN='not-a-token'
  run_script k0s/join-worker.sh
  assert_refused "join-worker: the join token is not a k0s join token (base64 of a gzipped kubeconfig)"
}

@test "join-worker: a token whose kubeconfig has no https server is refused" {
  K0S_JOIN_TOKEN="$(k0s_join_token "$BEARER" 'http://10.20.0.10:6443')"
  run_script k0s/join-worker.sh
  [ "$status" -eq 1 ]
  assert_output_contains "the join token's kubeconfig lacks an https server, a CA or a bootstrap token"
}

@test "join-worker: K0S_JOIN_ISSUER_URN must be a URN" {
  export K0S_JOIN_ISSUER_URN=$'urn:pulumi:dev\n$(reboot)'
  run_script k0s/join-worker.sh
  assert_refused "K0S_JOIN_ISSUER_URN must be a Pulumi URN"
}

# on_ec2: a pool instance's inputs: the AWS cloud provider (the stubbed IMDS gives
# aws:///eu-central-1c/i-0fedcba9876543210).
on_ec2() {
  export K0S_CLOUD_PROVIDER=aws STUB_ZONE=eu-central-1c STUB_INSTANCE_ID=i-0fedcba9876543210
  export_ssm_reader
}

@test "join-worker: an EC2 node runs with the cloud provider and its providerID from IMDS" {
  # What cloud-provider-aws finds an instance by; k0s's --enable-cloud-provider gives the
  # kubelet --cloud-provider=external (pkg/component/worker/kubelet.go:157 at v1.36.3+k0s.2).
  on_ec2
  run_script k0s/join-worker.sh
  assert_success
  assert_called '^k0s install worker --token-file /etc/k0s/worker-token --enable-cloud-provider --kubelet-extra-args=--node-ip=192\.0\.2\.21 --max-pods=250 --provider-id=aws:///eu-central-1c/i-0fedcba9876543210 --labels=gpu-cluster\.io/gpu=true --taints=nvidia\.com/gpu=present:NoSchedule --profile=gpu --kubelet-root-dir=/var/lib/kubelet$'
  assert_call_order '^python3 - provider-id$' '^curl '
  assert_idempotent k0s/join-worker.sh
}

@test "join-worker: an EC2 node without a node IP or extra args still gets its providerID" {
  on_ec2
  export NODE_IP="" KUBELET_EXTRA_ARGS="" NODE_LABELS="" NODE_TAINTS="" K0S_PROFILE="" KUBELET_ROOT_DIR=""
  run_script k0s/join-worker.sh
  assert_success
  assert_called '^k0s install worker --token-file /etc/k0s/worker-token --enable-cloud-provider --kubelet-extra-args=--provider-id=aws:///eu-central-1c/i-0fedcba9876543210$'
}

@test "join-worker: a providerID EC2 metadata does not give stops the join before anything changes" {
  on_ec2
  remember_root
  export STUB_ZONE=../../etc
  run_script k0s/join-worker.sh
  [ "$status" -eq 1 ]
  assert_output_contains "gpu-cluster: moscow: join-worker: EC2 metadata gave 'aws:///../../etc/i-0fedcba9876543210', not a providerID aws:///ZONE/INSTANCE-ID"
  assert_no_state_changes
  assert_root_unchanged
}

@test "join-worker: an existing worker is switched to the cloud provider, once" {
  run_script k0s/join-worker.sh
  assert_success
  reset_calls
  on_ec2
  run_script k0s/join-worker.sh
  assert_reinstalled '--enable-cloud-provider --kubelet-extra-args=--node-ip=192\.0\.2\.21 --max-pods=250 --provider-id=aws:///eu-central-1c/i-0fedcba9876543210 '
}

@test "join-worker: K0S_CLOUD_PROVIDER takes aws alone, and aws needs SSM_READER" {
  K0S_CLOUD_PROVIDER=gce run_script k0s/join-worker.sh
  assert_refused "gpu-cluster: moscow: join-worker: K0S_CLOUD_PROVIDER must be empty or aws, got 'gce'"
  K0S_CLOUD_PROVIDER=aws run_script k0s/join-worker.sh
  assert_refused "gpu-cluster: moscow: join-worker: K0S_CLOUD_PROVIDER=aws needs SSM_READER (ssm-parameter.py) to read the instance's zone and id"
}
