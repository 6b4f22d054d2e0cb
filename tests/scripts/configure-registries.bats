#!/usr/bin/env bats
# configure-registries.sh: the image mirror's files as the program renders them, the
# password put in on the host (never in the inputs' files), stale registries removed, and
# RKE2 restarted only when its file changed.

bats_require_minimum_version 1.5.0
load helpers

MARK='@GPU_CLUSTER_REGISTRY_PASSWORD@'
DIR=/etc/k0s/containerd.d/certs.d

setup() {
  setup_host
  unset REGISTRY_PASSWORD REGISTRY_PASSWORD_SSM_PARAMETER REGISTRY_SERVICES REGISTRY_HOSTS_DIR
  export REGISTRY_FILE_COUNT=3 REGISTRY_HOSTS_DIR="$DIR"
  export REGISTRY_FILE_1_PATH=/etc/k0s/containerd.d/registries.toml REGISTRY_FILE_1_MODE=0600
  export REGISTRY_FILE_1_CONTENT="version = 3
[plugins.\"io.containerd.cri.v1.images\".registry.configs.\"harbor.example\".auth]
  username = \"robot\$pull\"
  password = \"$MARK\""
  export REGISTRY_FILE_2_PATH="$DIR/docker.io/hosts.toml" REGISTRY_FILE_2_MODE=0644
  export REGISTRY_FILE_2_CONTENT='[host."https://harbor.example/v2/hub"]'
  export REGISTRY_FILE_3_PATH="$DIR/quay.io/hosts.toml" REGISTRY_FILE_3_MODE=0644
  export REGISTRY_FILE_3_CONTENT='[host."https://harbor.example/v2/proxy/quay.io"]'
  # '&' is the matched text in bash 5.2's patsub_replacement unless quoted; '$' and "'" too.
  export REGISTRY_PASSWORD="p&ss\$w'rd"
}

@test "configure-registries: writes the files with the password, the login's file 0600" {
  run_script configure-registries.sh
  assert_success
  assert_file /etc/k0s/containerd.d/registries.toml "version = 3
[plugins.\"io.containerd.cri.v1.images\".registry.configs.\"harbor.example\".auth]
  username = \"robot\$pull\"
  password = \"p&ss\$w'rd\""
  assert_mode /etc/k0s/containerd.d/registries.toml 600
  assert_file "$DIR/docker.io/hosts.toml" '[host."https://harbor.example/v2/hub"]'
  assert_mode "$DIR/quay.io/hosts.toml" 644
  refute_output_contains "p&ss"
  refute_called '^systemctl'
  assert_idempotent configure-registries.sh
}

@test "configure-registries: a registry no longer listed loses its hosts.toml" {
  mkdir -p "$GPU_CLUSTER_ROOT$DIR/gcr.io"
  echo '[host."https://old.example"]' >"$GPU_CLUSTER_ROOT$DIR/gcr.io/hosts.toml"
  run_script configure-registries.sh
  assert_success
  [ ! -e "$GPU_CLUSTER_ROOT$DIR/gcr.io/hosts.toml" ]
  assert_output_contains "changed: removed $DIR/gcr.io/hosts.toml"
}

@test "configure-registries: RKE2 restarts where it runs, only when its file changed" {
  export REGISTRY_FILE_COUNT=1 REGISTRY_HOSTS_DIR='' \
    REGISTRY_SERVICES='rke2-server.service rke2-agent.service' \
    REGISTRY_FILE_1_PATH=/etc/rancher/rke2/registries.yaml REGISTRY_FILE_1_MODE=0600 \
    REGISTRY_FILE_1_CONTENT="mirrors:
  \"docker.io\":
    endpoint:
      - \"https://harbor.example\""
  touch "$STUB_STATE/active-rke2-agent.service"
  run_script configure-registries.sh
  assert_success
  assert_called '^systemctl restart rke2-agent.service$'
  refute_called '^systemctl restart rke2-server'
  assert_idempotent configure-registries.sh
}

@test "configure-registries: at boot the password comes from SSM" {
  unset REGISTRY_PASSWORD
  export REGISTRY_PASSWORD_SSM_PARAMETER=/gpu-cluster/dev/a10g/image-mirror-password \
    AWS_REGION=us-west-2
  export_ssm_reader
  ssm_parameter us-west-2 /gpu-cluster/dev/a10g/image-mirror-password 'from-ssm&x'
  run_script configure-registries.sh
  assert_success
  grep -qF 'password = "from-ssm&x"' "$GPU_CLUSTER_ROOT/etc/k0s/containerd.d/registries.toml"
  refute_output_contains "from-ssm"
}

@test "configure-registries: bad inputs are all named at once, the password never" {
  unset REGISTRY_PASSWORD
  export REGISTRY_FILE_2_PATH=relative/hosts.toml REGISTRY_FILE_3_MODE=644 \
    REGISTRY_SERVICES='rke2; reboot'
  run_script configure-registries.sh
  assert_failure
  assert_output_contains "REGISTRY_FILE_2_PATH must be an absolute path"
  assert_output_contains "REGISTRY_FILE_3_MODE must be an octal mode"
  assert_output_contains "needs the mirror's password"
  assert_output_contains "REGISTRY_SERVICES must be systemd unit names"
  [ ! -e "$GPU_CLUSTER_ROOT/etc/k0s/containerd.d/registries.toml" ]
}
