#!/usr/bin/env bash
# On a healthy server, before another is removed or replaced: RKE2 removes its etcd member
# (node annotation, k3s pkg/etcd/member_controller.go sync), then its node goes. Refused
# when the members that stay would lose their quorum; a member already gone is a no-op.
set -euo pipefail
# shellcheck source=lib.sh
[[ -n "${GPU_CLUSTER_RKE2_LIB_LOADED:-}" ]] || source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
# shellcheck source=etcd/lib.sh
[[ -n "${GPU_CLUSTER_RKE2_ETCD_LIB_LOADED:-}" ]] || source "$(dirname "${BASH_SOURCE[0]}")/etcd/lib.sh"
: "${GPU_CLUSTER_STEP:=leave-etcd}"

# Inputs: NODE_NAME MEMBER_NODE MEMBER_ADDRESS

# k3s gives a removal one minute (pkg/etcd/etcd.go memberRemovalTimeout) and retries.
REMOVAL_SECONDS=300

# member_removed NODE: success once k3s recorded the member of NODE as removed.
member_removed() {
  [[ -n "$(rke2_kubectl get node "$1" -o "jsonpath={.metadata.annotations.$RKE2_ETCD_REMOVED_ANNOTATION}")" ]]
}

# leave_etcd NAME ADDRESS: the member at https://ADDRESS:2380 leaves, when it is NAME's and
# the rest keep a quorum; nothing when no member is there.
leave_etcd() {
  rke2_etcd_members
  etcd_find_leaving "$1" "$2"
  [[ -n "$ETCD_LEAVING" ]] || return 0
  if [[ -z "$(rke2_kubectl get node "$1" --ignore-not-found -o name)" ]]; then
    die "etcd member of $1 ($2) remains but node $1 is gone; RKE2 removes a member only" \
      "through its node, so remove it with etcdctl member remove"
  fi
  rke2_kubectl annotate node "$1" "$RKE2_ETCD_REMOVE=true" --overwrite >&2
  wait_until "$REMOVAL_SECONDS" "RKE2 to remove the etcd member of $1" member_removed "$1"
  log "changed: etcd member of $1 ($2) removed"
}

main() {
  local name
  etcd_check_member_inputs
  name="${MEMBER_NODE,,}"
  leave_etcd "$name" "$MEMBER_ADDRESS"
  if [[ -z "$(rke2_kubectl get node "$name" --ignore-not-found -o name)" ]]; then
    log "no node $name; nothing to delete"
    return 0
  fi
  rke2_kubectl delete node "$name" >&2
  log "changed: deleted node $name"
}

main "$@"
