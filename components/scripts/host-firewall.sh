#!/usr/bin/env bash
# The host firewall: nftables table inet gpu_cluster (components/hosts/firewall.py) drops
# packets to the nodes' ports from anywhere but the cluster's sources; loaded now and at
# every boot by its own unit, with no drop policy and no other table touched.
set -euo pipefail
# shellcheck source=lib.sh
[[ -n "${GPU_CLUSTER_LIB_LOADED:-}" ]] || source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
# shellcheck source=os/lib.sh
[[ -n "${GPU_CLUSTER_OS_LIB_LOADED:-}" ]] || source "$(dirname "${BASH_SOURCE[0]}")/os/lib.sh"
: "${GPU_CLUSTER_STEP:=host-firewall}"

# Inputs: HOST_FIREWALL_RULESET
#   HOST_FIREWALL_RULESET  required: `nft -f` input that replaces table inet gpu_cluster and
#                          touches nothing else (the program's header first)
FAMILY=inet
NAME=gpu_cluster
TABLE="$FAMILY $NAME"
HEADER="# Managed by gpu-cluster (host-firewall); changes are overwritten."
RULES_FILE=/etc/gpu-cluster/host-firewall.nft
UNIT=gpu-cluster-firewall
UNIT_FILE="/etc/systemd/system/$UNIT.service"

# check_inputs: dies naming every problem at once. Outside the table's braces the ruleset
# may only (re)define the table: no include, no `flush ruleset`, no other table.
check_inputs() {
  local line opened closed depth=0
  check_missing_env HOST_FIREWALL_RULESET
  if [[ -n "${HOST_FIREWALL_RULESET:-}" ]]; then
    if [[ "${HOST_FIREWALL_RULESET%%$'\n'*}" != "$HEADER" ]]; then
      INPUT_PROBLEMS+=("HOST_FIREWALL_RULESET does not start with the line '$HEADER'")
    fi
    while IFS= read -r line; do
      opened=${line//[^\{]/} closed=${line//[^\}]/}
      if [[ "$line" == *include* ]] ||
        { ((depth == 0)) && [[ ! "$line" =~ ^(#.*|table\ $TABLE(\ \{)?|delete\ table\ $TABLE|)$ ]]; }; then
        INPUT_PROBLEMS+=("HOST_FIREWALL_RULESET may only define table $TABLE, not: ${line:0:80}")
        break
      fi
      depth=$((depth + ${#opened} - ${#closed}))
    done <<<"$HOST_FIREWALL_RULESET"
  fi
  die_on_input_problems
}

# ensure_nft: the nft command (the nftables package, os/lib.sh). Ubuntu's own
# nftables.service stays off: its /etc/nftables.conf starts with `flush ruleset` and its
# ExecStop flushes the whole ruleset, kube-proxy's and the CNI's tables too (Debian's
# nftables package, debian/nftables.conf and debian/nftables.service, which Ubuntu ships
# unchanged).
ensure_nft() {
  os_install_packages --no-recommends nftables
}

# listing_of FILE: the kernel's own listing of the table FILE defines (stateless: no
# counters), from a network namespace of its own that is gone when nft exits.
listing_of() {
  printf 'include "%s"\nlist table %s\n' "$1" "$TABLE" | unshare --net -- nft -s -i
}

# write_unit: a oneshot unit ordered as Debian's nftables.service (before network-pre, so
# before any interface is up and before the node's services), loading only this table.
write_unit() {
  write_file "$UNIT_FILE" 0644 <<EOF
# Managed by gpu-cluster (host-firewall); changes are overwritten.
[Unit]
Description=gpu-cluster: node ports for the cluster's nodes only (nftables table $TABLE)
Documentation=man:nft(8)
DefaultDependencies=no
Wants=network-pre.target
Before=network-pre.target shutdown.target
Conflicts=shutdown.target

[Service]
Type=oneshot
RemainAfterExit=yes
ProtectSystem=full
ProtectHome=true
ExecStart=/usr/sbin/nft -f $RULES_FILE

[Install]
WantedBy=sysinit.target
EOF
  if needs_follow_up "$FILE_CHANGED" "reload-$UNIT"; then
    systemd_reload
    log "changed: reloaded systemd units (daemon-reload)"
    follow_up_done "reload-$UNIT"
  fi
  if ! systemctl is-enabled --quiet "$UNIT"; then
    systemd_enable "$UNIT"
    log "changed: enabled $UNIT"
  fi
}

main() {
  local wanted expected live
  check_inputs
  ensure_nft
  make_temp_dir
  wanted="$TEMP_DIR/host-firewall.nft"
  printf '%s\n' "${HOST_FIREWALL_RULESET%$'\n'}" >"$wanted"
  if ! nft -c -f "$wanted" >&2; then
    die "nft refuses the ruleset (nft -c -f, the error above); nothing was changed"
  fi
  expected="$(listing_of "$wanted")"
  if [[ "$expected" != "table $TABLE {"* ]]; then
    die "could not list the ruleset in a network namespace of its own (unshare --net nft)"
  fi
  write_file "$RULES_FILE" 0644 <"$wanted"
  write_unit
  live="$(nft -s list table "$FAMILY" "$NAME" 2>/dev/null)" || live=""
  if [[ "$live" == "$expected" ]]; then
    log "table $TABLE is loaded as configured"
    return 0
  elif checking; then
    drift "table $TABLE in the kernel $([[ -n "$live" ]] && echo differs from ||
      echo is not loaded from) $RULES_FILE (the step would load it: nft -f $RULES_FILE)"
    return 0
  fi
  nft -f "$ROOT$RULES_FILE"
  log "changed: loaded table $TABLE from $RULES_FILE"
  live="$(nft -s list table "$FAMILY" "$NAME" 2>/dev/null)" || live=""
  if [[ "$live" != "$expected" ]]; then
    die "table $TABLE differs from $RULES_FILE right after nft -f loaded it"
  fi
}

main "$@"
