#!/usr/bin/env bats
# versions.airgapBundleSha256: the distribution's airgap image bundle, downloaded by the real
# curl from a folder served on loopback (kubernetes.releaseUrl), checked against the
# configured sha256 and placed where the distribution imports it, before install and join.

bats_require_minimum_version 1.5.0
load helpers

K0S_BUNDLE=k0s-airgap-bundle-v1.34.1+k0s.0-amd64
RKE2_BUNDLE=rke2-images.linux-amd64.tar.zst
# The cluster CA both distributions get here (made-up PEM blocks).
CA_CERT='-----BEGIN CERTIFICATE-----
MIIBhTCCASugAwIBAgIUgpu-cluster-ca
-----END CERTIFICATE-----'
CA_KEY='-----BEGIN EC PRIVATE KEY-----
MHcCAQEEIA-secret-ca-key-0123456789
-----END EC PRIVATE KEY-----'

# The site's folder: the fake releases the stubs pin and a bundle of random bytes each.
setup_file() {
  local site="$BATS_FILE_TMPDIR/site" port
  mkdir -p "$site/k0s" "$site/rke2"
  GPU_CLUSTER_ROOT=$site STUB_STATE=$site "$TESTS_DIR/stubs/stub" fake-release k0s v1.34.1+k0s.0 >"$site/k0s/k0s-v1.34.1+k0s.0-amd64"
  GPU_CLUSTER_ROOT=$site STUB_STATE=$site "$TESTS_DIR/stubs/stub" fake-release rke2 v1.36.3+rke2r1 >"$site/rke2/rke2.linux-amd64.tar.gz"
  head -c 65536 /dev/urandom >"$site/k0s/$K0S_BUNDLE"
  head -c 65536 /dev/urandom >"$site/rke2/$RKE2_BUNDLE"
  port="$(/usr/bin/python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')"
  # Its fd 3 closed: bats waits for whatever holds it.
  (cd "$site" && exec /usr/bin/python3 -m http.server "$port" --bind 127.0.0.1 >/dev/null 2>&1 3>&-) &
  echo "$!" >"$BATS_FILE_TMPDIR/server.pid"
  echo "http://127.0.0.1:$port" >"$BATS_FILE_TMPDIR/site.url"
  for _ in $(seq 50); do
    (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null && return 0
    sleep 0.1
  done
  return 1
}

teardown_file() {
  kill "$(cat "$BATS_FILE_TMPDIR/server.pid")"
}

sha256_of() {
  sha256sum <"$BATS_FILE_TMPDIR/site/$1" | cut -c1-64
}

setup() {
  setup_host
  SITE="$(cat "$BATS_FILE_TMPDIR/site.url")"
}

k0s_controller_inputs() {
  export K0S_VERSION=v1.34.1+k0s.0 K0S_ENABLE_WORKER=true NODE_IP=192.0.2.10 \
    KUBELET_EXTRA_ARGS="" NODE_LABELS="" NODE_TAINTS="" API_PORT=6443 \
    KUBELET_ROOT_DIR=/var/lib/kubelet K0S_RELEASE_URL="$SITE/k0s/" \
    K0S_CONFIG='apiVersion: k0s.k0sproject.io/v1beta1
kind: ClusterConfig
metadata:
  name: gpu-cluster' \
    K0S_CA_CERT="$CA_CERT" K0S_CA_KEY="$CA_KEY" \
    K0S_ADMISSION_CONFIG='kind: AdmissionConfiguration' K0S_AUDIT_POLICY='kind: Policy'
}

rke2_server_inputs() {
  rke2_kubectl_installed
  export RKE2_VERSION=v1.36.3+rke2r1 RKE2_RELEASE_URL="$SITE/rke2" \
    RKE2_CONFIG='node-name: moscow' RKE2_KUBELET_CONFIG='kubelet-arg: []' \
    RKE2_CA_CERT="$CA_CERT" RKE2_CA_KEY="$CA_KEY" \
    RKE2_TOKEN=server-token-secret RKE2_AGENT_TOKEN=agent-token-secret RKE2_CANAL_CONFIG='' \
    RKE2_ADMISSION_CONFIG='kind: AdmissionConfiguration' RKE2_AUDIT_POLICY='kind: Policy'
}

@test "airgap bundle: k0s: downloaded, verified and placed in /var/lib/k0s/images before k0s starts" {
  k0s_controller_inputs
  export K0S_AIRGAP_SHA256_AMD64="$(sha256_of "k0s/$K0S_BUNDLE")"
  run_script k0s/install-controller.sh
  assert_success
  cmp "$BATS_FILE_TMPDIR/site/k0s/$K0S_BUNDLE" "$GPU_CLUSTER_ROOT/var/lib/k0s/images/$K0S_BUNDLE"
  assert_mode "/var/lib/k0s/images/$K0S_BUNDLE" 644
  assert_output_contains "changed /var/lib/k0s/images/$K0S_BUNDLE"
  assert_call_order "^curl .*/k0s/k0s-airgap-bundle-v1\\.34\\.1\\+k0s\\.0-amd64\$" '^k0s install controller'
  assert_called '^k0s install controller'

  reset_calls
  run_script k0s/install-controller.sh
  assert_success
  assert_output_contains "unchanged /var/lib/k0s/images/$K0S_BUNDLE (sha256 verified)"
  refute_called "^curl .*airgap"
}

@test "airgap bundle: k0s: a wrong sha256 is refused, naming host and step, nothing placed or started" {
  k0s_controller_inputs
  export K0S_AIRGAP_SHA256_AMD64=0000000000000000000000000000000000000000000000000000000000000000
  run_script k0s/install-controller.sh
  assert_failure
  assert_output_contains "gpu-cluster: moscow: install-controller: checksum mismatch for the image bundle $K0S_BUNDLE: versions.airgapBundleSha256 says 0000000000000000000000000000000000000000000000000000000000000000, downloaded $(sha256_of "k0s/$K0S_BUNDLE"); nothing installed"
  [ ! -e "$GPU_CLUSTER_ROOT/var/lib/k0s/images/$K0S_BUNDLE" ]
  refute_called '^k0s install|^systemctl (start|restart)'
}

@test "airgap bundle: k0s: a host of another architecture without its sha256 is refused" {
  k0s_controller_inputs
  export K0S_AIRGAP_SHA256_AMD64="$(sha256_of "k0s/$K0S_BUNDLE")" STUB_UNAME_M=aarch64 FAKE_PINS=off \
    K0S_SHA256_ARM64="$(fake_sha256 k0s v1.34.1+k0s.0)"
  cp "$BATS_FILE_TMPDIR/site/k0s/k0s-v1.34.1+k0s.0-amd64" "$BATS_FILE_TMPDIR/site/k0s/k0s-v1.34.1+k0s.0-arm64"
  run_script k0s/install-controller.sh
  assert_failure
  assert_output_contains "install-controller: no sha256 for k0s-airgap-bundle-v1.34.1+k0s.0-arm64: set gpu-cluster:versions airgapBundleSha256.arm64"
}

@test "airgap bundle: RKE2: rke2-images in agent/images before the server starts" {
  rke2_server_inputs
  export RKE2_AIRGAP_SHA256_AMD64="$(sha256_of "rke2/$RKE2_BUNDLE")"
  run_script rke2/install-server.sh
  assert_success
  cmp "$BATS_FILE_TMPDIR/site/rke2/$RKE2_BUNDLE" \
    "$GPU_CLUSTER_ROOT/var/lib/rancher/rke2/agent/images/$RKE2_BUNDLE"
  assert_output_contains "changed /var/lib/rancher/rke2/agent/images/$RKE2_BUNDLE"
  assert_call_order "^curl .*/rke2/$RKE2_BUNDLE\$" '^systemctl .*rke2-server'
  assert_called '^systemctl .*rke2-server'

}

@test "airgap bundle: RKE2: a wrong sha256 is refused, naming host and step, nothing placed or started" {
  rke2_server_inputs
  export RKE2_AIRGAP_SHA256_AMD64=1111111111111111111111111111111111111111111111111111111111111111
  run_script rke2/install-server.sh
  assert_failure
  assert_output_contains "gpu-cluster: moscow: install-server: checksum mismatch for the image bundle $RKE2_BUNDLE"
  [ ! -e "$GPU_CLUSTER_ROOT/var/lib/rancher/rke2/agent/images/$RKE2_BUNDLE" ]
  refute_called '^systemctl (enable|start|restart).*rke2-server'
}

@test "airgap bundle: without a sha256, nothing is downloaded" {
  k0s_controller_inputs
  run_script k0s/install-controller.sh
  assert_success
  [ ! -e "$GPU_CLUSTER_ROOT/var/lib/k0s/images" ]
}

@test "release download: a file the site lacks is refused naming it, on both distributions" {
  k0s_controller_inputs
  export K0S_RELEASE_URL="$SITE/missing" FAKE_PINS=off \
    K0S_SHA256_AMD64="$(sha256_of "k0s/k0s-v1.34.1+k0s.0-amd64")"
  run_script k0s/install-controller.sh
  assert_failure
  assert_output_contains "install-controller: could not download k0s-v1.34.1+k0s.0-amd64 from $SITE/missing/k0s-v1.34.1+k0s.0-amd64"
  refute_called '^k0s install'

  unset FAKE_PINS
  rke2_server_inputs
  export RKE2_RELEASE_URL="$SITE/rke2" RKE2_AIRGAP_SHA256_AMD64="$(sha256_of "rke2/$RKE2_BUNDLE")"
  mv "$BATS_FILE_TMPDIR/site/rke2/$RKE2_BUNDLE" "$BATS_FILE_TMPDIR/site/rke2/$RKE2_BUNDLE.away"
  run_script rke2/install-server.sh
  mv "$BATS_FILE_TMPDIR/site/rke2/$RKE2_BUNDLE.away" "$BATS_FILE_TMPDIR/site/rke2/$RKE2_BUNDLE"
  assert_failure
  assert_output_contains "install-server: could not download the image bundle $RKE2_BUNDLE from $SITE/rke2/$RKE2_BUNDLE"
  refute_called '^systemctl (enable|start|restart).*rke2-server'
}
