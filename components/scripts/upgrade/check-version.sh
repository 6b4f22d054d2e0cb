#!/usr/bin/env bash
# Runs on the controller before its install step: refuses a kubernetes.version that
# would skip a minor version or go back, against the version the API server and every
# node run (what the program cannot know offline). Changes nothing.
set -euo pipefail
# shellcheck source=lib.sh
[[ -n "${GPU_CLUSTER_UPGRADE_LIB_LOADED:-}" ]] || source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
: "${GPU_CLUSTER_STEP:=check-version}"

# Inputs: KUBECTL KUBERNETES_VERSION
#   KUBERNETES_VERSION  the release kubernetes.version names (e.g. v1.36.3+k0s.2).
#   KUBECTL             the controller's kubectl with its admin credential.

main() {
  local running problem node version problems=()
  check_missing_env KUBERNETES_VERSION
  check_kubectl_input
  die_on_input_problems
  if ! version_parts "$KUBERNETES_VERSION" >/dev/null; then
    die "KUBERNETES_VERSION is not a version: '$KUBERNETES_VERSION'"
  fi
  if ! controller_installed; then
    log "no control plane runs here yet: nothing to upgrade from"
    return 0
  fi
  if ! running="$(admin_kubectl version -o json 2>&1 | sed -n 's/^ *"gitVersion": *"\([^"]*\)".*/\1/p' | tail -n 1)" ||
    [[ -z "$running" ]]; then
    die "cannot read the version the API server runs, so cannot tell whether" \
      "$KUBERNETES_VERSION is a supported upgrade; nothing was changed. Bring the API back" \
      "(the install step re-run at the running version does) and run pulumi up again"
  fi
  problem="$(version_skew_problem "$running" "$KUBERNETES_VERSION")"
  if [[ -n "$problem" ]]; then
    problems+=("the API server runs $running; $problem")
  fi
  while read -r node version; do
    [[ -n "$node" ]] || continue
    problem="$(version_skew_problem "$version" "$KUBERNETES_VERSION")"
    if [[ -n "$problem" ]]; then
      problems+=("node $node runs $version; $problem")
    fi
  done < <(admin_kubectl get nodes \
    -o 'jsonpath={range .items[*]}{.metadata.name}{" "}{.status.nodeInfo.kubeletVersion}{"\n"}{end}')
  if ((${#problems[@]} > 0)); then
    printf -v problem '; %s' "${problems[@]}"
    die "refusing kubernetes.version $KUBERNETES_VERSION: ${problem#; }; nothing was changed." \
      "Set kubernetes.version back, or to the next minor release first"
  fi
  log "unchanged: $KUBERNETES_VERSION is a supported step from the running $running"
}

main "$@"
