# shellcheck shell=bash disable=SC2154,SC2034 # the scripts' UNIT, ROUTE_CIDRS...; globals they read
# route-to-vpc and route-to-vpc-remove on RHEL 9, Rocky Linux 9 and AlmaLinux 9 (os_do's el9_
# functions): the routes belong to the NetworkManager profile of the interface that reaches the
# gateway, since NetworkManager owns the network there. A record keeps what the program added,
# so the profile's other routes, the user's, are never touched.
#
# Why not the Ubuntu unit: when NetworkManager reapplies a device's configuration (a reapply,
# or the link coming back up: NetworkManager 1.42.4 src/core/devices/nm-device.c:6831-6843) it
# prunes every route of the device in the main table that its configuration does not hold,
# whoever added it: with ipv4.route-table 0, the default, its sync mode is "main"
# (nm-device.c:5213; nm-settings-nmcli(5), ipv4.route-table), and a reapply's prune list is
# every main-table route of the interface (src/core/nm-l3cfg.c:4629-4663,
# src/libnm-platform/nm-platform.c:4700 nm_platform_ip_route_get_prune_list).

GPU_CLUSTER_ROUTE_EL9_LOADED=1
# What route-to-vpc added to a profile: "connection=UUID", then "route=CIDR GATEWAY" lines.
NM_ROUTES_RECORD=/var/lib/gpu-cluster/route-to-vpc-nm
# Set by nm_find_connection: the interface that reaches the gateway, its active profile.
NM_DEVICE=""
NM_CONNECTION_UUID=""
NM_CONNECTION_NAME=""
# Set by nm_read_record: the profile the record names and the routes it lists.
NM_RECORD_UUID=""
NM_RECORD_ROUTES=()
# Set by nm_profile_routes: a profile's ipv4.routes, one "CIDR GATEWAY [METRIC] [ATTR=V...]" each.
NM_PROFILE_ROUTES=()

# nm_terse TEXT: TEXT, a value of nmcli's terse output (-t, -g), unescaped: nmcli writes a
# backslash before each ':' and '\' of a value (nmcli(1) --escape, default yes; NetworkManager
# 1.42.4 src/nmcli/utils.c:1719-1726).
nm_terse() {
  local text=$1 plain="" index
  for ((index = 0; index < ${#text}; index++)); do
    [[ "${text:index:1}" != "\\" ]] || index=$((index + 1))
    plain+=${text:index:1}
  done
  printf '%s\n' "$plain"
}

# nm_require_running: nmcli installed and NetworkManager running, else dies saying so.
nm_require_running() {
  command -v nmcli >/dev/null 2>&1 ||
    die "nmcli is not installed: on EL9 hosts the route to the VPC is kept in a NetworkManager" \
      "profile (dnf install NetworkManager)"
  systemctl is-active --quiet NetworkManager ||
    die "NetworkManager is not running: on EL9 hosts the route to the VPC is kept in the" \
      "NetworkManager profile of the interface that reaches $GATEWAY_ADDRESS; start and enable" \
      "NetworkManager.service, then run the step again"
}

# nm_find_connection: NM_DEVICE, the interface the kernel reaches GATEWAY_ADDRESS through,
# and NM_CONNECTION_UUID and NM_CONNECTION_NAME, the profile active on it. Dies when the
# gateway is not on one of the host's own networks or no profile is active on the device.
nm_find_connection() {
  local answer
  # iproute2 prints "ADDRESS [via GATEWAY] dev DEVICE src ADDRESS uid N" (ip-route(8), get).
  answer="$(ip -4 route get "$GATEWAY_ADDRESS")" ||
    die "ip route get $GATEWAY_ADDRESS failed: the host has no route to the gateway"
  answer=${answer%%$'\n'*}
  if [[ " $answer " == *" via "* || ! " $answer " =~ \ dev\ ([^ ]+)\  ]]; then
    die "GATEWAY_ADDRESS $GATEWAY_ADDRESS is not on a network of this host's interfaces" \
      "(ip route get: $answer): the route's next hop must be on-link"
  fi
  NM_DEVICE=${BASH_REMATCH[1]}
  # The profile by UUID, which nmcli prints unescaped and which no other profile shares (ids
  # may repeat): nmcli device show's GENERAL.CON-UUID (src/nmcli/devices.c, the GENERAL fields).
  NM_CONNECTION_UUID="$(nmcli -g GENERAL.CON-UUID device show "$NM_DEVICE")" ||
    die "nmcli could not show device $NM_DEVICE"
  if [[ -z "$NM_CONNECTION_UUID" ]]; then
    die "no NetworkManager connection is active on $NM_DEVICE, the interface that reaches" \
      "$GATEWAY_ADDRESS: activate its profile (nmcli device connect $NM_DEVICE) or let" \
      "NetworkManager manage it, then run the step again"
  fi
  NM_CONNECTION_NAME="$(nm_terse "$(nmcli -g GENERAL.CONNECTION device show "$NM_DEVICE")")"
}

# nm_profile_routes UUID: NM_PROFILE_ROUTES, the ipv4.routes of profile UUID. nmcli -g prints
# them joined by ", ", each "CIDR [NEXT-HOP] [METRIC] [ATTR=VALUE...]" (NetworkManager
# 1.42.4 src/libnmc-setting/nm-meta-setting-desc.c:3306-3330 _get_fcn_objlist and
# :3375-3405 the route), terse-escaped.
nm_profile_routes() {
  local value
  NM_PROFILE_ROUTES=()
  value="$(nm_terse "$(nmcli -g ipv4.routes connection show uuid "$1")")" ||
    die "nmcli could not show connection $1"
  [[ -n "$value" ]] || return 0
  value=${value//, /$'\n'}
  mapfile -t NM_PROFILE_ROUTES <<<"$value"
}

# nm_read_record: NM_RECORD_UUID and NM_RECORD_ROUTES from the record, empty without one.
nm_read_record() {
  local line
  NM_RECORD_UUID="" NM_RECORD_ROUTES=()
  [[ -f "$ROOT$NM_ROUTES_RECORD" ]] || return 0
  while IFS= read -r line; do
    case "$line" in
      connection=*) NM_RECORD_UUID=${line#connection=} ;;
      route=*) NM_RECORD_ROUTES+=("${line#route=}") ;;
    esac
  done <"$ROOT$NM_ROUTES_RECORD"
}

# nm_write_record UUID ROUTE...: the record of the routes the program added to profile UUID;
# none: no record.
nm_write_record() {
  local uuid=$1 route text
  shift
  if (($# == 0)); then
    remove_file "$NM_ROUTES_RECORD"
    return 0
  fi
  text="# Managed by gpu-cluster (route-to-vpc): the routes it added to a NetworkManager profile."
  text+=$'\n'"connection=$uuid"
  for route in "$@"; do
    text+=$'\n'"route=$route"
  done
  write_text "$NM_ROUTES_RECORD" 0644 "$text"
}

# nm_listed ITEM LIST...: success when ITEM is one of LIST.
nm_listed() {
  local item
  for item in "${@:2}"; do
    [[ "$item" != "$1" ]] || return 0
  done
  return 1
}

# nm_has_route ROUTE: NM_PROFILE_ROUTES holds ROUTE exactly ("CIDR GATEWAY": no metric, no
# attribute, as the program adds it; a route of the user's with a metric is another route).
nm_has_route() {
  nm_listed "$1" "${NM_PROFILE_ROUTES[@]}"
}

# nm_modify_routes UUID NAME CHANGES...: `nmcli connection modify` of profile UUID with CHANGES
# (+ipv4.routes ROUTE, -ipv4.routes ROUTE pairs). The profile changes on disk; the device keeps
# what it applied until a reapply. "+" adds a route unless the same is there; "-" removes the
# one equal to it, metric and attributes included (nm-meta-setting-desc.c:3588-3603, libnm-core
# nm_setting_ip_config_add_route, nm_setting_ip_config_remove_route_by_value:
# NM_IP_ROUTE_EQUAL_CMP_FLAGS_WITH_ATTRS), so the user's routes with a metric stay.
nm_modify_routes() {
  local uuid=$1 name=$2
  shift 2
  nmcli connection modify uuid "$uuid" "$@" ||
    die "nmcli could not change the routes of NetworkManager connection '$name' ($uuid)"
}

# nm_reapply DEVICE NAME: the device's profile applied again without taking the link down:
# `nmcli device reapply` ("Attempt to update device with changes to the currently active
# connection made since it was last applied", nmcli(1)). It also drops the device's main-table
# routes NetworkManager did not configure (nmcli asks for no PRESERVE_EXTERNAL_IP: 1.42.4
# src/nmcli/devices.c:2502, nm-device.c:13053-13058), which their owners add again.
nm_reapply() {
  nmcli device reapply "$1" ||
    die "nmcli could not reapply NetworkManager connection '$2' on $1"
}

# nm_routes_present ROUTE...: the kernel has each "CIDR GATEWAY" (route-to-vpc.sh route_present).
nm_routes_present() {
  local route cidr gateway
  for route in "$@"; do
    read -r cidr gateway <<<"$route"
    route_present "$cidr" "$gateway" || return 1
  done
}

# nm_release_profile UUID: the recorded routes out of profile UUID (one the record names that
# is no longer the gateway's), and its device reapplied when the profile is active. A profile
# that is gone has nothing to release.
nm_release_profile() {
  local uuid=$1 name device route changes=() removed=()
  if ! name="$(nmcli -g connection.id connection show uuid "$uuid" 2>/dev/null)"; then
    log "unchanged: NetworkManager connection $uuid, which the routes were added to, is gone"
    return 0
  fi
  name="$(nm_terse "$name")"
  nm_profile_routes "$uuid"
  for route in "${NM_RECORD_ROUTES[@]}"; do
    if nm_has_route "$route"; then
      changes+=(-ipv4.routes "$route")
      removed+=("$route")
    fi
  done
  if ((${#changes[@]} == 0)); then
    log "unchanged: NetworkManager connection '$name' has none of the routes ${NM_RECORD_ROUTES[*]}"
    return 0
  fi
  nm_modify_routes "$uuid" "$name" "${changes[@]}"
  log "changed: removed the route(s) ${removed[*]} from NetworkManager connection '$name'"
  # GENERAL.DEVICES: the devices an active profile is applied to (nmcli connection show ID).
  device="$(nmcli -g GENERAL.DEVICES connection show uuid "$uuid")"
  if [[ -n "$device" ]]; then
    nm_reapply "${device%%,*}" "$name"
    log "changed: reapplied NetworkManager connection '$name' on ${device%%,*}"
  fi
}

# el9_retire_unit: the Ubuntu way's unit and networkd drop-in, which an earlier run may have
# left. First: its ExecStop deletes "CIDR via GATEWAY" without a metric, which the kernel
# takes as whichever route of that destination and gateway it finds first, NetworkManager's
# too.
el9_retire_unit() {
  remove_unit "$UNIT" "restart-$UNIT"
  remove_file "$KEEP_ROUTES_FILE"
}

# el9_route_to_vpc: ROUTE_CIDRS via GATEWAY_ADDRESS in the profile active on the interface
# that reaches the gateway, applied to it, and present in the kernel.
el9_route_to_vpc() {
  local cidr route attempt wanted=() ours=() added=() dropped=() changes=() changed=0 missing=()
  el9_retire_unit
  nm_require_running
  nm_find_connection
  nm_read_record
  if [[ -n "$NM_RECORD_UUID" && "$NM_RECORD_UUID" != "$NM_CONNECTION_UUID" ]]; then
    nm_release_profile "$NM_RECORD_UUID"
    NM_RECORD_ROUTES=()
  fi
  for cidr in "${ROUTE_CIDRS[@]}"; do
    wanted+=("$cidr $GATEWAY_ADDRESS")
  done
  nm_profile_routes "$NM_CONNECTION_UUID"
  for route in "${NM_RECORD_ROUTES[@]}"; do
    if ! nm_listed "$route" "${wanted[@]}" && nm_has_route "$route"; then
      changes+=(-ipv4.routes "$route")
      dropped+=("$route")
    fi
  done
  for route in "${wanted[@]}"; do
    if ! nm_has_route "$route"; then
      changes+=(+ipv4.routes "$route")
      added+=("$route")
      ours+=("$route")
    elif nm_listed "$route" "${NM_RECORD_ROUTES[@]}"; then
      ours+=("$route")
    else
      log "NetworkManager connection '$NM_CONNECTION_NAME' has the route $route already, not" \
        "as the program's: it stays when the program no longer wants it"
    fi
  done
  if ((${#changes[@]} > 0)); then
    nm_modify_routes "$NM_CONNECTION_UUID" "$NM_CONNECTION_NAME" "${changes[@]}"
    changed=1
    for route in "${dropped[@]}"; do
      log "changed: removed the old route $route from NetworkManager connection '$NM_CONNECTION_NAME'"
    done
    for route in "${added[@]}"; do
      log "changed: added the route $route to NetworkManager connection '$NM_CONNECTION_NAME'"
    done
  fi
  nm_write_record "$NM_CONNECTION_UUID" "${ours[@]}"
  for route in "${wanted[@]}"; do
    nm_routes_present "$route" || missing+=("$route")
  done
  if ((!changed && ${#missing[@]} > 0)); then
    log "reapplying NetworkManager connection '$NM_CONNECTION_NAME' on $NM_DEVICE to restore" \
      "the route(s) ${missing[*]}"
    changed=1
  fi
  if needs_follow_up "$changed" nm-reapply-route-to-vpc; then
    nm_reapply "$NM_DEVICE" "$NM_CONNECTION_NAME"
    follow_up_done nm-reapply-route-to-vpc
    log "changed: reapplied NetworkManager connection '$NM_CONNECTION_NAME' on $NM_DEVICE"
  else
    log "unchanged: NetworkManager connection '$NM_CONNECTION_NAME' on $NM_DEVICE has the route(s)"
  fi
  # A reapply commits on NetworkManager's next idle turn, after nmcli has returned
  # (nm-device.c:13053-13058 and 3988-3991: nm_device_l3cfg_commit without commit_sync).
  for ((attempt = 1; ; attempt++)); do
    ! nm_routes_present "${wanted[@]}" || break
    if checking || ((attempt >= 10)); then
      die "NetworkManager connection '$NM_CONNECTION_NAME' on $NM_DEVICE is applied but the" \
        "kernel has not all of the route(s) ${wanted[*]} (ip -4 route; journalctl -u NetworkManager)"
    fi
    sleep 1
  done
}

# el9_remove_route_to_vpc: route-to-vpc-remove on EL9: the recorded routes out of their
# profile and the record gone, the device reapplied; an earlier run's unit retired too.
el9_remove_route_to_vpc() {
  el9_retire_unit
  nm_read_record
  if [[ -z "$NM_RECORD_UUID" ]]; then
    log "unchanged: no NetworkManager connection has routes of the program ($NM_ROUTES_RECORD is absent)"
    return 0
  fi
  nm_require_running
  nm_release_profile "$NM_RECORD_UUID"
  remove_file "$NM_ROUTES_RECORD"
}
