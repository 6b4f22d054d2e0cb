#!/usr/bin/env bash
# Delete step of route-to-vpc: stops and removes the route unit and the routes it set (on
# EL9: the routes it added to a NetworkManager profile).
set -euo pipefail
# shellcheck source=lib.sh
[[ -n "${GPU_CLUSTER_LIB_LOADED:-}" ]] || source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
# shellcheck source=os/lib.sh
[[ -n "${GPU_CLUSTER_OS_LIB_LOADED:-}" ]] || source "$(dirname "${BASH_SOURCE[0]}")/os/lib.sh"
# shellcheck source=route/el9.sh
[[ -n "${GPU_CLUSTER_ROUTE_EL9_LOADED:-}" ]] || source "$(dirname "${BASH_SOURCE[0]}")/route/el9.sh"
: "${GPU_CLUSTER_STEP:=remove-route-to-vpc}"

# Inputs: GATEWAY_ADDRESS VPC_CIDR
# Optional inputs: TUNNEL_CIDR
# What they hold, the same as route-to-vpc.sh: VPC_CIDR and GATEWAY_ADDRESS
# (required), TUNNEL_CIDR (optional).
UNIT=gpu-cluster-route-vpc
KEEP_ROUTES_FILE=/etc/systemd/networkd.conf.d/60-gpu-cluster-keep-routes.conf

ubuntu_remove_route_to_vpc() {
  local cidr
  remove_unit "$UNIT" "restart-$UNIT"
  remove_file "$KEEP_ROUTES_FILE"
  for cidr in "$VPC_CIDR" ${TUNNEL_CIDR:+"$TUNNEL_CIDR"}; do
    if [[ " $(ip -4 route show exact "$cidr") " == *" via $GATEWAY_ADDRESS "* ]]; then
      ip route del "$cidr" via "$GATEWAY_ADDRESS"
      log "changed: removed the route to $cidr via $GATEWAY_ADDRESS"
    else
      log "unchanged: no route to $cidr via $GATEWAY_ADDRESS"
    fi
  done
}

main() {
  require_env VPC_CIDR GATEWAY_ADDRESS
  : "${TUNNEL_CIDR:=}"
  os_do remove_route_to_vpc
}

main "$@"
