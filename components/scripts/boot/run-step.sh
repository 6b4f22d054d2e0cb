# shellcheck shell=bash
# Runs the step of one cloud-init user-data part at an instance's first boot. Appended to
# the part after its step function (gpu_cluster_create) and called last.
#
# cloud-init runs every part in order whatever an earlier part returned (cloud-init 22.4
# cloudinit/subp.py:416-430, runparts), so each part refuses to run unless the step
# before it completed: the first failure stops the rest. Every outcome is written to the
# console log (cloud-final.service: StandardOutput=journal+console) and, best effort, to the
# SSM parameter BOOT_STATUS_PARAMETER/<instance id>, which the user can read with
#   aws ssm get-parameters-by-path --path BOOT_STATUS_PARAMETER
#
# A step may reboot the instance (reboot-if-needed). The parts after it then wait for the
# reboot, and cloud-init is made to run the parts again at the next boot: cloud-init runs
# scripts_user once per instance unless its semaphore is gone (cloudinit/helpers.py
# FileSemaphores; cloudinit/config/cc_scripts_user.py: frequency PER_INSTANCE). Steps that
# completed in an earlier boot are not run again.
#
# Inputs (environment): GPU_CLUSTER_HOST, GPU_CLUSTER_STEP, BOOT_PREVIOUS_STEP (empty for
# the first step), BOOT_LAST_STEP (true for the last), BOOT_STATUS_PARAMETER, AWS_REGION,
# and in the first part only SSM_READER (the text of ssm-parameter.py) and the step
# libraries (BOOT_LIBRARIES, their paths; BOOT_LIBRARY_<n>, their texts), which it keeps
# in the boot folder for every part (each step sources its libraries from there).

gpu_cluster_boot_message() {
  printf 'gpu-cluster: %s: %s: %s\n' "$GPU_CLUSTER_HOST" "$GPU_CLUSTER_STEP" "$*" >&2
}

# gpu_cluster_boot_status TEXT: TEXT as this instance's boot status (not a secret: it is on
# a command line). A status that cannot be written is reported, never fatal.
gpu_cluster_boot_status() {
  local id
  [[ -n "${BOOT_STATUS_PARAMETER:-}" && -n "${SSM_READER:-}" ]] || return 0
  if id="$(python3 - instance-id <<<"$SSM_READER")" &&
    python3 - put "$AWS_REGION" "$BOOT_STATUS_PARAMETER/$id" "$1" <<<"$SSM_READER" >/dev/null; then
    return 0
  fi
  gpu_cluster_boot_message "warning: could not record the boot status '$1' in SSM"
}

# gpu_cluster_rebooting: a step of this boot scheduled a reboot (reboot-if-needed.sh keeps
# the boot id it is leaving).
gpu_cluster_rebooting() {
  local root="${GPU_CLUSTER_ROOT:-}" before="/var/lib/gpu-cluster/reboot/boot-id-before"
  [[ -f "$root$before" && "$(<"$root$before")" == "$(<"$root/proc/sys/kernel/random/boot_id")" ]]
}

# gpu_cluster_keep_libraries DIR: the first part's libraries, as files below DIR.
gpu_cluster_keep_libraries() {
  local number=0 path text
  for path in ${BOOT_LIBRARIES:-}; do
    if [[ ! "$path" =~ ^([a-z0-9-]+/)?lib\.sh$ ]]; then
      gpu_cluster_boot_message "not a library path: '$path'"
      exit 2
    fi
    text="BOOT_LIBRARY_$number"
    mkdir -p "$(dirname "$1/$path")"
    printf '%s\n' "${!text}" >"$1/$path"
    number=$((number + 1))
  done
}

gpu_cluster_boot_step() {
  local dir="${GPU_CLUSTER_ROOT:-}/var/lib/gpu-cluster/boot" status=0
  local semaphore="${CLOUD_INIT_DIR:-/var/lib/cloud}/instance/sem/config_scripts_user"
  mkdir -p "$dir"
  chmod 0700 "$dir"
  if [[ -n "${SSM_READER:-}" ]]; then
    printf '%s\n' "$SSM_READER" >"$dir/ssm-parameter.py"
  elif [[ -f "$dir/ssm-parameter.py" ]]; then
    SSM_READER="$(<"$dir/ssm-parameter.py")"
  fi
  export SSM_READER
  gpu_cluster_keep_libraries "$dir/lib"
  if gpu_cluster_rebooting; then
    gpu_cluster_boot_message "runs after the reboot under way"
    exit 0
  fi
  if [[ -e "$dir/$GPU_CLUSTER_STEP.done" ]]; then
    gpu_cluster_boot_message "completed in an earlier boot"
    exit 0
  fi
  if [[ -n "$BOOT_PREVIOUS_STEP" && ! -e "$dir/$BOOT_PREVIOUS_STEP.done" ]]; then
    gpu_cluster_boot_message "not run: the step before it, $BOOT_PREVIOUS_STEP, did not complete"
    exit 1
  fi
  gpu_cluster_boot_message "boot step started"
  gpu_cluster_boot_status "$GPU_CLUSTER_STEP: running"
  # Not in a condition: `set -e` inside the step must stay in force.
  set +e
  (gpu_cluster_create </dev/null)
  status=$?
  set -e
  if ((status != 0)); then
    gpu_cluster_boot_message "FAILED with exit code $status; the later boot steps will not run" \
      "(see /var/log/cloud-init-output.log)"
    gpu_cluster_boot_status "$GPU_CLUSTER_STEP: failed with exit code $status"
    exit "$status"
  fi
  : >"$dir/$GPU_CLUSTER_STEP.done"
  gpu_cluster_boot_message "boot step completed"
  if gpu_cluster_rebooting; then
    rm -f -- "$semaphore"
    gpu_cluster_boot_status "$GPU_CLUSTER_STEP: rebooting; the next steps run after it"
  elif [[ "$BOOT_LAST_STEP" == true ]]; then
    gpu_cluster_boot_status "ready"
  fi
}
