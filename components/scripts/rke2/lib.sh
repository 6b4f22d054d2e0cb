#!/usr/bin/env bash
# RKE2 helpers for the rke2 step scripts: its release (node/lib.sh installs it from the
# tarball), its paths, secrets given directly or read from SSM, and the service.
# shellcheck shell=bash disable=SC2034 # its globals are read by the scripts that source it

# shellcheck source=../lib.sh
[[ -n "${GPU_CLUSTER_LIB_LOADED:-}" ]] || source "$(dirname "${BASH_SOURCE[0]}")/../lib.sh"
# shellcheck source=../node/lib.sh
[[ -n "${GPU_CLUSTER_NODE_LIB_LOADED:-}" ]] || source "$(dirname "${BASH_SOURCE[0]}")/../node/lib.sh"
# shellcheck source=../os/lib.sh
[[ -n "${GPU_CLUSTER_OS_LIB_LOADED:-}" ]] || source "$(dirname "${BASH_SOURCE[0]}")/../os/lib.sh"
# shellcheck source=../os/selinux.sh
[[ -n "${GPU_CLUSTER_SELINUX_LIB_LOADED:-}" ]] || source "$(dirname "${BASH_SOURCE[0]}")/../os/selinux.sh"
# shellcheck source=../keys/lib.sh
[[ -n "${GPU_CLUSTER_KEYS_LIB_LOADED:-}" ]] || source "$(dirname "${BASH_SOURCE[0]}")/../keys/lib.sh"

GPU_CLUSTER_RKE2_LIB_LOADED=1
# install.sh's tar method unpacks the tarball below /usr/local: bin/rke2,
# bin/rke2-killall.sh, bin/rke2-uninstall.sh, lib/systemd/system/rke2-{server,agent}.service
# (rancher/rke2 install.sh unpack_tarball; bundle/).
RKE2_PREFIX=/usr/local
RKE2_BIN=$RKE2_PREFIX/bin/rke2
RKE2_UNINSTALL=$RKE2_PREFIX/bin/rke2-uninstall.sh
RKE2_RELEASES_URL=https://github.com/rancher/rke2/releases/download
RKE2_ETC=/etc/rancher/rke2
RKE2_CONFIG_FILE=$RKE2_ETC/config.yaml
# Drop-ins are merged after config.yaml (docs: install/configuration.md, "Multiple Config
# Files"); the kubelet's settings live in their own so that only apply-agent-args.sh
# changes them on a node in service.
RKE2_KUBELET_CONFIG_FILE=$RKE2_ETC/config.yaml.d/50-gpu-cluster-kubelet.yaml
# `selinux: true` where SELinux labels files: "RKE2's support for SELinux amounts to a single
# configuration item, the --selinux boolean flag", the CRI's enable_selinux, which a tarball
# install does not enable by itself (docs.rke2.io/security/selinux, "Configuration"). A
# drop-in, so that the same config.yaml serves every host of the cluster, whatever its OS.
RKE2_SELINUX_CONFIG_FILE=$RKE2_ETC/config.yaml.d/40-gpu-cluster-selinux.yaml
# An EC2 node's out-of-tree cloud provider (RKE2_CLOUD_PROVIDER=aws): `cloud-provider-name:
# external` gives the kubelet, API server and controller manager --cloud-provider=external
# (rancher/rke2 v1.36.3+rke2r1 pkg/rke2/rke2_linux.go:110-121, pkg/executor/staticpod/
# staticpod.go:152-154, 313-316); a server also disables RKE2's own cloud controller, as
# RKE2 does for the providers it bundles (pkg/cli/cmds/root.go:254-259, rke2_linux.go:161);
# the kubelet's --provider-id names the instance, which the AWS cloud controller manager
# finds by it, not by the node's name (components/aws/cloud_controller.py). Appended
# (`kubelet-arg+`), and read after the kubelet drop-in (50-), whose plain `kubelet-arg`
# would replace it: drop-ins are read in name order, a later plain key overrides and `+`
# appends (docs install/configuration.md, "Multiple Config Files").
RKE2_CLOUD_PROVIDER_CONFIG_FILE=$RKE2_ETC/config.yaml.d/60-gpu-cluster-cloud-provider.yaml
# rke2-selinux, the policy of RKE2's paths, from Rancher's stable repository for EL9, as
# install.sh's rpm method names it (rancher/rke2 install.sh, rancher-rke2-common-stable:
# gpgcheck=1, repo_gpgcheck=0: the packages are signed, the metadata is not).
RKE2_SELINUX_REPO_URL=https://rpm.rancher.io/rke2/stable/common/centos/9/noarch
RKE2_SELINUX_KEY_URL=https://rpm.rancher.io/public.key
RKE2_SELINUX_REPO_FILE=/etc/yum.repos.d/gpu-cluster-rke2-selinux.repo
RKE2_SELINUX_KEY_FILE=/etc/pki/rpm-gpg/RPM-GPG-KEY-rancher
# The tarball's files, which rke2-selinux's rke2.fc labels: its %post relabels the units once and
# never the binary, and each new tarball replaces both (rancher/rke2-selinux
# policy/centos9/rke2-selinux.spec, rke2_relabel_files). The state folders that %post relabels
# (RKE2's, /var/lib/kubelet, the CNI's) are left to it: a restorecon of /var/lib/kubelet here
# would walk into pods' NFS volumes, and one of RKE2's data at every run into all of
# containerd's snapshots.
RKE2_SELINUX_PATHS=("$RKE2_BIN" "$RKE2_PREFIX/lib/systemd/system/rke2-server.service"
  "$RKE2_PREFIX/lib/systemd/system/rke2-agent.service")
RKE2_TOKEN_FILE=$RKE2_ETC/server-token
RKE2_AGENT_TOKEN_FILE=$RKE2_ETC/agent-token
RKE2_ADMIN_KUBECONFIG=$RKE2_ETC/rke2.yaml
# RKE2's default data dir (--data-dir is never passed).
RKE2_DATA_DIR=/var/lib/rancher/rke2
RKE2_KUBECTL=$RKE2_DATA_DIR/bin/kubectl
# Written by the agent once it joined (k3s pkg/agent/config: KubeConfigKubelet).
RKE2_KUBELET_KUBECONFIG=$RKE2_DATA_DIR/agent/kubelet.kubeconfig
# RKE2's kubelet runs with the upstream default root (rke2-uninstall.sh removes it).
RKE2_KUBELET_ROOT_DIR=/var/lib/kubelet
RKE2_RELEASE='^v[0-9]+\.[0-9]+\.[0-9]+(-rc[0-9]+)?\+rke2r[0-9]+$'
RKE2_BINARY_CHANGED=0

# rke2_current_version: the version of the installed rke2, or nothing. `rke2 --version`
# prints "rke2 version v1.36.3+rke2r1 (commit)" first.
rke2_current_version() {
  local line
  # The whole output first: `| head -n 1` could end rke2 early and fail under pipefail.
  if [[ -x "$ROOT$RKE2_BIN" ]] && line="$(rke2 --version 2>/dev/null)"; then
    read -r _ _ line _ <<<"${line%%$'\n'*}"
    printf '%s\n' "${line:-}"
  fi
}

# rke2_install VERSION: RKE2 VERSION installed from its release tarball (or RKE2_RELEASE_URL)
# after checking it against the sha256 the program pinned for this host's architecture
# (RKE2_SHA256_AMD64 or RKE2_SHA256_ARM64; install.sh reads sha256sum-ARCH.txt of the same
# release instead), and, with RKE2_AIRGAP_SHA256_<ARCH> given, its image tarball
# rke2-images.linux-ARCH.tar.zst (Canal's images with the core ones) into agent/images below
# the data dir, which RKE2 imports at start (docs.rke2.io/install/airgap, "Tarball Method":
# copied there with its extension, before RKE2 is started; rancher/rke2 install.sh
# INSTALL_RKE2_AGENT_IMAGES_DIR, default /var/lib/rancher/rke2/agent/images): node/lib.sh
# install_pinned_release. Sets RKE2_BINARY_CHANGED=1 when it replaced the installation.
rke2_install() {
  install_pinned_release RKE2 RKE2 "$1" "$RKE2_RELEASES_URL/${1//+/%2B}" \
    "$RKE2_DATA_DIR/agent/images"
  RKE2_BINARY_CHANGED=$RELEASE_CHANGED
}

# What install_pinned_release asks of RKE2: its files for ARCH, and unpacking the tarball
# as install.sh does (unpack_tarball), then reloading systemd for its units.
rke2_release_file() { echo "rke2.linux-$1.tar.gz"; }
rke2_airgap_file() { echo "rke2-images.linux-$1.tar.zst"; }
rke2_unpack() {
  mkdir -p -- "$ROOT$RKE2_PREFIX"
  tar -xzf "$1" -C "$ROOT$RKE2_PREFIX"
  RELEASE_CHANGED=1
  log "changed: installed RKE2 $2 to $RKE2_PREFIX"
  # tar gives the new files the folder's label, not the policy's.
  ! selinux_enabled || selinux_restore "${RKE2_SELINUX_PATHS[@]}"
  # New or changed units below /usr/local/lib/systemd/system.
  systemd_reload
}

# rke2_check_selinux_inputs: adds to INPUT_PROBLEMS what is wrong with the rke2-selinux pins
# (config/versions.py RKE2_SELINUX, RANCHER_RPM_KEY_FINGERPRINT).
rke2_check_selinux_inputs() {
  check_missing_env RKE2_SELINUX_VERSION RANCHER_RPM_KEY_FINGERPRINT
  if [[ -n "${RKE2_SELINUX_VERSION:-}" && ! "$RKE2_SELINUX_VERSION" =~ ^[0-9]+\.[0-9]+-[0-9]+\.el9$ ]]; then
    INPUT_PROBLEMS+=("RKE2_SELINUX_VERSION must be VERSION-RELEASE such as 0.23-1.el9, got '$RKE2_SELINUX_VERSION'")
  fi
  check_fingerprints RANCHER_RPM_KEY_FINGERPRINT
}

# rke2_configure_cloud_provider ROLE: with RKE2_CLOUD_PROVIDER=aws the drop-in of an EC2
# node (ROLE server or agent) with the instance's providerID from IMDS; without it none.
# Sets FILE_CHANGED.
rke2_configure_cloud_provider() {
  local provider_id text
  if [[ -z "$RKE2_CLOUD_PROVIDER" ]]; then
    remove_file "$RKE2_CLOUD_PROVIDER_CONFIG_FILE"
    return 0
  fi
  read_aws_provider_id provider_id
  text="cloud-provider-name: external"
  [[ "$1" != server ]] || text+=$'\ndisable-cloud-controller: true'
  text+=$'\nkubelet-arg+:\n- provider-id='"$provider_id"
  write_text "$RKE2_CLOUD_PROVIDER_CONFIG_FILE" 0600 "$text"
}

# rke2_configure_selinux: where SELinux labels files, rke2-selinux at RKE2_SELINUX_VERSION
# (container-selinux, which it needs, came with prepare-host), the tarball's files relabeled and
# `selinux: true`; elsewhere no such drop-in. Sets FILE_CHANGED when the drop-in changed or a
# label did (the running RKE2 keeps the label it started with).
rke2_configure_selinux() {
  if ! selinux_enabled; then
    remove_file "$RKE2_SELINUX_CONFIG_FILE"
    return 0
  fi
  [[ "$(os_family)" == el9 ]] ||
    die "SELinux is $(selinux_mode) on this $(os_found) host; rke2-selinux is built for the RHEL family only"
  # Disabled: only this install reads it, so no `dnf upgrade` moves the policy off its pin.
  install_pinned_key "$RKE2_SELINUX_KEY_URL" "$RANCHER_RPM_KEY_FINGERPRINT" "$RKE2_SELINUX_KEY_FILE"
  el9_repository "$RKE2_SELINUX_REPO_FILE" gpu-cluster-rke2-selinux \
    "Rancher RKE2 Common (stable), rke2-selinux" "$RKE2_SELINUX_REPO_URL" "$RKE2_SELINUX_KEY_FILE" 1 0 0
  if [[ "$(el9_package_version rke2-selinux)" != "$RKE2_SELINUX_VERSION" ]]; then
    dnf_run --enablerepo=gpu-cluster-rke2-selinux install "rke2-selinux-$RKE2_SELINUX_VERSION" ||
      die "dnf could not install rke2-selinux-$RKE2_SELINUX_VERSION from $RKE2_SELINUX_REPO_URL"
    log "changed: installed rke2-selinux-$RKE2_SELINUX_VERSION"
  fi
  SELINUX_RELABELED=0
  selinux_restore "${RKE2_SELINUX_PATHS[@]}"
  write_text "$RKE2_SELINUX_CONFIG_FILE" 0600 "selinux: true"
  ((SELINUX_RELABELED == 0)) || FILE_CHANGED=1
}

# rke2_check_secret VAR WHAT EXAMPLE: adds to INPUT_PROBLEMS what is wrong with secret
# input VAR, given directly or as VAR_SSM_PARAMETER (with AWS_REGION and SSM_READER). The
# value is never shown.
rke2_check_secret() {
  local var=$1 what=$2 example=$3 ssm="${1}_SSM_PARAMETER"
  if [[ -n "${!var:-}" && -n "${!ssm:-}" ]]; then
    INPUT_PROBLEMS+=("give $what either as $var or as $ssm, not both")
  elif [[ -z "${!var:-}" && -z "${!ssm:-}" ]]; then
    INPUT_PROBLEMS+=("missing $what: $var, or $ssm with AWS_REGION and SSM_READER naming an SSM SecureString holding it")
  elif [[ -n "${!ssm:-}" ]]; then
    check_ssm_inputs "$ssm" "$what" "$example"
  fi
}

# rke2_read_secret VAR WHAT: reads VAR from VAR_SSM_PARAMETER when it was not given.
rke2_read_secret() {
  local ssm="${1}_SSM_PARAMETER"
  if [[ -z "${!1:-}" ]]; then
    read_ssm_parameter "$1" "${!ssm}" "$2"
  fi
}

# rke2_service_active SERVICE: success when systemd runs SERVICE.
rke2_service_active() {
  systemctl is-active --quiet "$1"
}

# rke2_ensure_service SERVICE RESTART: SERVICE (rke2-server or rke2-agent) enabled and
# running; restarted when RESTART=1 (binary, config or token changed), retried by the
# next run if that fails. Starts without waiting: the units are Type=notify with
# TimeoutStartSec=0 (bundle/lib/systemd/system/rke2-server.service), so a start that
# never gets ready would block forever; the callers wait with a timeout instead.
rke2_ensure_service() {
  local service=$1 restart=$2
  if ! systemctl is-enabled --quiet "$service"; then
    systemd_enable "$service"
    log "changed: enabled $service"
  fi
  if ! rke2_service_active "$service"; then
    systemctl start --no-block "$service"
    follow_up_done "restart-$service"
    log "changed: started $service"
  elif needs_follow_up "$restart" "restart-$service"; then
    systemctl restart --no-block "$service"
    follow_up_done "restart-$service"
    log "changed: restarted $service"
  else
    log "$service is already running"
  fi
}

# rke2_kubectl ARGS...: RKE2's kubectl with the admin kubeconfig (servers only).
rke2_kubectl() {
  "$ROOT$RKE2_KUBECTL" --kubeconfig "$ROOT$RKE2_ADMIN_KUBECONFIG" "$@"
}

# rke2_write_kubelet_config TEXT: the kubelet drop-in on a node that has not started its
# kubelet yet; on a node in service only apply-agent-args.sh changes it (a CPU manager
# policy change needs the node drained first). Sets FILE_CHANGED.
rke2_write_kubelet_config() {
  FILE_CHANGED=0
  if [[ -f "$ROOT$RKE2_KUBELET_CONFIG_FILE" && -f "$ROOT$RKE2_KUBELET_KUBECONFIG" ]]; then
    if ! same_text "$(<"$ROOT$RKE2_KUBELET_CONFIG_FILE")" "$1"; then
      log "the kubelet settings changed; the apply-agent-args step applies them"
    fi
    return 0
  fi
  write_text "$RKE2_KUBELET_CONFIG_FILE" 0600 "$1"
}
