#!/usr/bin/env bash
# What configure-time and its delete step share: the files they write and the copy of
# chrony.conf as it was.
# shellcheck shell=bash disable=SC2034 # its globals are read by the scripts that source it

# shellcheck source=../lib.sh
[[ -n "${GPU_CLUSTER_LIB_LOADED:-}" ]] || source "$(dirname "${BASH_SOURCE[0]}")/../lib.sh"

GPU_CLUSTER_TIME_LIB_LOADED=1
# Ubuntu 22.04 and 24.04 run systemd-timesyncd (chrony from 25.10:
# https://documentation.ubuntu.com/server/explanation/networking/about-time-synchronisation).
# A drop-in overrides /etc/systemd/timesyncd.conf (timesyncd.conf(5)); with NTP= set, the
# compiled-in fallback list (Ubuntu's ntp.ubuntu.com) is not tried: it is used only when
# every other list is empty (systemd src/timesync/timesyncd-manager.c, manager_connect).
TIMESYNCD_DROPIN=/etc/systemd/timesyncd.conf.d/90-gpu-cluster.conf
CHRONY_CONF=/etc/chrony/chrony.conf
# chrony.conf as it was (keep_original).
TIME_BACKUP_DIR=/var/lib/gpu-cluster/time
# The first line of every file configure-time writes starts with it.
TIME_MANAGED_PREFIX="# Managed by gpu-cluster (time.ntpServers)"
