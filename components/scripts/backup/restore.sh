#!/usr/bin/env bash
# gpu-cluster-restore: rebuilds the control plane's state from a snapshot, on the
# controller (README "Restoring the control plane").
set -euo pipefail
# shellcheck source=../lib.sh
[[ -n "${GPU_CLUSTER_LIB_LOADED:-}" ]] || source "$(dirname "${BASH_SOURCE[0]}")/../lib.sh"
# shellcheck source=lib.sh
[[ -n "${GPU_CLUSTER_BACKUP_LIB_LOADED:-}" ]] || source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
: "${GPU_CLUSTER_STEP:=restore}"

# install-backup installs it with the distribution's cluster_state_restore
# (<distribution>/cluster-state.sh) ahead of it.
#
#   gpu-cluster-restore --yes FILE     a snapshot file on the controller; an .enc file (from
#                                      the NFS export or backup.path) is decrypted with
#                                      /etc/gpu-cluster/backup.key
#   gpu-cluster-restore --yes latest   the newest snapshot in the NFS export or backup.path
#   gpu-cluster-restore --list         the snapshots there, newest first
#
# Restoring stops the control plane and replaces its state: what changed in the cluster
# since the snapshot is lost, hence --yes. The timer's backups are paused meanwhile.

USAGE="usage: gpu-cluster-restore --yes FILE|latest, or gpu-cluster-restore --list"

# list_in FOLDER: this cluster's snapshots in FOLDER, newest first.
list_in() {
  find "$1" -maxdepth 1 -type f -name "$BACKUP_NAME-*.enc" -printf '%f\n' | sort -r
}

# copy_newest_in TARGET FOLDER: the newest snapshot in FOLDER, copied to TARGET.
copy_newest_in() {
  local newest
  newest="$(list_in "$2" | head -n 1)"
  [[ -n "$newest" ]] || die "no snapshot of $BACKUP_NAME in $2"
  log "restoring $newest"
  cp -- "$2/$newest" "$1"
}

# plain_snapshot FILE: the snapshot to restore, decrypted into TEMP_DIR when encrypted.
plain_snapshot() {
  local file=$1
  if [[ "$file" != *.enc ]]; then
    printf '%s\n' "$file"
    return
  fi
  [[ -s "$ROOT$BACKUP_KEY_FILE" ]] || die "no key in $BACKUP_KEY_FILE to decrypt $file"
  local plain
  plain="$TEMP_DIR/$(basename -- "${file%.enc}")"
  openssl enc -d -aes-256-cbc -pbkdf2 -iter 200000 -in "$file" -out "$plain" \
    -pass "file:$ROOT$BACKUP_KEY_FILE" ||
    die "could not decrypt $file with $BACKUP_KEY_FILE (a snapshot of another stack?)"
  printf '%s\n' "$plain"
}

main() {
  local confirmed=false what="" file
  while (($#)); do
    case "$1" in
      --yes) confirmed=true ;;
      --list) what=--list ;;
      -*) die "$USAGE" ;;
      *) [[ -z "$what" ]] || die "$USAGE"; what=$1 ;;
    esac
    shift
  done
  [[ -n "$what" ]] || die "$USAGE"
  load_backup_settings
  if [[ "$what" == --list ]]; then
    [[ "$BACKUP_STORE" != s3 ]] || die "snapshots in S3 are versions of s3://$BACKUP_BUCKET/$BACKUP_OBJECT: list them with \`aws s3api list-object-versions\`"
    with_backup_folder list_in
    return
  fi
  [[ "$confirmed" == true ]] || die "restoring replaces the cluster's state with the snapshot's: add --yes"
  make_temp_dir
  if [[ "$what" == latest ]]; then
    [[ "$BACKUP_STORE" != s3 ]] || die "download a version of s3://$BACKUP_BUCKET/$BACKUP_OBJECT and give its path"
    with_backup_folder copy_newest_in "$TEMP_DIR/latest.enc"
    what="$TEMP_DIR/latest.enc"
  fi
  [[ -f "$what" ]] || die "no snapshot file $what"
  file="$(plain_snapshot "$what")"
  systemctl stop gpu-cluster-backup.timer
  cluster_state_restore "$file"
  systemctl start gpu-cluster-backup.timer
}

main "$@"
