#!/usr/bin/env bash
# What configure-time and its delete step share: the files they write and the copy of
# chrony.conf as it was.
# shellcheck shell=bash disable=SC2034 # its globals are read by the scripts that source it

# shellcheck source=../lib.sh
[[ -n "${GPU_CLUSTER_LIB_LOADED:-}" ]] || source "$(dirname "${BASH_SOURCE[0]}")/../lib.sh"
# shellcheck source=../os/lib.sh
[[ -n "${GPU_CLUSTER_OS_LIB_LOADED:-}" ]] || source "$(dirname "${BASH_SOURCE[0]}")/../os/lib.sh"

GPU_CLUSTER_TIME_LIB_LOADED=1
# Ubuntu 22.04 and 24.04 run systemd-timesyncd (chrony from 25.10:
# https://documentation.ubuntu.com/server/explanation/networking/about-time-synchronisation).
# A drop-in overrides /etc/systemd/timesyncd.conf (timesyncd.conf(5)); with NTP= set, the
# compiled-in fallback list (Ubuntu's ntp.ubuntu.com) is not tried: it is used only when
# every other list is empty (systemd src/timesync/timesyncd-manager.c, manager_connect).
TIMESYNCD_DROPIN=/etc/systemd/timesyncd.conf.d/90-gpu-cluster.conf
# The family's chrony.conf and chrony's unit, set by `os_do chrony_files`.
CHRONY_CONF=""
CHRONY_SERVICE=""
# chrony.conf as it was (keep_original).
TIME_BACKUP_DIR=/var/lib/gpu-cluster/time
# The first line of every file configure-time writes starts with it.
TIME_MANAGED_PREFIX="# Managed by gpu-cluster (time.ntpServers)"

# ubuntu_chrony_files: Debian's package, which Ubuntu's is, builds chronyd with
# /etc/chrony/chrony.conf as its default file and ships chrony.service (chrony
# 4.3-2+deb12u3: the path compiled into /usr/sbin/chronyd, /lib/systemd/system/).
ubuntu_chrony_files() {
  CHRONY_CONF=/etc/chrony/chrony.conf
  CHRONY_SERVICE=chrony.service
}

# el9_chrony_files: RHEL 9 and its rebuilds keep chrony's own defaults: the file at
# SYSCONFDIR/chrony.conf, /etc/chrony.conf (chrony 4.5 doc/chronyd.adoc, -f), and the unit
# upstream ships, chronyd.service (examples/chronyd.service).
el9_chrony_files() {
  CHRONY_CONF=/etc/chrony.conf
  CHRONY_SERVICE=chronyd.service
}
