#!/usr/bin/env bash
# Delete step of host-firewall (the host left the cluster, or hostFirewall.enabled is
# false): deletes the table inet gpu_cluster and removes its unit and file. The nftables
# package stays, and so does every other table.
set -euo pipefail
# shellcheck source=lib.sh
[[ -n "${GPU_CLUSTER_LIB_LOADED:-}" ]] || source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
: "${GPU_CLUSTER_STEP:=remove-host-firewall}"

# It runs with host-firewall.sh's inputs and reads none.
FAMILY=inet
NAME=gpu_cluster
RULES_FILE=/etc/gpu-cluster/host-firewall.nft
UNIT=gpu-cluster-firewall

main() {
  # A oneshot unit without ExecStop: stopping it leaves the table, deleted below.
  remove_unit "$UNIT" "reload-$UNIT"
  remove_file "$RULES_FILE"
  if command -v nft >/dev/null 2>&1 && nft list table "$FAMILY" "$NAME" >/dev/null 2>&1; then
    nft delete table "$FAMILY" "$NAME"
    log "changed: deleted table $FAMILY $NAME"
  else
    log "unchanged: no table $FAMILY $NAME"
  fi
}

main "$@"
