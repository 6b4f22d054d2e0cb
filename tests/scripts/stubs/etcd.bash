# shellcheck shell=bash disable=SC2154 # state: set by stubs/stub, which sources this
# The etcd of a cluster of controllers, for stubs/stub (sourced by it; uses its $state):
# `k0s etcd member-list|leave`, `k0s kubectl` and RKE2's kubectl on EtcdMember objects,
# controller leases, autopilot ControlNodes and etcd nodes, and curl on RKE2's etcd HTTP
# listener. Each answer follows the real format, cited where it is made.
#   STUB_ETCD_MEMBERS="c1=10.20.0.11 ..."  the members: node name = peer address
#   STUB_ETCD_UNHEALTHY="c2 ..."  members that are down: their k0s controller lease expired,
#                         RKE2's EtcdIsVoter condition False (Unhealthy)
#   STUB_ETCD_NO_QUORUM=1  the local member has no leader
#   STUB_ETCD_REMOVAL_STUCK=1  RKE2 never answers a removal request
#   STUB_CONTROL_NODES="c1 ..."  k0s autopilot's ControlNode objects
# A member that left is $state/etcd-left-NAME; a deleted ControlNode $state/controlnode-deleted-NAME.

# etcd_stub_members: "name address" of every member that has not left.
etcd_stub_members() {
  local entry
  for entry in ${STUB_ETCD_MEMBERS:-}; do
    [[ -f "$state/etcd-left-${entry%%=*}" ]] || printf '%s %s\n' "${entry%%=*}" "${entry#*=}"
  done
}

etcd_stub_down() {
  [[ " ${STUB_ETCD_UNHEALTHY:-} " == *" $1 "* ]]
}

# RKE2's member name: the node name and 8 hex digits (k3s pkg/etcd/etcd.go setName; e.g.
# "server-0-c121eac1", rke2-docs docs/security/cis_self_assessment110.md:1775).
etcd_stub_rke2_name() {
  printf '%s-%s' "$1" "$(printf '%s' "$1" | sha256sum | cut -c1-8)"
}

# stub_k0s_etcd member-list | leave --peer-address ADDRESS
stub_k0s_etcd() {
  local name address entries=""
  case "$1" in
    member-list)
      # {"members":{NAME:PEER_URL,...}}, Go's encoding/json of a map: keys sorted, one line
      # (k0s cmd/etcd/list.go:53-61; docs/remove_controller.md:95).
      while read -r name address; do
        entries+="${entries:+,}\"$name\":\"https://$address:2380\""
      done < <(etcd_stub_members | LC_ALL=C sort)
      printf '{"members":{%s}}\n' "$entries"
      ;;
    leave)
      [[ "$2" == --peer-address ]] || { echo "stub k0s etcd leave: expected --peer-address" >&2; exit 2; }
      while read -r name address; do
        if [[ "$address" == "$3" ]]; then
          touch "$state/etcd-left-$name"
          echo "time=\"...\" level=info msg=\"Successfully deleted\" peerID=1a2b" >&2
          return 0
        fi
      done < <(etcd_stub_members)
      # pkg/etcd/client.go:193, returned by cmd/etcd/leave.go:56-60.
      echo "Error: peer not found: https://$3:2380" >&2
      exit 1
      ;;
    *) echo "stub k0s etcd: unsupported: $*" >&2; exit 2 ;;
  esac
}

# stub_etcd_kubectl ARGS...: answers the calls on etcd's objects (success), or fails for
# any other call, which stub_k0s_kubectl answers.
stub_etcd_kubectl() {
  local name address renew entry
  case "$*" in
    "get --raw=/readyz/etcd")
      if [[ -n "${STUB_ETCD_NO_QUORUM:-}" ]]; then
        # k8s.io/apiserver pkg/server/healthz: the failed check, then the verdict.
        printf '[-]etcd failed: reason withheld\nreadyz check failed\n' >&2
        exit 1
      fi
      printf ok
      ;;
    "get etcdmember -o jsonpath="*)
      # The EtcdMember objects (k0s pkg/apis/etcd/v1beta1/types.go:24-67): each joined
      # member's Joined True; one that left keeps its object, Joined False, reconcileStatus
      # Success (docs/remove_controller.md:86-91).
      for entry in ${STUB_ETCD_MEMBERS:-}; do
        name=${entry%%=*}
        if [[ -f "$state/etcd-left-$name" ]]; then
          printf '%s\tFalse\tSuccess\n' "$name"
        else
          printf '%s\tTrue\t\n' "$name"
        fi
      done
      ;;
    "get lease -n kube-node-lease -o jsonpath="*)
      # A running controller renews k0s-ctrl-NODE (pkg/component/controller/
      # controllersleasecounter.go:54-58); a down one's renewTime is ten minutes old.
      # renewTime is a MicroTime (RFC 3339 with microseconds).
      while read -r name address; do
        if etcd_stub_down "$name"; then
          renew="$(date -u -d '-10 minutes' +%Y-%m-%dT%H:%M:%S.000000Z)"
        else
          renew="$(date -u +%Y-%m-%dT%H:%M:%S.000000Z)"
        fi
        printf 'k0s-ctrl-%s\t%s\t60\n' "$name" "$renew"
      done < <(etcd_stub_members)
      printf 'kube-node-lease-holder\t%s\t15\n' "$(date -u +%Y-%m-%dT%H:%M:%S.000000Z)"
      ;;
    "get controlnode.autopilot.k0sproject.io "*" --ignore-not-found -o name")
      name=$3
      if [[ " ${STUB_CONTROL_NODES:-} " == *" $name "* && ! -f "$state/controlnode-deleted-$name" ]]; then
        echo "controlnode.autopilot.k0sproject.io/$name"
      fi
      ;;
    "delete controlnode.autopilot.k0sproject.io "*)
      touch "$state/controlnode-deleted-$3"
      echo "controlnode.autopilot.k0sproject.io \"$3\" deleted"
      ;;
    "get nodes --selector node-role.kubernetes.io/etcd=true -o jsonpath="*)
      # node, etcd.rke2.cattle.io/node-name, EtcdIsVoter status and reason (k3s pkg/etcd/
      # etcd.go setEtcdStatusCondition); a removed member's node keeps no name annotation
      # (member_controller.go sync) and is NotAMember.
      for entry in ${STUB_ETCD_MEMBERS:-}; do
        name=${entry%%=*}
        [[ ! -f "$state/deleted-$name" ]] || continue
        if [[ -f "$state/etcd-left-$name" ]]; then
          printf '%s\t\tFalse\tNotAMember\n' "$name"
        elif etcd_stub_down "$name"; then
          printf '%s\t%s\tFalse\tUnhealthy\n' "$name" "$(etcd_stub_rke2_name "$name")"
        else
          printf '%s\t%s\tTrue\tMemberNotLearner\n' "$name" "$(etcd_stub_rke2_name "$name")"
        fi
      done
      ;;
    "get node "*" -o jsonpath={.metadata.annotations.etcd\\.rke2\\.cattle\\.io/removed-node-name}")
      [[ ! -f "$state/etcd-left-$3" ]] || etcd_stub_rke2_name "$3"
      ;;
    "annotate node "*" etcd.rke2.cattle.io/remove=true --overwrite")
      [[ -n "${STUB_ETCD_REMOVAL_STUCK:-}" ]] || touch "$state/etcd-left-$3"
      echo "node/$3 annotated"
      ;;
    *) return 1 ;;
  esac
}

# stub_etcd_http URL CACERT CERT KEY: RKE2's etcd on its loopback HTTP listener, with its
# server certificate (which must exist, as curl needs it).
stub_etcd_http() {
  local file name address members=""
  for file in "$2" "$3" "$4"; do
    if [[ ! -r "$file" ]]; then
      echo "curl: (58) unable to set client certificate or key: $file" >&2
      exit 58
    fi
  done
  case "$1" in
    */health)
      # etcd's /health: 503 {"health":"false","reason":"RAFT NO LEADER"} without a leader
      # (server/etcdserver/api/etcdhttp/health.go); curl --fail prints no body then.
      if [[ -n "${STUB_ETCD_NO_QUORUM:-}" ]]; then
        echo "curl: (22) The requested URL returned error: 503" >&2
        exit 22
      fi
      echo '{"health":"true","reason":""}'
      ;;
    */v3/cluster/member/list)
      # MemberListResponse in the gateway's JSON (api/etcdserverpb/rpc.proto field names;
      # 64-bit integers as strings, the proto3 JSON mapping).
      while read -r name address; do
        members+="${members:+,}{\"ID\":\"$((0x$(printf '%s' "$name" | sha256sum | cut -c1-12)))\",\"name\":\"$(etcd_stub_rke2_name "$name")\",\"peerURLs\":[\"https://$address:2380\"],\"clientURLs\":[\"https://$address:2379\"]}"
      done < <(etcd_stub_members)
      printf '{"header":{"cluster_id":"14841639068965178418","member_id":"10276657743932975437","raft_term":"3"},"members":[%s]}\n' "$members"
      ;;
    *)
      echo "curl: (22) The requested URL returned error: 404" >&2
      exit 22
      ;;
  esac
}
