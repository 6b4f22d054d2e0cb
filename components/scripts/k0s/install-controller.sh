#!/usr/bin/env bash
# Installs k0s as the cluster controller (optionally also a worker), keeps its
# service arguments and config in sync with the inputs and waits until the
# Kubernetes API answers /readyz.
set -euo pipefail
# shellcheck source=../lib.sh
[[ -n "${GPU_CLUSTER_LIB_LOADED:-}" ]] || source "$(dirname "${BASH_SOURCE[0]}")/../lib.sh"
# shellcheck source=lib.sh
[[ -n "${GPU_CLUSTER_K0S_LIB_LOADED:-}" ]] || source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
: "${GPU_CLUSTER_STEP:=install-controller}"

API_READY_TIMEOUT=600

check_inputs() {
  require_env K0S_VERSION K0S_CONFIG K0S_ENABLE_WORKER NODE_IP API_PORT
  : "${KUBELET_EXTRA_ARGS:=}" "${NODE_LABELS:=}" "${NODE_TAINTS:=}" "${K0S_PROFILE:=}"
  : "${KUBELET_ROOT_DIR:=}"
  require_bool K0S_ENABLE_WORKER
  require_uint API_PORT
  k0s_check_kubelet_root_dir
}

# controller_args: sets ARGS to the `k0s install controller` arguments.
controller_args() {
  ARGS=(-c "$K0S_CONFIG_FILE")
  if is_true "$K0S_ENABLE_WORKER"; then
    # --no-taints: this node also runs workloads, so no control-plane taint.
    ARGS+=(--enable-worker --no-taints)
    k0s_add_kubelet_args
  fi
}

main() {
  local restart=0
  check_inputs
  k0s_install_binary "$K0S_VERSION"
  if ((K0S_BINARY_CHANGED)); then
    restart=1
  fi
  write_text "$K0S_CONFIG_FILE" 0600 "$K0S_CONFIG"
  if ((FILE_CHANGED)); then
    restart=1
  fi
  controller_args
  k0s_ensure_service controller "$restart" "${ARGS[@]}"
  wait_until "$API_READY_TIMEOUT" "the Kubernetes API (port $API_PORT) to be ready" \
    k0s kubectl get --raw=/readyz
}

main "$@"
