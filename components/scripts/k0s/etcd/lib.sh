#!/usr/bin/env bash
# k0s's etcd members as etcd/lib.sh's member table, read on a controller. k0s serves etcd's
# client API on loopback only ("the etcd API is NOT exposed outside the nodes", k0s
# docs/remove_controller.md:52-53; pkg/component/controller/etcd.go:173-174), so another
# member's health is read from what its controller keeps in the API: its EtcdMember object
# and its controller lease.
# shellcheck shell=bash disable=SC2034 # its globals are read by the scripts that source it

# ShellCheck resolves a `source=` path from the folder of the file it was asked to check
# (.shellcheckrc: source-path=SCRIPTDIR), so from this folder, one level deeper than the
# others, the libraries' own directives name the wrong files, and following them took
# minutes; each library is checked on its own instead.
# shellcheck source=/dev/null # etcd/lib.sh, checked on its own (note above)
[[ -n "${GPU_CLUSTER_ETCD_LIB_LOADED:-}" ]] || source "$(dirname "${BASH_SOURCE[0]}")/../../etcd/lib.sh"

GPU_CLUSTER_K0S_ETCD_LIB_LOADED=1
# The unit `k0s install controller` writes and `k0s reset` removes (k0s docs/install.md,
# "Run k0s as a service"; components/distributions/k0s.py controller_file): a controller
# without it runs no etcd member yet.
K0S_CONTROLLER_UNIT=/etc/systemd/system/k0scontroller.service
# `k0s etcd member-list` prints {"members":{"NAME":"PEER_URL",...}} on one line (k0s
# cmd/etcd/list.go:53-61, a JSON-encoded map of member name to its first peer URL); each
# member's name is its host name (pkg/component/controller/etcd.go:160-166).
K0S_MEMBER_ENTRY='"([^"]+)":"([^"]*)"'

# k0s_etcd_member_health NAME MEMBERS LEASES NOW: "healthy", or why member NAME is not.
# MEMBERS: "name<TAB>Joined<TAB>reconcileStatus" lines of the EtcdMember objects (k0s
# pkg/apis/etcd/v1beta1/types.go:24-67: one per controller, named as its member; Joined
# False once it left, reconcileStatus Failed when k0s could not act on it).
# LEASES: "name<TAB>renewTime<TAB>leaseDurationSeconds" of kube-node-lease; a running
# controller renews its lease k0s-ctrl-<node name>
# (pkg/component/controller/controllersleasecounter.go:54-58), a stopped one lets it expire.
k0s_etcd_member_health() {
  local name=$1 joined reconcile renew duration renewed
  if ! IFS=$'\t' read -r _ joined reconcile < <(grep -F -- "$name"$'\t' <<<"$2" | head -n 1); then
    echo "no EtcdMember object"
    return 0
  fi
  if [[ "$joined" != True ]]; then
    echo "EtcdMember Joined=${joined:-unknown}"
  elif [[ "$reconcile" == Failed ]]; then
    echo "EtcdMember reconcileStatus=Failed"
  elif ! IFS=$'\t' read -r _ renew duration < <(grep -F -- "k0s-ctrl-$name"$'\t' <<<"$3" | head -n 1); then
    echo "its controller holds no lease k0s-ctrl-$name"
  elif [[ ! "$duration" =~ ^[0-9]+$ ]] || ! renewed="$(date -d "$renew" +%s 2>/dev/null)"; then
    echo "its controller lease has no valid renewal: '$renew' for '$duration's"
  elif ((renewed + duration < $4)); then
    echo "its controller stopped renewing its lease k0s-ctrl-$name at $renew"
  else
    echo healthy
  fi
}

# k0s_etcd_members: fills the member table from `k0s etcd member-list`, after this
# controller's API server found its etcd ready (/readyz/etcd: kubernetes.io/docs/reference/
# using-api/health-checks, one check per name); dies naming what it could not read.
k0s_etcd_members() {
  local output etcd_members leases rest name peer now
  if ! output="$(k0s kubectl get --raw=/readyz/etcd 2>&1)"; then
    die "this controller's API server finds etcd not ready (/readyz/etcd), so etcd has" \
      "no quorum here: ${output:-no answer}"
  fi
  if ! output="$(k0s etcd member-list 2>&1)"; then
    die "could not list the etcd members (k0s etcd member-list): $output"
  fi
  etcd_members="$(k0s kubectl get etcdmember -o \
    'jsonpath={range .items[*]}{.metadata.name}{"\t"}{.status.conditions[?(@.type=="Joined")].status}{"\t"}{.status.reconcileStatus}{"\n"}{end}')"
  leases="$(k0s kubectl get lease -n kube-node-lease -o \
    'jsonpath={range .items[*]}{.metadata.name}{"\t"}{.spec.renewTime}{"\t"}{.spec.leaseDurationSeconds}{"\n"}{end}')"
  now="$(date +%s)"
  if [[ "$output" != '{"members":{'*'}}' ]]; then
    die "unexpected output of k0s etcd member-list: $output"
  fi
  rest=${output#'{"members":{'}
  while [[ "$rest" =~ ^,?$K0S_MEMBER_ENTRY ]]; do
    name=${BASH_REMATCH[1]} peer=${BASH_REMATCH[2]}
    rest=${rest#"${BASH_REMATCH[0]}"}
    if [[ ! "$name" =~ $ETCD_NODE_NAME ]]; then
      die "etcd member name is not a node name: '$name'"
    fi
    etcd_add_member "$name" "$peer" \
      "$(k0s_etcd_member_health "$name" "$etcd_members" "$leases" "$now")"
  done
  if [[ "$rest" != '}}' ]]; then
    die "unexpected output of k0s etcd member-list: $output"
  fi
}
