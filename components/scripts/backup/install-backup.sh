#!/usr/bin/env bash
# Scheduled snapshots of the control plane's state on the controller: the backup command
# (backup/backup.sh), gpu-cluster-restore (backup/restore.sh), the libraries they source,
# their settings, and a systemd timer starting gpu-cluster-backup.service at BACKUP_SCHEDULE.
set -euo pipefail
# shellcheck source=lib.sh
[[ -n "${GPU_CLUSTER_BACKUP_LIB_LOADED:-}" ]] || source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
# shellcheck source=../os/lib.sh
[[ -n "${GPU_CLUSTER_OS_LIB_LOADED:-}" ]] || source "$(dirname "${BASH_SOURCE[0]}")/../os/lib.sh"
: "${GPU_CLUSTER_STEP:=install-backup}"

# Inputs: BACKUP_FILES BACKUP_NAME BACKUP_RECIPIENTS BACKUP_RETENTION BACKUP_SCHEDULE BACKUP_STORE CONTROLLER_SERVICE
# Optional inputs: AWS_REGION BACKUP_BUCKET BACKUP_DIR BACKUP_NFS_OPTIONS BACKUP_NFS_SOURCE BACKUP_OBJECT S3_CLIENT SSM_CLIENT API_PORT BACKUP_CONTROLLERS BACKUP_NODE
# What they hold, beyond the settings backup/lib.sh checks:
#   BACKUP_FILES            required: PATH=SHA256 words, the files of the step bundle the
#                           commands run (PATH below components/scripts/), each installed
#                           once; their digests make a changed file re-run this step
#   BACKUP_SCHEDULE         required: systemd OnCalendar= value (checked by the config)
#   CONTROLLER_SERVICE      required: the control plane's unit, e.g. k0scontroller.service
#   BACKUP_RECIPIENTS       required: blank-separated age public keys (age1...) every
#                           snapshot is encrypted to; their private keys stay off the host
UNIT=gpu-cluster-backup
SERVICE_FILE="/etc/systemd/system/$UNIT.service"
TIMER_FILE="/etc/systemd/system/$UNIT.timer"
BACKUP_COMMAND="$BACKUP_LIB_DIR/backup.sh"
RECIPIENTS=()
# The files the step runs from: the step bundle (bundle/run-step.sh exports its folder),
# or the tree this script is in when run on its own.
SOURCE_DIR="${GPU_CLUSTER_BUNDLE_DIR:-$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")/.." && pwd)}"
# BACKUP_FILES: the paths in their order, and each one's sha256.
WANTED_PATHS=()
declare -A WANTED_SHA256=()

check_inputs() {
  local recipient
  read -r -a RECIPIENTS <<<"${BACKUP_RECIPIENTS:-}"
  check_missing_env BACKUP_FILES BACKUP_SCHEDULE CONTROLLER_SERVICE BACKUP_RECIPIENTS
  check_backup_settings
  check_backup_files
  # age's X25519 recipients (Bech32, "age" and 58 characters); config/backup.py also
  # checks their checksum.
  for recipient in "${RECIPIENTS[@]}"; do
    [[ "$recipient" =~ ^age1[qpzry9x8gf2tvdw0s3jn54khce6mua7l]{58}$ ]] ||
      INPUT_PROBLEMS+=("BACKUP_RECIPIENTS has '$recipient', which is not an age public key (age1...)")
  done
  # OnCalendar= takes the rest of its line: no line break, quote, `%` or `\`.
  if [[ -n "${BACKUP_SCHEDULE:-}" ]] && ! [[ "$BACKUP_SCHEDULE" =~ ^[A-Za-z0-9*,./:~\ -]+$ ]]; then
    INPUT_PROBLEMS+=("BACKUP_SCHEDULE is not a calendar event: '$BACKUP_SCHEDULE'")
  fi
  if [[ -n "${CONTROLLER_SERVICE:-}" ]] && ! [[ "$CONTROLLER_SERVICE" =~ ^[A-Za-z0-9@._-]+\.service$ ]]; then
    INPUT_PROBLEMS+=("CONTROLLER_SERVICE must be a systemd service name, got '$CONTROLLER_SERVICE'")
  fi
  die_on_input_problems
}

# installed_path PATH: where file PATH of the bundle goes; nothing for another file.
installed_path() {
  case "$1" in
    lib.sh) echo "$BACKUP_SHARED_LIB" ;;
    backup/lib.sh | backup/backup.sh | backup/restore.sh) echo "$BACKUP_LIB_DIR/${1#backup/}" ;;
    k0s/cluster-state.sh | rke2/cluster-state.sh) echo "$BACKUP_LIB_DIR/cluster-state.sh" ;;
    aws/s3-object.py) echo "${S3_CLIENT:-}" ;;
  esac
}

# check_backup_files: BACKUP_FILES names each file the commands need once, and no other.
check_backup_files() {
  local word path needed
  for word in ${BACKUP_FILES:-}; do
    path=${word%%=*}
    if ! [[ "$word" =~ ^[a-z0-9][a-z0-9/_.-]*=[0-9a-f]{64}$ ]] || [[ -z "$(installed_path "$path")" ]]; then
      INPUT_PROBLEMS+=("BACKUP_FILES has '$word', which is not PATH=SHA256 of a file the backup commands run")
    elif [[ -n "${WANTED_SHA256[$path]:-}" ]]; then
      INPUT_PROBLEMS+=("BACKUP_FILES names $path more than once")
    else
      WANTED_PATHS+=("$path")
      WANTED_SHA256[$path]=${word#*=}
    fi
  done
  [[ -n "${BACKUP_FILES:-}" ]] || return 0
  needed=(lib.sh backup/lib.sh backup/backup.sh backup/restore.sh)
  [[ "${BACKUP_STORE:-}" != s3 ]] || needed+=(aws/s3-object.py)
  for path in "${needed[@]}"; do
    [[ -n "${WANTED_SHA256[$path]:-}" ]] || INPUT_PROBLEMS+=("BACKUP_FILES lacks $path")
  done
  [[ -n "${WANTED_SHA256[k0s/cluster-state.sh]:-}${WANTED_SHA256[rke2/cluster-state.sh]:-}" ]] ||
    INPUT_PROBLEMS+=("BACKUP_FILES lacks the distribution's cluster-state.sh")
}

# install_backup_files: each file of BACKUP_FILES from SOURCE_DIR, refused unless it has
# the sha256 the step was rendered with. The service runs them afresh each time: nothing
# to restart.
install_backup_files() {
  local path source got mode
  for path in "${WANTED_PATHS[@]}"; do
    source="$SOURCE_DIR/$path"
    [[ -f "$source" ]] || die "no $path in $SOURCE_DIR: this step runs from the step bundle"
    got="$(sha256sum -- "$source" | cut -c1-64)"
    [[ "$got" == "${WANTED_SHA256[$path]}" ]] ||
      die "$source has sha256 $got, not the ${WANTED_SHA256[$path]} this step was rendered with"
    mode=0644
    [[ "$path" != backup/backup.sh && "$path" != backup/restore.sh ]] || mode=0700
    write_file "$(installed_path "$path")" "$mode" <"$source"
  done
}

# restore_wrapper_text: gpu-cluster-restore on the admin's PATH runs the installed
# restore.sh, which sources the libraries beside it (a link would not: restore.sh finds
# them from its own path). Relative to itself, so that it works below ROOT too.
restore_wrapper_text() {
  printf '#!/usr/bin/env bash\n# Written by gpu-cluster (step %s); changes are overwritten.\n' "$GPU_CLUSTER_STEP"
  cat <<'WRAPPER'
# gpu-cluster-restore: README "Restoring the control plane".
exec "$(dirname "${BASH_SOURCE[0]}")/../lib/gpu-cluster/backup/restore.sh" "$@"
WRAPPER
}

# settings_text: the settings backup.sh and gpu-cluster-restore read (EnvironmentFile=).
settings_text() {
  local name
  printf '# Written by gpu-cluster (step %s); changes are overwritten.\n' "$GPU_CLUSTER_STEP"
  printf 'GPU_CLUSTER_HOST=%s\n' "$GPU_CLUSTER_HOST"
  for name in BACKUP_STORE BACKUP_NAME BACKUP_RETENTION BACKUP_BUCKET BACKUP_OBJECT \
    AWS_REGION S3_CLIENT SSM_CLIENT BACKUP_NFS_SOURCE BACKUP_NFS_OPTIONS BACKUP_DIR \
    BACKUP_CONTROLLERS BACKUP_NODE API_PORT; do
    if [[ -n "${!name:-}" ]]; then
      printf '%s=%s\n' "$name" "${!name}"
    fi
  done
}

service_text() {
  cat <<UNIT
# Written by gpu-cluster (step $GPU_CLUSTER_STEP); changes are overwritten.
[Unit]
Description=gpu-cluster: snapshot of the control plane's state
After=$CONTROLLER_SERVICE network-online.target
Wants=network-online.target

[Service]
Type=oneshot
EnvironmentFile=$BACKUP_ENV_FILE
Environment=GPU_CLUSTER_STEP=backup
ExecStart=$BACKUP_COMMAND
UNIT
}

timer_text() {
  cat <<UNIT
# Written by gpu-cluster (step $GPU_CLUSTER_STEP); changes are overwritten.
[Unit]
Description=gpu-cluster: snapshots of the control plane's state, $BACKUP_SCHEDULE

[Timer]
OnCalendar=$BACKUP_SCHEDULE
# A time missed while the controller was off is caught up at boot.
Persistent=true
RandomizedDelaySec=10min

[Install]
WantedBy=timers.target
UNIT
}

# install_age: the age package (Ubuntu 22.04: 1.0.0 in universe; 24.04: 1.1.1,
# https://packages.ubuntu.com/jammy/age, https://packages.ubuntu.com/noble/age; EL9: EPEL's,
# os/lib.sh).
install_age() {
  os_install_packages age
}

main() {
  local changed=0
  check_inputs
  install_age
  install_backup_files
  write_text "$RESTORE_COMMAND" 0700 "$(restore_wrapper_text)"
  if [[ "$BACKUP_STORE" == s3 ]]; then
    [[ -f "$ROOT$SSM_CLIENT" ]] ||
      die "no $SSM_CLIENT, which the instance's boot keeps (the S3 client uses it)"
  fi
  # Public keys: encrypting needs no secret, and nothing here can decrypt.
  write_text "$BACKUP_RECIPIENTS_FILE" 0644 "$(printf '%s\n' "${RECIPIENTS[@]}")"
  if [[ -e "$ROOT$OLD_BACKUP_KEY_FILE" ]]; then
    warn "$OLD_BACKUP_KEY_FILE decrypts the snapshots made before they were encrypted with age (*.enc); delete it with them once no longer needed (README \"Backups\")"
  fi
  write_text "$BACKUP_ENV_FILE" 0600 "$(settings_text)"
  write_text "$SERVICE_FILE" 0644 "$(service_text)"
  changed=$((changed | FILE_CHANGED))
  write_text "$TIMER_FILE" 0644 "$(timer_text)"
  changed=$((changed | FILE_CHANGED))
  ensure_unit_running "$UNIT.timer" "$changed"
  log "$UNIT.timer starts a snapshot at '$BACKUP_SCHEDULE'"
}

main "$@"
