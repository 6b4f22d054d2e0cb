#!/usr/bin/env bats
# Three controllers on bare metal, through the steps the program renders for the second one
# (gpu000), whole, as `pulumi up` pipes them: its keepalived (RKE2), its etcd quorum check
# before anything is installed, and its join, which takes the CA from the cluster. And the
# second of three EC2 controllers on hybrid (control-plane-2), joining through the network
# load balancer.

bats_require_minimum_version 1.5.0
load helpers

# tests/components/test_ha_configs.py cluster(3, DISTRIBUTION): controller, gpu000 and
# gpu001 run the control plane behind the VIP 192.168.2.100.
stack() {
  "$PYTHON" - "$1" <<'PY'
import json, sys
sys.path.insert(0, ".")
from tests.components.test_ha_configs import cluster
print(json.dumps(cluster(3, sys.argv[1])))
PY
}

# hybrid_stack DISTRIBUTION: tests/stacks/ec2_controllers.py three_controllers on hybrid:
# control-plane, -2 and -3 at 10.20.{0,1,2}.10 behind the load balancer at 10.20.0.11.
hybrid_stack() {
  "$PYTHON" - "$1" <<'PY'
import json, sys
sys.path.insert(0, ".")
from tests.builders import hybrid_config
from tests.stacks.ec2_controllers import three_controllers
print(json.dumps(three_controllers(hybrid_config(), sys.argv[1])))
PY
}

setup_file() {
  local distribution step
  cd "$REPO_ROOT" || exit 1
  for distribution in rke2 k0s; do
    for step in control-plane-vip etcd-quorum install-controller; do
      "$PYTHON" "$TESTS_DIR/render_host_step.py" "$(stack "$distribution")" gpu000 "$step" \
        >"$BATS_FILE_TMPDIR/$distribution-$step.sh" 2>"$BATS_FILE_TMPDIR/$distribution-$step.err" || true
    done
    "$PYTHON" "$TESTS_DIR/render_host_step.py" "$(hybrid_stack "$distribution")" control-plane-2 \
      install-controller >"$BATS_FILE_TMPDIR/hybrid-$distribution-install-controller.sh" \
      2>"$BATS_FILE_TMPDIR/hybrid-$distribution-install-controller.err" || true
  done
}

setup() {
  setup_host
  export GPU_CLUSTER_HOST=gpu000
  mkdir -p "$BATS_TEST_TMPDIR/empty"
  cd "$BATS_TEST_TMPDIR/empty" || exit 1
}

# rendered DISTRIBUTION STEP: the program's text of gpu000's STEP (fails when it made none).
rendered() {
  if [[ ! -s "$BATS_FILE_TMPDIR/$1-$2.sh" ]]; then
    echo "the program rendered no $2 step: $(<"$BATS_FILE_TMPDIR/$1-$2.err")" >&2
    return 1
  fi
  cat "$BATS_FILE_TMPDIR/$1-$2.sh"
}

# run_rendered FILE: the step in FILE through a pipe to `bash -s -- create`.
run_rendered() {
  # shellcheck disable=SC2016 # expanded by the inner bash
  run bash -c 'bash -s -- create <"$1"' _ "$1"
}

# input FILE NAME: the value the step in FILE exports as NAME.
input() {
  "$PYTHON" -c 'import sys
sys.path.insert(0, sys.argv[3])
from components.common.step_text import step_inputs
print(step_inputs(open(sys.argv[1]).read())[sys.argv[2]])' "$1" "$2" "$REPO_ROOT"
}

# with_fake_release FILE DISTRIBUTION: FILE's step with the release pins of the stub's fake
# release (the stubbed curl serves it; helpers.bash pin_fake_releases) in place of the real
# release's, written to $BATS_TEST_TMPDIR/step.sh.
with_fake_release() {
  local prefix=${2^^} version pin
  version="$(input "$1" "${prefix}_VERSION")"
  pin="$(fake_sha256 "$2" "$version")"
  sed -E "s/^export ${prefix}_SHA256_(AMD64|ARM64)='[0-9a-f]{64}'$/export ${prefix}_SHA256_\\1='$pin'/" \
    "$1" >"$BATS_TEST_TMPDIR/step.sh"
}

# joining_rke2 FILE: an RKE2 server about to join with FILE's step: its kubectl in place, and
# an RKE2 that writes the cluster's CA (FILE's RKE2_CA_CERT), fetched from the server it
# joins, as it starts.
joining_rke2() {
  rke2_kubectl_installed
  STUB_CLUSTER_CA="$(input "$1" RKE2_CA_CERT)"
  # shellcheck disable=SC2016 # expanded by the bash the stub starts
  export STUB_CLUSTER_CA STUB_ON_START='[[ "$1" == rke2-server ]] || exit 0
    tls="$GPU_CLUSTER_ROOT/var/lib/rancher/rke2/server/tls"; mkdir -p "$tls"
    for name in server-ca client-ca; do printf "%s\n" "$STUB_CLUSTER_CA" >"$tls/$name.crt"
      echo "the cluster CA key" >"$tls/$name.key"; done'
}

@test "rke2: the second server's keepalived holds the VIP with the other two as peers" {
  rendered rke2 control-plane-vip >"$BATS_TEST_TMPDIR/vip.sh"
  # keepalived --config-test of the same text runs for real in tests/components/test_keepalived.py.
  ln -s "$TESTS_DIR/stubs/stub" "$BATS_TEST_TMPDIR/bin/keepalived"
  run_rendered "$BATS_TEST_TMPDIR/vip.sh"
  assert_success
  assert_output_contains "gpu-cluster: gpu000: control-plane-vip:"
  grep -q '192.168.2.100/24' "$GPU_CLUSTER_ROOT/etc/keepalived/keepalived.conf"
  # gpu000 is 192.168.2.2; controller and gpu001 (192.168.2.1, .3) are its peers.
  grep -q 'unicast_src_ip 192.168.2.2$' "$GPU_CLUSTER_ROOT/etc/keepalived/keepalived.conf"
  [ "$(sed -n '/unicast_peer {/,/}/p' "$GPU_CLUSTER_ROOT/etc/keepalived/keepalived.conf" | grep -Eo '192\.168\.2\.[0-9]+' | tr '\n' ' ')" = "192.168.2.1 192.168.2.3 " ]
  run_rendered "$BATS_TEST_TMPDIR/vip.sh"
  assert_success
  refute_changes_logged
}

@test "rke2 and k0s: before the second controller is installed, its quorum check has nothing to take down" {
  local distribution
  for distribution in rke2 k0s; do
    rendered "$distribution" etcd-quorum >"$BATS_TEST_TMPDIR/quorum.sh"
    run_rendered "$BATS_TEST_TMPDIR/quorum.sh"
    assert_success
    assert_output_contains "gpu-cluster: gpu000: etcd-quorum: unchanged: no control plane runs here yet"
    refute_called 'etcd|kubectl'
  done
}

@test "rke2: the second server joins at the VIP with the server token and no CA key, and runs with the cluster's CA" {
  rendered rke2 install-controller >"$BATS_TEST_TMPDIR/install.sh"
  with_fake_release "$BATS_TEST_TMPDIR/install.sh" rke2
  joining_rke2 "$BATS_TEST_TMPDIR/install.sh"
  ! grep -q '^export RKE2_CA_KEY' "$BATS_TEST_TMPDIR/step.sh"
  run_rendered "$BATS_TEST_TMPDIR/step.sh"
  assert_success
  assert_output_contains "gpu-cluster: gpu000: install-controller: joins https://192.168.2.100:9345: the cluster CA comes from there" \
    "gpu-cluster: gpu000: install-controller: joined https://192.168.2.100:9345, whose CA is the cluster's"
  grep -qx 'server: https://192.168.2.100:9345' "$GPU_CLUSTER_ROOT/etc/rancher/rke2/config.yaml"
  [ -s "$GPU_CLUSTER_ROOT/etc/rancher/rke2/server-token" ]
}

@test "k0s: the second controller joins with the first one's token and no CA key, and runs with the cluster's CA" {
  rendered k0s install-controller >"$BATS_TEST_TMPDIR/install.sh"
  # The token is the first controller's create-controller-token output at `up`: unknown,
  # so empty, in the offline preview; a made-up one stands in.
  grep -qx "export K0S_CONTROLLER_TOKEN=''" "$BATS_TEST_TMPDIR/install.sh"
  sed -i "s/^export K0S_CONTROLLER_TOKEN=''$/export K0S_CONTROLLER_TOKEN='H4sIAAAAAAAAfirstControllersToken'/" \
    "$BATS_TEST_TMPDIR/install.sh"
  with_fake_release "$BATS_TEST_TMPDIR/install.sh" k0s
  STUB_CLUSTER_CA="$(input "$BATS_TEST_TMPDIR/install.sh" K0S_CA_CERT)"
  export STUB_CLUSTER_CA
  ! grep -q '^export K0S_CA_KEY' "$BATS_TEST_TMPDIR/step.sh"
  run_rendered "$BATS_TEST_TMPDIR/step.sh"
  assert_success
  assert_output_contains "gpu-cluster: gpu000: install-controller: joins with K0S_CONTROLLER_TOKEN" \
    "gpu-cluster: gpu000: install-controller: joined the cluster; its CA is K0S_CA_CERT"
  grep -q 'joined with H4sIAAAAAAAAfirstControllersToken' "$STUB_STATE/k0s-joins"
  grep -q -- '--token-file /etc/k0s/controller-token' "$GPU_CLUSTER_ROOT/etc/systemd/system/k0scontroller.service"
}

@test "rke2 on hybrid: the second EC2 server joins through the load balancer, named in its certificate" {
  rendered hybrid-rke2 install-controller >"$BATS_TEST_TMPDIR/install.sh"
  with_fake_release "$BATS_TEST_TMPDIR/install.sh" rke2
  export GPU_CLUSTER_HOST=control-plane-2
  joining_rke2 "$BATS_TEST_TMPDIR/install.sh"
  ! grep -q '^export RKE2_CA_KEY' "$BATS_TEST_TMPDIR/step.sh"
  run_rendered "$BATS_TEST_TMPDIR/step.sh"
  assert_success
  assert_output_contains \
    "gpu-cluster: control-plane-2: install-controller: joined https://10.20.0.11:9345, whose CA is the cluster's"
  local config="$GPU_CLUSTER_ROOT/etc/rancher/rke2/config.yaml"
  grep -qx 'server: https://10.20.0.11:9345' "$config"
  grep -qx 'node-ip: 10.20.1.10' "$config"
  # The load balancer's address and DNS name (the preview's stand-in), and its own address.
  grep -qx -- '- 10.20.0.11' "$config"
  grep -qE -- '^- gcapi-[0-9a-f]+-[0-9a-f]+\.elb\.preview-region-1\.amazonaws\.com$' "$config"
  grep -qx -- '- 10.20.1.10' "$config"
  run_rendered "$BATS_TEST_TMPDIR/step.sh"
  assert_success
  refute_changes_logged
}

@test "k0s on hybrid: the second EC2 controller joins with a token, the load balancer its external address" {
  rendered hybrid-k0s install-controller >"$BATS_TEST_TMPDIR/install.sh"
  grep -qx "export K0S_CONTROLLER_TOKEN=''" "$BATS_TEST_TMPDIR/install.sh"
  sed -i "s/^export K0S_CONTROLLER_TOKEN=''$/export K0S_CONTROLLER_TOKEN='H4sIAAAAAAAAfirstControllersToken'/" \
    "$BATS_TEST_TMPDIR/install.sh"
  with_fake_release "$BATS_TEST_TMPDIR/install.sh" k0s
  STUB_CLUSTER_CA="$(input "$BATS_TEST_TMPDIR/install.sh" K0S_CA_CERT)"
  # Its node, as k0s names it (the host name) and registers it, which the step labels.
  export GPU_CLUSTER_HOST=control-plane-2 STUB_CLUSTER_CA STUB_HOSTNAME=control-plane-2 \
    STUB_NODES=control-plane-2
  ! grep -q '^export K0S_CA_KEY' "$BATS_TEST_TMPDIR/step.sh"
  run_rendered "$BATS_TEST_TMPDIR/step.sh"
  assert_success
  assert_output_contains "gpu-cluster: control-plane-2: install-controller: joined the cluster; its CA is K0S_CA_CERT"
  assert_output_contains "install-controller: changed: node control-plane-2 now has the label node-restriction.kubernetes.io/gpu-cluster-controller=true"
  grep -q 'joined with H4sIAAAAAAAAfirstControllersToken' "$STUB_STATE/k0s-joins"
  grep -q 'externalAddress: 10.20.0.11$' "$GPU_CLUSTER_ROOT/etc/k0s/k0s.yaml"
  ! grep -q 'controlPlaneLoadBalancing' "$GPU_CLUSTER_ROOT/etc/k0s/k0s.yaml"
  run_rendered "$BATS_TEST_TMPDIR/step.sh"
  assert_success
  refute_changes_logged
}
