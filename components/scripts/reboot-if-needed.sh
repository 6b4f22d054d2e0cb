#!/usr/bin/env bash
# Reboots a host when a step left it needing one (kernel arguments, the NVIDIA driver,
# nouveau): before it joins, or, in the cluster, while its node is drained for it
# (drained_for_upgrade); otherwise a host in the cluster gets a warning to drain it.
set -euo pipefail
# shellcheck source=lib.sh
[[ -n "${GPU_CLUSTER_LIB_LOADED:-}" ]] || source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
: "${GPU_CLUSTER_STEP:=reboot-if-needed}"

# Inputs: NODE_SERVICES REBOOT_TIMEOUT SSH_PORT
# Optional inputs: DISABLE_CPU_MITIGATIONS DISABLE_IOMMU EXTRA_KERNEL_ARGS NODE_KUBECTL NODE_NAME NVIDIA_DRIVER_BRANCH
#   SSH_PORT            the port the program reaches this host's sshd at.
#   REBOOT_TIMEOUT      seconds the program waits for the host to come back; if the
#                       reboot has not happened by then, SSH is let in again.
#   NODE_SERVICES       the systemd units that run the distribution's node (space-separated,
#                       e.g. "k0scontroller.service k0sworker.service"): with one installed,
#                       the host is in the cluster.
#   NVIDIA_DRIVER_BRANCH, DISABLE_IOMMU, DISABLE_CPU_MITIGATIONS, EXTRA_KERNEL_ARGS
#                       what a reboot is for (as prepare-host and install-nvidia get them);
#                       only recorded, so that a change re-runs the step.
#   NODE_NAME, NODE_KUBECTL (over SSH, on a worker, with upgrade/lib.sh) how a host in
#                       the cluster reads whether its node is drained.
#
# The decision is the marker REBOOT_REQUIRED_FILE, /var/run/reboot-required, on both families:
# a step that needs a reboot sets it (lib.sh mark_reboot_required), and /run is a tmpfs that
# every boot starts empty (file-hierarchy(7), "/run"; /var/run links to it), so the reboot
# clears it. Ubuntu's packages set the same file (update-notifier-common); on the RHEL 9
# family only the program's steps do, so a kernel an administrator's `dnf update` installed
# is no reason for this step to reboot (`dnf needs-restarting -r` says whether one is due).
#
# The program's next step connects once the host is back. So that it cannot reach the
# host in the seconds before the reboot, new SSH connections are refused until then (an
# iptables rule, which the reboot clears; a timer removes it should the reboot not come).

BOOT_ID_FILE=/var/lib/gpu-cluster/reboot/boot-id-before
REBOOT_DELAY=2
RULE=(INPUT -p tcp --dport "${SSH_PORT:-22}" -m conntrack --ctstate NEW -m comment
  --comment gpu-cluster-reboot -j REJECT --reject-with tcp-reset)

check_inputs() {
  check_missing_env SSH_PORT REBOOT_TIMEOUT NODE_SERVICES
  : "${NVIDIA_DRIVER_BRANCH:=}" "${DISABLE_IOMMU:=}" "${DISABLE_CPU_MITIGATIONS:=}"
  : "${EXTRA_KERNEL_ARGS:=}"
  if [[ -n "${SSH_PORT:-}" ]] && ! [[ "$SSH_PORT" =~ ^[1-9][0-9]{0,4}$ && "$SSH_PORT" -le 65535 ]]; then
    INPUT_PROBLEMS+=("SSH_PORT is not a port number: '$SSH_PORT'")
  fi
  if [[ -n "${REBOOT_TIMEOUT:-}" && ! "$REBOOT_TIMEOUT" =~ ^[1-9][0-9]{1,4}$ ]]; then
    INPUT_PROBLEMS+=("REBOOT_TIMEOUT is not a number of seconds (10 or more): '$REBOOT_TIMEOUT'")
  fi
  if [[ -n "${NODE_SERVICES:-}" && ! "$NODE_SERVICES" =~ ^[A-Za-z0-9_.@-]+\.service(\ [A-Za-z0-9_.@-]+\.service)*$ ]]; then
    INPUT_PROBLEMS+=("NODE_SERVICES is not a list of systemd service names: '$NODE_SERVICES'")
  fi
  die_on_input_problems
}

# in_cluster: one of NODE_SERVICES is installed (a controller or a joined worker), where
# systemd looks for units: administrators', then locally installed, then packaged ones
# (systemd.unit(5), "System Unit Search Path"; RKE2's tarball install puts its units in
# /usr/local/lib/systemd/system).
in_cluster() {
  local service folder
  for service in $NODE_SERVICES; do
    for folder in /etc/systemd/system /usr/local/lib/systemd/system /usr/lib/systemd/system \
      /lib/systemd/system; do
      [[ -f "$ROOT$folder/$service" ]] && return 0
    done
  done
  return 1
}

main() {
  local boot_id
  check_inputs
  boot_id="$(<"$ROOT/proc/sys/kernel/random/boot_id")"
  if [[ -f "$ROOT$BOOT_ID_FILE" && "$(<"$ROOT$BOOT_ID_FILE")" == "$boot_id" ]]; then
    log "the reboot is already under way"
    return 0
  fi
  if [[ ! -e "$ROOT$REBOOT_REQUIRED_FILE" ]]; then
    remove_file "$BOOT_ID_FILE"
    log "no reboot needed"
    return 0
  fi
  if in_cluster && ! { [[ -n "${NODE_KUBECTL:-}" ]] &&
    drained_for_upgrade "$NODE_NAME" "$NODE_KUBECTL"; }; then
    warn "a reboot is pending ($REBOOT_REQUIRED_FILE) but this host is in the cluster:" \
      "drain it (kubectl drain $GPU_CLUSTER_HOST --ignore-daemonsets), reboot it, uncordon it"
    return 0
  fi
  if ! command -v iptables >/dev/null 2>&1; then
    die "iptables is not installed; it is needed to hold off SSH until the reboot"
  fi
  if ! iptables -C "${RULE[@]}" 2>/dev/null; then
    iptables -I "${RULE[@]}"
  fi
  systemd-run --unit=gpu-cluster-reboot-fallback --on-active="${REBOOT_TIMEOUT}s" \
    iptables -D "${RULE[@]}"
  systemd-run --unit=gpu-cluster-reboot --on-active="${REBOOT_DELAY}s" systemctl reboot
  # Only once the reboot is certain: the boot id it leaves tells what comes next
  # (verify-boot, a boot's later parts) that the reboot is under way.
  write_text "$BOOT_ID_FILE" 0644 "$boot_id"
  log "changed: rebooting in ${REBOOT_DELAY}s for what the earlier steps installed"
}

main "$@"
