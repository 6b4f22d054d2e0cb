#!/usr/bin/env bash
# The Kubeflow UI on the controller: a systemd unit running `k0s kubectl port-forward` to
# the Istio ingress gateway, restarted whenever it drops (gateway pod restarts).
set -euo pipefail
# shellcheck source=../scripts/lib.sh
[[ -n "${GPU_CLUSTER_LIB_LOADED:-}" ]] || source "$(dirname "${BASH_SOURCE[0]}")/../scripts/lib.sh"
: "${GPU_CLUSTER_STEP:=kubeflow-port-forward}"

# Inputs (environment):
#   LISTEN_ADDRESS     required: address the controller listens on, e.g. 127.0.0.1
#   LISTEN_PORT        required: port it listens on, e.g. 8080
#   GATEWAY_NAMESPACE  required: namespace of the gateway Service (istio-system)
#   GATEWAY_SERVICE    required: the gateway Service (istio-ingressgateway)
UNIT=gpu-cluster-kubeflow-port-forward
UNIT_FILE="/etc/systemd/system/$UNIT.service"

check_inputs() {
  check_missing_env LISTEN_ADDRESS LISTEN_PORT GATEWAY_NAMESPACE GATEWAY_SERVICE
  if [[ -n "${LISTEN_PORT:-}" ]] && ! [[ "$LISTEN_PORT" =~ ^[0-9]{1,5}$ && "$LISTEN_PORT" -ge 1 && "$LISTEN_PORT" -le 65535 ]]; then
    INPUT_PROBLEMS+=("LISTEN_PORT must be a port number, got '$LISTEN_PORT'")
  fi
  if [[ -n "${LISTEN_ADDRESS:-}" ]] && ! [[ "$LISTEN_ADDRESS" =~ ^[0-9]{1,3}(\.[0-9]{1,3}){3}$ ]]; then
    INPUT_PROBLEMS+=("LISTEN_ADDRESS must be an IPv4 address, got '$LISTEN_ADDRESS'")
  fi
  die_on_input_problems
}

unit_text() {
  cat <<UNIT
# Written by gpu-cluster (step $GPU_CLUSTER_STEP); changes are overwritten.
[Unit]
Description=gpu-cluster: Kubeflow UI, port-forward to $GATEWAY_NAMESPACE/$GATEWAY_SERVICE
After=k0scontroller.service
Wants=k0scontroller.service

[Service]
ExecStart=/usr/local/bin/k0s kubectl --namespace $GATEWAY_NAMESPACE port-forward --address $LISTEN_ADDRESS service/$GATEWAY_SERVICE $LISTEN_PORT:80
Restart=always
RestartSec=5

[Install]
WantedBy=multi-user.target
UNIT
}

create() {
  check_inputs
  write_text "$UNIT_FILE" 0644 "$(unit_text)"
  if ((FILE_CHANGED)); then
    systemd_reload
    systemd_enable "$UNIT" >&2
    systemctl restart "$UNIT"
    log "changed: $UNIT forwards $LISTEN_ADDRESS:$LISTEN_PORT to $GATEWAY_NAMESPACE/$GATEWAY_SERVICE"
  else
    systemd_enable --now "$UNIT" >&2
    log "unchanged: $UNIT"
  fi
}

create
