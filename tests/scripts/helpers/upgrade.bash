# shellcheck shell=bash
# The rolling upgrade as the controller's steps see it (upgrade/drain-node.sh and
# uncordon-node.sh): RKE2's kubectl with the admin kubeconfig, and the node annotations the
# steps keep the rollout's state in (gpu-cluster.io/upgrading-to, upgrade-failed and
# host-settings), which the stubbed API keeps as files in STUB_STATE (stubs/stub, the
# `annotate` branch of its kubectl).

# How the steps call the controller's kubectl, as a regular expression.
# shellcheck disable=SC2034 # used by the .bats files
ADMIN='^kubectl --kubeconfig /etc/rancher/rke2/rke2\.yaml'

# rke2_admin_kubectl: RKE2's kubectl installed and passed as KUBECTL, as the program passes
# it to the upgrade steps of an RKE2 controller.
rke2_admin_kubectl() {
  rke2_kubectl_installed
  export KUBECTL="/var/lib/rancher/rke2/bin/kubectl --kubeconfig /etc/rancher/rke2/rke2.yaml"
}

# marks NODE: "UPGRADING-TO|UPGRADE-FAILED|HOST-SETTINGS", NODE's annotations.
marks() {
  printf '%s|%s|%s' "$(cat "$STUB_STATE/annotation-$1" 2>/dev/null)" \
    "$(cat "$STUB_STATE/failed-$1" 2>/dev/null)" "$(cat "$STUB_STATE/settings-$1" 2>/dev/null)"
}

# assert_marks NODE MARKS: NODE's annotations are MARKS (as marks prints them).
assert_marks() {
  local actual
  actual="$(marks "$1")"
  if [[ "$actual" != "$2" ]]; then
    printf 'node %s is marked %s, expected %s\n' "$1" "$actual" "$2" >&2
    return 1
  fi
}

# refute_drained NODE MARKS: no node was drained or annotated, and NODE's annotations are
# still MARKS.
refute_drained() {
  refute_called ' (drain|annotate) ' || return 1
  assert_marks "$1" "$2"
}

# upgrade_inputs: drain-node's inputs for the upgrade of node kazan to v1.37.0+rke2r1 as the
# program passes them (one node at a time, 120s to drain, 30s to wait for a slot), with
# kazan registered and its kubelet at the older v1.36.3+rke2r1.
upgrade_inputs() {
  rke2_admin_kubectl
  export NODE_NAME=kazan STUB_NODES=kazan KUBERNETES_VERSION=v1.37.0+rke2r1 DRAIN_TIMEOUT=120 \
    MAX_UNAVAILABLE=1 SLOT_WAIT_TIMEOUT=30 STUB_KUBELET_VERSION=v1.36.3+rke2r1
}
