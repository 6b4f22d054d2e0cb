#!/usr/bin/env bash
# On the first of several EC2 controllers that install themselves at boot, before its
# install: refuses to initialise while a control plane already answers at the load
# balancer. Reads only: a second run changes nothing.
set -euo pipefail
# shellcheck source=../lib.sh
[[ -n "${GPU_CLUSTER_LIB_LOADED:-}" ]] || source "$(dirname "${BASH_SOURCE[0]}")/../lib.sh"
: "${GPU_CLUSTER_STEP:=refuse-second-cluster}"

# The first's boot initialises the cluster; a new instance under its name (the old one
# lost, launched again by `pulumi up`) would start a second cluster beside the controllers
# that kept running, behind the same address. On a new stack nothing answers there yet:
# the others are launched only once this one runs.

# Inputs: API_ADDRESS API_PORT CONTROLLER_FILE
#   API_ADDRESS      the load balancer's address, API_PORT the API's port there.
#   CONTROLLER_FILE  a file this controller has once installed (the distribution's): with
#                    it the cluster is this one's, and nothing is asked.

PROBE_SECONDS=5

check_inputs() {
  check_missing_env API_ADDRESS API_PORT CONTROLLER_FILE
  if [[ -n "${API_ADDRESS:-}" ]] && ! valid_ipv4 "$API_ADDRESS"; then
    INPUT_PROBLEMS+=("API_ADDRESS is not an IPv4 address: '$API_ADDRESS'")
  fi
  if [[ -n "${CONTROLLER_FILE:-}" && ! "$CONTROLLER_FILE" =~ ^(/[A-Za-z0-9._-]+)+$ ]]; then
    INPUT_PROBLEMS+=("CONTROLLER_FILE is not an absolute path: '$CONTROLLER_FILE'")
  fi
  die_on_input_problems
  require_uint API_PORT
}

# api_answers: success when anything answers HTTPS at the load balancer within
# PROBE_SECONDS. No credential is sent, so the server is not verified: any answer (401
# included) means a control plane runs there; curl's status 000 means none did.
api_answers() {
  local code
  code="$(curl --silent --insecure --max-time "$PROBE_SECONDS" -o /dev/null \
    --write-out '%{http_code}' "https://$API_ADDRESS:$API_PORT/livez" || true)"
  [[ -n "$code" && "$code" != 000 ]]
}

main() {
  check_inputs
  if [[ -e "$ROOT$CONTROLLER_FILE" ]]; then
    log "unchanged: this controller runs the cluster ($CONTROLLER_FILE)"
    return 0
  fi
  if api_answers; then
    die "a control plane already answers at $API_ADDRESS:$API_PORT (the load balancer):" \
      "this instance is a new one under the first controller's name, and initialising here" \
      "would start a second cluster beside the running one. Nothing was changed; see" \
      "docs/day-2.md, \"Losing the first EC2 controller\""
  fi
  log "nothing answers at $API_ADDRESS:$API_PORT yet: this controller initialises the cluster"
}

main "$@"
