#!/usr/bin/env bats
# openvpn/remove.sh: the delete step of both OpenVPN ends.

bats_require_minimum_version 1.5.0
load helpers

setup() {
  setup_host
  export OPENVPN_CONFIG=$'client\nremote 203.0.113.1 1194 udp' REMOTE_CIDR=10.20.0.0/16 \
    TUNNEL_CHECK_ADDRESS=10.8.0.1 OPENVPN_CCD="# Managed by gpu-cluster (install-openvpn-server): client-config-dir entry of lab-onprem-gateway"$'\n'"iroute 192.168.2.0 255.255.255.0" OPENVPN_CRL=$'-----BEGIN X509 CRL-----\nMIIB\n-----END X509 CRL-----' OPENVPN_FILTER=$'*filter\nCOMMIT'
  export OPENVPN_CA=$'-----BEGIN CERTIFICATE-----\nMIIBca\n-----END CERTIFICATE-----'
  export OPENVPN_CERT=$'-----BEGIN CERTIFICATE-----\nMIIBcert\n-----END CERTIFICATE-----'
  export OPENVPN_KEY=$'-----BEGIN EC PRIVATE KEY-----\nkey\n-----END EC PRIVATE KEY-----'
  export OPENVPN_TLS_CRYPT=$'-----BEGIN OpenVPN Static key V1-----\n00\n-----END OpenVPN Static key V1-----'
  add_route 10.20.0.0/16 10.8.0.1
}

# other_setup: files of another OpenVPN setup on the same host, which must survive.
other_setup() {
  local dir="$GPU_CLUSTER_ROOT/etc/openvpn/$1"
  mkdir -p "$dir/ccd"
  echo "their config" >"$dir/office.conf"
  echo "their ca" >"$dir/ca.crt"
  echo "their entry" >"$dir/ccd/laptop"
}

@test "openvpn-remove: the server's unit is stopped and disabled and only its files removed" {
  run_script openvpn/server.sh
  assert_success
  other_setup server
  reset_calls
  export OPENVPN_UNIT=openvpn-server@gpu-cluster
  run_script openvpn/remove.sh
  assert_success
  assert_called '^systemctl stop openvpn-server@gpu-cluster$'
  assert_called '^systemctl disable openvpn-server@gpu-cluster$'
  [ ! -e "$GPU_CLUSTER_ROOT/etc/openvpn/server/gpu-cluster.conf" ]
  [ ! -e "$GPU_CLUSTER_ROOT/etc/openvpn/server/gpu-cluster" ]
  [ ! -e "$GPU_CLUSTER_ROOT/etc/sysctl.d/90-gpu-cluster-vpn.conf" ]
  assert_file /etc/openvpn/server/office.conf "their config"
  assert_file /etc/openvpn/server/ca.crt "their ca"
  assert_file /etc/openvpn/server/ccd/laptop "their entry"
  # Forwarding stays on: no sysctl reload.
  refute_called '^sysctl'
  assert_output_contains \
    "gpu-cluster: moscow: remove-openvpn: changed: stopped openvpn-server@gpu-cluster" \
    "changed: removed /etc/openvpn/server/gpu-cluster" "removed the OpenVPN server gpu-cluster"

  reset_calls
  run_script openvpn/remove.sh
  assert_success
  assert_no_state_changes
  refute_changes_logged
  assert_output_contains "openvpn-server@gpu-cluster is not running"
}

@test "openvpn-remove: the client's drop-in goes too, with a daemon-reload" {
  run_script openvpn/client.sh
  assert_success
  other_setup client
  reset_calls
  export OPENVPN_UNIT=openvpn-client@gpu-cluster
  run_script openvpn/remove.sh
  assert_success
  [ ! -e "$GPU_CLUSTER_ROOT/etc/systemd/system/openvpn-client@gpu-cluster.service.d" ]
  [ ! -e "$GPU_CLUSTER_ROOT/etc/openvpn/client/gpu-cluster" ]
  assert_file /etc/openvpn/client/ca.crt "their ca"
  assert_call_order '^systemctl stop openvpn-client@gpu-cluster$' '^systemctl daemon-reload$'
  [ ! -e "$STUB_STATE/active-openvpn-client@gpu-cluster" ]
  [ ! -e "$STUB_STATE/enabled-openvpn-client@gpu-cluster" ]
  [ -z "$(ls -A "$GPU_CLUSTER_ROOT/var/lib/gpu-cluster/pending")" ]
}

@test "openvpn-remove: only the program's own units are accepted" {
  local unit
  for unit in "" sshd openvpn-server@ "openvpn-server@../../x" "openvpn-client@a b" openvpn@gpu-cluster; do
    export OPENVPN_UNIT=$unit
    run_script openvpn/remove.sh
    [ "$status" -eq 1 ]
    if [[ -z "$unit" ]]; then
      assert_output_contains "missing required environment variable(s): OPENVPN_UNIT"
    else
      assert_output_contains "OPENVPN_UNIT must be openvpn-server@NAME or openvpn-client@NAME, got '$unit'"
    fi
  done
  [ "$(<"$STUB_CALLS")" = "" ]
}
