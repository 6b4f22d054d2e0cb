#!/usr/bin/env bash
# Scheduled snapshots of the control plane's state on the controller: the backup command
# (backup/backup.sh), gpu-cluster-restore (backup/restore.sh), their settings, and a
# systemd timer starting gpu-cluster-backup.service at BACKUP_SCHEDULE.
set -euo pipefail
# shellcheck source=lib.sh
[[ -n "${GPU_CLUSTER_BACKUP_LIB_LOADED:-}" ]] || source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
: "${GPU_CLUSTER_STEP:=install-backup}"

# Inputs: BACKUP_NAME BACKUP_RECIPIENTS BACKUP_RETENTION BACKUP_SCHEDULE BACKUP_SCRIPT BACKUP_STORE CONTROLLER_SERVICE RESTORE_SCRIPT
# Optional inputs: AWS_REGION BACKUP_BUCKET BACKUP_DIR BACKUP_NFS_OPTIONS BACKUP_NFS_SOURCE BACKUP_OBJECT S3_CLIENT S3_CLIENT_SCRIPT SSM_CLIENT
# What they hold, beyond the settings backup/lib.sh checks:
#   BACKUP_SCRIPT, RESTORE_SCRIPT  required: the texts of the two commands
#   BACKUP_SCHEDULE         required: systemd OnCalendar= value (checked by the config)
#   CONTROLLER_SERVICE      required: the control plane's unit, e.g. k0scontroller.service
#   BACKUP_RECIPIENTS       required: blank-separated age public keys (age1...) every
#                           snapshot is encrypted to; their private keys stay off the host
#   S3_CLIENT_SCRIPT        s3: the text of s3-object.py, installed at S3_CLIENT
UNIT=gpu-cluster-backup
SERVICE_FILE="/etc/systemd/system/$UNIT.service"
TIMER_FILE="/etc/systemd/system/$UNIT.timer"
BACKUP_COMMAND="$BACKUP_LIB_DIR/backup.sh"
RESTORE_COMMAND=/usr/local/sbin/gpu-cluster-restore
RECIPIENTS=()

check_inputs() {
  local recipient
  read -r -a RECIPIENTS <<<"${BACKUP_RECIPIENTS:-}"
  check_missing_env BACKUP_SCRIPT RESTORE_SCRIPT BACKUP_SCHEDULE CONTROLLER_SERVICE \
    BACKUP_RECIPIENTS
  check_backup_settings
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
  [[ "${BACKUP_STORE:-}" != s3 ]] || check_missing_env S3_CLIENT_SCRIPT
  die_on_input_problems
}

# settings_text: the settings backup.sh and gpu-cluster-restore read (EnvironmentFile=).
settings_text() {
  local name
  printf '# Written by gpu-cluster (step %s); changes are overwritten.\n' "$GPU_CLUSTER_STEP"
  printf 'GPU_CLUSTER_HOST=%s\n' "$GPU_CLUSTER_HOST"
  for name in BACKUP_STORE BACKUP_NAME BACKUP_RETENTION BACKUP_BUCKET BACKUP_OBJECT \
    AWS_REGION S3_CLIENT SSM_CLIENT BACKUP_NFS_SOURCE BACKUP_NFS_OPTIONS BACKUP_DIR; do
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
# https://packages.ubuntu.com/jammy/age, https://packages.ubuntu.com/noble/age).
install_age() {
  if package_installed age; then
    log "age is already installed"
    return 0
  fi
  apt_update_once
  apt_get install -y age
  log "changed: installed age"
}

main() {
  local changed=0
  check_inputs
  install_age
  write_text "$BACKUP_COMMAND" 0700 "$BACKUP_SCRIPT"
  write_text "$RESTORE_COMMAND" 0700 "$RESTORE_SCRIPT"
  if [[ "$BACKUP_STORE" == s3 ]]; then
    write_text "$S3_CLIENT" 0644 "$S3_CLIENT_SCRIPT"
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
