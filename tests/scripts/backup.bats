#!/usr/bin/env bats
# components/scripts/backup/: install-backup puts the timer, the backup command and
# gpu-cluster-restore on the controller; the backup command encrypts each snapshot with the
# real age to the recipients' public keys and keeps it in a folder (backup.path) or the
# NFS export, pruned to the retention, or uploads it to S3; gpu-cluster-restore decrypts
# one with the restorer's identity (refusing another key's or a changed one) and puts it
# back. k0s and RKE2 take and restore the snapshot
# (<distribution>/cluster-state.sh): stubbed here, their own commands faked below.

bats_require_minimum_version 1.5.0
load helpers

SERVICE=/etc/systemd/system/gpu-cluster-backup.service
TIMER=/etc/systemd/system/gpu-cluster-backup.timer
COMMAND=/usr/local/lib/gpu-cluster/backup/backup.sh
RESTORE=/usr/local/sbin/gpu-cluster-restore
RECIPIENTS_FILE=/etc/gpu-cluster/backup.recipients

# Two restore keys made by the real age-keygen for this file's tests, and a third, of
# nobody the snapshots are encrypted to.
setup_file() {
  command -v age >/dev/null || skip "age is not installed (apt-get install age)"
  local name
  for name in restore second stranger; do
    age-keygen -o "$BATS_FILE_TMPDIR/$name.key" 2>/dev/null
  done
  # install-backup's BACKUP_FILES as the program renders them (components/kubernetes/
  # backups.py backup_files), once for the file's tests.
  (cd "$REPO_ROOT" && "$PYTHON" -c 'import sys
from components.distributions import DISTRIBUTIONS
from components.kubernetes.backups import backup_files
for name, distribution in DISTRIBUTIONS.items():
    for store in ("path", "s3"):
        with open(f"{sys.argv[1]}/{name}-{store}", "w") as out:
            out.write(backup_files(distribution, store))' "$BATS_FILE_TMPDIR")
}

# backup_files DISTRIBUTION STORE: install-backup's BACKUP_FILES (setup_file).
backup_files() {
  cat "$BATS_FILE_TMPDIR/$1-$2"
}

# fake NAME BODY: command NAME on PATH runs BODY (bash), logging its call as the stubs do.
fake() {
  rm -f "$BATS_TEST_TMPDIR/bin/$1"
  printf '#!/usr/bin/env bash\nset -euo pipefail\nprintf "%%s\\n" "%s${*:+ $*}" >>"$STUB_CALLS"\n%s\n' \
    "$1" "$2" >"$BATS_TEST_TMPDIR/bin/$1"
  chmod +x "$BATS_TEST_TMPDIR/bin/$1"
}

setup() {
  setup_host
  mkdir -p "$STUB_STATE/export" "$STUB_STATE/s3"
  # k0s backup writes a new archive each time; k0s restore records what it restored.
  # `k0s kubectl --server https://ADDRESS:PORT ... get --raw=/readyz` fails for the
  # addresses in STUB_API_DOWN.
  fake k0s '
    if [[ "$1" == kubectl ]]; then
      server=${3#https://}; [[ " ${STUB_API_DOWN:-} " != *" ${server%:*} "* ]]; exit
    fi
    n=$(($(cat "$STUB_STATE/snapshots" 2>/dev/null || echo 0) + 1)); echo $n >"$STUB_STATE/snapshots"
    case "$1" in
      backup) [[ -z "${STUB_SNAPSHOT_FAILS:-}" ]] || { echo "etcd: context deadline exceeded" >&2; exit 1; }
        printf "k0s state %s\n" $n >"$3/k0s_backup_2026-11-23T03_30_0${n}Z.tar.gz" ;;
      restore) cp "${!#}" "$STUB_STATE/restored" ;;
    esac'
  fake rke2 '
    n=$(($(cat "$STUB_STATE/snapshots" 2>/dev/null || echo 0) + 1)); echo $n >"$STUB_STATE/snapshots"
    case "$1 $2" in
      "etcd-snapshot save") printf "etcd state %s\n" $n >"$6/$4-moscow-176386500$n" ;;
      "server --cluster-reset") cp "${3#--cluster-reset-restore-path=}" "$STUB_STATE/restored" ;;
    esac'
  # The NFS export is a folder of the test; mounting links the mount point to it.
  fake mount 'mp="${!#}"; rmdir -- "$mp"; ln -s "$STUB_STATE/export" "$mp"'
  fake umount 'rm -- "${!#}"; mkdir -p -- "${!#}"'
  fake mountpoint '[[ -L "${!#}" ]]'
  fake python3 'mkdir -p "$STUB_STATE/s3/$4/${5%/*}"; cp "$6" "$STUB_STATE/s3/$4/$5"'
  export BACKUP_SCHEDULE="*-*-* 03:30:00" BACKUP_RETENTION=3 BACKUP_NAME=lab \
    CONTROLLER_SERVICE=k0scontroller.service
  IDENTITY="$BATS_FILE_TMPDIR/restore.key" SECOND="$BATS_FILE_TMPDIR/second.key"
  STRANGER="$BATS_FILE_TMPDIR/stranger.key"
  RECIPIENTS="$(age-keygen -y "$IDENTITY") $(age-keygen -y "$SECOND")"
  use_path_store k0s
}

# use_path_store DISTRIBUTION / use_nfs_store / use_s3_store: install-backup's inputs.
use_path_store() {
  export BACKUP_STORE=path BACKUP_DIR=/mnt/backups BACKUP_RECIPIENTS=$RECIPIENTS \
    BACKUP_FILES="$(backup_files "$1" path)"
}

use_nfs_store() {
  use_path_store k0s
  export BACKUP_STORE=nfs BACKUP_NFS_SOURCE=192.168.2.50:/srv/nfs BACKUP_DIR=gpu-cluster-backups/lab \
    BACKUP_NFS_OPTIONS=nfsvers=4.1,hard,timeo=600
}

use_s3_store() {
  export BACKUP_STORE=s3 BACKUP_BUCKET=research-backups-0123456789 \
    BACKUP_OBJECT=research/control-plane/snapshot AWS_REGION=eu-central-1 \
    S3_CLIENT=/usr/local/lib/gpu-cluster/backup/s3-object.py \
    SSM_CLIENT=/var/lib/gpu-cluster/boot/ssm-parameter.py \
    CONTROLLER_SERVICE=rke2-server.service BACKUP_FILES="$(backup_files rke2 s3)"
  unset BACKUP_DIR
  mkdir -p "$GPU_CLUSTER_ROOT/var/lib/gpu-cluster/boot"
  cp "$SCRIPTS_DIR/ssm-parameter.py" "$GPU_CLUSTER_ROOT$SSM_CLIENT"
}

# run_installed COMMAND [ARGS]: an installed command as systemd (or an admin) runs it: its
# settings from the file install-backup wrote, not from the test's environment.
run_installed() {
  local command=$1
  shift
  run env -u BACKUP_STORE -u BACKUP_DIR -u BACKUP_NAME -u BACKUP_RETENTION \
    -u BACKUP_CONTROLLERS -u BACKUP_NODE -u API_PORT \
    GPU_CLUSTER_STEP="${STEP:-backup}" bash "$GPU_CLUSTER_ROOT$command" "$@"
}

# kept: the snapshot files in the folder of the store, oldest first.
kept() {
  find "$GPU_CLUSTER_ROOT/mnt/backups" "$STUB_STATE/export" -type f -name 'lab-*.age' -printf '%f\n' 2>/dev/null | sort
}

# decrypted FILE [IDENTITY]: FILE decrypted by age with the restore key (or IDENTITY).
decrypted() {
  age --decrypt --identity "${2:-$IDENTITY}" "$1"
}

# flip_byte FILE OFFSET: FILE with the byte at OFFSET (from the end when negative) changed.
flip_byte() {
  python3_real - "$@" <<'PY'
import sys
path, offset = sys.argv[1], int(sys.argv[2])
data = bytearray(open(path, "rb").read())
data[offset] ^= 0x01
open(path, "wb").write(data)
PY
}

# python3_real: the machine's Python (python3 on PATH is a stub here).
python3_real() {
  PATH=/usr/local/bin:/usr/bin:/bin python3 "$@"
}

@test "install-backup: installs age, the commands, the settings, the public keys and a timer systemd accepts" {
  run_script backup/install-backup.sh
  assert_success
  assert_called "^$APT "'install -y age$'
  assert_mode "$COMMAND" 700
  assert_mode "$RESTORE" 700
  assert_mode "$RECIPIENTS_FILE" 644
  assert_file "$RECIPIENTS_FILE" "$(tr ' ' '\n' <<<"$RECIPIENTS")"
  # Public keys only: nothing on the controller can decrypt a snapshot.
  [ -z "$(grep -rl AGE-SECRET-KEY "$GPU_CLUSTER_ROOT")" ]
  [ ! -e "$GPU_CLUSTER_ROOT/etc/gpu-cluster/backup.key" ]
  assert_mode /etc/gpu-cluster/backup.env 600
  grep -qx 'BACKUP_DIR=/mnt/backups' "$GPU_CLUSTER_ROOT/etc/gpu-cluster/backup.env"
  grep -qx 'OnCalendar=\*-\*-\* 03:30:00' "$GPU_CLUSTER_ROOT$TIMER"
  grep -qx 'After=k0scontroller.service network-online.target' "$GPU_CLUSTER_ROOT$SERVICE"
  assert_unit_verifies "$SERVICE" "$COMMAND"
  assert_unit_verifies "$TIMER"
  assert_call_order '^systemctl daemon-reload$' '^systemctl enable gpu-cluster-backup.timer$'
  assert_call_order '^systemctl enable gpu-cluster-backup.timer$' '^systemctl start gpu-cluster-backup.timer$'
  assert_output_contains "gpu-cluster: moscow: install-backup: changed: started gpu-cluster-backup.timer" \
    "gpu-cluster: moscow: install-backup: gpu-cluster-backup.timer starts a snapshot at '*-*-* 03:30:00'"
}

@test "install-backup: a second run changes nothing; a new schedule restarts the timer" {
  run_twice backup/install-backup.sh
  assert_output_contains "unchanged: gpu-cluster-backup.timer is enabled and running" \
    "age is already installed"
  reset_calls
  BACKUP_SCHEDULE=daily run_script backup/install-backup.sh
  assert_success
  grep -qx 'OnCalendar=daily' "$GPU_CLUSTER_ROOT$TIMER"
  assert_called '^systemctl restart gpu-cluster-backup.timer$'
}

@test "install-backup: names every bad input at once, with host and step, changing nothing" {
  BACKUP_SCHEDULE=$'daily\nExecStart=/bin/sh' BACKUP_RETENTION=0 BACKUP_DIR=relative \
    BACKUP_RECIPIENTS="$RECIPIENTS AGE-SECRET-KEY-1QQQ" run_script backup/install-backup.sh
  assert_failure
  assert_output_contains "gpu-cluster: moscow: install-backup:" \
    "BACKUP_RECIPIENTS has 'AGE-SECRET-KEY-1QQQ', which is not an age public key" \
    "BACKUP_RETENTION must be a count" "BACKUP_DIR is not valid" "BACKUP_SCHEDULE is not a calendar event"
  [ ! -e "$GPU_CLUSTER_ROOT$TIMER" ]
  assert_no_state_changes
}

@test "install-backup: each library once, beside the commands, from the tree it runs from" {
  run_script backup/install-backup.sh
  assert_success
  dir=/usr/local/lib/gpu-cluster
  for path in lib.sh backup/lib.sh backup/backup.sh backup/restore.sh; do
    cmp "$SCRIPTS_DIR/$path" "$GPU_CLUSTER_ROOT$dir/$path"
  done
  cmp "$SCRIPTS_DIR/k0s/cluster-state.sh" "$GPU_CLUSTER_ROOT$dir/backup/cluster-state.sh"
  assert_mode "$dir/lib.sh" 644
  assert_mode "$dir/backup/cluster-state.sh" 644
  [ "$(find "$GPU_CLUSTER_ROOT$dir" -type f | wc -l)" = 5 ]
  # gpu-cluster-restore runs the installed restore.sh, found relative to itself.
  grep -qxF 'exec "$(dirname "${BASH_SOURCE[0]}")/../lib/gpu-cluster/backup/restore.sh" "$@"' "$GPU_CLUSTER_ROOT$RESTORE"
}

@test "install-backup: a file other than the one the step was rendered with is refused, naming it" {
  BACKUP_FILES="${BACKUP_FILES/backup\/lib.sh=????????/backup/lib.sh=00000000}" run_script backup/install-backup.sh
  assert_failure
  assert_output_contains "gpu-cluster: moscow: install-backup:" "/backup/lib.sh has sha256 " \
    "not the 00000000"
  [ ! -e "$GPU_CLUSTER_ROOT$TIMER" ] && [ ! -e "$GPU_CLUSTER_ROOT/usr/local/lib/gpu-cluster/backup/lib.sh" ]
}

@test "install-backup: BACKUP_FILES names each file the commands run, once and no other" {
  BACKUP_FILES="lib.sh=$(printf '0%.0s' {1..64}) lib.sh=$(printf '1%.0s' {1..64}) ../etc/passwd=$(printf '2%.0s' {1..64}) k0s/cluster-state.sh=xyz" \
    run_script backup/install-backup.sh
  assert_failure
  assert_output_contains "BACKUP_FILES names lib.sh more than once" \
    "BACKUP_FILES has '../etc/passwd=" "BACKUP_FILES has 'k0s/cluster-state.sh=xyz'" \
    "BACKUP_FILES lacks backup/lib.sh" "BACKUP_FILES lacks backup/restore.sh" \
    "BACKUP_FILES lacks the distribution's cluster-state.sh"
  assert_no_state_changes
}

@test "install-backup: out of the step bundle, where its files are not, it says so" {
  mkdir -p "$BATS_TEST_TMPDIR/empty-bundle"
  GPU_CLUSTER_BUNDLE_DIR="$BATS_TEST_TMPDIR/empty-bundle" run_script backup/install-backup.sh
  assert_failure
  assert_output_contains "gpu-cluster: moscow: install-backup: no lib.sh in $BATS_TEST_TMPDIR/empty-bundle: this step runs from the step bundle"
}

@test "backup: keeps a snapshot in backup.path that only the recipients' keys decrypt" {
  run_script backup/install-backup.sh
  run_installed "$COMMAND"
  assert_success
  [ "$(kept | wc -l)" = 1 ]
  file="$GPU_CLUSTER_ROOT/mnt/backups/$(kept)"
  [[ "$(kept)" =~ ^lab-[0-9]{8}T[0-9]{6}Z-k0s_backup_.*\.tar\.gz\.age$ ]]
  [ "$(head -n 1 "$file")" = "age-encryption.org/v1" ]
  refute_file_contains "$file" "k0s state 1"
  [ "$(decrypted "$file")" = "k0s state 1" ]
  [ "$(decrypted "$file" "$SECOND")" = "k0s state 1" ]
  assert_mode "/mnt/backups/$(kept)" 600
  assert_called '^k0s backup --save-path '
  assert_output_contains "gpu-cluster: moscow: backup: changed: kept lab-"
  run ! decrypted "$file" "$STRANGER"
  assert_output_contains "no identity matched any of the recipients"
}

@test "backup: keeps the newest retention snapshots and removes older ones" {
  run_script backup/install-backup.sh
  for _ in 1 2 3 4 5; do
    run_installed "$COMMAND"
    assert_success
  done
  [ "$(kept | wc -l)" = 3 ]
  [ "$(decrypted "$GPU_CLUSTER_ROOT/mnt/backups/$(kept | tail -n 1)")" = "k0s state 5" ]
  [ "$(decrypted "$GPU_CLUSTER_ROOT/mnt/backups/$(kept | head -n 1)")" = "k0s state 3" ]
  assert_output_contains "changed: removed lab-"
}

@test "backup: a snapshot that fails names host and step and keeps nothing" {
  run_script backup/install-backup.sh
  STUB_SNAPSHOT_FAILS=1 run_installed "$COMMAND"
  assert_failure
  assert_output_contains "gpu-cluster: moscow: backup: could not take a snapshot"
  [ -z "$(kept)" ]
}

@test "backup: without the public keys it refuses, naming the step that installs them" {
  run_script backup/install-backup.sh
  rm "$GPU_CLUSTER_ROOT$RECIPIENTS_FILE"
  run_installed "$COMMAND"
  assert_failure
  assert_output_contains "gpu-cluster: moscow: backup: no age public keys in $RECIPIENTS_FILE" "install-backup"
  refute_called '^k0s backup'
}

# of_three NODE: install-backup's inputs on controller NODE of c1, c2 and c3.
of_three() {
  export BACKUP_CONTROLLERS=c1=10.20.0.11,c2=10.20.0.12,c3=10.20.0.13 BACKUP_NODE=$1 API_PORT=6443
}

@test "backup: of several controllers, the first whose API answers takes the snapshot, the others skip" {
  of_three c2
  run_script backup/install-backup.sh
  assert_success
  grep -qx 'BACKUP_CONTROLLERS=c1=10.20.0.11,c2=10.20.0.12,c3=10.20.0.13' "$GPU_CLUSTER_ROOT/etc/gpu-cluster/backup.env"
  grep -qx 'BACKUP_NODE=c2' "$GPU_CLUSTER_ROOT/etc/gpu-cluster/backup.env"
  # c1 answers: c2 skips, taking nothing.
  run_installed "$COMMAND"
  assert_success
  assert_output_contains "gpu-cluster: moscow: backup: unchanged: c1, the first controller whose API server answers, takes this snapshot"
  [ -z "$(kept)" ]
  refute_called '^k0s backup'
  assert_called '^k0s kubectl --server https://10.20.0.11:6443 --request-timeout=5s get --raw=/readyz$'
  # c1 is down: c2 is the first that answers, and takes it.
  STUB_API_DOWN=10.20.0.11 run_installed "$COMMAND"
  assert_success
  [ "$(kept | wc -l)" = 1 ]
  assert_called '^k0s backup --save-path '
}

@test "backup: no controller's API answers: it fails naming them and takes nothing" {
  of_three c3
  run_script backup/install-backup.sh
  STUB_API_DOWN="10.20.0.11 10.20.0.12 10.20.0.13" run_installed "$COMMAND"
  assert_failure
  assert_output_contains "gpu-cluster: moscow: backup: no controller's API server answers (c1=10.20.0.11,c2=10.20.0.12,c3=10.20.0.13): no snapshot taken"
  [ -z "$(kept)" ]
  refute_called '^k0s backup'
}

@test "backup: an RKE2 server asks the others' API with its admin kubeconfig" {
  use_path_store rke2
  of_three c1
  export CONTROLLER_SERVICE=rke2-server.service
  run_script backup/install-backup.sh
  assert_success
  # RKE2's kubectl under the root, answering for c2 only.
  kubectl="$GPU_CLUSTER_ROOT/var/lib/rancher/rke2/bin/kubectl"
  mkdir -p "${kubectl%/*}"
  printf '#!/usr/bin/env bash\nprintf "%%s\\n" "kubectl $*" >>"$STUB_CALLS"\n[[ "$4" == https://10.20.0.12:6443 ]]\n' >"$kubectl"
  chmod +x "$kubectl"
  run_installed "$COMMAND"
  assert_success
  assert_called "^kubectl --kubeconfig $GPU_CLUSTER_ROOT/etc/rancher/rke2/rke2.yaml --server https://10.20.0.11:6443 --request-timeout=5s get --raw=/readyz$"
  assert_output_contains "unchanged: c2, the first controller whose API server answers, takes this snapshot"
  refute_called '^rke2 etcd-snapshot'
}

@test "install-backup: the controllers' settings are checked, all at once" {
  export BACKUP_CONTROLLERS='c1=10.20.0.11,c2;reboot=10.20.0.12,c3=10.20.0.300' BACKUP_NODE=c9 API_PORT=70000
  run_script backup/install-backup.sh
  assert_failure
  assert_output_contains "gpu-cluster: moscow: install-backup:" \
    "BACKUP_CONTROLLERS has 'c2;reboot=10.20.0.12', which is not NAME=IPV4 of a controller" \
    "BACKUP_CONTROLLERS has 'c3=10.20.0.300', which is not NAME=IPV4 of a controller" \
    "BACKUP_NODE 'c9' is not one of BACKUP_CONTROLLERS" "API_PORT must be a TCP port, got '70000'"
  unset BACKUP_CONTROLLERS API_PORT
  run_script backup/install-backup.sh
  assert_failure
  assert_output_contains "missing required environment variable(s): BACKUP_CONTROLLERS"
  [ ! -e "$GPU_CLUSTER_ROOT$TIMER" ]
}

@test "backup: to the NFS export, mounted for the copy only" {
  use_nfs_store
  run_script backup/install-backup.sh
  assert_success
  run_installed "$COMMAND"
  assert_success
  assert_called '^mount -t nfs -o nfsvers=4.1,hard,timeo=600 192.168.2.50:/srv/nfs .*/run/gpu-cluster/backup-mount$'
  assert_called '^umount '
  [ "$(find "$STUB_STATE/export/gpu-cluster-backups/lab" -name 'lab-*.age' | wc -l)" = 1 ]
  [ "$(decrypted "$STUB_STATE/export/gpu-cluster-backups/lab/$(kept)")" = "k0s state 1" ]
  [ ! -L "$GPU_CLUSTER_ROOT/run/gpu-cluster/backup-mount" ]
}

@test "backup: RKE2's etcd snapshot encrypted with age and uploaded to S3 with the instance's role" {
  use_s3_store
  run_script backup/install-backup.sh
  assert_success
  assert_file "$S3_CLIENT" "$(<"$SCRIPTS_DIR/aws/s3-object.py")"
  run_installed "$COMMAND"
  assert_success
  assert_called "^rke2 etcd-snapshot save --name gpu-cluster --dir "
  assert_called "^python3 $GPU_CLUSTER_ROOT$S3_CLIENT put eu-central-1 research-backups-0123456789 research/control-plane/snapshot .*\.age$"
  object="$STUB_STATE/s3/research-backups-0123456789/research/control-plane/snapshot"
  refute_file_contains "$object" "etcd state 1"
  [ "$(decrypted "$object")" = "etcd state 1" ]
  run ! decrypted "$object" "$STRANGER"
}

@test "install-backup: S3 needs the SSM client the instance's boot keeps" {
  use_s3_store
  rm "$GPU_CLUSTER_ROOT$SSM_CLIENT"
  run_script backup/install-backup.sh
  assert_failure
  assert_output_contains "gpu-cluster: moscow: install-backup: no $SSM_CLIENT"
}

@test "gpu-cluster-restore: restores the newest snapshot (k0s), backups paused meanwhile" {
  run_script backup/install-backup.sh
  for _ in 1 2; do run_installed "$COMMAND"; done
  mkdir -p "$GPU_CLUSTER_ROOT/var/lib/k0s/pki"
  reset_calls
  STEP=restore run_installed "$RESTORE" --yes --identity "$IDENTITY" latest
  assert_success
  [ "$(<"$STUB_STATE/restored")" = "k0s state 2" ]
  [ -d "$(echo "$GPU_CLUSTER_ROOT"/var/lib/k0s.before-restore-*/pki)" ]
  assert_call_order '^systemctl stop gpu-cluster-backup.timer$' '^systemctl stop k0scontroller$'
  assert_call_order '^k0s restore --config-out ' '^systemctl start k0scontroller$'
  assert_called '^systemctl start gpu-cluster-backup.timer$'
  assert_output_contains "gpu-cluster: moscow: restore: changed: moved /var/lib/k0s aside"
}

@test "gpu-cluster-restore: an RKE2 snapshot downloaded from S3 is decrypted with the restore key and resets the cluster to it" {
  use_s3_store
  run_script backup/install-backup.sh
  run_installed "$COMMAND"
  cp "$STUB_STATE/s3/research-backups-0123456789/research/control-plane/snapshot" "$BATS_TEST_TMPDIR/downloaded"
  reset_calls
  STEP=restore run_installed "$RESTORE" --yes --identity "$IDENTITY" "$BATS_TEST_TMPDIR/downloaded"
  assert_success
  assert_call_order '^systemctl stop rke2-server$' "^rke2 server --cluster-reset --cluster-reset-restore-path="
  assert_called '^systemctl start rke2-server$'
  [ "$(<"$STUB_STATE/restored")" = "etcd state 1" ]
}

@test "gpu-cluster-restore: a snapshot decrypted elsewhere is restored as given" {
  use_s3_store
  run_script backup/install-backup.sh
  printf 'etcd state 9\n' >"$BATS_TEST_TMPDIR/decrypted"
  STEP=restore run_installed "$RESTORE" --yes --decrypted "$BATS_TEST_TMPDIR/decrypted"
  assert_success
  assert_called "^rke2 server --cluster-reset --cluster-reset-restore-path=$BATS_TEST_TMPDIR/decrypted$"
  [ "$(<"$STUB_STATE/restored")" = "etcd state 9" ]
}

# refused_restore ARGS...: gpu-cluster-restore ARGS fails before anything stops.
refused_restore() {
  reset_calls
  STEP=restore run_installed "$RESTORE" "$@"
  assert_failure
  refute_called '^systemctl stop'
  refute_called '^k0s restore'
  [ ! -e "$STUB_STATE/restored" ]
}

@test "gpu-cluster-restore: refuses without --yes, without an identity, and with a key the snapshot is not encrypted to" {
  run_script backup/install-backup.sh
  run_installed "$COMMAND"
  refused_restore --identity "$IDENTITY" latest
  assert_output_contains "gpu-cluster: moscow: restore: restoring replaces the cluster's state" "--yes"
  refused_restore --yes latest
  assert_output_contains "gpu-cluster: moscow: restore: the snapshot is encrypted with age: give the identity file"
  refused_restore --yes --identity "$STRANGER" latest
  assert_output_contains "gpu-cluster: moscow: restore: could not decrypt" "not encrypted to that key" \
    "nothing was restored"
}

@test "gpu-cluster-restore: a snapshot with one byte changed is refused, in its header or its payload" {
  run_script backup/install-backup.sh
  run_installed "$COMMAND"
  snapshot="$GPU_CLUSTER_ROOT/mnt/backups/$(kept)"
  cp "$snapshot" "$BATS_TEST_TMPDIR/original"
  for offset in 30 -1 -17; do
    cp "$BATS_TEST_TMPDIR/original" "$snapshot"
    flip_byte "$snapshot" "$offset"
    run ! cmp -s "$snapshot" "$BATS_TEST_TMPDIR/original"
    refused_restore --yes --identity "$IDENTITY" latest
    assert_output_contains "gpu-cluster: moscow: restore: could not decrypt" "changed after it was made"
  done
  # The same file unchanged restores.
  cp "$BATS_TEST_TMPDIR/original" "$snapshot"
  STEP=restore run_installed "$RESTORE" --yes --identity "$IDENTITY" latest
  assert_success
  [ "$(<"$STUB_STATE/restored")" = "k0s state 1" ]
}

@test "gpu-cluster-restore --leave: a k0s controller stops and puts its state aside; a second run moves nothing" {
  run_script backup/install-backup.sh
  mkdir -p "$GPU_CLUSTER_ROOT/var/lib/k0s/pki" "$GPU_CLUSTER_ROOT/var/lib/k0s/etcd"
  reset_calls
  STEP=restore run_installed "$RESTORE" --yes --leave
  assert_success
  assert_called '^systemctl stop k0scontroller$'
  [ ! -e "$GPU_CLUSTER_ROOT/var/lib/k0s" ]
  [ -d "$(echo "$GPU_CLUSTER_ROOT"/var/lib/k0s.before-restore-*/etcd)" ]
  assert_output_contains "gpu-cluster: moscow: restore: changed: stopped k0scontroller and moved /var/lib/k0s aside" \
    "raise this host's generation and run pulumi up to join it again"
  refute_called '^k0s restore'
  STEP=restore run_installed "$RESTORE" --yes --leave
  assert_success
  assert_output_contains "restore: unchanged: no /var/lib/k0s; k0scontroller stopped"
  [ "$(echo "$GPU_CLUSTER_ROOT"/var/lib/k0s.before-restore-* | wc -w)" = 1 ]
}

@test "gpu-cluster-restore --leave: an RKE2 server stops and puts its etcd database aside" {
  use_s3_store
  run_script backup/install-backup.sh
  mkdir -p "$GPU_CLUSTER_ROOT/var/lib/rancher/rke2/server/db/etcd" "$GPU_CLUSTER_ROOT/var/lib/rancher/rke2/server/tls"
  STEP=restore run_installed "$RESTORE" --yes --leave
  assert_success
  assert_called '^systemctl stop rke2-server$'
  [ ! -e "$GPU_CLUSTER_ROOT/var/lib/rancher/rke2/server/db" ]
  [ -d "$(echo "$GPU_CLUSTER_ROOT"/var/lib/rancher/rke2/server/db.before-restore-*/etcd)" ]
  # The server's certificates and config stay: it joins again with them.
  [ -d "$GPU_CLUSTER_ROOT/var/lib/rancher/rke2/server/tls" ]
  refute_called '^rke2 server --cluster-reset'
}

@test "gpu-cluster-restore --leave: refused without --yes, or with a snapshot's options" {
  run_script backup/install-backup.sh
  mkdir -p "$GPU_CLUSTER_ROOT/var/lib/k0s/pki"
  reset_calls
  STEP=restore run_installed "$RESTORE" --leave
  assert_failure
  assert_output_contains "gpu-cluster: moscow: restore: --leave stops this controller's control plane and puts its state aside: add --yes (and nothing else)"
  STEP=restore run_installed "$RESTORE" --yes --leave --identity "$IDENTITY"
  assert_failure
  STEP=restore run_installed "$RESTORE" --yes --leave latest
  assert_failure
  assert_output_contains "usage: gpu-cluster-restore"
  [ -d "$GPU_CLUSTER_ROOT/var/lib/k0s/pki" ]
  refute_called '^systemctl stop'
}

@test "gpu-cluster-restore: --list names the snapshots, newest first" {
  run_script backup/install-backup.sh
  for _ in 1 2; do run_installed "$COMMAND"; done
  STEP=restore run_installed "$RESTORE" --list
  assert_success
  [ "$(grep -c '^lab-' <<<"$output")" = 2 ]
  [ "$(grep '^lab-' <<<"$output" | head -n 1)" = "$(kept | tail -n 1)" ]
}

@test "remove-backup: stops the timer and removes the commands; the snapshots stay" {
  run_script backup/install-backup.sh
  run_installed "$COMMAND"
  run_script backup/remove-backup.sh
  assert_success
  assert_called '^systemctl disable --now gpu-cluster-backup.timer$'
  [ ! -e "$GPU_CLUSTER_ROOT$TIMER" ] && [ ! -e "$GPU_CLUSTER_ROOT$COMMAND" ]
  [ ! -e "$GPU_CLUSTER_ROOT$RECIPIENTS_FILE" ] && [ ! -e "$GPU_CLUSTER_ROOT$RESTORE" ]
  [ -z "$(find "$GPU_CLUSTER_ROOT/usr/local/lib/gpu-cluster" -type f)" ]
  [ "$(kept | wc -l)" = 1 ]
  assert_idempotent backup/remove-backup.sh
}
