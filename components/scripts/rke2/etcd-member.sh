#!/usr/bin/env bash
# On the first server after another joined: waits until that one's etcd member is healthy
# (etcd/lib.sh etcd_member_step). Its resource's delete is leave-etcd.sh: removing the server
# from the config takes its member out first. Reads only: a second run changes nothing.
set -euo pipefail
# shellcheck source=lib.sh
[[ -n "${GPU_CLUSTER_RKE2_LIB_LOADED:-}" ]] || source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
# shellcheck source=etcd/lib.sh
[[ -n "${GPU_CLUSTER_RKE2_ETCD_LIB_LOADED:-}" ]] || source "$(dirname "${BASH_SOURCE[0]}")/etcd/lib.sh"
: "${GPU_CLUSTER_STEP:=etcd-member}"

# Inputs: NODE_NAME MEMBER_NODE MEMBER_ADDRESS
# Optional inputs: MEMBER_WAIT_SECONDS
#   NODE_NAME       this server.
#   MEMBER_NODE     the server that joined, and MEMBER_ADDRESS its address (etcd's peer URL
#                   is https://MEMBER_ADDRESS:2380).
#   MEMBER_WAIT_SECONDS  how long to wait for it (default 300; one that joins at boot: its
#                   whole boot).

main() {
  etcd_member_step rke2_etcd_members
}

main "$@"
