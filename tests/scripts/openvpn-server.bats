#!/usr/bin/env bats
# openvpn/server.sh: package, config, keys, CRL, client-config-dir, filter, forwarding,
# service.

bats_require_minimum_version 1.5.0
load helpers

DIR=/etc/openvpn/server
FILES=/etc/openvpn/server/gpu-cluster
UNIT=openvpn-server@gpu-cluster
SYSCTL=/etc/sysctl.d/90-gpu-cluster-vpn.conf
KEY_SECRET=c2VydmVyLWtleS1zZWNyZXQtbWF0ZXJpYWw
TLS_SECRET=6f70656e76706e2d746c732d63727970
CONFIG="# Managed by gpu-cluster (install-openvpn-server); changes are overwritten.
dev tun
server 10.8.0.0 255.255.255.0
ca gpu-cluster/ca.crt"
HEADER="# Managed by gpu-cluster (install-openvpn-server): client-config-dir entry of "
GATEWAY_CCD="${HEADER}lab-onprem-gateway
ifconfig-push 10.8.0.2 255.255.255.0
iroute 192.168.2.0 255.255.255.0"
ALICE_CCD="${HEADER}user-alice
ifconfig-push 10.8.0.20 255.255.255.0
push \"route 10.20.1.10 255.255.255.255\""
CCD="$GATEWAY_CCD
$ALICE_CCD"
CRL=$'-----BEGIN X509 CRL-----\nMIIBcrlTestOnly\n-----END X509 CRL-----'
FILTER=$'*filter\n:GPU-CLUSTER-VPN - [0:0]\n-A GPU-CLUSTER-VPN -j DROP\nCOMMIT'
DROPIN=/etc/systemd/system/openvpn-server@gpu-cluster.service.d/gpu-cluster.conf

setup() {
  setup_host
  export OPENVPN_CONFIG=$CONFIG OPENVPN_CCD=$CCD OPENVPN_CRL=$CRL OPENVPN_FILTER=$FILTER
  export OPENVPN_CA=$'-----BEGIN CERTIFICATE-----\nMIIBcaTestOnly\n-----END CERTIFICATE-----'
  export OPENVPN_CERT=$'-----BEGIN CERTIFICATE-----\nMIIBserverTestOnly\n-----END CERTIFICATE-----'
  export OPENVPN_KEY=$'-----BEGIN EC PRIVATE KEY-----\n'"$KEY_SECRET"$'\n-----END EC PRIVATE KEY-----'
  export OPENVPN_TLS_CRYPT=$'#\n# 2048 bit OpenVPN static key\n#\n-----BEGIN OpenVPN Static key V1-----\n'"$TLS_SECRET"$'\n-----END OpenVPN Static key V1-----'
}

@test "openvpn-server: first run installs openvpn, writes config, keys, CRL, ccd entries and filter, and starts the server" {
  run_script openvpn/server.sh
  assert_success
  assert_called "^$APT "'update$'
  assert_called "^$APT "'install -y openvpn iptables$'
  assert_file "$DIR/gpu-cluster.conf" "$CONFIG"
  assert_mode "$DIR/gpu-cluster.conf" 644
  assert_file "$FILES/ca.crt" "$OPENVPN_CA"
  assert_mode "$FILES/ca.crt" 644
  assert_file "$FILES/server.crt" "$OPENVPN_CERT"
  assert_mode "$FILES/server.crt" 644
  assert_file "$FILES/server.key" "$OPENVPN_KEY"
  assert_mode "$FILES/server.key" 600
  assert_file "$FILES/tls-crypt.key" "$OPENVPN_TLS_CRYPT"
  assert_mode "$FILES/tls-crypt.key" 600
  assert_file "$FILES/ccd/lab-onprem-gateway" "$GATEWAY_CCD"
  assert_mode "$FILES/ccd/lab-onprem-gateway" 644
  assert_file "$FILES/ccd/user-alice" "$ALICE_CCD"
  assert_file "$FILES/crl.pem" "$CRL"
  assert_mode "$FILES/crl.pem" 644
  assert_file "$FILES/filter.rules" "$FILTER"
  assert_file "$DROPIN" "# Managed by gpu-cluster (install-openvpn-server); changes are overwritten.
# What arrives from the VPN is filtered before the server starts.
[Service]
ExecStartPre=-/usr/sbin/iptables -w -D INPUT -i gpu-cluster -j GPU-CLUSTER-VPN
ExecStartPre=-/usr/sbin/iptables -w -D FORWARD -i gpu-cluster -j GPU-CLUSTER-VPN
ExecStartPre=/usr/sbin/iptables-restore -w --noflush $FILES/filter.rules"
  assert_call_order '^systemctl daemon-reload$' "^systemctl start $UNIT$"
  # Read by the server after it dropped root.
  assert_mode "$FILES" 755
  assert_mode "$FILES/ccd" 755
  assert_file "$SYSCTL" "# Managed by gpu-cluster (openvpn): this host routes between its network and the VPN.
net.ipv4.ip_forward = 1"
  assert_called '^sysctl --system$'
  assert_called "^systemctl enable $UNIT$"
  assert_called "^systemctl start $UNIT$"
  refute_called '^systemctl restart'
  assert_call_order "^$APT install" "^systemctl start $UNIT$"
  assert_call_order '^sysctl --system$' "^systemctl start $UNIT$"
  assert_output_contains \
    "gpu-cluster: moscow: install-openvpn-server: changed: installed openvpn" \
    "gpu-cluster: moscow: install-openvpn-server: changed $DIR/gpu-cluster.conf" \
    "gpu-cluster: moscow: install-openvpn-server: changed $FILES/server.key" \
    "gpu-cluster: moscow: install-openvpn-server: changed $FILES/ccd/lab-onprem-gateway" \
    "gpu-cluster: moscow: install-openvpn-server: changed: applied sysctls (sysctl --system)" \
    "gpu-cluster: moscow: install-openvpn-server: changed: enabled $UNIT" \
    "gpu-cluster: moscow: install-openvpn-server: changed: started $UNIT" \
    "OpenVPN server $UNIT is running"
  [ -z "$(ls -A "$GPU_CLUSTER_ROOT/var/lib/gpu-cluster/pending")" ]
}

@test "openvpn-server: a second run changes nothing and says so" {
  run_twice openvpn/server.sh
  assert_output_contains "openvpn is already installed" "unchanged $FILES/server.key" \
    "unchanged $SYSCTL" "$UNIT is already running"
}

@test "openvpn-server: secrets never reach the log, a command line or a command's environment" {
  export STUB_RECORD_ENV=1
  run_script openvpn/server.sh
  assert_success
  run_script openvpn/server.sh
  assert_success
  refute_output_contains "$KEY_SECRET" "$TLS_SECRET"
  run ! grep -qF -e "$KEY_SECRET" -e "$TLS_SECRET" "$STUB_CALLS" "$STUB_STATE/env.log"
  # Other values are not secret and do reach the commands' environment.
  grep -qF "ifconfig-push 10.8.0.2 255.255.255.0" "$STUB_STATE/env.log"
}

@test "openvpn-server: a changed key rewrites only the key and restarts the server" {
  run_script openvpn/server.sh
  assert_success
  local before after
  before="$(snapshot_root | grep -v /server.key)"
  reset_calls
  export OPENVPN_KEY=$'-----BEGIN EC PRIVATE KEY-----\nrotated-key-material\n-----END EC PRIVATE KEY-----'
  run_script openvpn/server.sh
  assert_success
  after="$(snapshot_root | grep -v /server.key)"
  [ "$before" = "$after" ]
  assert_file "$FILES/server.key" "$OPENVPN_KEY"
  assert_mode "$FILES/server.key" 600
  assert_output_contains "changed $FILES/server.key" "unchanged $DIR/gpu-cluster.conf" \
    "changed: restarted $UNIT to apply the changes"
  assert_called "^systemctl restart $UNIT$"
  refute_called '^apt-get'
  refute_called '^sysctl'
  refute_called '^systemctl (enable|start)'
  assert_idempotent openvpn/server.sh
}

@test "openvpn-server: a removed client's entry goes and the server restarts; others' files stay" {
  run_script openvpn/server.sh
  assert_success
  echo "iroute 198.51.100.0 255.255.255.0" >"$GPU_CLUSTER_ROOT$FILES/ccd/someone-else"
  reset_calls
  export OPENVPN_CCD=$GATEWAY_CCD
  run_script openvpn/server.sh
  assert_success
  assert_file "$FILES/ccd/lab-onprem-gateway" "$GATEWAY_CCD"
  [ ! -e "$GPU_CLUSTER_ROOT$FILES/ccd/user-alice" ]
  assert_file "$FILES/ccd/someone-else" "iroute 198.51.100.0 255.255.255.0"
  assert_output_contains "changed: removed $FILES/ccd/user-alice"
  assert_called "^systemctl restart $UNIT$"
  assert_idempotent openvpn/server.sh
}

@test "openvpn-server: an interrupted restart is retried by the next run" {
  run_script openvpn/server.sh
  assert_success
  export OPENVPN_CONFIG="$CONFIG
verb 4"
  STUB_FAIL_CALL='^systemctl restart' run_script openvpn/server.sh
  assert_failure
  assert_output_contains "install-openvpn-server: command failed with exit code 1"
  reset_calls
  run_script openvpn/server.sh
  assert_success
  assert_output_contains "unchanged $DIR/gpu-cluster.conf" \
    "retrying restart-$UNIT, which an earlier run did not finish"
  assert_called "^systemctl restart $UNIT$"
  assert_idempotent openvpn/server.sh
}

@test "openvpn-server: a run that fails after writing new files still restarts the server next time" {
  run_script openvpn/server.sh
  assert_success
  rm "$GPU_CLUSTER_ROOT$SYSCTL"
  export OPENVPN_CERT=$'-----BEGIN CERTIFICATE-----\nMIIBrenewed\n-----END CERTIFICATE-----'
  STUB_FAIL_CALL='^sysctl' run_script openvpn/server.sh
  assert_failure
  refute_called '^systemctl restart'
  reset_calls
  run_script openvpn/server.sh
  assert_success
  assert_output_contains "unchanged $FILES/server.crt" \
    "retrying restart-$UNIT, which an earlier run did not finish"
  assert_called "^systemctl restart $UNIT$"
  assert_idempotent openvpn/server.sh
}

@test "openvpn-server: a stopped server is started, a disabled one enabled, neither restarted" {
  run_script openvpn/server.sh
  assert_success
  rm "$STUB_STATE/active-$UNIT"
  reset_calls
  run_script openvpn/server.sh
  assert_success
  assert_called "^systemctl start $UNIT$"
  refute_called '^systemctl (restart|enable)'
  rm "$STUB_STATE/enabled-$UNIT"
  reset_calls
  run_script openvpn/server.sh
  assert_success
  assert_called "^systemctl enable $UNIT$"
  refute_called '^systemctl (restart|start)'
  assert_idempotent openvpn/server.sh
}

@test "openvpn-server: all missing environment variables are named at once" {
  unset OPENVPN_CONFIG OPENVPN_CA OPENVPN_CERT OPENVPN_KEY OPENVPN_TLS_CRYPT OPENVPN_CCD \
    OPENVPN_CRL OPENVPN_FILTER
  run_script openvpn/server.sh
  assert_refused "gpu-cluster: moscow: install-openvpn-server: missing required environment variable(s): OPENVPN_CONFIG OPENVPN_CA OPENVPN_CERT OPENVPN_KEY OPENVPN_TLS_CRYPT OPENVPN_CCD OPENVPN_CRL OPENVPN_FILTER"
  [ ! -e "$GPU_CLUSTER_ROOT/etc/openvpn" ]
}

@test "openvpn-server: malformed inputs are all named at once, without showing secrets" {
  remember_root
  unset OPENVPN_FILTER
  export OPENVPN_CCD="${HEADER}../../../etc/passwd
iroute 192.168.2.0 255.255.255.0" OPENVPN_CA="not a certificate" OPENVPN_CRL="a list" \
    OPENVPN_KEY="ssh-ed25519 $KEY_SECRET" OPENVPN_TLS_CRYPT="$TLS_SECRET"
  run_script openvpn/server.sh
  [ "$status" -eq 1 ]
  [ "$(grep -c 'install-openvpn-server: ' <<<"$output")" -eq 1 ]
  assert_output_contains \
    "missing required environment variable(s): OPENVPN_FILTER; OPENVPN_CCD names a client '../../../etc/passwd'" \
    "OPENVPN_CRL is not a PEM CRL" "OPENVPN_CA is not a PEM certificate" \
    "OPENVPN_KEY is not a PEM private key" "OPENVPN_TLS_CRYPT is not an OpenVPN static key"
  refute_output_contains "OPENVPN_CERT" "$KEY_SECRET" "$TLS_SECRET"
  [ "$(<"$STUB_CALLS")" = "" ]
  assert_root_unchanged
}
