#!/usr/bin/env bash
# Runs as PID 1 of the sandbox cloud_init.py starts with `unshare --mount --net --uts
# --pid --propagation private`: puts the sandbox's folders and files over the host's
# (private mounts, gone with the namespace), so cloud-init keeps its default paths, then
# runs cloud-init's boot stages in the order systemd runs them, each bounded.
# Usage: sandbox.bash SANDBOX_DIR STAGE_TIMEOUT_SECONDS
# Commands go by absolute path: PATH may start with stubs of host commands.
set -euo pipefail

sandbox=$1
stage_timeout=$2

# Config; state (/var/lib/cloud), the NoCloud seed included; logs; /run/cloud-init; the
# files cloud-init's hostname modules write.
for path in /etc/cloud /var/lib /var/log /run /etc/hostname /etc/hosts; do
  /usr/bin/mount --bind "$sandbox$path" "$path"
done

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

# This namespace's hostname, as cloud-init's set_hostname left it.
printf '%s\n' "$(</proc/sys/kernel/hostname)" >"$sandbox/hostname"
