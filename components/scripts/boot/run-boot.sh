#!/usr/bin/env bash
# Runs a machine's boot plan (boot/bootstrap.sh execs it from the step bundle): each step in
# order, as SSH would run it, stopping at the first failure; every outcome in the console
# log and, best effort, in SSM; a step may reboot the machine, and the boot goes on after it.
set -euo pipefail

# Usage: run-boot.sh PLAN. PLAN has one line a step, `NAME BASE64`, BASE64 its stdin as the
# program renders it (components/common/remote_step.py bundle_stdin), run with `create`.
# Optional inputs: AWS_REGION BOOT_STATUS_PARAMETER CLOUD_INIT_DIR
# What they hold: GPU_CLUSTER_HOST, AWS_REGION, BOOT_STATUS_PARAMETER.
#
# The outcome goes to the console log (cloud-final.service: StandardOutput=journal+console)
# and to the SSM parameter BOOT_STATUS_PARAMETER/<instance id>, which the user can read with
#   aws ssm get-parameters-by-path --path BOOT_STATUS_PARAMETER
#
# A step may reboot the instance (reboot-if-needed): cloud-init is then made to run the user
# data again at the next boot, as it runs scripts_user once per instance unless its
# semaphore is gone (cloud-init 22.4 cloudinit/helpers.py FileSemaphores;
# cloudinit/config/cc_scripts_user.py: frequency PER_INSTANCE). Steps that completed in an
# earlier boot are not run again.

GPU_CLUSTER_STEP=boot

boot_message() {
  printf 'gpu-cluster: %s: %s: %s\n' "$GPU_CLUSTER_HOST" "$GPU_CLUSTER_STEP" "$*" >&2
}

# boot_status TEXT: TEXT as this instance's boot status (not a secret: it is on a command
# line). A status that cannot be written is reported, never fatal.
boot_status() {
  local id
  [[ -n "${BOOT_STATUS_PARAMETER:-}" ]] || return 0
  if id="$(python3 - instance-id <<<"$SSM_READER")" &&
    python3 - put "$AWS_REGION" "$BOOT_STATUS_PARAMETER/$id" "$1" <<<"$SSM_READER" >/dev/null; then
    return 0
  fi
  boot_message "warning: could not record the boot status '$1' in SSM"
}

# rebooting: a step of this boot scheduled a reboot (reboot-if-needed.sh keeps the boot id
# it is leaving).
rebooting() {
  local root="${GPU_CLUSTER_ROOT:-}" before="/var/lib/gpu-cluster/reboot/boot-id-before"
  [[ -f "$root$before" && "$(<"$root$before")" == "$(<"$root/proc/sys/kernel/random/boot_id")" ]]
}

main() {
  local plan=$1 dir="${GPU_CLUSTER_ROOT:-}/var/lib/gpu-cluster/boot" name encoded status
  local semaphore="${CLOUD_INIT_DIR:-/var/lib/cloud}/instance/sem/config_scripts_user"
  # Steps read SSM with the bundle's client (the text, run by python3 from stdin); the
  # services the boot installs (the node cleanup agent, the backups) run its copy in the
  # boot folder, which only root may read.
  SSM_READER="$(<"$(dirname "${BASH_SOURCE[0]}")/../ssm-parameter.py")"
  export SSM_READER
  mkdir -p -- "$dir/steps"
  chmod 0700 -- "$dir"
  printf '%s\n' "$SSM_READER" >"$dir/ssm-parameter.py"
  while read -r name encoded; do
    GPU_CLUSTER_STEP=$name
    if [[ -e "$dir/$name.done" ]]; then
      boot_message "completed in an earlier boot"
      continue
    fi
    boot_message "boot step started"
    boot_status "$name: running"
    base64 -d <<<"$encoded" >"$dir/steps/$name.sh"
    status=0
    bash "$dir/steps/$name.sh" create </dev/null || status=$?
    if ((status != 0)); then
      boot_message "FAILED with exit code $status; the later boot steps will not run" \
        "(see /var/log/cloud-init-output.log)"
      boot_status "$name: failed with exit code $status"
      exit "$status"
    fi
    : >"$dir/$name.done"
    boot_message "boot step completed"
    if rebooting; then
      rm -f -- "$semaphore"
      boot_status "$name: rebooting; the next steps run after it"
      exit 0
    fi
  done <"$plan"
  boot_status "ready"
}

main "$@"
