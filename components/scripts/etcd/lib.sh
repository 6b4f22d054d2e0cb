#!/usr/bin/env bash
# The etcd quorum rules every distribution's controller steps share: a controller is taken
# down for its upgrade only while every expected member is present and healthy, and a
# member leaves only if the members that stay keep a quorum. Each distribution's script
# fills the member table (etcd_add_member) from its own sources, then asks these.
# shellcheck shell=bash disable=SC2034 # its globals are read by the scripts that source it

# shellcheck source=../lib.sh
[[ -n "${GPU_CLUSTER_LIB_LOADED:-}" ]] || source "$(dirname "${BASH_SOURCE[0]}")/../lib.sh"

GPU_CLUSTER_ETCD_LIB_LOADED=1
# A Kubernetes node name (RFC 1123 label, as config/hosts.py allows host names).
ETCD_NODE_NAME='^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$'
# Both distributions dial etcd peers at https://ADDRESS:2380 (k0s cmd/etcd/leave.go:49;
# k3s pkg/etcd/etcd.go peerURL).
ETCD_PEER_URL='^https://([0-9.]+):2380$'
# The member table: one entry per member, in the order listed. ETCD_NAMES: its node's name
# (or the member's own name when no node claims it), ETCD_PEERS: the address of its peer
# URL, ETCD_HEALTH: "healthy" or why not.
ETCD_NAMES=()
ETCD_PEERS=()
ETCD_HEALTH=()
# How long a joined member may take to show healthy: its install step already waited for
# its API server, which waits for etcd. A controller that joins at boot gives the whole
# boot as MEMBER_WAIT_SECONDS.
ETCD_MEMBER_SECONDS=300

# etcd_check_node_name VAR..., etcd_check_address VAR..., etcd_check_count VAR...: add to
# INPUT_PROBLEMS each VAR missing or not a node name, an IPv4 address, or a member count of
# 1-7 (etcd recommends at most seven members: etcd.io/docs/v3.6/faq, "What is maximum
# cluster size?").
etcd_check_node_name() {
  local var
  check_missing_env "$@"
  for var in "$@"; do
    if [[ -n "${!var:-}" && ! "${!var,,}" =~ $ETCD_NODE_NAME ]]; then
      INPUT_PROBLEMS+=("$var is not a node name: '${!var}'")
    fi
  done
}

etcd_check_address() {
  local var
  check_missing_env "$@"
  for var in "$@"; do
    if [[ -n "${!var:-}" ]] && ! valid_ipv4 "${!var}"; then
      INPUT_PROBLEMS+=("$var is not an IPv4 address: '${!var}'")
    fi
  done
}

etcd_check_count() {
  local var
  check_missing_env "$@"
  for var in "$@"; do
    if [[ -n "${!var:-}" && ! "${!var}" =~ ^[1-7]$ ]]; then
      INPUT_PROBLEMS+=("$var must be a member count from 1 to 7, got '${!var}'")
    fi
  done
}

# etcd_check_member_inputs: the inputs of an etcd-member or leave-etcd step: NODE_NAME
# (this controller), MEMBER_NODE and MEMBER_ADDRESS (another controller, whose member
# joined or leaves).
etcd_check_member_inputs() {
  etcd_check_node_name NODE_NAME MEMBER_NODE
  etcd_check_address MEMBER_ADDRESS
  if [[ -n "${NODE_NAME:-}" && "${NODE_NAME,,}" == "${MEMBER_NODE,,}" ]]; then
    INPUT_PROBLEMS+=("MEMBER_NODE is this controller ($NODE_NAME): run $GPU_CLUSTER_STEP on another one")
  fi
  die_on_input_problems
}

# etcd_check_quorum_inputs: the inputs of an etcd-quorum step: NODE_NAME and NODE_ADDRESS
# (this controller), EXPECTED_MEMBERS (the controllers in config).
etcd_check_quorum_inputs() {
  etcd_check_node_name NODE_NAME
  etcd_check_address NODE_ADDRESS
  etcd_check_count EXPECTED_MEMBERS
  die_on_input_problems
}

# etcd_quorum N: the majority of N members, floor(N/2)+1, without which etcd accepts no
# write (etcd.io/docs/v3.6/faq, "What is failure tolerance?"; v3.4/op-guide/failures).
etcd_quorum() {
  echo $(($1 / 2 + 1))
}

# etcd_add_member NAME PEER_URL HEALTH: one row of the member table; dies naming a peer URL
# that is not https://IPV4:2380.
etcd_add_member() {
  local address=""
  [[ ! "$2" =~ $ETCD_PEER_URL ]] || address=${BASH_REMATCH[1]}
  if ! valid_ipv4 "$address"; then
    die "etcd member $1 has an unexpected peer URL: '$2'"
  fi
  ETCD_NAMES+=("$1")
  ETCD_PEERS+=("$address")
  ETCD_HEALTH+=("$3")
}

# etcd_member_index NAME: the table index of member NAME, or nothing.
etcd_member_index() {
  local i
  for i in "${!ETCD_NAMES[@]}"; do
    if [[ "${ETCD_NAMES[i]}" == "$1" ]]; then
      echo "$i"
      return 0
    fi
  done
}

# etcd_unhealthy: "name (why)" for every unhealthy member, joined by "; ".
etcd_unhealthy() {
  local i text=""
  for i in "${!ETCD_NAMES[@]}"; do
    if [[ "${ETCD_HEALTH[i]}" != healthy ]]; then
      text+="${text:+; }${ETCD_NAMES[i]} (${ETCD_HEALTH[i]})"
    fi
  done
  printf '%s' "$text"
}

# etcd_healthy_count: how many members are healthy.
etcd_healthy_count() {
  local health count=0
  for health in "${ETCD_HEALTH[@]}"; do
    [[ "$health" != healthy ]] || count=$((count + 1))
  done
  echo "$count"
}

# etcd_require_all_healthy SELF ADDRESS EXPECTED: dies unless SELF is a member at ADDRESS,
# every listed member is healthy, and at least 3 are listed: taking SELF down then leaves
# listed-1 healthy members, a majority of the listed ones (etcd.io/docs/v3.6/faq, "What is
# failure tolerance?"). The members listed, not EXPECTED (the controllers in config), are
# what etcd counts: while controllers are added (3 to 5) the new ones join after this
# check, and while some are removed (5 to 3) their members leave after it
# (<host>-etcd-member's delete), so neither count is refused. With one already unhealthy
# the step refuses at any size: the unhealthy one needs its own repair (leave-etcd, a new
# generation) first, not an upgrade around it.
etcd_require_all_healthy() {
  local self=$1 address=$2 expected=$3 index listed unhealthy problems=()
  listed=${#ETCD_NAMES[@]}
  index="$(etcd_member_index "$self")"
  if [[ -z "$index" ]]; then
    problems+=("this controller ($self) is not an etcd member")
  elif [[ "${ETCD_PEERS[index]}" != "$address" ]]; then
    problems+=("this controller's member $self has peer address ${ETCD_PEERS[index]}, not $address")
  fi
  if ((listed < 3)); then
    problems+=("$listed members are listed (${ETCD_NAMES[*]:-none}) where $expected controllers are configured: with one down the rest would not be a majority")
  fi
  unhealthy="$(etcd_unhealthy)"
  if [[ -n "$unhealthy" ]]; then
    problems+=("unhealthy: $unhealthy")
  fi
  if ((${#problems[@]} > 0)); then
    local text
    printf -v text '; %s' "${problems[@]}"
    die "refusing to take $self down: etcd needs a majority of its members up and every" \
      "member healthy before one leaves for its upgrade: ${text#; }"
  fi
  log "etcd: all $listed members healthy (${ETCD_NAMES[*]}); quorum" \
    "$(etcd_quorum "$listed") holds while $self is down"
}

# etcd_require_removable INDEX: dies unless the removal can be agreed (a member change is
# a write: the current quorum must be healthy) and the members other than INDEX, which
# stay, keep a quorum of their own count with the healthy ones among them (etcd checks the
# same before removing a voting member: server/etcdserver/server.go
# mayRemoveMember, "--strict-reconfig-check", on by default).
etcd_require_removable() {
  local index=$1 listed remaining healthy healthy_remaining need
  listed=${#ETCD_NAMES[@]}
  remaining=$((listed - 1))
  healthy="$(etcd_healthy_count)"
  healthy_remaining=$healthy
  [[ "${ETCD_HEALTH[index]}" != healthy ]] || healthy_remaining=$((healthy - 1))
  if ((remaining == 0)); then
    die "refusing to remove ${ETCD_NAMES[index]}: it is the last etcd member"
  fi
  need="$(etcd_quorum "$remaining")"
  if ((healthy < $(etcd_quorum "$listed") || healthy_remaining < need)); then
    die "refusing to remove ${ETCD_NAMES[index]}: the $remaining members that stay need" \
      "$need healthy for a quorum, $healthy_remaining are (unhealthy: $(etcd_unhealthy));" \
      "repair them first"
  fi
  log "etcd: $healthy_remaining of the $remaining members that stay are healthy (quorum $need)"
}

# etcd_find_leaving NAME ADDRESS: ETCD_LEAVING set to the table index of NAME's member at
# ADDRESS once it may leave (etcd_require_removable), or "" (logged) when no member is at
# ADDRESS. Dies
# when NAME's member is elsewhere or another member is at ADDRESS: config and cluster
# disagree, and nothing is removed on a guess.
etcd_find_leaving() {
  local name=$1 address=$2 i index=""
  ETCD_LEAVING=""
  for i in "${!ETCD_NAMES[@]}"; do
    if [[ "${ETCD_PEERS[i]}" == "$address" ]]; then
      index=$i
    elif [[ "${ETCD_NAMES[i]}" == "$name" ]]; then
      die "etcd member $name has peer address ${ETCD_PEERS[i]}, not $address: check the" \
        "host's address; nothing was removed"
    fi
  done
  if [[ -z "$index" ]]; then
    log "no etcd member has peer address $address; $name has already left etcd"
    return 0
  fi
  if [[ "${ETCD_NAMES[index]}" != "$name" ]]; then
    die "the etcd member at $address is ${ETCD_NAMES[index]}, not $name; nothing was removed"
  fi
  etcd_require_removable "$index"
  ETCD_LEAVING=$index
}

# etcd_quorum_step READ_MEMBERS INSTALLED_FILE: an etcd-quorum step: its inputs checked;
# nothing more on a controller without INSTALLED_FILE (not installed yet: its install step
# joins, or initialises, and takes no member down); else the member table filled by the
# distribution's READ_MEMBERS, every expected member healthy.
etcd_quorum_step() {
  etcd_check_quorum_inputs
  if [[ ! -e "$ROOT$2" ]]; then
    log "unchanged: no control plane runs here yet ($2), so its install takes no etcd" \
      "member down${KUBERNETES_VERSION:+ for $KUBERNETES_VERSION}"
    return 0
  fi
  "$1"
  etcd_require_all_healthy "${NODE_NAME,,}" "$NODE_ADDRESS" "$EXPECTED_MEMBERS"
}

# etcd_member_healthy READ_MEMBERS NAME ADDRESS: success when the member table READ_MEMBERS
# fills lists NAME's member at ADDRESS, healthy; otherwise prints why not.
etcd_member_healthy() {
  local index
  ETCD_NAMES=() ETCD_PEERS=() ETCD_HEALTH=()
  "$1"
  index="$(etcd_member_index "$2")"
  if [[ -z "$index" ]]; then
    echo "no etcd member $2 (members: ${ETCD_NAMES[*]:-none})"
    return 1
  fi
  if [[ "${ETCD_PEERS[index]}" != "$3" ]]; then
    echo "etcd member $2 has peer address ${ETCD_PEERS[index]}, not $3"
    return 1
  fi
  if [[ "${ETCD_HEALTH[index]}" != healthy ]]; then
    echo "etcd member $2 is not healthy: ${ETCD_HEALTH[index]}"
    return 1
  fi
}

# etcd_member_step READ_MEMBERS: an etcd-member step, on a controller after another joined:
# waits until the other's member is listed at its address and healthy. Reads only.
etcd_member_step() {
  : "${MEMBER_WAIT_SECONDS:=$ETCD_MEMBER_SECONDS}"
  if [[ ! "$MEMBER_WAIT_SECONDS" =~ ^[1-9][0-9]{0,4}$ ]]; then
    INPUT_PROBLEMS+=("MEMBER_WAIT_SECONDS must be a number of seconds (1-99999), got '$MEMBER_WAIT_SECONDS'")
  fi
  etcd_check_member_inputs
  wait_until "$MEMBER_WAIT_SECONDS" "etcd member ${MEMBER_NODE,,} ($MEMBER_ADDRESS) to be healthy" \
    etcd_member_healthy "$1" "${MEMBER_NODE,,}" "$MEMBER_ADDRESS"
}
