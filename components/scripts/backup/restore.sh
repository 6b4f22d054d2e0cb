#!/usr/bin/env bash
# gpu-cluster-restore: rebuilds the control plane's state from a snapshot, on the
# controller (README "Restoring the control plane").
set -euo pipefail
# shellcheck source=lib.sh
[[ -n "${GPU_CLUSTER_BACKUP_LIB_LOADED:-}" ]] || source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
# The distribution's way of taking and restoring a snapshot (<distribution>/cluster-state.sh),
# which install-backup installs beside it.
# shellcheck source=../k0s/cluster-state.sh
source "$(dirname "${BASH_SOURCE[0]}")/cluster-state.sh"
: "${GPU_CLUSTER_STEP:=restore}"

# Inputs: AWS_REGION BACKUP_BUCKET BACKUP_DIR BACKUP_NAME BACKUP_NFS_OPTIONS BACKUP_NFS_SOURCE BACKUP_OBJECT BACKUP_RETENTION BACKUP_STORE S3_CLIENT SSM_CLIENT
# Optional inputs: API_PORT BACKUP_CONTROLLERS BACKUP_NODE

#   gpu-cluster-restore --yes --identity KEY FILE     a snapshot file on the controller (from
#                                      S3, the NFS export or backup.path), decrypted with
#                                      age and the restorer's identity file KEY (the private
#                                      key of one of backup.recipients)
#   gpu-cluster-restore --yes --identity KEY latest   the newest snapshot in the NFS export
#                                      or backup.path
#   gpu-cluster-restore --yes --decrypted FILE        a snapshot already decrypted elsewhere
#                                      (`age --decrypt -i KEY -o FILE SNAPSHOT`)
#   gpu-cluster-restore --list         the snapshots there, newest first
#   gpu-cluster-restore --yes --leave  with several controllers, on each but the first,
#                                      before the first restores: stops this controller's
#                                      control plane and puts its state aside, so that it
#                                      joins the restored cluster when `pulumi up` runs its
#                                      steps again (hosts[].generation raised)
#
# A snapshot age does not decrypt (another key, or a changed byte: age checks the header's
# HMAC and each chunk's Poly1305 tag) is refused before anything stops. Restoring stops
# the control plane and replaces its state: what changed in the cluster since the
# snapshot is lost, hence --yes. The timer's backups are paused meanwhile.

USAGE="usage: gpu-cluster-restore --yes --identity KEY FILE|latest, gpu-cluster-restore --yes --decrypted FILE, gpu-cluster-restore --yes --leave, or gpu-cluster-restore --list"

# list_in FOLDER: this cluster's snapshots in FOLDER, newest first.
list_in() {
  find "$1" -maxdepth 1 -type f -name "$BACKUP_NAME-*.age" -printf '%f\n' | sort -r
}

# copy_newest_in TARGET FOLDER: the newest snapshot in FOLDER, copied to TARGET.
copy_newest_in() {
  local newest
  newest="$(list_in "$2" | head -n 1)"
  [[ -n "$newest" ]] || die "no snapshot of $BACKUP_NAME in $2"
  log "restoring $newest"
  cp -- "$2/$newest" "$1"
}

# decrypted FILE IDENTITY: FILE decrypted with age into TEMP_DIR, its path printed; dies
# when age refuses it. age may have written part of a tampered file before its failing
# chunk: that part is removed, never restored.
decrypted() {
  local plain
  plain="$TEMP_DIR/$(basename -- "${1%.age}")"
  if ! age --decrypt --identity "$2" --output "$plain" "$1"; then
    rm -f -- "$plain"
    die "could not decrypt $1 with $2: it is not encrypted to that key (backup.recipients), or it was changed after it was made; nothing was restored"
  fi
  printf '%s\n' "$plain"
}

main() {
  local confirmed=false what="" file identity="" plain=false
  while (($#)); do
    case "$1" in
      --yes) confirmed=true ;;
      --list | --leave) [[ -z "$what" ]] || die "$USAGE"; what=$1 ;;
      --identity) (($# > 1)) || die "$USAGE"; identity=$2; shift ;;
      --decrypted) plain=true ;;
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
  if [[ "$what" == --leave ]]; then
    [[ "$confirmed" == true && -z "$identity" && "$plain" == false ]] ||
      die "--leave stops this controller's control plane and puts its state aside: add --yes (and nothing else)"
    cluster_state_leave
    return
  fi
  [[ "$confirmed" == true ]] || die "restoring replaces the cluster's state with the snapshot's: add --yes"
  if [[ "$plain" == true ]]; then
    [[ -z "$identity" && "$what" != latest ]] || die "$USAGE"
  else
    [[ -n "$identity" ]] || die "the snapshot is encrypted with age: give the identity file of one of backup.recipients with --identity (or decrypt it elsewhere and give it with --decrypted)"
    [[ -r "$identity" ]] || die "cannot read the identity file $identity"
  fi
  umask 077
  make_temp_dir
  if [[ "$what" == latest ]]; then
    [[ "$BACKUP_STORE" != s3 ]] || die "download a version of s3://$BACKUP_BUCKET/$BACKUP_OBJECT and give its path"
    with_backup_folder copy_newest_in "$TEMP_DIR/latest.age"
    what="$TEMP_DIR/latest.age"
  fi
  [[ -f "$what" ]] || die "no snapshot file $what"
  file=$what
  [[ "$plain" == true ]] || file="$(decrypted "$what" "$identity")"
  systemctl stop gpu-cluster-backup.timer
  cluster_state_restore "$file"
  systemctl start gpu-cluster-backup.timer
}

main "$@"
