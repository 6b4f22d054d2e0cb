#!/usr/bin/env bash
# The Kubeflow UI on the controller: a systemd unit running `kubectl port-forward` (the
# distribution's) to the Istio ingress gateway, restarted whenever it drops (gateway pod
# restarts).
set -euo pipefail
# shellcheck source=../lib.sh
[[ -n "${GPU_CLUSTER_LIB_LOADED:-}" ]] || source "$(dirname "${BASH_SOURCE[0]}")/../lib.sh"
: "${GPU_CLUSTER_STEP:=kubeflow-port-forward}"

# Inputs: CONTROLLER_SERVICE GATEWAY_NAMESPACE GATEWAY_PORT GATEWAY_SERVICE KUBECTL LISTEN_ADDRESS LISTEN_PORT
#   LISTEN_ADDRESS     required: address the controller listens on, e.g. 127.0.0.1
#   LISTEN_PORT        required: port it listens on, e.g. 8080
#   GATEWAY_NAMESPACE  required: namespace of the gateway Service (istio-system)
#   GATEWAY_SERVICE    required: the gateway Service (istio-ingressgateway)
#   GATEWAY_PORT       required: its port users reach, 443 (HTTPS) or 80 (tls off)
#   KUBECTL            required: the distribution's kubectl on the controller, by absolute
#                      path with its fixed arguments, e.g. /usr/local/bin/k0s kubectl
#   CONTROLLER_SERVICE required: the controller's systemd unit, e.g. k0scontroller.service
UNIT=gpu-cluster-kubeflow-port-forward
UNIT_FILE="/etc/systemd/system/$UNIT.service"

check_inputs() {
  check_missing_env LISTEN_ADDRESS LISTEN_PORT GATEWAY_NAMESPACE GATEWAY_SERVICE GATEWAY_PORT \
    KUBECTL CONTROLLER_SERVICE
  local name
  for name in LISTEN_PORT GATEWAY_PORT; do
    if [[ -n "${!name:-}" ]] && ! [[ "${!name}" =~ ^[0-9]{1,5}$ && "${!name}" -ge 1 && "${!name}" -le 65535 ]]; then
      INPUT_PROBLEMS+=("$name must be a port number, got '${!name}'")
    fi
  done
  if [[ -n "${LISTEN_ADDRESS:-}" ]] && ! [[ "$LISTEN_ADDRESS" =~ ^[0-9]{1,3}(\.[0-9]{1,3}){3}$ ]]; then
    INPUT_PROBLEMS+=("LISTEN_ADDRESS must be an IPv4 address, got '$LISTEN_ADDRESS'")
  fi
  # Words systemd's ExecStart= takes as they are: no quotes, `$`, `%` or `;`.
  if [[ -n "${KUBECTL:-}" ]] && ! [[ "$KUBECTL" =~ ^/[A-Za-z0-9._/+-]+(\ [A-Za-z0-9._/=+-]+)*$ ]]; then
    INPUT_PROBLEMS+=("KUBECTL must be an absolute path with plain arguments, got '$KUBECTL'")
  fi
  if [[ -n "${CONTROLLER_SERVICE:-}" ]] && ! [[ "$CONTROLLER_SERVICE" =~ ^[A-Za-z0-9@._-]+\.service$ ]]; then
    INPUT_PROBLEMS+=("CONTROLLER_SERVICE must be a systemd service name, got '$CONTROLLER_SERVICE'")
  fi
  die_on_input_problems
}

unit_text() {
  cat <<UNIT
# Written by gpu-cluster (step $GPU_CLUSTER_STEP); changes are overwritten.
[Unit]
Description=gpu-cluster: Kubeflow UI, port-forward to $GATEWAY_NAMESPACE/$GATEWAY_SERVICE
After=$CONTROLLER_SERVICE
Wants=$CONTROLLER_SERVICE

[Service]
ExecStart=$KUBECTL --namespace $GATEWAY_NAMESPACE port-forward --address $LISTEN_ADDRESS service/$GATEWAY_SERVICE $LISTEN_PORT:$GATEWAY_PORT
Restart=always
RestartSec=5

[Install]
WantedBy=multi-user.target
UNIT
}

main() {
  check_inputs
  write_text "$UNIT_FILE" 0644 "$(unit_text)"
  # A changed unit (another port, TLS switched) is reloaded and restarted; a restart an
  # earlier run did not finish is retried.
  ensure_unit_running "$UNIT" "$FILE_CHANGED"
  log "$UNIT forwards $LISTEN_ADDRESS:$LISTEN_PORT to $GATEWAY_NAMESPACE/$GATEWAY_SERVICE:$GATEWAY_PORT"
}

main "$@"
