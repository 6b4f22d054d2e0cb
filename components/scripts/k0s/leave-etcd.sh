#!/usr/bin/env bash
# On a healthy controller, before another is removed or replaced: its etcd member leaves,
# then its Node and autopilot ControlNode go (k0s docs/remove_controller.md:13-38). Refused
# when the members that stay would lose their quorum; a member already gone is a no-op.
set -euo pipefail
# shellcheck source=lib.sh
[[ -n "${GPU_CLUSTER_K0S_LIB_LOADED:-}" ]] || source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
# shellcheck source=etcd/lib.sh
[[ -n "${GPU_CLUSTER_K0S_ETCD_LIB_LOADED:-}" ]] || source "$(dirname "${BASH_SOURCE[0]}")/etcd/lib.sh"
: "${GPU_CLUSTER_STEP:=leave-etcd}"

# Inputs: NODE_NAME MEMBER_NODE MEMBER_ADDRESS

# k0s autopilot's per-controller object (docs/remove_controller.md:23-27).
CONTROL_NODE=controlnode.autopilot.k0sproject.io

# leave_etcd NAME ADDRESS: the member at https://ADDRESS:2380 leaves, when it is NAME's and
# the rest keep a quorum; nothing when no member is there.
leave_etcd() {
  k0s_etcd_members
  etcd_find_leaving "$1" "$2"
  [[ -n "$ETCD_LEAVING" ]] || return 0
  # --peer-address takes the address; k0s makes the URL https://ADDRESS:2380 (k0s
  # cmd/etcd/leave.go:49, 79-99).
  k0s etcd leave --peer-address "$2" >&2
  log "changed: etcd member $1 ($2) left"
}

# delete_object KIND NAME: deletes the object when it exists.
delete_object() {
  if [[ -z "$(k0s kubectl get "$1" "$2" --ignore-not-found -o name)" ]]; then
    log "no $1 $2; nothing to delete"
    return 0
  fi
  k0s kubectl delete "$1" "$2" >&2
  log "changed: deleted $1 $2"
}

main() {
  local name
  etcd_check_member_inputs
  name="${MEMBER_NODE,,}"
  leave_etcd "$name" "$MEMBER_ADDRESS"
  delete_object node "$name"
  delete_object "$CONTROL_NODE" "$name"
}

main "$@"
