#!/usr/bin/env bash
# What the backup and restore commands on the controller share: their settings, from the
# file install-backup writes, and the checks of those settings.
# shellcheck shell=bash disable=SC2034 # its globals are read by the scripts that source it

# shellcheck source=../lib.sh
[[ -n "${GPU_CLUSTER_LIB_LOADED:-}" ]] || source "$(dirname "${BASH_SOURCE[0]}")/../lib.sh"

GPU_CLUSTER_BACKUP_LIB_LOADED=1
# What install-backup installs: the commands and the libraries they source (the shared
# lib.sh where backup/lib.sh finds it), and gpu-cluster-restore on the admin's PATH.
BACKUP_LIB_DIR=/usr/local/lib/gpu-cluster/backup
BACKUP_SHARED_LIB=/usr/local/lib/gpu-cluster/lib.sh
RESTORE_COMMAND=/usr/local/sbin/gpu-cluster-restore
BACKUP_ENV_FILE=/etc/gpu-cluster/backup.env
# The age public keys snapshots are encrypted to (install-backup).
BACKUP_RECIPIENTS_FILE=/etc/gpu-cluster/backup.recipients
# The symmetric key of the snapshots made before age (*.enc, openssl without a MAC): read
# by nothing any more, named in warnings only.
OLD_BACKUP_KEY_FILE=/etc/gpu-cluster/backup.key
# Where the NFS export is mounted while a snapshot is written to it.
BACKUP_MOUNT_DIR=/run/gpu-cluster/backup-mount

# check_backup_settings: adds to INPUT_PROBLEMS every problem of the settings (the
# environment) for store BACKUP_STORE: s3, nfs or path.
check_backup_settings() {
  check_missing_env BACKUP_STORE BACKUP_NAME BACKUP_RETENTION
  if [[ -n "${BACKUP_RETENTION:-}" ]] && ! [[ "$BACKUP_RETENTION" =~ ^[1-9][0-9]{0,2}$ ]]; then
    INPUT_PROBLEMS+=("BACKUP_RETENTION must be a count from 1, got '$BACKUP_RETENTION'")
  fi
  if [[ -n "${BACKUP_NAME:-}" ]] && ! [[ "$BACKUP_NAME" =~ ^[a-z0-9]([a-z0-9-]*[a-z0-9])?$ ]]; then
    INPUT_PROBLEMS+=("BACKUP_NAME must be a DNS label, got '$BACKUP_NAME'")
  fi
  case "${BACKUP_STORE:-}" in
    s3)
      check_missing_env BACKUP_BUCKET BACKUP_OBJECT AWS_REGION S3_CLIENT SSM_CLIENT
      _backup_check_pattern BACKUP_BUCKET '^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$'
      _backup_check_pattern BACKUP_OBJECT '^[A-Za-z0-9][A-Za-z0-9._/-]*$'
      _backup_check_pattern AWS_REGION '^[a-z]{2}(-[a-z]+)+-[0-9]$'
      _backup_check_pattern S3_CLIENT '^/[A-Za-z0-9._/-]+$'
      _backup_check_pattern SSM_CLIENT '^/[A-Za-z0-9._/-]+$'
      ;;
    nfs)
      check_missing_env BACKUP_NFS_SOURCE BACKUP_NFS_OPTIONS BACKUP_DIR
      _backup_check_pattern BACKUP_NFS_SOURCE '^[A-Za-z0-9.-]+:/[A-Za-z0-9._/-]*$'
      _backup_check_pattern BACKUP_NFS_OPTIONS '^[A-Za-z0-9_=.:-]+(,[A-Za-z0-9_=.:-]+)*$'
      _backup_check_pattern BACKUP_DIR '^[A-Za-z0-9._-]+(/[A-Za-z0-9._-]+)*$'
      ;;
    path)
      check_missing_env BACKUP_DIR
      _backup_check_pattern BACKUP_DIR '^/[A-Za-z0-9._/-]*$'
      ;;
    "") ;;
    *) INPUT_PROBLEMS+=("BACKUP_STORE must be s3, nfs or path, got '$BACKUP_STORE'") ;;
  esac
  _backup_check_controllers
}

# _backup_check_controllers: with several controllers, BACKUP_CONTROLLERS (NAME=IPV4 of
# each, in config order, joined by commas: one word in the settings file, which bash and
# systemd both read), BACKUP_NODE (this one, among them) and API_PORT; none of the three
# with one controller.
_backup_check_controllers() {
  local entry list names=" "
  [[ -n "${BACKUP_CONTROLLERS:-}${BACKUP_NODE:-}${API_PORT:-}" ]] || return 0
  check_missing_env BACKUP_CONTROLLERS BACKUP_NODE API_PORT
  list=${BACKUP_CONTROLLERS:-}
  for entry in ${list//,/ }; do
    if [[ "$entry" =~ ^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?=[0-9.]+$ ]] && valid_ipv4 "${entry#*=}"; then
      names+="${entry%%=*} "
    else
      INPUT_PROBLEMS+=("BACKUP_CONTROLLERS has '$entry', which is not NAME=IPV4 of a controller")
    fi
  done
  if [[ -n "${BACKUP_NODE:-}" && "$names" != *" $BACKUP_NODE "* ]]; then
    INPUT_PROBLEMS+=("BACKUP_NODE '$BACKUP_NODE' is not one of BACKUP_CONTROLLERS")
  fi
  if [[ -n "${API_PORT:-}" ]] && ! [[ "$API_PORT" =~ ^[1-9][0-9]{0,4}$ && "$API_PORT" -le 65535 ]]; then
    INPUT_PROBLEMS+=("API_PORT must be a TCP port, got '$API_PORT'")
  fi
}

# backup_taker: with several controllers, the one that takes this snapshot: the first of
# BACKUP_CONTROLLERS (config order) whose API server answers /readyz at its own address,
# asked with this controller's admin credential (cluster_state_api_ready); nothing when
# none answers. Each controller's timer runs this, so exactly the ones that agree on the
# first healthy controller skip (a controller that cannot reach that one takes a snapshot
# too: one more, never none).
backup_taker() {
  local entry
  for entry in ${BACKUP_CONTROLLERS//,/ }; do
    if cluster_state_api_ready "${entry#*=}" "$API_PORT"; then
      printf '%s\n' "${entry%%=*}"
      return 0
    fi
  done
}

# _backup_check_pattern VAR REGEX: a problem when VAR is set and does not match REGEX
# (every setting lands in a systemd EnvironmentFile= and on command lines as one word).
_backup_check_pattern() {
  if [[ -n "${!1:-}" ]] && ! [[ "${!1}" =~ $2 ]]; then
    INPUT_PROBLEMS+=("$1 is not valid: '${!1}'")
  fi
}

# load_backup_settings: the settings install-backup wrote, unless given in the
# environment already (tests, a run by hand), checked.
load_backup_settings() {
  if [[ -z "${BACKUP_STORE:-}" ]]; then
    [[ -r "$ROOT$BACKUP_ENV_FILE" ]] ||
      die "no backup settings in $BACKUP_ENV_FILE: has \`pulumi up\` run the install-backup step?"
    set -a
    # shellcheck source=/dev/null
    source "$ROOT$BACKUP_ENV_FILE"
    set +a
  fi
  check_backup_settings
  die_on_input_problems
}

# with_backup_folder COMMAND ARGS...: runs COMMAND ARGS... FOLDER with FOLDER the host
# path snapshots are kept in: BACKUP_DIR, or its folder of the NFS export, mounted for the
# time of COMMAND only.
with_backup_folder() {
  local mount="$ROOT$BACKUP_MOUNT_DIR" status=0
  if [[ "$BACKUP_STORE" == path ]]; then
    mkdir -p -- "$ROOT$BACKUP_DIR"
    "$@" "$ROOT$BACKUP_DIR"
    return
  fi
  mkdir -p -- "$mount"
  if ! mountpoint -q -- "$mount"; then
    mount -t nfs -o "$BACKUP_NFS_OPTIONS" "$BACKUP_NFS_SOURCE" "$mount" ||
      die "could not mount the NFS export $BACKUP_NFS_SOURCE"
  fi
  mkdir -p -- "$mount/$BACKUP_DIR"
  "$@" "$mount/$BACKUP_DIR" || status=$?
  umount -- "$mount" || warn "could not unmount $BACKUP_MOUNT_DIR"
  return "$status"
}

# leave_cluster SERVICE DIR: gpu-cluster-restore --leave on a controller but the first:
# SERVICE stopped and DIR (its cluster state) moved aside to DIR.before-restore-<time>, so
# that it joins the restored cluster as a new member (each distribution's
# cluster_state_leave says which). A second run finds nothing to move.
leave_cluster() {
  local service=$1 dir=$2 aside
  systemctl stop "$service"
  if [[ ! -e "$ROOT$dir" ]]; then
    log "unchanged: no $dir; $service stopped"
    return 0
  fi
  aside="$dir.before-restore-$(date -u +%Y%m%dT%H%M%SZ)"
  mv -- "$ROOT$dir" "$ROOT$aside"
  log "changed: stopped $service and moved $dir aside to $aside; once the first" \
    "controller is restored, raise this host's generation and run pulumi up to join it again"
}
