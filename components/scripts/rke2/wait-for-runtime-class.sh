#!/usr/bin/env bash
# Runs on the RKE2 server once every node is ready: waits until RKE2's own RuntimeClass
# RUNTIME_CLASS exists as its chart CHART_RELEASE installed (or adopted) it, within
# WAIT_TIMEOUT seconds; the program then patches that object's scheduling.
set -euo pipefail
# shellcheck source=lib.sh
[[ -n "${GPU_CLUSTER_RKE2_LIB_LOADED:-}" ]] || source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
: "${GPU_CLUSTER_STEP:=wait-for-runtime-class}"

# Inputs: CHART_RELEASE RUNTIME_CLASS WAIT_TIMEOUT

# RKE2's helm-controller installs the rke2-runtimeclasses chart (nvidia, nvidia-experimental,
# crun) a while after the server starts (rancher/rke2 v1.36.3+rke2r1 charts/
# chart_versions.yaml:60-63, takeOwnership: true). A RuntimeClass of the program's own would
# be refused as AlreadyExists or taken over by Helm. Helm marks what it installs or adopts
# with the annotation meta.helm.sh/release-name (helm/helm pkg/action/validate.go).

# A Kubernetes object name (DNS subdomain) and a Helm release name.
OBJECT_NAME='^[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?$'

check_inputs() {
  require_env RUNTIME_CLASS CHART_RELEASE WAIT_TIMEOUT
  require_uint WAIT_TIMEOUT
  if [[ ! "$RUNTIME_CLASS" =~ $OBJECT_NAME || ! "$CHART_RELEASE" =~ $OBJECT_NAME ]]; then
    die "RUNTIME_CLASS and CHART_RELEASE must be object names, got '$RUNTIME_CLASS'" \
      "and '$CHART_RELEASE'"
  fi
}

# from_chart: success when RuntimeClass RUNTIME_CLASS is CHART_RELEASE's; prints why not.
from_chart() {
  local release
  if ! release="$(rke2_kubectl get runtimeclass "$RUNTIME_CLASS" \
    -o 'jsonpath={.metadata.annotations.meta\.helm\.sh/release-name}' 2>&1)"; then
    printf '%s\n' "$release"
    return 1
  fi
  if [[ "$release" != "$CHART_RELEASE" ]]; then
    echo "RuntimeClass $RUNTIME_CLASS is not (yet) the $CHART_RELEASE chart's" \
      "(its release: ${release:-none})"
    return 1
  fi
}

main() {
  check_inputs
  if ! (wait_until "$WAIT_TIMEOUT" "RuntimeClass $RUNTIME_CLASS from RKE2's $CHART_RELEASE chart" \
    from_chart); then
    die "RKE2 has not installed its $CHART_RELEASE chart: \`kubectl -n kube-system get" \
      "helmchart $CHART_RELEASE\` and the job helm-install-$CHART_RELEASE say why (a server" \
      "started with \`disable: $CHART_RELEASE\` has none)"
  fi
  log "RuntimeClass $RUNTIME_CLASS is RKE2's ($CHART_RELEASE chart); its scheduling is patched next"
}

main "$@"
