# shellcheck shell=bash disable=SC2154 # status, output: set by bats' run
# k0s/etcd-quorum.sh, rke2/etcd-quorum.sh, k0s/leave-etcd.sh and rke2/leave-etcd.sh on a
# controller of three: c1 (this host, 10.20.0.11), c2 and c3. The stubbed etcd
# (stubs/etcd.bash) follows what k0s and RKE2 answer. etcd-quorum.bats and
# member-removal.bats run each check with either distribution.

# k0s_etcd: a k0s controller (k0s on PATH, its kubectl the stub's `k0s kubectl`).
k0s_etcd() {
  DISTRIBUTION=k0s
  export STUB_CONTROL_NODES="c1 c2 c3"
  mkdir -p "$GPU_CLUSTER_ROOT/etc/systemd/system"
  touch "$GPU_CLUSTER_ROOT/etc/systemd/system/k0scontroller.service"
  etcd_members c1 c2 c3
}

# rke2_etcd: an RKE2 server: its kubectl, admin kubeconfig and etcd server certificate.
rke2_etcd() {
  DISTRIBUTION=rke2
  rke2_kubectl_installed
  local tls="$GPU_CLUSTER_ROOT/var/lib/rancher/rke2/server/tls/etcd"
  mkdir -p "$GPU_CLUSTER_ROOT/etc/rancher/rke2" "$tls"
  touch "$GPU_CLUSTER_ROOT/etc/rancher/rke2/rke2.yaml"
  # Stand-ins: curl is stubbed and only the paths it is given matter.
  echo "stand-in for RKE2's etcd CA certificate" >"$tls/server-ca.crt"
  echo "stand-in for RKE2's etcd client certificate" >"$tls/server-client.crt"
  echo "stand-in for RKE2's etcd client key" >"$tls/server-client.key"
  chmod 0600 "$tls/server-client.key"
  etcd_members c1 c2 c3
}

# etcd_members NAME...: the etcd members and their nodes, cN at 10.20.0.1N.
etcd_members() {
  local name entries=()
  for name in "$@"; do
    entries+=("$name=10.20.0.1${name#c}")
  done
  export STUB_ETCD_MEMBERS="${entries[*]}" STUB_NODES="$*"
}

# quorum_check [EXPECTED]: etcd-quorum on c1 expecting EXPECTED (default 3) members.
quorum_check() {
  export NODE_NAME=c1 NODE_ADDRESS=10.20.0.11 EXPECTED_MEMBERS="${1:-3}"
  run_script "$DISTRIBUTION/etcd-quorum.sh"
}

# leave NAME [ADDRESS]: leave-etcd on c1 for NAME (at 10.20.0.1N unless ADDRESS).
leave() {
  export NODE_NAME=c1 MEMBER_NODE=$1 MEMBER_ADDRESS="${2:-10.20.0.1${1#c}}"
  run_script "$DISTRIBUTION/leave-etcd.sh"
}

# unhealthy NAME: how the distribution names member NAME down (stubs/etcd.bash), as
# "NAME (why".
unhealthy() {
  if [[ "$DISTRIBUTION" == k0s ]]; then
    echo "$1 (its controller stopped renewing its lease k0s-ctrl-$1 at 20"
  else
    echo "$1 (EtcdIsVoter=False (Unhealthy))"
  fi
}

# assert_only_reads: no call changed the host or the cluster; curl only read RKE2's etcd
# (helpers.bash counts any curl as a download).
assert_only_reads() {
  local changing
  changing="$(grep -v '^curl .* https://127\.0\.0\.1:2382/' "$STUB_CALLS" |
    grep -E -- "$STATE_CHANGING|etcd leave|annotate node|delete " || true)"
  if [[ -n "$changing" ]]; then
    printf 'unexpected changing calls:\n%s\n' "$changing" >&2
    return 1
  fi
}

# assert_refused_upgrade TEXT...: etcd-quorum failed naming host, step and every TEXT, and
# changed nothing.
assert_refused_upgrade() {
  assert_failure || return 1
  assert_output_contains "gpu-cluster: $GPU_CLUSTER_HOST: etcd-quorum: refusing to take c1 down:" "$@" || return 1
  assert_only_reads
}

# assert_rerun_changes_nothing SCRIPT: SCRIPT runs again, successfully, changing no file,
# making only reads and logging no change.
assert_rerun_changes_nothing() {
  remember_root
  reset_calls
  run_script "$1"
  assert_success || return 1
  assert_root_unchanged || return 1
  assert_only_reads || return 1
  refute_changes_logged
}

# assert_member_left NAME: NAME's member left etcd, and its node (and, on k0s, its
# ControlNode) was deleted.
assert_member_left() {
  assert_success || return 1
  [[ -f "$STUB_STATE/etcd-left-$1" ]] || { echo "member $1 did not leave" >&2; return 1; }
  [[ -f "$STUB_STATE/deleted-$1" ]] || { echo "node $1 was not deleted" >&2; return 1; }
  if [[ "$DISTRIBUTION" == k0s ]]; then
    assert_called "^k0s etcd leave --peer-address 10\.20\.0\.1${1#c}\$" || return 1
    [[ -f "$STUB_STATE/controlnode-deleted-$1" ]] || { echo "ControlNode $1 was not deleted" >&2; return 1; }
    assert_call_order '^k0s etcd leave' "^k0s kubectl delete node $1\$"
  else
    assert_called "^kubectl --kubeconfig .* annotate node $1 etcd\.rke2\.cattle\.io/remove=true --overwrite\$" || return 1
    assert_call_order ' annotate node ' " delete node $1\$"
  fi
}

