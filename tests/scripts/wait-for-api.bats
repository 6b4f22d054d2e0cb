#!/usr/bin/env bats
# local/wait-for-api.sh: waits on the operator's machine until the API answers /readyz.

bats_require_minimum_version 1.5.0
load helpers
load helpers/secrets

CA_PEM='-----BEGIN CERTIFICATE-----
MIIBhTCCASugAwIBAgIUgpu-cluster-ca
-----END CERTIFICATE-----'
CLIENT_PEM='-----BEGIN CERTIFICATE-----
MIIBgDCCASagAwIBAgIUadmin
-----END CERTIFICATE-----'
KEY_SECRET='MHcCAQEEIA-secret-admin-key-0123456789'
CLIENT_KEY="-----BEGIN EC PRIVATE KEY-----
$KEY_SECRET
-----END EC PRIVATE KEY-----"
READYZ_CALL='^curl --silent --show-error --fail --max-time 10 --cacert ([^ ]+)/ca\.crt --cert \1/client\.crt --key \1/client\.key https://192\.0\.2\.10:6443/readyz$'

setup() {
  setup_host
  # Its temporary directory goes here, to be checked; the fake root stays unused.
  export TMPDIR="$BATS_TEST_TMPDIR/tmp"
  mkdir -p "$TMPDIR"
  export API_SERVER=https://192.0.2.10:6443 API_CA_CERT="$CA_PEM" API_CLIENT_CERT="$CLIENT_PEM" \
    API_CLIENT_KEY="$CLIENT_KEY" API_READY_TIMEOUT=60
  remember_root
}

# assert_nothing_left: the temporary directory is gone, the (fake) host is untouched and
# nothing but curl, and sleep between its tries, ran.
assert_nothing_left() {
  if [[ -n "$(ls -A "$TMPDIR")" ]]; then
    printf 'left behind in TMPDIR:\n%s\n' "$(ls -lA "$TMPDIR")" >&2
    return 1
  fi
  assert_root_unchanged || return 1
  if grep -Ev '^(curl|sleep) ' "$STUB_CALLS"; then
    echo "unexpected calls (above)" >&2
    return 1
  fi
}

@test "wait-for-api: a ready API is asked once, with the client certificate" {
  run_script local/wait-for-api.sh
  assert_success
  assert_called "$READYZ_CALL"
  [ "$(grep -c '^curl ' "$STUB_CALLS")" -eq 1 ]
  refute_called '^sleep'
  assert_output_contains "gpu-cluster: moscow: wait-for-api: ready: the Kubernetes API at https://192.0.2.10:6443 to be ready"
  # The stubbed curl checked that the three files were readable PEMs of mode 600.
  assert_nothing_left
}

@test "wait-for-api: the files curl got hold the inputs" {
  # A curl that keeps copies, to compare (the stub never does). Not through the link,
  # which would overwrite the stub itself.
  remove_stub curl
  cat >"$BATS_TEST_TMPDIR/bin/curl" <<'STUB'
#!/usr/bin/env bash
printf '%s\n' "curl $*" >>"$STUB_CALLS"
while (($#)); do
  case "$1" in
    --cacert | --cert | --key) cp "$2" "$STUB_STATE/got${1#--}"; stat -c %a "$2" >"$STUB_STATE/mode${1#--}"; shift ;;
  esac
  shift
done
echo ok
STUB
  chmod +x "$BATS_TEST_TMPDIR/bin/curl"
  run_script local/wait-for-api.sh
  assert_success
  [ "$(<"$STUB_STATE/gotcacert")" = "$CA_PEM" ]
  [ "$(<"$STUB_STATE/gotcert")" = "$CLIENT_PEM" ]
  [ "$(<"$STUB_STATE/gotkey")" = "$CLIENT_KEY" ]
  [ "$(cat "$STUB_STATE"/modecacert "$STUB_STATE"/modecert "$STUB_STATE"/modekey)" = $'600\n600\n600' ]
  assert_nothing_left
}

@test "wait-for-api: waits while the API is not ready yet" {
  export STUB_READYZ_FAIL_TIMES=3
  run_script local/wait-for-api.sh
  assert_success
  [ "$(grep -cE "$READYZ_CALL" "$STUB_CALLS")" -eq 4 ]
  [ "$(grep -cx 'sleep 2' "$STUB_CALLS")" -eq 3 ]
  assert_output_contains "waiting up to 60s for the Kubernetes API at https://192.0.2.10:6443 to be ready" \
    "ready: the Kubernetes API at https://192.0.2.10:6443 to be ready"
  assert_nothing_left
}

@test "wait-for-api: gives up after the timeout with curl's last answer" {
  export STUB_READYZ_FAIL_TIMES=1000 API_READY_TIMEOUT=20
  run_script local/wait-for-api.sh
  [ "$status" -eq 1 ]
  assert_output_contains "gpu-cluster: moscow: wait-for-api: timed out after 20s waiting for the Kubernetes API at https://192.0.2.10:6443 to be ready; last output: curl: (7) Failed to connect to 192.0.2.10:6443 after 0 ms: Couldn't connect to server"
  [ "$(grep -c '^curl ' "$STUB_CALLS")" -eq 11 ]
  assert_nothing_left
}

@test "wait-for-api: the client key never shows up in output, command lines or environments" {
  export STUB_READYZ_FAIL_TIMES=2
  run_script_watched local/wait-for-api.sh
  assert_success
  [ -s "$STUB_STATE/env.log" ]
  refute_leaked "$KEY_SECRET"
  assert_nothing_left
}

@test "wait-for-api: a trailing slash on the server is dropped" {
  export API_SERVER=https://192.0.2.10:6443/
  run_script local/wait-for-api.sh
  assert_success
  assert_called "$READYZ_CALL"
}

@test "wait-for-api: all missing inputs are named at once" {
  unset API_SERVER API_CA_CERT API_CLIENT_CERT API_CLIENT_KEY API_READY_TIMEOUT
  run_script local/wait-for-api.sh
  assert_refused "gpu-cluster: moscow: wait-for-api: missing required environment variable(s): API_SERVER API_CA_CERT API_CLIENT_CERT API_CLIENT_KEY API_READY_TIMEOUT"
  assert_nothing_left
}

@test "wait-for-api: malformed inputs are named at once, without the key" {
  export API_SERVER=http://192.0.2.10:6443 API_CA_CERT="MIIB" API_CLIENT_KEY="$KEY_SECRET" \
    API_READY_TIMEOUT=10m
  run_script local/wait-for-api.sh
  assert_refused "gpu-cluster: moscow: wait-for-api: API_SERVER must be https://HOST:PORT (e.g. https://192.0.2.10:6443), got 'http://192.0.2.10:6443'; API_CA_CERT is not a PEM certificate; API_CLIENT_KEY is not a PEM private key; expected a non-negative integer: API_READY_TIMEOUT='10m'"
  refute_leaked "$KEY_SECRET"
  assert_nothing_left
}

@test "wait-for-api: a server URL with a path is refused" {
  export API_SERVER=https://192.0.2.10:6443/readyz
  run_script local/wait-for-api.sh
  [ "$status" -eq 1 ]
  assert_output_contains "API_SERVER must be https://HOST:PORT (e.g. https://192.0.2.10:6443), got 'https://192.0.2.10:6443/readyz'"
}

@test "wait-for-api: without curl the API cannot be asked" {
  hide_command curl
  run_script local/wait-for-api.sh
  [ "$status" -eq 1 ]
  assert_output_contains "gpu-cluster: moscow: wait-for-api: the curl command is not installed; it is needed to ask the Kubernetes API whether it is ready"
  assert_nothing_left
}
