#!/bin/bash
# ssh as the doctor calls it: options, the target, --, one command line. Only moscow
# (192.168.2.2) answers, with the recorded outputs in $HOSTS; each call is logged to $SSH_LOG.
printf '%s\n' "$*" >> "$SSH_LOG"
args=("$@")
for ((i = 0; i < ${#args[@]}; i++)); do [[ ${args[i]} == -- ]] && break; done
target=${args[i-1]} command=${args[i+1]}
if [[ $target != ubuntu@192.168.2.2 ]]; then
  echo "ssh: connect to host ${target#*@} port 22: Connection timed out" >&2
  exit 255
fi
case $command in
  "sudo -n bash -s -- check") exec bash -s -- check ;;
  "ip -j addr show") cat "$HOSTS/ip-addr.json" ;;
  "ip -j route show table main") cat "$HOSTS/ip-route.json" ;;
  "sysctl -n fs.inotify.max_user_instances fs.inotify.max_user_watches") cat "$HOSTS/inotify.txt" ;;
  "readlink -f /run/systemd/resolve/resolv.conf") cat "$HOSTS/resolv-target.txt" ;;
  "cat /run/systemd/resolve/resolv.conf") cat "$HOSTS/resolv-conf.txt" ;;
  nvidia-smi\ --query-gpu=*\ --format=csv) cat "$HOSTS/nvidia-smi.csv" ;;
  *) echo "unexpected command: $command" >&2; exit 127 ;;
esac
