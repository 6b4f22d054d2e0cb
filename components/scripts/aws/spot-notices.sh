#!/usr/bin/env bash
# Runs at boot on every EC2 pool instance: installs and starts gpu-cluster-spot-notices, the
# service that cordons and drains the instance's node on EC2's Spot notices (below).
set -euo pipefail
# shellcheck source=../lib.sh
[[ -n "${GPU_CLUSTER_LIB_LOADED:-}" ]] || source "$(dirname "${BASH_SOURCE[0]}")/../lib.sh"
: "${GPU_CLUSTER_STEP:=spot-notices}"

# Inputs: NODE_KUBECTL SPOT_NOTICE_HANDLER
#   SPOT_NOTICE_HANDLER  the text of spot-notice-handler.sh, the service's program.
#   NODE_KUBECTL         kubectl with the kubelet's own credential: an absolute path, then
#                        plain options (the distribution's node_kubectl).
#
# The service polls the instance metadata (IMDSv2) every 5 s for a Spot interruption notice
# (two minutes before EC2 stops or terminates the instance: cordon, then evictions, done
# within 90 s) and a rebalance recommendation (cordon only); spot-notice-handler.sh says
# what and why. On an on-demand instance both items answer 404 and it does nothing: it runs
# on every pool instance, whatever the pool buys.
#
# Who can do what: it uses the kubelet's own credential and brings none, so a compromised
# pool node gains nothing new. What that credential may do here, in kubernetes/kubernetes
# (the v1.36 tag's tree is over the size this machine may fetch; read instead at the commits
# the code index holds: node_authorizer.go at 00d03ec0, with the AuthorizeNodeWithSelectors
# gate of v1.31 and later; admission.go at 01467da7; functions and messages cited):
# - cordon (kubectl cordon: GET then PATCH its own Node's spec.unschedulable):
#   plugin/pkg/auth/authorizer/node/node_authorizer.go authorizeNode allows get/list/watch
#   of its own Node by name and "create", "update", "patch" of nodes, leaving the rest to
#   NodeRestriction; plugin/pkg/admission/noderestriction/admission.go admitNode forbids a
#   node any other Node ("node %q is not allowed to modify node %q"), its taints ("node %q
#   is not allowed to modify taints"), configSource and labels outside the kubelet's set,
#   and nothing else: spec.unschedulable is allowed. So no taint is set here: the node
#   lifecycle controller itself taints an unschedulable node
#   node.kubernetes.io/unschedulable:NoSchedule.
# - list the pods bound to it: authorizePod allows list/watch of pods only "with
#   spec.nodeName field selector" equal to its own name (the AuthorizeNodeWithSelectors
#   gate; without it, bootstrappolicy/policy.go NodeRules' Read of pods allows any list).
# - evict them: authorizePod allows create of pods/eviction ("Needed for the node to evict
#   pods it is running"; NodeRules: create pods/eviction), and admitPodEviction refuses a
#   pod on another node ("node %s can only evict pods with spec.nodeName set to itself").
# - not kubectl drain: for each DaemonSet pod it GETs the DaemonSet (kubectl
#   pkg/drain/filters.go daemonSetFilter), which neither the Node authorizer nor NodeRules
#   allow, so it fails on every node; the service evicts the pods itself.

LIBEXEC=/usr/local/libexec/gpu-cluster
ETC=/etc/gpu-cluster
UNIT=gpu-cluster-spot-notices
# The unit's StateDirectory=: what notices were acted on, kept across reboots.
STATE=/var/lib/gpu-cluster/spot-notices

check_inputs() {
  check_missing_env SPOT_NOTICE_HANDLER NODE_KUBECTL
  if [[ -n "${NODE_KUBECTL:-}" && ! "$NODE_KUBECTL" =~ ^/[A-Za-z0-9_./-]+([\ ][A-Za-z0-9_./=-]+)*$ ]]; then
    INPUT_PROBLEMS+=("NODE_KUBECTL is not an absolute path followed by plain options: '$NODE_KUBECTL'")
  fi
  die_on_input_problems
}

main() {
  local changed=0
  check_inputs
  write_text "$LIBEXEC/spot-notice-handler" 0755 "$SPOT_NOTICE_HANDLER"
  changed=$((changed | FILE_CHANGED))
  # systemd reads KEY=VALUE lines; NODE_KUBECTL (checked words, spaces) in double quotes.
  write_file "$ETC/spot-notices.env" 0644 <<EOT
NODE_KUBECTL="$NODE_KUBECTL"
SPOT_NOTICE_STATE=$STATE
EOT
  changed=$((changed | FILE_CHANGED))
  write_file "/etc/systemd/system/$UNIT.service" 0644 <<EOT
# Managed by gpu-cluster (spot-notices); changes are overwritten.
[Unit]
Description=gpu-cluster: cordon and drain this node on EC2 Spot interruption and rebalance notices
Wants=network-online.target
After=network-online.target

[Service]
Type=simple
EnvironmentFile=$ETC/spot-notices.env
ExecStart=$LIBEXEC/spot-notice-handler
Restart=always
RestartSec=5s
StateDirectory=${STATE#/var/lib/}
NoNewPrivileges=yes
PrivateTmp=yes
ProtectSystem=full

[Install]
WantedBy=multi-user.target
EOT
  changed=$((changed | FILE_CHANGED))
  if needs_follow_up "$changed" "start-$UNIT"; then
    systemd_reload
    log "changed: reloaded systemd units (daemon-reload)"
    systemd_enable "$UNIT.service"
    systemctl restart "$UNIT.service"
    log "changed: started $UNIT.service"
  else
    log "$UNIT.service is installed"
  fi
  follow_up_done "start-$UNIT"
  log "Spot interruption notices cordon and drain this node; rebalance recommendations cordon it"
}

main "$@"
