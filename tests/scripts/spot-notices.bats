#!/usr/bin/env bats
# EC2 Spot notices on a pool instance: the boot step aws/spot-notices.sh, and the service it
# installs, aws/spot-notice-handler.sh, run here against IMDSv2 on loopback
# (tests/scripts/spot_imds.py, with real curl) and a kubectl stub that records its calls and
# keeps the node's pods (tests/scripts/stubs/spot-kubectl), at the kubelet kubeconfig path
# k0s gives (k0s.py node_kubectl). `sleep` is stubbed: polls follow each other at once.

bats_require_minimum_version 1.5.0
load helpers

NODE=ip-10-0-1-23
KUBELET="kubectl --kubeconfig /var/lib/k0s/kubelet.conf --request-timeout=10s"
INTERRUPTION=latest/meta-data/spot/instance-action
REBALANCE=latest/meta-data/events/recommendations/rebalance

setup() {
  setup_host
  # The handler's own curl reaches the loopback IMDS.
  remove_stub curl
  export STUB_HOSTNAME=IP-10-0-1-23
  mkdir -p "$GPU_CLUSTER_ROOT/usr/local/bin"
  ln -s "$TESTS_DIR/stubs/spot-kubectl" "$GPU_CLUSTER_ROOT/usr/local/bin/k0s"
  export NODE_KUBECTL="/usr/local/bin/k0s kubectl --kubeconfig /var/lib/k0s/kubelet.conf"
  export SPOT_NOTICE_STATE="$BATS_TEST_TMPDIR/spot-state"
  # The node's pods: a DaemonSet's, a static (mirror) pod, two a drain evicts, one without
  # a controller, and one already terminating.
  cat >"$STUB_STATE/pods" <<'EOF'
kube-system|nvidia-device-plugin-x7k2p|DaemonSet||
kube-system|kube-proxy-ip-10-0-1-23|Node|4b1c9d|
team-a|train-llm-0|Job||
team-b|notebook-7d9f-abcde|ReplicaSet||
team-b|scratch||
team-c|finished-run-1|Job||2026-11-29T10:00:00Z
EOF
}

teardown() {
  if [[ -n "${IMDS_PID:-}" ]]; then
    kill "$IMDS_PID" 2>/dev/null || true
  fi
}

# start_imds: serves IMDSv2 on a free loopback port; IMDS_ENDPOINT points there.
start_imds() {
  IMDS_DIR="$BATS_TEST_TMPDIR/imds"
  mkdir -p "$IMDS_DIR"
  (cd "$REPO_ROOT" && exec "$PYTHON" -m tests.scripts.spot_imds "$IMDS_DIR") \
    </dev/null >"$BATS_TEST_TMPDIR/imds.log" 2>&1 3>&- &
  IMDS_PID=$!
  local tries=100
  until [[ -s "$IMDS_DIR/port" ]]; do
    ((tries-- > 0)) || { cat "$BATS_TEST_TMPDIR/imds.log" >&2; return 1; }
    /bin/sleep 0.1
  done
  IMDS_ENDPOINT="http://127.0.0.1:$(<"$IMDS_DIR/port")"
  export IMDS_ENDPOINT
}

# announce PATH BODY: the IMDS item PATH holds BODY from now on.
announce() {
  mkdir -p "$IMDS_DIR/items/${1%/*}"
  printf '%s' "$2" >"$IMDS_DIR/items/$1"
}

# run_handler POLLS: the service's program, polling POLLS times.
run_handler() {
  SPOT_NOTICE_POLLS=$1 run bash "$SCRIPTS_DIR/aws/spot-notice-handler.sh"
}

# kubectl_calls: the kubectl calls made, one a line.
kubectl_calls() {
  grep '^kubectl ' "$STUB_CALLS" || true
}

list_pods() {
  printf '%s\n' "$KUBELET get pods --all-namespaces --field-selector spec.nodeName=$NODE -o jsonpath={range .items[*]}{.metadata.namespace}{\"|\"}{.metadata.name}{\"|\"}{.metadata.ownerReferences[?(@.controller==true)].kind}{\"|\"}{.metadata.annotations.kubernetes\.io/config\.mirror}{\"|\"}{.metadata.deletionTimestamp}{\"\n\"}{end}"
}

evict_call() {
  printf '%s\n' "$KUBELET create --raw /api/v1/namespaces/$1/pods/$2/eviction -f -"
}

# assert_kubectl_calls LINE...: the kubectl calls made, exactly these in this order.
assert_kubectl_calls() {
  local expected actual
  expected="$(printf '%s\n' "$@")"
  actual="$(kubectl_calls)"
  if [[ "$actual" != "${expected%$'\n'}" ]]; then
    printf 'kubectl calls:\n%s\n--- expected:\n%s\n--- handler output:\n%s\n' "$actual" \
      "$expected" "$output" >&2
    return 1
  fi
}

# drain_calls: what a drain of the node above calls: the listing, an eviction of each pod
# not a DaemonSet's nor static and not being deleted, in the listing's order; a listing that
# finds them terminating; a last one that finds only the DaemonSet and static pods.
drain_calls() {
  printf '%s\n' "$(list_pods)" "$(evict_call team-a train-llm-0)" \
    "$(evict_call team-b notebook-7d9f-abcde)" "$(evict_call team-b scratch)" \
    "$(list_pods)" "$(list_pods)"
}

# assert_cordoned_and_drained: the kubectl calls were the cordon, then drain_calls.
assert_cordoned_and_drained() {
  local drain
  mapfile -t drain < <(drain_calls)
  assert_kubectl_calls "$KUBELET cordon $NODE" "${drain[@]}"
}

@test "spot-notices: an interruption notice cordons the node, then evicts its pods in order, DaemonSet and static pods left" {
  start_imds
  announce "$INTERRUPTION" '{"action": "terminate", "time": "2026-11-29T10:02:00Z"}'
  run_handler 1
  assert_success
  assert_cordoned_and_drained
  [[ -f "$STUB_STATE/cordoned-$NODE" ]]
  [[ "$(<"$STUB_STATE/pods")" == "kube-system|nvidia-device-plugin-x7k2p|DaemonSet||
kube-system|kube-proxy-ip-10-0-1-23|Node|4b1c9d|" ]]
  # Each pod gets at most 45 s to stop, within the two minutes.
  [[ "$(grep -c '"deleteOptions":{"gracePeriodSeconds":45}' "$STUB_STATE/evictions.log")" == 3 ]]
  grep -qF '{"apiVersion":"policy/v1","kind":"Eviction","metadata":{"namespace":"team-a","name":"train-llm-0"}' \
    "$STUB_STATE/evictions.log"
  assert_output_contains "EC2 interrupts this Spot instance: terminate at 2026-11-29T10:02:00Z" \
    "cordoned node $NODE" "drained node $NODE: only DaemonSet and static pods are left"
  # IMDSv2: a token first, then both items with it.
  grep -qx "PUT /latest/api/token 200" "$IMDS_DIR/requests.log"
  grep -qx "GET /$INTERRUPTION 200" "$IMDS_DIR/requests.log"
  grep -qx "GET /$REBALANCE 404" "$IMDS_DIR/requests.log"
}

@test "spot-notices: an eviction a PodDisruptionBudget refuses is tried again in the next round" {
  start_imds
  announce "$INTERRUPTION" '{"action": "terminate", "time": "2026-11-29T10:02:00Z"}'
  STUB_PDB_PODS=train-llm-0 run_handler 1
  assert_success
  assert_kubectl_calls "$KUBELET cordon $NODE" "$(list_pods)" "$(evict_call team-a train-llm-0)" \
    "$(evict_call team-b notebook-7d9f-abcde)" "$(evict_call team-b scratch)" "$(list_pods)" \
    "$(evict_call team-a train-llm-0)" "$(list_pods)" "$(list_pods)"
  assert_output_contains "pod team-a/train-llm-0 not evicted yet: Error from server (TooManyRequests): Cannot evict pod as it would violate the pod's disruption budget." \
    "drained node $NODE"
}

@test "spot-notices: the same interruption notice polled again changes nothing" {
  start_imds
  announce "$INTERRUPTION" '{"action": "terminate", "time": "2026-11-29T10:02:00Z"}'
  run_handler 1
  assert_success
  reset_calls
  # The same service polling on, and the service restarted (its state kept).
  run_handler 3
  assert_success
  assert_kubectl_calls
  refute_output_contains "EC2 interrupts"
}

@test "spot-notices: a rebalance recommendation cordons the node and evicts nothing, once" {
  start_imds
  announce "$REBALANCE" '{"noticeTime": "2026-11-29T09:40:00Z"}'
  run_handler 2
  assert_success
  assert_kubectl_calls "$KUBELET cordon $NODE"
  [[ -f "$STUB_STATE/cordoned-$NODE" ]]
  [[ ! -e "$STUB_STATE/evictions.log" ]]
  assert_output_contains "EC2 recommends rebalancing away from this Spot instance (notice of 2026-11-29T09:40:00Z): running jobs go on"
  reset_calls
  run_handler 1
  assert_kubectl_calls
  # Then the interruption: the drain, although the node is cordoned already.
  announce "$INTERRUPTION" '{"action": "terminate", "time": "2026-11-29T10:02:00Z"}'
  run_handler 1
  assert_success
  assert_cordoned_and_drained
}

@test "spot-notices: no notice (an on-demand instance: both items 404) calls nothing" {
  start_imds
  run_handler 3
  assert_success
  assert_kubectl_calls
  [[ "$(grep -c "^GET /$INTERRUPTION 404$" "$IMDS_DIR/requests.log")" == 3 ]]
  [[ "$(grep -c "^GET /$REBALANCE 404$" "$IMDS_DIR/requests.log")" == 3 ]]
  # One token serves every poll.
  [[ "$(grep -c '^PUT ' "$IMDS_DIR/requests.log")" == 1 ]]
  refute_output_contains "fails"
}

@test "spot-notices: an unreachable IMDS is polled again, logged once, and drains nothing" {
  # A port nothing listens on.
  export IMDS_ENDPOINT=http://127.0.0.1:9
  run_handler 3
  assert_success
  assert_kubectl_calls
  [[ "$(grep -c "the instance metadata service at $IMDS_ENDPOINT fails" <<<"$output")" == 1 ]]
  [[ "$(grep -c '^sleep 5$' "$STUB_CALLS")" == 2 ]]
  [[ ! -e "$SPOT_NOTICE_STATE/interruption" ]]
  # Once it answers, a notice is acted on.
  start_imds
  announce "$INTERRUPTION" '{"action": "stop", "time": "2026-11-29T10:02:00Z"}'
  run_handler 1
  assert_success
  assert_called "^$KUBELET cordon $NODE\$"
}

@test "spot-notices: a refused token (401) is renewed and nothing is drained meanwhile" {
  start_imds
  announce "$INTERRUPTION" '{"action": "terminate", "time": "2026-11-29T10:02:00Z"}'
  : >"$IMDS_DIR/refuse-tokens"
  run_handler 2
  assert_success
  assert_kubectl_calls
  # A new token after each 401: both items of both polls asked for one.
  [[ "$(grep -c '^PUT /latest/api/token 200$' "$IMDS_DIR/requests.log")" == 4 ]]
  [[ "$(grep -c '^GET .* 401$' "$IMDS_DIR/requests.log")" == 4 ]]
  [[ "$(grep -c "fails (/$REBALANCE: HTTP 401" <<<"$output")" == 1 ]]
  rm "$IMDS_DIR/refuse-tokens"
  run_handler 1
  assert_success
  assert_cordoned_and_drained
}

@test "spot-notices: an item EC2 does not document is logged and not acted on" {
  start_imds
  announce "$INTERRUPTION" '{"action": "reboot", "time": "2026-11-29T10:02:00Z"}'
  announce "$REBALANCE" 'not json'
  run_handler 2
  assert_success
  assert_kubectl_calls
  assert_output_contains "spot/instance-action holds what EC2 does not document: '{\"action\": \"reboot\", \"time\": \"2026-11-29T10:02:00Z\"}'; not acted on" \
    "events/recommendations/rebalance holds what EC2 does not document: 'not json'; not acted on"
}

@test "spot-notices: an API that does not answer leaves the notice to the next poll" {
  start_imds
  announce "$INTERRUPTION" '{"action": "terminate", "time": "2026-11-29T10:02:00Z"}'
  STUB_API_DOWN=1 run_handler 2
  assert_success
  assert_output_contains "could not cordon node $NODE (kubectl's error above): trying again at the next poll"
  [[ "$(grep -c "^$KUBELET cordon $NODE\$" "$STUB_CALLS")" == 2 ]]
  refute_called "eviction"
  reset_calls
  run_handler 1
  assert_success
  assert_cordoned_and_drained
}

@test "spot-notices: refuses inputs it cannot use, naming them" {
  NODE_KUBECTL='kubectl; reboot' run bash "$SCRIPTS_DIR/aws/spot-notice-handler.sh"
  [[ "$status" == 2 ]]
  assert_output_contains "NODE_KUBECTL is not an absolute path followed by plain options: 'kubectl; reboot'"
  unset SPOT_NOTICE_STATE
  run bash "$SCRIPTS_DIR/aws/spot-notice-handler.sh"
  [[ "$status" == 2 ]]
  assert_output_contains "missing required environment variable(s): SPOT_NOTICE_STATE"
  assert_kubectl_calls
}

install_step() {
  SPOT_NOTICE_HANDLER="$(<"$SCRIPTS_DIR/aws/spot-notice-handler.sh")"
  export SPOT_NOTICE_HANDLER
}

@test "spot-notices step: installs and starts the service, the handler and its settings" {
  install_step
  run_script aws/spot-notices.sh
  assert_success
  assert_file /usr/local/libexec/gpu-cluster/spot-notice-handler "$SPOT_NOTICE_HANDLER"
  assert_mode /usr/local/libexec/gpu-cluster/spot-notice-handler 755
  assert_file /etc/gpu-cluster/spot-notices.env "NODE_KUBECTL=\"$NODE_KUBECTL\"
SPOT_NOTICE_STATE=/var/lib/gpu-cluster/spot-notices"
  grep -qx 'ExecStart=/usr/local/libexec/gpu-cluster/spot-notice-handler' \
    "$GPU_CLUSTER_ROOT/etc/systemd/system/gpu-cluster-spot-notices.service"
  grep -qx 'StateDirectory=gpu-cluster/spot-notices' \
    "$GPU_CLUSTER_ROOT/etc/systemd/system/gpu-cluster-spot-notices.service"
  assert_call_order '^systemctl daemon-reload$' '^systemctl enable gpu-cluster-spot-notices\.service$'
  assert_call_order '^systemctl enable gpu-cluster-spot-notices\.service$' \
    '^systemctl restart gpu-cluster-spot-notices\.service$'
  assert_idempotent aws/spot-notices.sh
}

@test "spot-notices step: systemd accepts the unit as written" {
  install_step
  run_script aws/spot-notices.sh
  assert_success
  assert_unit_verifies /etc/systemd/system/gpu-cluster-spot-notices.service
}

@test "spot-notices step: names every bad input at once" {
  export NODE_KUBECTL='k0s kubectl; reboot'
  run_script aws/spot-notices.sh
  assert_failure
  assert_output_contains "missing required environment variable(s): SPOT_NOTICE_HANDLER" \
    "NODE_KUBECTL is not an absolute path followed by plain options: 'k0s kubectl; reboot'"
  refute_called '^systemctl'
}
