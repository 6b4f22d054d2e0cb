# shellcheck shell=bash disable=SC2154 # output, stderr: set by bats' run
# Secrecy of the steps that take keys and tokens (CA keys, join tokens, the admin client
# key): each test file gives its own made-up secrets (the secrets scan accepts each fake key
# in the file that holds it, tests/scans/checkov_skips.py), and these check that the script
# shows none of them anywhere a log could keep it.

# run_script_watched SCRIPT: runs SCRIPT with stderr kept apart (bats' $stderr) and every
# stub recording the environment it got ($STUB_STATE/env.log), for refute_leaked.
run_script_watched() {
  export STUB_RECORD_ENV=1
  run_script --separate-stderr "$1"
}

# refute_leaked SECRET...: no SECRET in the output, in stderr, on a stub's command line or in
# an environment a stub recorded.
refute_leaked() {
  local secret
  for secret in "$@"; do
    refute_output_contains "$secret" || return 1
    if [[ "${stderr:-}" == *"$secret"* ]]; then
      printf 'stderr contains the secret %s\nstderr:\n%s\n' "$secret" "$stderr" >&2
      return 1
    fi
    refute_file_contains "$STUB_CALLS" "$secret" || return 1
    if [[ -f "$STUB_STATE/env.log" ]]; then
      refute_file_contains "$STUB_STATE/env.log" "$secret" || return 1
    fi
  done
}

# assert_secret_unseen SCRIPT FILE SECRET...: SCRIPT succeeds and writes FILE (its log says
# "changed FILE"), with every stub recording its environment, and no SECRET shows up in its
# output, in stderr, on a stub's command line or in an environment.
assert_secret_unseen() {
  local script=$1 file=$2
  shift 2
  run_script_watched "$script"
  assert_success || return 1
  if [[ "$stderr" != *"changed $file"* ]]; then
    printf 'no "changed %s" in stderr:\n%s\n' "$file" "$stderr" >&2
    return 1
  fi
  if [[ ! -s "$STUB_STATE/env.log" ]]; then
    echo "no stub recorded its environment (STUB_RECORD_ENV)" >&2
    return 1
  fi
  refute_leaked "$@"
}

# assert_failure_unseen SCRIPT CALL SECRET...: SCRIPT, stopped by the failure of the first
# command matching CALL (STUB_FAIL_CALL), says so (assert_failed_at_command) and shows no
# SECRET.
assert_failure_unseen() {
  local script=$1 step=${1##*/}
  export STUB_FAIL_CALL=$2
  shift 2
  run_script "$script"
  assert_failed_at_command "${step%.sh}" || return 1
  refute_leaked "$@"
}
