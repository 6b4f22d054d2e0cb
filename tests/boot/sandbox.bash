#!/usr/bin/env bash
# Runs as PID 1 of the sandbox cloud_init.py starts with `unshare --mount --net --uts
# --pid --propagation private`: puts the sandbox's folders and files over the host's
# (private mounts, gone with the namespace), so cloud-init keeps its default paths, then
# runs cloud-init's boot stages in the order systemd runs them, each bounded.
# Usage: sandbox.bash SANDBOX_DIR STAGE_TIMEOUT_SECONDS [PYTHON AWS_LAUNCHER]
# With PYTHON and AWS_LAUNCHER (tests/boot/aws_in_sandbox.py), AWS is emulated in this
# network namespace before the stages start (tests/boot/aws_emulation.py): lo up with
# 169.254.169.254 on it, then `PYTHON AWS_LAUNCHER SANDBOX_DIR/aws`, which serves once it
# has written SANDBOX_DIR/aws/ready; after the stages it gets SIGTERM, writes what the
# test reads back and SANDBOX_DIR/aws/done.
# Commands go by absolute path: PATH may start with stubs of host commands.
set -euo pipefail

sandbox=$1
stage_timeout=$2
aws_launcher=("${@:3}")
aws_dir=$sandbox/aws
# Seconds the emulation may take to start (moto's import and seeding: 2-3 s on an idle
# machine) and to write what it read back.
aws_start_timeout=60
aws_stop_timeout=30

# Config; state (/var/lib/cloud), the NoCloud seed included; logs; /run/cloud-init; the
# files cloud-init's hostname modules write.
for path in /etc/cloud /var/lib /var/log /run /etc/hostname /etc/hosts; do
  /usr/bin/mount --bind "$sandbox$path" "$path"
done
# As systemd does early at every boot: the host name from /etc/hostname (hostname(5)),
# which cloud-init's set_hostname wrote on the first boot and sets only once an instance.
/usr/bin/hostname -F /etc/hostname

# wait_for FILE SECONDS [PID]: until FILE exists; fails after SECONDS, or as soon as PID
# (when given) has exited.
wait_for() {
  local file=$1 tries=$(($2 * 10)) pid=${3:-}
  while [[ ! -e "$file" ]]; do
    if ((tries-- <= 0)); then
      return 1
    fi
    if [[ -n "$pid" ]] && ! kill -0 "$pid" 2>/dev/null; then
      # It may have written FILE just before it exited.
      [[ -e "$file" ]]
      return
    fi
    /usr/bin/sleep 0.1
  done
}

aws_pid=
if ((${#aws_launcher[@]} > 0)); then
  # This namespace's loopback, and EC2's instance metadata address on it, so that the
  # boot's programs use their default IMDS endpoint.
  /usr/bin/ip link set lo up
  /usr/bin/ip address add 169.254.169.254/32 dev lo
  # A clean environment: none of cloud-init's (stubs first on PATH), no AWS settings.
  /usr/bin/env -i PATH=/usr/bin:/bin AWS_CONFIG_FILE=/dev/null \
    AWS_SHARED_CREDENTIALS_FILE=/dev/null "${aws_launcher[@]}" "$aws_dir" \
    </dev/null >>"$aws_dir/launcher.log" 2>&1 &
  aws_pid=$!
  if ! wait_for "$aws_dir/ready" "$aws_start_timeout" "$aws_pid"; then
    echo "sandbox.bash: the AWS emulation did not start:" >&2
    /usr/bin/cat "$aws_dir/launcher.log" >&2
    exit 1
  fi
fi

# run_stage NAME ARGS...: `cloud-init ARGS...`; appends "NAME EXIT_CODE" to exit-codes
# (124: timed out; timeout(1) signals the whole process group, the parts included).
run_stage() {
  local name=$1 status=0
  shift
  /usr/bin/timeout --kill-after=5 "$stage_timeout" /usr/bin/cloud-init "$@" || status=$?
  printf '%s %s\n' "$name" "$status" >>"$sandbox/exit-codes"
}

# The ExecStart= lines of cloud-init-local, cloud-init, cloud-config and cloud-final.service.
run_stage init-local init --local
run_stage init init
run_stage modules-config modules --mode=config
run_stage modules-final modules --mode=final

# SANDBOX_DIR/after-boot.sh (cloud_init.py's after_boot), when there is one: what runs on the
# instance once it has booted, in this namespace, with AWS still emulated, bounded like a
# stage; given SANDBOX_DIR, cloud-init's environment, its output in after-boot.log and its
# exit code in after-boot.status.
if [[ -f "$sandbox/after-boot.sh" ]]; then
  status=0
  /usr/bin/timeout --kill-after=5 "$stage_timeout" /bin/bash "$sandbox/after-boot.sh" "$sandbox" \
    </dev/null >"$sandbox/after-boot.log" 2>&1 || status=$?
  printf '%s\n' "$status" >"$sandbox/after-boot.status"
fi

# This namespace's hostname, as cloud-init's set_hostname left it.
printf '%s\n' "$(</proc/sys/kernel/hostname)" >"$sandbox/hostname"

if [[ -n "$aws_pid" ]]; then
  kill -TERM "$aws_pid" 2>/dev/null || true
  if ! wait_for "$aws_dir/done" "$aws_stop_timeout" "$aws_pid"; then
    echo "sandbox.bash: the AWS emulation did not write what it read back:" >&2
    /usr/bin/cat "$aws_dir/launcher.log" >&2
    exit 1
  fi
fi
