#!/usr/bin/env bash
# k0s helpers for the k0s step scripts: its release (node/lib.sh installs it), service
# names, and (re)installing the k0s service only when its arguments changed.
# shellcheck shell=bash disable=SC2034 # its globals are read by the scripts that source it

# shellcheck source=../lib.sh
[[ -n "${GPU_CLUSTER_LIB_LOADED:-}" ]] || source "$(dirname "${BASH_SOURCE[0]}")/../lib.sh"
# shellcheck source=../node/lib.sh
[[ -n "${GPU_CLUSTER_NODE_LIB_LOADED:-}" ]] || source "$(dirname "${BASH_SOURCE[0]}")/../node/lib.sh"
# shellcheck source=../os/selinux.sh
[[ -n "${GPU_CLUSTER_SELINUX_LIB_LOADED:-}" ]] || source "$(dirname "${BASH_SOURCE[0]}")/../os/selinux.sh"

GPU_CLUSTER_K0S_LIB_LOADED=1
K0S_BIN=/usr/local/bin/k0s
K0S_CONFIG_FILE=/etc/k0s/k0s.yaml
K0S_TOKEN_FILE=/etc/k0s/worker-token
# k0s's default data dir; we never pass --data-dir. The kubelet root (pod volume
# mounts, NFS included) lives below it unless KUBELET_ROOT_DIR moves it.
K0S_DATA_DIR=/var/lib/k0s
# Written by a worker once it has joined; from then on the join token is unused.
K0S_KUBELET_KUBECONFIG="$K0S_DATA_DIR/kubelet.conf"
K0S_RELEASES_URL=https://github.com/k0sproject/k0s/releases/download
# Where SELinux labels files: containerd labels containers ("Enable SELinux in containerd of
# k0s", k0sproject/k0s docs/selinux.md; containerd 2's CRI runtime plugin, as k0s's drop-ins
# are read, docs/runtime.md), and its state carries container-selinux's types. k0s labels the
# containerd and runc it unpacks itself (pkg/component/worker/containerd/component_other.go,
# container_runtime_exec_t, since v1.35.1).
K0S_SELINUX_DROPIN=/etc/k0s/containerd.d/gpu-cluster-selinux.toml
K0S_CONTAINERD_DIR=$K0S_DATA_DIR/containerd
K0S_SNAPSHOTS_DIR=$K0S_CONTAINERD_DIR/io.containerd.snapshotter.v1.overlayfs/snapshots
K0S_RELEASE='^v[0-9]+\.[0-9]+\.[0-9]+(-[0-9A-Za-z.]+)?\+k0s\.[0-9]+$'
K0S_BINARY_CHANGED=0
# This EC2 instance's providerID with K0S_CLOUD_PROVIDER=aws (k0s_read_provider_id).
K0S_PROVIDER_ID=""

# k0s_current_version: prints the version of the k0s on PATH, or nothing.
k0s_current_version() {
  if command -v k0s >/dev/null 2>&1; then
    k0s version 2>/dev/null || true
  fi
}

# k0s_install VERSION: k0s VERSION (e.g. v1.34.1+k0s.0) installed to /usr/local/bin/k0s
# from its GitHub release (or K0S_RELEASE_URL) after checking it against the sha256 the
# program pinned for this host's architecture (K0S_SHA256_AMD64 or K0S_SHA256_ARM64), and,
# with K0S_AIRGAP_SHA256_<ARCH> given, its image bundle into <data-dir>/images, which k0s
# watches and imports into its containerd (k0sproject/k0s docs/airgap-install.md, "k0s will
# watch for image bundles in the <data-dir>/images folder"): node/lib.sh
# install_pinned_release. Sets K0S_BINARY_CHANGED=1 when it replaced the binary.
k0s_install() {
  install_pinned_release K0S k0s "$1" "$K0S_RELEASES_URL/${1//+/%2B}" "$K0S_DATA_DIR/images"
  K0S_BINARY_CHANGED=$RELEASE_CHANGED
}

# What install_pinned_release asks of k0s: its files for ARCH and VERSION, and installing
# the binary.
k0s_release_file() { echo "k0s-$2-$1"; }
k0s_airgap_file() { echo "k0s-airgap-bundle-$2-$1"; }
k0s_unpack() {
  write_file "$K0S_BIN" 0755 <"$1"
  RELEASE_CHANGED=$FILE_CHANGED
  hash -r
}

# k0s_check_kubelet_root_dir: dies unless KUBELET_ROOT_DIR (optional, "" keeps
# k0s's default below its data dir) is a plain absolute path at least two levels
# deep. `k0s reset` deletes that directory, so nothing like /, /var or ../ passes.
k0s_check_kubelet_root_dir() {
  local dir=${KUBELET_ROOT_DIR:-}
  if [[ -z "$dir" ]]; then
    return 0
  fi
  if [[ ! "$dir" =~ ^(/[A-Za-z0-9_.-]+){2,}$ || "$dir/" == */./* || "$dir/" == */../* ]]; then
    die "KUBELET_ROOT_DIR must be an absolute path at least two levels deep," \
      "without '.', '..', blanks or a trailing slash (e.g. /var/lib/kubelet), got '$dir'"
  fi
}

# k0s_read_provider_id: with K0S_CLOUD_PROVIDER=aws (node/lib.sh check_cloud_provider_input),
# K0S_PROVIDER_ID set to this instance's providerID from IMDSv2 (node/lib.sh
# read_aws_provider_id); dies when EC2 metadata gives none.
k0s_read_provider_id() {
  if [[ "${K0S_CLOUD_PROVIDER:-}" == aws ]]; then
    read_aws_provider_id K0S_PROVIDER_ID
    log "this instance's providerID is $K0S_PROVIDER_ID"
  fi
}

# k0s_add_kubelet_args: appends the flags of a node that runs workloads to ARGS: the
# node IP pinned to NODE_IP (when empty the kubelet picks the host's primary address,
# as on a single-NIC cloud instance), labels, taints, the worker profile and the
# kubelet root dir (where device plugins and CSI drivers expect it), and on an EC2 node
# (K0S_PROVIDER_ID) the external cloud provider with the instance's providerID. Without a
# node IP, KUBELET_EXTRA_ARGS and providerID there is no --kubelet-extra-args at all.
k0s_add_kubelet_args() {
  local kubelet_args="${NODE_IP:+--node-ip=$NODE_IP}"
  if [[ -n "${KUBELET_EXTRA_ARGS:-}" ]]; then
    kubelet_args+="${kubelet_args:+ }$KUBELET_EXTRA_ARGS"
  fi
  if [[ -n "$K0S_PROVIDER_ID" ]]; then
    # --enable-cloud-provider gives the kubelet --cloud-provider=external, and k0s merges
    # the extra args after it (pkg/component/worker/kubelet.go:157-162 at v1.36.3+k0s.2;
    # pkg/config/cli.go:255, which `k0s install controller` takes too:
    # cmd/install/controller_test.go:51). --provider-id comes last, so that it wins over
    # one in KUBELET_EXTRA_ARGS (cmd/worker/worker.go:159 splits them into a map, the last
    # value winning: internal/pkg/flags/flags.go:13-28).
    ARGS+=(--enable-cloud-provider)
    kubelet_args+="${kubelet_args:+ }--provider-id=$K0S_PROVIDER_ID"
  fi
  if [[ -n "$kubelet_args" ]]; then
    ARGS+=("--kubelet-extra-args=$kubelet_args")
  fi
  if [[ -n "${NODE_LABELS:-}" ]]; then
    ARGS+=("--labels=$NODE_LABELS")
  fi
  if [[ -n "${NODE_TAINTS:-}" ]]; then
    ARGS+=("--taints=$NODE_TAINTS")
  fi
  if [[ -n "${K0S_PROFILE:-}" ]]; then
    ARGS+=("--profile=$K0S_PROFILE")
  fi
  if [[ -n "${KUBELET_ROOT_DIR:-}" ]]; then
    ARGS+=("--kubelet-root-dir=$KUBELET_ROOT_DIR")
  fi
}

# k0s_service_name ROLE: the systemd unit k0s installs for ROLE
# (controller, controller+worker or worker).
k0s_service_name() {
  case "$1" in
    controller | controller+worker) echo k0scontroller ;;
    worker) echo k0sworker ;;
    *) die "unknown k0s role: $1" ;;
  esac
}

# k0s_service_installed SERVICE: success when `k0s install` created SERVICE.
k0s_service_installed() {
  [[ -f "$ROOT/etc/systemd/system/$1.service" ]]
}

# k0s_service_active SERVICE: success when systemd runs SERVICE.
k0s_service_active() {
  systemctl is-active --quiet "$1"
}

# k0s_args_file SERVICE: where the arguments of the last successful
# `k0s install` for SERVICE are recorded (one per line). How flags appear in the
# unit file differs between k0s versions; our own record compares reliably.
k0s_args_file() {
  printf '/etc/k0s/gpu-cluster-%s.args\n' "$1"
}

# k0s_service_args_changed SERVICE ROLE ARGS...: success when ROLE ARGS differ
# from the recorded install arguments (or none are recorded).
k0s_service_args_changed() {
  local service=$1 file recorded wanted
  shift
  file="$ROOT$(k0s_args_file "$service")"
  wanted="$(printf '%s\n' "$@")"
  if [[ ! -f "$file" ]]; then
    return 0
  fi
  recorded="$(<"$file")"
  [[ "$recorded" != "$wanted" ]]
}

# k0s_ensure_service ROLE RESTART ARGS...: makes the k0s service for ROLE
# (controller or worker) installed with exactly ARGS and running.
#   - not installed: `k0s install ROLE ARGS...`
#   - installed with other arguments: `k0s install ROLE --force ARGS...`, restart
#   - RESTART=1 (binary, config or token changed): restart, retried by the
#     next run if it fails
#   - not running: `k0s start`
k0s_ensure_service() {
  local role=$1 restart=$2 service
  shift 2
  service="$(k0s_service_name "$role")"
  # `k0s install` enables its unit and reloads systemd (kardianos/service,
  # service_systemd_linux.go Install): a GPU node's devices must be linked first.
  ensure_nvidia_dev_char_links
  if ! k0s_service_installed "$service"; then
    log "installing the $service service"
    k0s install "$role" "$@" >&2
    log "changed: installed the $service service"
  elif k0s_service_args_changed "$service" "$role" "$@"; then
    log "the $service service arguments changed; reinstalling it"
    k0s install "$role" --force "$@" >&2
    systemd_reload
    restart=1
    log "changed: reinstalled the $service service"
  else
    log "the $service service is already installed with the same arguments"
  fi
  write_text "$(k0s_args_file "$service")" 0644 "$(printf '%s\n' "$role" "$@")"

  if ! k0s_service_active "$service"; then
    k0s start >&2
    follow_up_done "restart-$service"
    log "changed: started $service"
  elif needs_follow_up "$restart" "restart-$service"; then
    systemctl restart "$service"
    follow_up_done "restart-$service"
    log "changed: restarted $service"
  else
    log "$service is already running"
  fi
}

# k0s_print_token ROLE: checks TOKEN_EXPIRY (a Go duration, k0s cmd/token/create.go at
# v1.36.3+k0s.2, lines 33 and 91: --expiry), waits for the API and prints only a new join
# token of ROLE (worker or controller) on stdout, which the program reads as a secret.
k0s_print_token() {
  local role=$1 token
  require_env TOKEN_EXPIRY
  if [[ ! "$TOKEN_EXPIRY" =~ ^([0-9]+(ns|us|ms|s|m|h))+$ ]]; then
    die "TOKEN_EXPIRY must be a duration such as 2h or 90m, got '$TOKEN_EXPIRY'"
  fi
  wait_until 120 "the Kubernetes API to be ready" k0s kubectl get --raw=/readyz
  token="$(k0s token create --role="$role" --expiry="$TOKEN_EXPIRY")"
  if [[ -z "$token" ]]; then
    die "k0s token create printed no token"
  fi
  log "created a $role join token (expires in $TOKEN_EXPIRY)"
  printf '%s\n' "$token"
}

# k0s_configure_selinux: where SELinux labels files, docs/selinux.md's file contexts of k0s's
# containerd state and the CRI's enable_selinux; elsewhere no such drop-in. The folders are
# made before k0s first starts, so that what containerd creates in them inherits their labels
# (as rke2-selinux's %post makes RKE2's, policy/centos9/rke2-selinux.spec). k0s reloads its
# containerd when a drop-in changes (docs/runtime.md).
k0s_configure_selinux() {
  if ! selinux_enabled; then
    remove_file "$K0S_SELINUX_DROPIN"
    return 0
  fi
  SELINUX_RULES_CHANGED=0
  selinux_file_context "$K0S_CONTAINERD_DIR(/.*)?" container_var_lib_t
  selinux_file_context "$K0S_CONTAINERD_DIR/io.containerd.snapshotter.*/snapshots(/.*)?" container_ro_file_t
  if [[ ! -d "$ROOT$K0S_SNAPSHOTS_DIR" ]]; then
    # containerd's own modes: its root 0711, the snapshotter's folders 0700.
    mkdir -p -- "$ROOT$K0S_SNAPSHOTS_DIR"
    chmod 0711 -- "$ROOT$K0S_CONTAINERD_DIR"
    chmod 0700 -- "$ROOT$K0S_SNAPSHOTS_DIR" "$ROOT${K0S_SNAPSHOTS_DIR%/*}"
    log "changed: made $K0S_SNAPSHOTS_DIR for SELinux's labels"
    SELINUX_RULES_CHANGED=1
  fi
  # Only after a new rule or new folders (retried until it succeeds): every run's restorecon
  # would walk all of containerd's snapshots.
  if needs_follow_up "$SELINUX_RULES_CHANGED" relabel-k0s-containerd; then
    selinux_restore "$K0S_CONTAINERD_DIR"
    follow_up_done relabel-k0s-containerd
  fi
  write_file "$K0S_SELINUX_DROPIN" 0644 <<'EOF'
# Written by gpu-cluster: containerd labels containers for SELinux (k0s docs/selinux.md).
version = 3

[plugins."io.containerd.cri.v1.runtime"]
  enable_selinux = true
EOF
}
