#!/usr/bin/env bash
# RKE2's etcd members as etcd/lib.sh's member table, read on a server. RKE2 ships no
# etcdctl; etcd's JSON gateway (etcd.io/docs/v3.6/dev-guide/api_grpc_gateway) answers on
# the loopback HTTP listener k3s gives it, https://127.0.0.1:2382 (k3s pkg/etcd/etcd.go
# listenClientHTTPURLs: the client port 2379 serves gRPC only, etcd-io/etcd#15402), with
# etcd's own server certificate, which is also a client one
# (rke2-docs docs/security/cis_self_assessment110.md:1748-1760). Each member's health is
# the EtcdIsVoter condition the etcd leader keeps on its node (k3s pkg/etcd/etcd.go
# manageLearners, setEtcdStatusCondition: True "MemberNotLearner", False "Unhealthy" when
# its status call fails).
# shellcheck shell=bash disable=SC2034 # its globals are read by the scripts that source it

# ShellCheck resolves a `source=` path from the folder of the file it was asked to check
# (.shellcheckrc: source-path=SCRIPTDIR), so from this folder, one level deeper than the
# others, the libraries' own directives name the wrong files, and following them took
# minutes; each library is checked on its own instead.
# shellcheck source=/dev/null # <distribution>/lib.sh, checked on its own (note above)
[[ -n "${GPU_CLUSTER_RKE2_LIB_LOADED:-}" ]] || source "$(dirname "${BASH_SOURCE[0]}")/../lib.sh"
# shellcheck source=/dev/null # etcd/lib.sh, checked on its own (note above)
[[ -n "${GPU_CLUSTER_ETCD_LIB_LOADED:-}" ]] || source "$(dirname "${BASH_SOURCE[0]}")/../../etcd/lib.sh"

GPU_CLUSTER_RKE2_ETCD_LIB_LOADED=1
RKE2_ETCD_TLS=$RKE2_DATA_DIR/server/tls/etcd
RKE2_ETCD_HTTP=https://127.0.0.1:2382
# k3s's node annotations and label for etcd (version.Program is "rke2"): the member name on
# its node (pkg/etcd/etcd.go NodeNameAnnotation), the removal request and its answer
# (pkg/etcd/member_controller.go removalAnnotation, removedNodeNameAnnotation), and the
# label of etcd nodes (getETCDNodes: node-role.kubernetes.io/etcd=true).
RKE2_ETCD_NAME_ANNOTATION='etcd\.rke2\.cattle\.io/node-name'
RKE2_ETCD_REMOVE=etcd.rke2.cattle.io/remove
RKE2_ETCD_REMOVED_ANNOTATION='etcd\.rke2\.cattle\.io/removed-node-name'
RKE2_ETCD_LABEL='node-role.kubernetes.io/etcd=true'
# A member's JSON in the gateway's answer (etcdserverpb.Member with its proto field names:
# ID, name, peerURLs, clientURLs, isLearner; api/etcdserverpb/rpc.proto): no nested object.
RKE2_ETCD_MEMBER_JSON='\{[^{}]*\}'

# rke2_etcd_http PATH [BODY]: etcd's HTTP answer at PATH (a POST of BODY when given).
rke2_etcd_http() {
  curl --silent --show-error --fail --max-time 10 \
    --cacert "$ROOT$RKE2_ETCD_TLS/server-ca.crt" --cert "$ROOT$RKE2_ETCD_TLS/server-client.crt" \
    --key "$ROOT$RKE2_ETCD_TLS/server-client.key" ${2:+--data "$2"} "$RKE2_ETCD_HTTP$1"
}

# rke2_etcd_member_health MEMBER JSON NODES: "healthy", or why member MEMBER (its JSON) is
# not; NODES: "node<TAB>member name<TAB>EtcdIsVoter status<TAB>reason" lines.
rke2_etcd_member_health() {
  local status reason
  if [[ "$2" == *'"isLearner":true'* ]]; then
    echo "a learner, not yet a voting member"
  elif ! IFS=$'\t' read -r _ _ status reason < <(awk -F '\t' -v m="$1" '$2 == m' <<<"$3"); then
    echo "no etcd node carries its name"
  elif [[ "$status" != True ]]; then
    echo "EtcdIsVoter=${status:-unknown}${reason:+ ($reason)}"
  else
    echo healthy
  fi
}

# rke2_etcd_members: fills the member table, named by node, after this server's etcd
# answered healthy (/health: {"health":"true"} once it has a leader and no alarm,
# etcd.io/docs/v3.6/op-guide/monitoring, "Health Check"); dies naming what it could not read.
rke2_etcd_members() {
  local output nodes rest member name peer node
  if ! output="$(rke2_etcd_http /health 2>&1)" || [[ "$output" != *'"health":"true"'* ]]; then
    die "this server's etcd is not healthy (no leader, so no quorum, or an alarm): ${output:-no answer}"
  fi
  if ! output="$(rke2_etcd_http /v3/cluster/member/list '{}' 2>&1)"; then
    die "could not list the etcd members ($RKE2_ETCD_HTTP/v3/cluster/member/list): $output"
  fi
  nodes="$(rke2_kubectl get nodes --selector "$RKE2_ETCD_LABEL" -o \
    "jsonpath={range .items[*]}{.metadata.name}{\"\\t\"}{.metadata.annotations.$RKE2_ETCD_NAME_ANNOTATION}{\"\\t\"}{.status.conditions[?(@.type==\"EtcdIsVoter\")].status}{\"\\t\"}{.status.conditions[?(@.type==\"EtcdIsVoter\")].reason}{\"\\n\"}{end}")"
  if [[ "$output" != *'"members":['* ]]; then
    die "unexpected answer to the etcd member list: $output"
  fi
  rest=${output#*'"members":['}
  while [[ "$rest" =~ ^,?($RKE2_ETCD_MEMBER_JSON) ]]; do
    member=${BASH_REMATCH[1]}
    rest=${rest#"${BASH_REMATCH[0]}"}
    name="" peer=""
    [[ ! "$member" =~ \"name\":\"([^\"]*)\" ]] || name=${BASH_REMATCH[1]}
    [[ ! "$member" =~ \"peerURLs\":\[\"([^\"]*)\" ]] || peer=${BASH_REMATCH[1]}
    if [[ ! "$name" =~ ^[A-Za-z0-9._-]+$ ]]; then
      die "etcd lists a member without a valid name (not started yet?): $member"
    fi
    node="$(awk -F '\t' -v m="$name" '$2 == m { print $1; exit }' <<<"$nodes")"
    etcd_add_member "${node:-$name}" "$peer" "$(rke2_etcd_member_health "$name" "$member" "$nodes")"
  done
  if [[ "$rest" != ']'* ]]; then
    die "unexpected answer to the etcd member list: $output"
  fi
}
