# shellcheck shell=bash disable=SC2154 # state: set by stubs/stub, which sources this
# NetworkManager's nmcli for stubs/stub (sourced by it; uses its $state and stub_route's table,
# $state/routes): connection profiles with their ipv4.routes, the profile active on each
# device, and `device reapply` making the kernel's routes of the device the profile's, as
# NetworkManager 1.42.4 does (see components/scripts/route/el9.sh): it prunes the device's
# other routes, whoever added them. Output as nmcli prints it with -g: values only, ':' and
# '\' escaped with '\', a list of routes joined by ", " (src/nmcli/utils.c,
# src/libnmc-setting/nm-meta-setting-desc.c).
#   $state/active-NetworkManager   NetworkManager runs (systemctl's state; helpers.bash
#                                  nm_profile starts it)
#   $state/nm/device-DEV           the UUID of the profile active on DEV (empty: none)
#   $state/nm/profile-UUID/id      the profile's name; .../routes its ipv4.routes, a line each
# Exit codes as nmcli(1) lists them: 2 invalid input, 8 NetworkManager not running, 10 no
# such connection or device.

nm_stub_escape() {
  local text=${1//\\/\\\\}
  printf '%s\n' "${text//:/\\:}"
}

nm_stub_profile() {
  local dir="$state/nm/profile-$1"
  if [[ ! -d "$dir" ]]; then
    echo "Error: $1 - no such connection profile." >&2
    exit 10
  fi
  printf '%s\n' "$dir"
}

nm_stub_device() {
  if [[ ! -f "$state/nm/device-$1" ]]; then
    echo "Error: Device '$1' not found." >&2
    exit 10
  fi
  cat "$state/nm/device-$1"
}

# nm_stub_route_valid ROUTE: "ip[/prefix] [next-hop] [metric] [attribute=value]..."
# (nm-settings-nmcli(5), ipv4.routes), IPv4.
nm_stub_route_valid() {
  local quad='[0-9]{1,3}(\.[0-9]{1,3}){3}'
  [[ "$1" =~ ^$quad(/[0-9]{1,2})?(\ $quad)?(\ [0-9]+)?(\ [a-z-]+=[^ ]+)*$ ]]
}

# nm_stub_get FIELD WHAT ID: the value of FIELD of device or connection (uuid) ID.
nm_stub_get() {
  local field=$1 what=$2 id=$3 uuid dir device routes
  case "$what:$field" in
    device:GENERAL.CON-UUID) nm_stub_device "$id" ;;
    device:GENERAL.CONNECTION)
      uuid="$(nm_stub_device "$id")"
      [[ -z "$uuid" ]] || nm_stub_escape "$(cat "$(nm_stub_profile "$uuid")/id")"
      ;;
    connection:connection.id) dir="$(nm_stub_profile "$id")" && nm_stub_escape "$(cat "$dir/id")" ;;
    connection:ipv4.routes)
      dir="$(nm_stub_profile "$id")"
      routes="$(awk 'NR > 1 { printf ", " } { printf "%s", $0 }' "$dir/routes")"
      nm_stub_escape "$routes"
      ;;
    connection:GENERAL.DEVICES)
      nm_stub_profile "$id" >/dev/null
      for device in "$state"/nm/device-*; do
        [[ "$(cat "$device")" != "$id" ]] || echo "${device##*/device-}"
      done
      ;;
    *)
      echo "nmcli stub: unsupported field $field of $what" >&2
      exit 2
      ;;
  esac
}

# nm_stub_reapply DEVICE: the kernel's routes of DEVICE become its profile's (metric 100,
# NetworkManager's default for ethernet, proto static).
nm_stub_reapply() {
  local uuid cidr gateway rest
  uuid="$(nm_stub_device "$1")"
  if [[ -z "$uuid" ]]; then
    echo "Error: Reapplying connection to device '$1' (...) failed: Device is not activated" >&2
    exit 10
  fi
  touch "$state/routes"
  awk -v dev="$1" '{ for (i = 1; i < NF; i++) if ($i == "dev" && $(i + 1) == dev) next } { print }' \
    "$state/routes" >"$state/routes.tmp"
  while read -r cidr gateway rest; do
    [[ -n "$cidr" ]] || continue
    printf '%s via %s dev %s proto static metric %s\n' "$cidr" "$gateway" "$1" "$rest" \
      >>"$state/routes.tmp"
  done < <(awk '{ print $1, $2, ($3 ~ /^[0-9]+$/ ? $3 : 100) }' "$(nm_stub_profile "$uuid")/routes")
  cat "$state/routes.tmp" >"$state/routes"
}

# nm_stub_modify UUID [+|-]ipv4.routes ROUTE...: the profile's routes changed; "+" leaves a
# route that is there, "-" removes the one equal to ROUTE (libnm-core
# nm_setting_ip_config_add_route, nm_setting_ip_config_remove_route_by_value).
nm_stub_modify() {
  local dir file
  dir="$(nm_stub_profile "$1")"
  file="$dir/routes"
  shift
  cp "$file" "$state/nm-routes.tmp"
  while (($# > 0)); do
    if [[ ! "$1" =~ ^[+-]ipv4\.routes$ ]] || (($# < 2)) || ! nm_stub_route_valid "$2"; then
      echo "Error: failed to modify ${1#[+-]}: invalid route '${2:-}'." >&2
      exit 2
    fi
    if [[ "$1" == +* ]]; then
      grep -qxF -- "$2" "$state/nm-routes.tmp" || printf '%s\n' "$2" >>"$state/nm-routes.tmp"
    else
      awk -v route="$2" '$0 != route' "$state/nm-routes.tmp" >"$state/nm-routes.tmp2"
      cat "$state/nm-routes.tmp2" >"$state/nm-routes.tmp"
    fi
    shift 2
  done
  cat "$state/nm-routes.tmp" >"$file"
}

stub_nmcli() {
  if [[ ! -f "$state/active-NetworkManager" ]]; then
    echo "Error: NetworkManager is not running." >&2
    exit 8
  fi
  case "$*" in
    "-g "*" device show "*) nm_stub_get "$2" device "$5" ;;
    "-g "*" connection show uuid "*) nm_stub_get "$2" connection "$6" ;;
    "connection modify uuid "*) shift 3 && nm_stub_modify "$@" ;;
    "device reapply "*) nm_stub_reapply "$3" ;;
    *)
      echo "nmcli stub: unsupported: $*" >&2
      exit 2
      ;;
  esac
}
