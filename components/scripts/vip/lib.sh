#!/usr/bin/env bash
# What keepalived.sh and keepalived-remove.sh share: the control plane's virtual IP by host
# keepalived (components/hosts/vip.py renders its file), its unit and the first line that
# marks the file as the step's.
# shellcheck shell=bash disable=SC2034 # its globals are read by the scripts that source it

# shellcheck source=../lib.sh
[[ -n "${GPU_CLUSTER_LIB_LOADED:-}" ]] || source "$(dirname "${BASH_SOURCE[0]}")/../lib.sh"

GPU_CLUSTER_VIP_LIB_LOADED=1
KEEPALIVED_FILE=/etc/keepalived/keepalived.conf
# Ubuntu's keepalived.service (Debian's debian/keepalived.service): ExecReload sends SIGHUP,
# on which keepalived rereads its file without dropping the address it holds; the unit
# starts only once the file is there (ConditionFileNotEmpty).
KEEPALIVED_UNIT=keepalived
# components/hosts/vip.py HEADER and INTERFACE_PLACEHOLDER.
KEEPALIVED_HEADER="# Managed by gpu-cluster (control-plane-vip); changes are overwritten."
KEEPALIVED_INTERFACE_PLACEHOLDER=@INTERFACE_OF_UNICAST_SRC_IP@

# keepalived_file_is_ours: the file is absent or the step's own (its first line).
keepalived_file_is_ours() {
  [[ ! -e "$ROOT$KEEPALIVED_FILE" ]] || [[ "$(head -n 1 -- "$ROOT$KEEPALIVED_FILE")" == "$KEEPALIVED_HEADER" ]]
}
