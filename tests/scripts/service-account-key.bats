#!/usr/bin/env bats
# service-account-key (k0s, RKE2): the public key the API server signs service-account
# tokens with, alone on stdout; the private key never leaves the host.

bats_require_minimum_version 1.5.0
load helpers

setup() {
  setup_host
}

@test "k0s: prints sa.pub and nothing else on stdout" {
  mkdir -p "$GPU_CLUSTER_ROOT/var/lib/k0s/pki"
  openssl genpkey -algorithm RSA -pkeyopt rsa_keygen_bits:2048 -out "$BATS_TEST_TMPDIR/sa.key" 2>/dev/null
  openssl pkey -in "$BATS_TEST_TMPDIR/sa.key" -pubout -out "$GPU_CLUSTER_ROOT/var/lib/k0s/pki/sa.pub"
  run --separate-stderr bash "$SCRIPTS_DIR/k0s/service-account-key.sh"
  assert_success
  [ "$output" = "$(cat "$GPU_CLUSTER_ROOT/var/lib/k0s/pki/sa.pub")" ]
  # openssl reads it back as a public key.
  printf '%s\n' "$output" | openssl pkey -pubin -noout
  [[ "$stderr" == *"gpu-cluster: moscow: service-account-key: read the service-account public key"* ]]
  assert_no_state_changes
}

@test "k0s: fails with host and step before the controller is installed" {
  run_script k0s/service-account-key.sh
  assert_failure
  assert_output_contains "gpu-cluster: moscow: service-account-key: no service-account key at /var/lib/k0s/pki/sa.pub"
}

@test "k0s: refuses a file that is not a PEM public key" {
  mkdir -p "$GPU_CLUSTER_ROOT/var/lib/k0s/pki"
  echo "not a key" >"$GPU_CLUSTER_ROOT/var/lib/k0s/pki/sa.pub"
  run_script k0s/service-account-key.sh
  assert_failure
  assert_output_contains "service-account-key: /var/lib/k0s/pki/sa.pub is not a PEM public key"
}

@test "rke2: prints the public key of service.current.key, never the private key" {
  local tls="$GPU_CLUSTER_ROOT/var/lib/rancher/rke2/server/tls"
  mkdir -p "$tls"
  openssl genpkey -algorithm RSA -pkeyopt rsa_keygen_bits:2048 -out "$tls/service.current.key" 2>/dev/null
  run --separate-stderr bash "$SCRIPTS_DIR/rke2/service-account-key.sh"
  assert_success
  [ "$output" = "$(openssl pkey -in "$tls/service.current.key" -pubout)" ]
  [[ "$output$stderr" != *PRIVATE* ]]
  printf '%s\n' "$output" | openssl pkey -pubin -noout
  assert_no_state_changes
}

@test "rke2: fails with host and step when the key is missing or unreadable" {
  run_script rke2/service-account-key.sh
  assert_failure
  assert_output_contains "gpu-cluster: moscow: service-account-key: no service-account key at /var/lib/rancher/rke2/server/tls/service.current.key"
  mkdir -p "$GPU_CLUSTER_ROOT/var/lib/rancher/rke2/server/tls"
  echo "garbage" >"$GPU_CLUSTER_ROOT/var/lib/rancher/rke2/server/tls/service.current.key"
  run_script rke2/service-account-key.sh
  assert_failure
  assert_output_contains "service-account-key: openssl could not read /var/lib/rancher/rke2/server/tls/service.current.key"
}
