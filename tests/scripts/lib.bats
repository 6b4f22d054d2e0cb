#!/usr/bin/env bats
# components/scripts/lib.sh on its own.

bats_require_minimum_version 1.5.0
load helpers

setup() {
  setup_host
  export GPU_CLUSTER_STEP=lib-test
}

# lib CODE: runs CODE in a bash that sourced lib.sh.
lib() {
  run_library lib.sh "$1"
}

@test "lib: write_file writes only when content or mode differ" {
  lib 'write_file /etc/x/y.conf 0640 < <(printf "a\n"); echo "FILE_CHANGED=$FILE_CHANGED"'
  assert_success
  assert_output_contains "gpu-cluster: moscow: lib-test: changed /etc/x/y.conf" "FILE_CHANGED=1"
  assert_mode /etc/x/y.conf 640
  lib 'write_file /etc/x/y.conf 0640 <<<"a"; echo "FILE_CHANGED=$FILE_CHANGED"'
  assert_output_contains "unchanged /etc/x/y.conf" "FILE_CHANGED=0"
  lib 'write_file /etc/x/y.conf 0600 <<<"a"; echo "FILE_CHANGED=$FILE_CHANGED"'
  assert_output_contains "changed mode of /etc/x/y.conf to 0600" "FILE_CHANGED=1"
  assert_mode /etc/x/y.conf 600
  [ "$(find "$GPU_CLUSTER_ROOT/etc/x" -name '.gpu-cluster.*' | wc -l)" -eq 0 ]
}

@test "lib: write_text ends the content with exactly one newline" {
  lib 'write_text /etc/t 0644 "$(printf "one\ntwo")"; write_text /etc/u 0644 "$(printf "one\ntwo\n\n")"$'"'"'\n\n'"'"''
  assert_success
  [ "$(od -c "$GPU_CLUSTER_ROOT/etc/t")" = "$(od -c "$GPU_CLUSTER_ROOT/etc/u")" ]
  [ "$(tail -c 4 "$GPU_CLUSTER_ROOT/etc/t")" = "two" ]
}

@test "lib: remove_file removes once and then reports absence" {
  mkdir -p "$GPU_CLUSTER_ROOT/etc"
  touch "$GPU_CLUSTER_ROOT/etc/gone"
  lib 'remove_file /etc/gone; echo "FILE_CHANGED=$FILE_CHANGED"; remove_file /etc/gone; echo "FILE_CHANGED=$FILE_CHANGED"'
  assert_success
  assert_output_contains "changed: removed /etc/gone" "FILE_CHANGED=1" "unchanged: /etc/gone is absent" "FILE_CHANGED=0"
}

@test "lib: keep_original keeps the image's file once; restore_original puts it back" {
  mkdir -p "$GPU_CLUSTER_ROOT/etc"
  printf 'the image\n' >"$GPU_CLUSTER_ROOT/etc/a.conf"
  lib 'keep_original /etc/a.conf /var/keep "# ours"; printf "# ours\nv1\n" >"$ROOT/etc/a.conf"
    keep_original /etc/a.conf /var/keep "# ours"'
  assert_success
  # Kept once: the step's own file (its first line starts with the mark) is never kept.
  [ "$(cat "$GPU_CLUSTER_ROOT/var/keep/a.conf")" = "the image" ]
  lib 'restore_original /etc/a.conf /var/keep "# ours"; echo "FILE_CHANGED=$FILE_CHANGED"'
  assert_success
  assert_output_contains "changed /etc/a.conf" "FILE_CHANGED=1"
  [ "$(cat "$GPU_CLUSTER_ROOT/etc/a.conf")" = "the image" ]
  [ ! -e "$GPU_CLUSTER_ROOT/var/keep/a.conf" ]
  # Without a copy: the step's own file goes (nothing was there), another file stays.
  printf '# ours\n' >"$GPU_CLUSTER_ROOT/etc/b.conf"
  lib 'restore_original /etc/b.conf /var/keep "# ours"; echo "FILE_CHANGED=$FILE_CHANGED"
    restore_original /etc/a.conf /var/keep "# ours"; echo "FILE_CHANGED=$FILE_CHANGED"'
  assert_success
  assert_output_contains "changed: removed /etc/b.conf" "FILE_CHANGED=1" \
    "unchanged: /etc/a.conf is not the step's" "FILE_CHANGED=0"
  [ "$(cat "$GPU_CLUSTER_ROOT/etc/a.conf")" = "the image" ]
}

@test "lib: input checks name every offending variable" {
  lib 'A=1; require_env A B C'
  [ "$status" -eq 1 ]
  [ "$output" = "gpu-cluster: moscow: lib-test: missing required environment variable(s): B C" ]
  lib 'A=true B=no C=False; require_bool A B C'
  [ "$status" -eq 1 ]
  assert_output_contains "expected \"true\" or \"false\": B='no' C='False'"
  lib 'N=12 M=1.5; require_uint N M'
  assert_output_contains "expected a non-negative integer: M='1.5'"
  lib 'is_true maybe'
  [ "$status" -eq 1 ]
  assert_output_contains 'expected "true" or "false", got "maybe"'
}

@test "lib: input problems are collected and named in one failure" {
  lib 'A=1; check_missing_env A B C; INPUT_PROBLEMS+=("A is odd"); die_on_input_problems'
  [ "$status" -eq 1 ]
  [ "$output" = "gpu-cluster: moscow: lib-test: missing required environment variable(s): B C; A is odd" ]
  lib 'A=1; check_missing_env A; die_on_input_problems; echo "went on"'
  assert_success
  [ "$output" = "went on" ]
  # require_env names only its own variables.
  lib 'INPUT_PROBLEMS+=("collected"); A=1; require_env A; echo "${INPUT_PROBLEMS[*]}"'
  assert_success
  [ "$output" = "collected" ]
}

@test "lib: valid_ipv4 and valid_ipv4_cidr take dotted quads without leading zeros" {
  local value
  for value in 0.0.0.0 10.8.0.1 192.168.2.255 255.255.255.255; do
    lib "valid_ipv4 $value"
    assert_success
  done
  for value in "" 10.8.0 10.8.0.1.2 10.8.0.256 10.08.0.1 " 10.8.0.1" 10.8.0.1/32 a.b.c.d; do
    lib "valid_ipv4 '$value'"
    assert_failure
  done
  for value in 0.0.0.0/0 10.20.0.0/16 192.168.2.0/24 10.8.0.1/32; do
    lib "valid_ipv4_cidr $value"
    assert_success
  done
  for value in "" 10.20.0.0 10.20.0.0/ 10.20.0.0/33 10.20.0.0/016 10.20.0.256/16 10.20.0/16 \
    10.20.0.0/16/1 /16; do
    lib "valid_ipv4_cidr '$value'"
    assert_failure
  done
}

@test "lib: failing commands and die name host and step" {
  lib 'false'
  [ "$status" -eq 1 ]
  [[ "$output" =~ ^gpu-cluster:\ moscow:\ lib-test:\ command\ failed\ with\ exit\ code\ 1\ at\ line\ [0-9]+:\ false$ ]]
  lib 'die "broken thing"'
  [ "$status" -eq 1 ]
  [ "$output" = "gpu-cluster: moscow: lib-test: broken thing" ]
}

@test "lib: wait_until polls every 2 s and gives up after the timeout" {
  lib 'wait_until 6 "the impossible" false'
  [ "$status" -eq 1 ]
  assert_output_contains "waiting up to 6s for the impossible" \
    "timed out after 6s waiting for the impossible; last output: <none>"
  [ "$(grep -c '^sleep 2$' "$STUB_CALLS")" -eq 3 ]
  reset_calls
  lib 'wait_until 6 "a file" test -e "$ROOT/ready"'
  assert_failure
  touch "$GPU_CLUSTER_ROOT/ready"
  lib 'wait_until 6 "a file" test -e "$ROOT/ready"'
  assert_success
  assert_output_contains "ready: a file"
}

@test "lib: a follow-up action stays pending until it is done" {
  lib 'if needs_follow_up 0 thing; then echo RUN; fi'
  refute_output_contains RUN
  lib 'if needs_follow_up 1 thing; then false; fi'
  assert_failure
  lib 'if needs_follow_up 0 thing; then echo RUN; follow_up_done thing; fi'
  assert_output_contains "retrying thing, which an earlier run did not finish" RUN
  lib 'if needs_follow_up 0 thing; then echo RUN; fi'
  refute_output_contains RUN
}

@test "lib: read_ssm_parameter sets VAR unexported, leaving the caller's TEMP_DIR alone" {
  export_ssm_reader
  export AWS_REGION=eu-central-1 SECRET=""
  ssm_parameter eu-central-1 /gpu-cluster/dev/x "value-0123"
  lib 'make_temp_dir; before=$TEMP_DIR
    read_ssm_parameter SECRET /gpu-cluster/dev/x "a secret"
    [[ "$TEMP_DIR" == "$before" && -d "$TEMP_DIR" ]] && echo "temp dir kept"
    [[ "$SECRET" == value-0123 ]] && echo "value read"
    env | grep -q "^SECRET=" || echo "not exported"'
  assert_success
  assert_output_contains "lib-test: reading a secret from SSM parameter /gpu-cluster/dev/x in eu-central-1" \
    "lib-test: read a secret from SSM parameter /gpu-cluster/dev/x" "temp dir kept" "value read" "not exported"
  refute_output_contains value-0123
}
