#!/usr/bin/env bash
# Runs on every EC2 pool instance as gpu-cluster-spot-notices.service (installed by
# spot-notices.sh): polls the instance metadata for EC2's Spot notices and, once per notice,
# cordons the instance's own node and, on an interruption, drains it within the warning.
set -euo pipefail

# Inputs: NODE_KUBECTL SPOT_NOTICE_STATE
# Optional inputs: GPU_CLUSTER_ROOT IMDS_ENDPOINT SPOT_NOTICE_POLLS
#   NODE_KUBECTL       kubectl with the kubelet's own credential: an absolute path, then
#                      options (the distribution's node_kubectl, e.g.
#                      "/usr/local/bin/k0s kubectl --kubeconfig /var/lib/k0s/kubelet.conf").
#   SPOT_NOTICE_STATE  the folder remembering the notices already acted on (the unit's
#                      StateDirectory, kept across reboots).
#   IMDS_ENDPOINT      the instance metadata service (default http://169.254.169.254).
#   SPOT_NOTICE_POLLS  stop after this many polls (default: never; tests and one-off runs).
#   GPU_CLUSTER_ROOT   prefix of NODE_KUBECTL's path ("" on the instance; tests).
#
# What EC2 says, and when (https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/
# spot-instance-termination-notices.html): a Spot interruption notice is issued two minutes
# before EC2 stops or terminates the instance (hibernation starts at once, with no two
# minutes); the instance metadata item spot/instance-action then holds
# {"action": "terminate|stop|hibernate", "time": "<UTC>"} and answers 404 otherwise (an
# on-demand instance always answers 404); AWS recommends checking every 5 seconds. A
# rebalance recommendation (https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/
# rebalance-recommendations.html) signals an elevated risk of interruption, possibly
# together with the notice; events/recommendations/rebalance then holds
# {"noticeTime": "<UTC>"} (404 otherwise). Of the actions that page lists, this one takes
# "Prevent new work from being scheduled": the node is cordoned and its running jobs go
# on, since a GPU job evicted early loses as much as one evicted at the interruption.
#
# Only the kubelet's own credential is used: the Node authorizer and NodeRestriction let it
# cordon its own Node (spec.unschedulable; never taints), list the pods bound to it (a
# spec.nodeName field selector) and evict those pods, which is all this needs.
# kubectl drain is not used: it reads the DaemonSet of each DaemonSet pod, which the kubelet
# may not (see spot-notices.sh for the sources). The drain here evicts (PodDisruptionBudgets
# honoured) every pod bound to the node but DaemonSet and mirror (static) pods, giving each
# GRACE_SECONDS to stop (the Eviction's deleteOptions, in place of the pod's own
# terminationGracePeriodSeconds), retries the evictions refused until DRAIN_SECONDS after
# the notice was seen, and then gives up: the instance goes at two minutes whatever happens.
#
# A notice is remembered (SPOT_NOTICE_STATE) once acted on, so a second poll that sees it
# again changes nothing; a failed cordon is not remembered and is retried at the next poll.
# An unreachable or failing IMDS is logged and polled again; it never drains anything.

POLL_SECONDS=5
# Bounded: 5 s to see the notice, 90 s of evictions and termination, well inside 120 s.
DRAIN_SECONDS=90
GRACE_SECONDS=45
REQUEST_TIMEOUT=10s
TOKEN_TTL_SECONDS=300
# A token is renewed well before it expires (and at once on a 401).
TOKEN_RENEW_SECONDS=240
INTERRUPTION_PATH=/latest/meta-data/spot/instance-action
REBALANCE_PATH=/latest/meta-data/events/recommendations/rebalance
# What the two items hold (AWS's format above); anything else is logged and not acted on.
INSTANCE_ACTION='^\{[[:space:]]*"action"[[:space:]]*:[[:space:]]*"(terminate|stop|hibernate)"[[:space:]]*,[[:space:]]*"time"[[:space:]]*:[[:space:]]*"([0-9TZ:.-]+)"[[:space:]]*\}[[:space:]]*$'
NOTICE_TIME='^\{[[:space:]]*"noticeTime"[[:space:]]*:[[:space:]]*"([0-9TZ:.-]+)"[[:space:]]*\}[[:space:]]*$'
# One pod a line: namespace, name, its controller's kind, the mirror annotation, whether it
# is being deleted; "|" never occurs in those.
POD_FIELDS='{range .items[*]}{.metadata.namespace}{"|"}{.metadata.name}{"|"}{.metadata.ownerReferences[?(@.controller==true)].kind}{"|"}{.metadata.annotations.kubernetes\.io/config\.mirror}{"|"}{.metadata.deletionTimestamp}{"\n"}{end}'

HOST="$(hostname)"
IMDS="${IMDS_ENDPOINT:-http://169.254.169.254}"
TOKEN=""
TOKEN_AT=0
IMDS_FAILING=0
IMDS_STATUS=000
IMDS_BODY=""

log() {
  printf 'gpu-cluster: %s: spot-notices: %s\n' "$HOST" "$*" >&2
}

# kube ARGS...: NODE_KUBECTL with ARGS (its words split on spaces: an absolute path, then
# plain options, as checked in main); an API that does not answer holds no call for longer
# than REQUEST_TIMEOUT.
kube() {
  local words
  read -r -a words <<<"$NODE_KUBECTL"
  "${GPU_CLUSTER_ROOT:-}${words[0]}" "${words[@]:1}" --request-timeout="$REQUEST_TIMEOUT" "$@"
}

# imds_get PATH: GETs the item with an IMDSv2 session token (the launch template requires
# one), renewed when old or refused; sets IMDS_STATUS (000: no answer) and IMDS_BODY. Runs in
# this shell, not a subshell, so the token it keeps lasts.
imds_get() {
  local answer
  IMDS_STATUS=000 IMDS_BODY=""
  if [[ -z "$TOKEN" ]] || ((SECONDS - TOKEN_AT >= TOKEN_RENEW_SECONDS)); then
    if ! TOKEN="$(curl -s -f --max-time 2 -X PUT \
      -H "X-aws-ec2-metadata-token-ttl-seconds: $TOKEN_TTL_SECONDS" "$IMDS/latest/api/token")"; then
      TOKEN=""
      return 0
    fi
    TOKEN_AT=$SECONDS
  fi
  answer="$(curl -s --max-time 2 -w '\n%{http_code}' \
    -H "X-aws-ec2-metadata-token: $TOKEN" "$IMDS$1")" || true
  IMDS_STATUS="${answer##*$'\n'}"
  IMDS_BODY="${answer%$'\n'*}"
  [[ "$IMDS_STATUS" =~ ^[0-9]{3}$ ]] || IMDS_STATUS=000
  if [[ "$IMDS_STATUS" == 401 ]]; then
    TOKEN=""
  fi
}

# acted_on NAME KEY: success when notice KEY of kind NAME was already acted on.
acted_on() {
  [[ -f "$SPOT_NOTICE_STATE/$1" && "$(<"$SPOT_NOTICE_STATE/$1")" == "$2" ]]
}

remember() {
  printf '%s\n' "$2" >"$SPOT_NOTICE_STATE/$1.tmp"
  mv -f -- "$SPOT_NOTICE_STATE/$1.tmp" "$SPOT_NOTICE_STATE/$1"
}

# node_name: the kubelet's node name, the host name lower-cased and trimmed
# (k8s.io/component-helpers/node/util GetHostname).
node_name() {
  local name="${HOST,,}"
  printf '%s' "${name//[[:space:]]/}"
}

cordon() {
  local node
  node="$(node_name)"
  if ! kube cordon "$node" >&2; then
    log "could not cordon node $node (kubectl's error above): trying again at the next poll"
    return 1
  fi
  log "cordoned node $node: nothing new is scheduled here"
}

# drained_pods NODE: "namespace name deleting" of each pod bound to NODE that the drain
# evicts (deleting: "-" or when its deletion began); fails when the API does not answer.
drained_pods() {
  local listing namespace name kind mirror deleting
  listing="$(kube get pods --all-namespaces --field-selector "spec.nodeName=$1" \
    -o "jsonpath=$POD_FIELDS")" || return 1
  while IFS='|' read -r namespace name kind mirror deleting; do
    [[ -n "$name" && "$kind" != DaemonSet && -z "$mirror" ]] || continue
    printf '%s %s %s\n' "$namespace" "$name" "${deleting:--}"
  done <<<"$listing"
}

# evict NAMESPACE NAME: the Eviction API (policy/v1), which a PodDisruptionBudget may refuse
# (429); the pod gets at most GRACE_SECONDS to stop.
evict() {
  local output
  if output="$(kube create --raw "/api/v1/namespaces/$1/pods/$2/eviction" -f - 2>&1 <<EOT
{"apiVersion":"policy/v1","kind":"Eviction","metadata":{"namespace":"$1","name":"$2"},"deleteOptions":{"gracePeriodSeconds":$GRACE_SECONDS}}
EOT
  )"; then
    log "evicting pod $1/$2"
  elif [[ "$output" == *NotFound* ]]; then
    log "pod $1/$2 is gone"
  else
    log "pod $1/$2 not evicted yet: ${output##*$'\n'}"
  fi
}

drain() {
  local node deadline pods namespace name deleting
  node="$(node_name)"
  deadline=$((SECONDS + DRAIN_SECONDS))
  while ((SECONDS < deadline)); do
    if ! pods="$(drained_pods "$node")"; then
      log "could not list the pods of node $node; trying again"
    elif [[ -z "$pods" ]]; then
      log "drained node $node: only DaemonSet and static pods are left"
      return 0
    else
      # Those being deleted already are waited for, the others evicted.
      while read -r namespace name deleting; do
        [[ "$deleting" != - ]] || evict "$namespace" "$name"
      done <<<"$pods"
    fi
    sleep 2
  done
  log "node $node is not drained after ${DRAIN_SECONDS}s: the pods left go with the instance"
}

handle_interruption() {
  local body=$1 key
  if [[ ! "$body" =~ $INSTANCE_ACTION ]]; then
    log "spot/instance-action holds what EC2 does not document: '$body'; not acted on"
    return 0
  fi
  key="${BASH_REMATCH[1]} ${BASH_REMATCH[2]}"
  ! acted_on interruption "$key" || return 0
  log "EC2 interrupts this Spot instance: ${BASH_REMATCH[1]} at ${BASH_REMATCH[2]}"
  cordon || return 0
  drain
  remember interruption "$key"
}

handle_rebalance() {
  local body=$1 key
  if [[ ! "$body" =~ $NOTICE_TIME ]]; then
    log "events/recommendations/rebalance holds what EC2 does not document: '$body'; not acted on"
    return 0
  fi
  key="${BASH_REMATCH[1]}"
  ! acted_on rebalance "$key" || return 0
  log "EC2 recommends rebalancing away from this Spot instance (notice of $key): running jobs go on"
  cordon || return 0
  remember rebalance "$key"
}

# poll: both items once; each notice acted on as it comes. After an interruption the node
# is drained already, and a cordon is all a rebalance recommendation adds.
poll() {
  local path failed=""
  for path in "$INTERRUPTION_PATH" "$REBALANCE_PATH"; do
    imds_get "$path"
    case "$IMDS_STATUS" in
      200) if [[ "$path" == "$INTERRUPTION_PATH" ]]; then
        handle_interruption "$IMDS_BODY"
      else
        handle_rebalance "$IMDS_BODY"
      fi ;;
      404) ;;
      *) failed="$path: HTTP $IMDS_STATUS" ;;
    esac
  done
  if [[ -n "$failed" && "$IMDS_FAILING" == 0 ]]; then
    log "the instance metadata service at $IMDS fails ($failed, 000: no answer or no token):" \
      "polling again every ${POLL_SECONDS}s, nothing drained"
    IMDS_FAILING=1
  elif [[ -z "$failed" && "$IMDS_FAILING" == 1 ]]; then
    log "the instance metadata service answers again"
    IMDS_FAILING=0
  fi
}

main() {
  local polls=0 missing=() name
  for name in NODE_KUBECTL SPOT_NOTICE_STATE; do
    [[ -n "${!name:-}" ]] || missing+=("$name")
  done
  if ((${#missing[@]} > 0)); then
    log "missing required environment variable(s): ${missing[*]}"
    exit 2
  fi
  if [[ ! "$NODE_KUBECTL" =~ ^/[A-Za-z0-9_./-]+([\ ][A-Za-z0-9_./=-]+)*$ ]]; then
    log "NODE_KUBECTL is not an absolute path followed by plain options: '$NODE_KUBECTL'"
    exit 2
  fi
  if [[ -n "${SPOT_NOTICE_POLLS:-}" && ! "$SPOT_NOTICE_POLLS" =~ ^[1-9][0-9]*$ ]]; then
    log "SPOT_NOTICE_POLLS is not a positive number: '$SPOT_NOTICE_POLLS'"
    exit 2
  fi
  mkdir -p -- "$SPOT_NOTICE_STATE"
  # systemd gives a unit without User= no HOME, and kubectl then keeps its discovery cache
  # in ./.kube of its working directory (/): here instead.
  export HOME="${HOME:-$SPOT_NOTICE_STATE}"
  log "watching $IMDS for Spot interruption and rebalance notices every ${POLL_SECONDS}s"
  while true; do
    poll
    polls=$((polls + 1))
    if [[ -n "${SPOT_NOTICE_POLLS:-}" ]] && ((polls >= SPOT_NOTICE_POLLS)); then
      return 0
    fi
    sleep "$POLL_SECONDS"
  done
}

main "$@"
