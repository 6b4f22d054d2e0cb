#!/usr/bin/env bash
# One snapshot of the control plane's state, kept outside the controller: run by
# gpu-cluster-backup.service at the times of its timer, or `systemctl start gpu-cluster-backup`.
set -euo pipefail
# shellcheck source=lib.sh
[[ -n "${GPU_CLUSTER_BACKUP_LIB_LOADED:-}" ]] || source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
# The distribution's way of taking and restoring a snapshot (<distribution>/cluster-state.sh),
# which install-backup installs beside it.
# shellcheck source=../k0s/cluster-state.sh
source "$(dirname "${BASH_SOURCE[0]}")/cluster-state.sh"
: "${GPU_CLUSTER_STEP:=backup}"

# Inputs: AWS_REGION BACKUP_BUCKET BACKUP_DIR BACKUP_NAME BACKUP_NFS_OPTIONS BACKUP_NFS_SOURCE BACKUP_OBJECT BACKUP_RETENTION BACKUP_STORE S3_CLIENT SSM_CLIENT
# Optional inputs: API_PORT BACKUP_CONTROLLERS BACKUP_NODE

# Every snapshot is encrypted here, before it leaves the controller, with age to the
# public keys in /etc/gpu-cluster/backup.recipients (config backup.recipients): age's
# payload is ChaCha20-Poly1305 in 64 KiB chunks and its header carries an HMAC
# (https://github.com/C2SP/C2SP/blob/main/age.md), so a changed byte is refused at
# decryption. No key that decrypts is on the controller.
#
# Settings (environment, from /etc/gpu-cluster/backup.env; see backup/lib.sh):
#   BACKUP_STORE      s3: PUT to s3://BACKUP_BUCKET/BACKUP_OBJECT with the instance's role
#                     (S3_CLIENT, s3-object.py), a new version each time: the bucket keeps
#                     BACKUP_RETENTION of them (its lifecycle); nfs: the folder BACKUP_DIR
#                     of the NFS export BACKUP_NFS_SOURCE; path: the folder BACKUP_DIR on
#                     the controller. In both, files BACKUP_NAME-<UTC time>-<snapshot>.age,
#                     the newest BACKUP_RETENTION kept.
#   BACKUP_CONTROLLERS, BACKUP_NODE, API_PORT  with several controllers, each of which runs
#                     this: only the first controller whose API answers takes the snapshot
#                     (backup/lib.sh backup_taker).

# encrypt_into FILE FOLDER NAME: FILE encrypted as FOLDER/NAME; a file only appears
# complete (written under a temporary name, then renamed).
encrypt_into() {
  local partial="$2/.$3.partial"
  age --encrypt --recipients-file "$ROOT$BACKUP_RECIPIENTS_FILE" --output "$partial" "$1" ||
    { rm -f -- "$partial"; die "could not encrypt the snapshot into $2"; }
  mv -f -- "$partial" "$2/$3"
}

# prune FOLDER: removes all but the newest BACKUP_RETENTION snapshots of this cluster
# (their names sort by time).
prune() {
  local -a kept=()
  local file
  mapfile -t kept < <(find "$1" -maxdepth 1 -type f -name "$BACKUP_NAME-*.age" -printf '%f\n' | sort -r)
  for file in "${kept[@]:BACKUP_RETENTION}"; do
    rm -f -- "${1:?}/$file"
    log "changed: removed $file (over the $BACKUP_RETENTION kept)"
  done
}

# keep_in SNAPSHOT NAME FOLDER: the snapshot encrypted into FOLDER, then the old ones pruned.
keep_in() {
  encrypt_into "$1" "$3" "$2"
  log "changed: kept $2 in $(backup_location)"
  prune "$3"
}

backup_location() {
  case "$BACKUP_STORE" in
    s3) printf 's3://%s/%s' "$BACKUP_BUCKET" "$BACKUP_OBJECT" ;;
    nfs) printf '%s/%s' "$BACKUP_NFS_SOURCE" "$BACKUP_DIR" ;;
    path) printf '%s' "$BACKUP_DIR" ;;
  esac
}

main() {
  local snapshot name taker
  load_backup_settings
  if [[ ! -s "$ROOT$BACKUP_RECIPIENTS_FILE" ]]; then
    die "no age public keys in $BACKUP_RECIPIENTS_FILE to encrypt to: has \`pulumi up\` run the install-backup step?"
  fi
  command -v age >/dev/null || die "age is not installed: has \`pulumi up\` run the install-backup step?"
  if [[ -n "${BACKUP_CONTROLLERS:-}" ]]; then
    taker="$(backup_taker)"
    [[ -n "$taker" ]] || die "no controller's API server answers (${BACKUP_CONTROLLERS}): no snapshot taken"
    if [[ "$taker" != "$BACKUP_NODE" ]]; then
      log "unchanged: $taker, the first controller whose API server answers, takes this snapshot"
      return 0
    fi
  fi
  # Only root reads what is written here (the plain snapshot in TEMP_DIR included).
  umask 077
  make_temp_dir
  snapshot="$(cluster_state_snapshot "$TEMP_DIR")" || die "could not take a snapshot"
  name="$BACKUP_NAME-$(date -u +%Y%m%dT%H%M%SZ)-${snapshot##*/}.age"
  case "$BACKUP_STORE" in
    s3)
      encrypt_into "$snapshot" "$TEMP_DIR" "$name"
      python3 "$ROOT$S3_CLIENT" put "$AWS_REGION" "$BACKUP_BUCKET" "$BACKUP_OBJECT" "$TEMP_DIR/$name" ||
        die "could not upload the snapshot to $(backup_location)"
      log "changed: uploaded ${snapshot##*/}, encrypted with age, to $(backup_location)"
      ;;
    nfs | path) with_backup_folder keep_in "$snapshot" "$name" ;;
  esac
}

main "$@"
