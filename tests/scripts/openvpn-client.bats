#!/usr/bin/env bats
# openvpn/client.sh: package, config, keys, forwarding, restart drop-in, service, and the
# wait until the server answers through the tunnel.

bats_require_minimum_version 1.5.0
load helpers

DIR=/etc/openvpn/client
FILES=/etc/openvpn/client/gpu-cluster
UNIT=openvpn-client@gpu-cluster
DROPIN=/etc/systemd/system/openvpn-client@gpu-cluster.service.d/gpu-cluster.conf
SYSCTL=/etc/sysctl.d/90-gpu-cluster-vpn.conf
KEY_SECRET=Z2F0ZXdheS1rZXktc2VjcmV0LW1hdGVyaWFs
TLS_SECRET=746c732d63727970742d736563726574
CONFIG="# Managed by gpu-cluster (install-openvpn-client); changes are overwritten.
client
remote 203.0.113.1 1194 udp
ca gpu-cluster/ca.crt"

setup() {
  setup_host
  export OPENVPN_CONFIG=$CONFIG REMOTE_CIDR=10.20.0.0/16 TUNNEL_CHECK_ADDRESS=10.8.0.1
  export OPENVPN_CA=$'-----BEGIN CERTIFICATE-----\nMIIBcaTestOnly\n-----END CERTIFICATE-----'
  export OPENVPN_CERT=$'-----BEGIN CERTIFICATE-----\nMIIBgatewayTestOnly\n-----END CERTIFICATE-----'
  export OPENVPN_KEY=$'-----BEGIN EC PRIVATE KEY-----\n'"$KEY_SECRET"$'\n-----END EC PRIVATE KEY-----'
  export OPENVPN_TLS_CRYPT=$'#\n# 2048 bit OpenVPN static key\n#\n-----BEGIN OpenVPN Static key V1-----\n'"$TLS_SECRET"$'\n-----END OpenVPN Static key V1-----'
  # The route the server pushes once connected (the stubbed kernel keeps it).
  add_route 10.20.0.0/16 10.8.0.1
}

@test "openvpn-client: first run installs openvpn, writes config and keys, starts the client and waits for the tunnel" {
  run_script openvpn/client.sh
  assert_success
  assert_called "^$APT "'install -y openvpn$'
  assert_file "$DIR/gpu-cluster.conf" "$CONFIG"
  assert_mode "$DIR/gpu-cluster.conf" 600
  assert_file "$FILES/ca.crt" "$OPENVPN_CA"
  assert_file "$FILES/client.crt" "$OPENVPN_CERT"
  assert_file "$FILES/client.key" "$OPENVPN_KEY"
  assert_mode "$FILES/client.key" 600
  assert_file "$FILES/tls-crypt.key" "$OPENVPN_TLS_CRYPT"
  assert_mode "$FILES/tls-crypt.key" 600
  grep -qx 'net.ipv4.ip_forward = 1' "$GPU_CLUSTER_ROOT$SYSCTL"
  assert_called '^sysctl --system$'
  grep -qx 'Restart=on-failure' "$GPU_CLUSTER_ROOT$DROPIN"
  assert_called '^systemctl daemon-reload$'
  assert_called "^systemctl enable $UNIT$"
  assert_called "^systemctl start --no-block $UNIT$"
  assert_called '^ping -c 1 -W 2 10\.8\.0\.1$'
  assert_called '^ip -4 route show exact 10\.20\.0\.0/16$'
  assert_call_order '^systemctl daemon-reload$' "^systemctl start --no-block $UNIT$"
  assert_call_order "^systemctl start --no-block $UNIT$" '^ping '
  assert_output_contains \
    "gpu-cluster: moscow: install-openvpn-client: changed $FILES/client.key" \
    "gpu-cluster: moscow: install-openvpn-client: changed: started $UNIT" \
    "gpu-cluster: moscow: install-openvpn-client: ready: 10.8.0.1 to answer through the tunnel" \
    "gpu-cluster: moscow: install-openvpn-client: the tunnel to 10.20.0.0/16 is up"
}

@test "openvpn-client: a second run changes nothing, still checks the tunnel, and says so" {
  run_twice openvpn/client.sh
  assert_called '^ping -c 1 -W 2 10\.8\.0\.1$'
  assert_output_contains "openvpn is already installed" "unchanged $FILES/client.key" \
    "unchanged $DROPIN" "$UNIT is already running" "the tunnel to 10.20.0.0/16 is up"
}

@test "openvpn-client: secrets never reach the log, a command line or a command's environment" {
  export STUB_RECORD_ENV=1
  run_script openvpn/client.sh
  assert_success
  run_script openvpn/client.sh
  assert_success
  refute_output_contains "$KEY_SECRET" "$TLS_SECRET"
  run ! grep -qF -e "$KEY_SECRET" -e "$TLS_SECRET" "$STUB_CALLS" "$STUB_STATE/env.log"
  grep -qF "TUNNEL_CHECK_ADDRESS=10.8.0.1" "$STUB_STATE/env.log"
}

@test "openvpn-client: a changed server address rewrites only the config and restarts the client" {
  run_script openvpn/client.sh
  assert_success
  local before after
  before="$(snapshot_root | grep -v '/gpu-cluster\.conf')"
  reset_calls
  export OPENVPN_CONFIG="${CONFIG/203.0.113.1/203.0.113.77}"
  run_script openvpn/client.sh
  assert_success
  after="$(snapshot_root | grep -v '/gpu-cluster\.conf')"
  [ "$before" = "$after" ]
  grep -qx 'remote 203.0.113.77 1194 udp' "$GPU_CLUSTER_ROOT$DIR/gpu-cluster.conf"
  assert_called "^systemctl restart --no-block $UNIT$"
  assert_call_order "^systemctl restart --no-block $UNIT$" '^ping '
  refute_called '^(apt-get|sysctl)'
  refute_called '^systemctl (enable|start|daemon-reload)'
  assert_idempotent openvpn/client.sh
}

@test "openvpn-client: a tunnel that never answers fails in bounded time, naming the check" {
  export STUB_EXIT_PING=1
  run_script openvpn/client.sh
  [ "$status" -eq 1 ]
  assert_output_contains \
    "gpu-cluster: moscow: install-openvpn-client: timed out after 180s waiting for 10.8.0.1 to answer through the tunnel (see journalctl -u $UNIT)"
  [ "$(grep -c '^ping ' "$STUB_CALLS")" -eq 91 ]
  refute_output_contains "$KEY_SECRET"
}

@test "openvpn-client: a tunnel without the pushed route to the VPC fails, naming the route" {
  : >"$STUB_STATE/routes"
  run_script openvpn/client.sh
  [ "$status" -eq 1 ]
  assert_output_contains "ready: 10.8.0.1 to answer through the tunnel" \
    "timed out after 30s waiting for the route to 10.20.0.0/16 the VPN server pushes"
}

@test "openvpn-client: an interrupted restart is retried by the next run" {
  run_script openvpn/client.sh
  assert_success
  export OPENVPN_CERT=$'-----BEGIN CERTIFICATE-----\nMIIBrenewed\n-----END CERTIFICATE-----'
  STUB_FAIL_CALL='^systemctl restart' run_script openvpn/client.sh
  assert_failure
  reset_calls
  run_script openvpn/client.sh
  assert_success
  assert_output_contains "retrying restart-$UNIT, which an earlier run did not finish"
  assert_called "^systemctl restart --no-block $UNIT$"
  assert_idempotent openvpn/client.sh
}

@test "openvpn-client: a host without ping gets iputils-ping for the tunnel check" {
  installed_package openvpn 2.6.12-0ubuntu0.24.04.1
  hide_command ping
  run_script openvpn/client.sh
  # The stubbed apt-get installs no binary, so the tunnel check itself fails here.
  assert_failure
  assert_output_contains "ping: command not found"
  assert_called "^$APT "'install -y iputils-ping$'
  refute_called "^$APT install -y openvpn"
  assert_output_contains "openvpn is already installed" "changed: installed iputils-ping"
}

@test "openvpn-client: all missing environment variables are named at once" {
  unset OPENVPN_CONFIG OPENVPN_CA OPENVPN_CERT OPENVPN_KEY OPENVPN_TLS_CRYPT REMOTE_CIDR \
    TUNNEL_CHECK_ADDRESS
  run_script openvpn/client.sh
  assert_refused "gpu-cluster: moscow: install-openvpn-client: missing required environment variable(s): OPENVPN_CONFIG REMOTE_CIDR TUNNEL_CHECK_ADDRESS"
}

@test "openvpn-client: malformed inputs are all named at once, without showing secrets" {
  remember_root
  export REMOTE_CIDR=10.20.0.0 TUNNEL_CHECK_ADDRESS=10.8.0.256 OPENVPN_CERT=garbage \
    OPENVPN_KEY="$KEY_SECRET" OPENVPN_TLS_CRYPT="-----BEGIN PRIVATE KEY----- $TLS_SECRET"
  unset OPENVPN_CONFIG
  run_script openvpn/client.sh
  [ "$status" -eq 1 ]
  [ "$(grep -c 'install-openvpn-client: ' <<<"$output")" -eq 1 ]
  assert_output_contains "missing required environment variable(s): OPENVPN_CONFIG;" \
    "REMOTE_CIDR must be an IPv4 CIDR such as 10.20.0.0/16, got '10.20.0.0'" \
    "TUNNEL_CHECK_ADDRESS must be an IPv4 address such as 10.8.0.1, got '10.8.0.256'" \
    "OPENVPN_CERT is not a PEM certificate" "OPENVPN_KEY is not a PEM private key" \
    "OPENVPN_TLS_CRYPT is not an OpenVPN static key"
  refute_output_contains "$KEY_SECRET" "$TLS_SECRET" "OPENVPN_CA"
  [ "$(<"$STUB_CALLS")" = "" ]
  assert_root_unchanged
}

@test "openvpn-client: a profile with its keys inline (an existing server's) needs no key inputs" {
  local profile
  profile=$'client\nremote 198.51.100.7 1194 udp\n<key>\n'"$KEY_SECRET"$'\n</key>'
  unset OPENVPN_CA OPENVPN_CERT OPENVPN_KEY OPENVPN_TLS_CRYPT
  export OPENVPN_CONFIG=$profile REMOTE_CIDR=192.168.2.0/24 TUNNEL_CHECK_ADDRESS=192.168.2.1
  add_route 192.168.2.0/24 10.8.0.1
  run_script openvpn/client.sh
  assert_success
  assert_file "$DIR/gpu-cluster.conf" "$profile"
  assert_mode "$DIR/gpu-cluster.conf" 600
  [ ! -e "$GPU_CLUSTER_ROOT$FILES/client.key" ]
  refute_output_contains "$KEY_SECRET"
  assert_output_contains "the tunnel to 192.168.2.0/24 is up"
}

@test "openvpn-client: some key inputs without the others are named" {
  unset OPENVPN_CERT OPENVPN_TLS_CRYPT
  run_script openvpn/client.sh
  [ "$status" -eq 1 ]
  assert_output_contains "missing required environment variable(s): OPENVPN_CERT OPENVPN_TLS_CRYPT"
}

@test "openvpn-client: systemd accepts the packaged unit with the drop-in as written" {
  # The unit is the openvpn package's (Debian's and Ubuntu's openvpn-client@.service).
  [[ -f /usr/lib/systemd/system/openvpn-client@.service ]] ||
    { echo "the openvpn package's units are needed: apt-get install openvpn" >&2; return 1; }
  run_script openvpn/client.sh
  assert_success
  assert_unit_verifies "/etc/systemd/system/$UNIT.service" /usr/sbin/openvpn
}
