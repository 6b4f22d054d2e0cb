#!/usr/bin/env bash
# A persistent route from this on-prem host to the VPC (and the VPN's tunnel network)
# through the on-prem VPN gateway: on Ubuntu a oneshot systemd unit that sets it at every boot,
# on EL9 a route of the NetworkManager profile of the interface that reaches the gateway.
set -euo pipefail
# shellcheck source=lib.sh
[[ -n "${GPU_CLUSTER_LIB_LOADED:-}" ]] || source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
# shellcheck source=os/lib.sh
[[ -n "${GPU_CLUSTER_OS_LIB_LOADED:-}" ]] || source "$(dirname "${BASH_SOURCE[0]}")/os/lib.sh"
# The EL9 family's way (os_do): NetworkManager.
# shellcheck source=route/el9.sh
[[ -n "${GPU_CLUSTER_ROUTE_EL9_LOADED:-}" ]] || source "$(dirname "${BASH_SOURCE[0]}")/route/el9.sh"
: "${GPU_CLUSTER_STEP:=route-to-vpc}"

# Inputs: GATEWAY_ADDRESS VPC_CIDR
# Optional inputs: TUNNEL_CIDR
#   VPC_CIDR         required: the VPC's network, e.g. 10.20.0.0/16
#   GATEWAY_ADDRESS  required: the on-prem VPN gateway's LAN address
#   TUNNEL_CIDR      optional: the VPN's tunnel network, routed the same way so that
#                    traffic from the VPN server and VPN clients (admins) finds its way
#                    back; empty routes the VPC only
UNIT=gpu-cluster-route-vpc
UNIT_FILE="/etc/systemd/system/$UNIT.service"
# systemd-networkd drops routes it did not configure whenever it (re)starts, this one
# and the CNI's among them, unless told not to: networkd.conf(5), ManageForeignRoutes=
# ("When true, systemd-networkd will remove routes that are not configured in .network
# files"; systemd 246 and later). Read at its next start, which is when it matters.
KEEP_ROUTES_FILE=/etc/systemd/networkd.conf.d/60-gpu-cluster-keep-routes.conf
ROUTE_CIDRS=()
OLD_ROUTES=()
UNIT_CHANGED=0

# check_inputs: dies naming every missing or invalid input at once. Sets ROUTE_CIDRS.
check_inputs() {
  local name
  : "${TUNNEL_CIDR:=}"
  check_missing_env VPC_CIDR GATEWAY_ADDRESS
  for name in VPC_CIDR TUNNEL_CIDR; do
    if [[ -n "${!name:-}" ]] && ! valid_ipv4_cidr "${!name}"; then
      INPUT_PROBLEMS+=("$name must be an IPv4 CIDR such as 10.20.0.0/16, got '${!name}'")
    fi
  done
  if [[ -n "${GATEWAY_ADDRESS:-}" ]] && ! valid_ipv4 "$GATEWAY_ADDRESS"; then
    INPUT_PROBLEMS+=("GATEWAY_ADDRESS must be an IPv4 address such as 192.168.2.4, got '$GATEWAY_ADDRESS'")
  fi
  die_on_input_problems
  ROUTE_CIDRS=("$VPC_CIDR")
  if [[ -n "$TUNNEL_CIDR" && "$TUNNEL_CIDR" != "$VPC_CIDR" ]]; then
    ROUTE_CIDRS+=("$TUNNEL_CIDR")
  fi
}

# read_old_routes: OLD_ROUTES as "CIDR GATEWAY" from the unit an earlier run wrote.
read_old_routes() {
  local line
  OLD_ROUTES=()
  [[ -f "$ROOT$UNIT_FILE" ]] || return 0
  while IFS= read -r line; do
    if [[ "$line" =~ ^ExecStart=ip\ route\ replace\ ([0-9./]+)\ via\ ([0-9.]+)$ ]]; then
      OLD_ROUTES+=("${BASH_REMATCH[1]} ${BASH_REMATCH[2]}")
    fi
  done <"$ROOT$UNIT_FILE"
}

# route_present CIDR GATEWAY: the kernel routes CIDR via GATEWAY.
route_present() {
  [[ " $(ip -4 route show exact "$1") " == *" via $2 "* ]]
}

write_unit() {
  local cidr starts="" stops=""
  for cidr in "${ROUTE_CIDRS[@]}"; do
    starts+="ExecStart=ip route replace $cidr via $GATEWAY_ADDRESS"$'\n'
    stops+="ExecStop=-ip route del $cidr via $GATEWAY_ADDRESS"$'\n'
  done
  write_file "$UNIT_FILE" 0644 <<EOF
# Managed by gpu-cluster (route-to-vpc); changes are overwritten.
[Unit]
Description=gpu-cluster: route ${ROUTE_CIDRS[*]} via the on-prem VPN gateway $GATEWAY_ADDRESS
Wants=network-online.target
After=network-online.target

[Service]
Type=oneshot
RemainAfterExit=yes
${starts}${stops}
[Install]
WantedBy=multi-user.target
EOF
  if needs_follow_up "$FILE_CHANGED" "restart-$UNIT"; then
    UNIT_CHANGED=1
  fi
}

# remove_old_routes: routes an earlier run set up that the inputs no longer ask for.
remove_old_routes() {
  local old cidr gateway
  for old in "${OLD_ROUTES[@]}"; do
    read -r cidr gateway <<<"$old"
    if [[ "$gateway" == "$GATEWAY_ADDRESS" && " ${ROUTE_CIDRS[*]} " == *" $cidr "* ]]; then
      continue
    fi
    if route_present "$cidr" "$gateway"; then
      ip route del "$cidr" via "$gateway"
      log "changed: removed the old route to $cidr via $gateway"
    fi
  done
}

# ensure_unit: enabled and started; restarted when the unit changed (or an earlier run's
# restart failed), and when a route it sets went missing (a network reconfiguration).
ensure_unit() {
  local cidr missing=()
  if systemctl is-active --quiet "$UNIT"; then
    for cidr in "${ROUTE_CIDRS[@]}"; do
      route_present "$cidr" "$GATEWAY_ADDRESS" || missing+=("$cidr")
    done
  fi
  if ((${#missing[@]} > 0)); then
    log "restarting $UNIT to restore the route(s) to ${missing[*]}"
    UNIT_CHANGED=1
  fi
  ensure_unit_running "$UNIT" "$UNIT_CHANGED"
  for cidr in "${ROUTE_CIDRS[@]}"; do
    if ! route_present "$cidr" "$GATEWAY_ADDRESS"; then
      die "$UNIT is active but there is no route to $cidr via $GATEWAY_ADDRESS (see journalctl -u $UNIT)"
    fi
  done
}

# keep_routes_across_networkd_restarts: the networkd drop-in above.
keep_routes_across_networkd_restarts() {
  write_file "$KEEP_ROUTES_FILE" 0644 <<'EOF'
# Managed by gpu-cluster (route-to-vpc): keep routes networkd did not configure (the
# route to the VPC, the CNI's) when systemd-networkd restarts.
[Network]
ManageForeignRoutes=no
EOF
}

# ubuntu_route_to_vpc: the unit, and networkd told to keep the routes it did not make.
ubuntu_route_to_vpc() {
  keep_routes_across_networkd_restarts
  read_old_routes
  write_unit
  remove_old_routes
  ensure_unit
}

main() {
  check_inputs
  os_do route_to_vpc
  log "${ROUTE_CIDRS[*]} routed via $GATEWAY_ADDRESS"
}

main "$@"
