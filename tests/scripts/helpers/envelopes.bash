# shellcheck shell=bash
# Step envelopes as a host gets them: a step's scripts pasted with their libraries into the
# functions of one text (components/common/step_text.py) that arrives over SSH on stdin of
# `bash -s -- ACTION`. The tests run it from an empty directory, so nothing can be sourced
# from disk.

# setup_envelope: a fresh fake host (setup_host), ENVELOPE the file the test writes its
# envelope to, and an empty working directory.
setup_envelope() {
  setup_host
  ENVELOPE="$BATS_TEST_TMPDIR/envelope.sh"
  mkdir -p "$BATS_TEST_TMPDIR/empty"
  cd "$BATS_TEST_TMPDIR/empty" || return 1
}

# run_envelope ACTION [RUN_FLAGS]: the envelope through a pipe to `bash -s -- ACTION`, as
# over ssh (RUN_FLAGS go to bats' run, e.g. --separate-stderr).
run_envelope() {
  # shellcheck disable=SC2016 # expanded by the inner bash
  run "${@:2}" bash -c 'cat "$2" | bash -s -- "$1"' _ "$1" "$ENVELOPE"
}

# assert_envelope_idempotent: a further `create` changes no file and makes no state-changing
# call, and says so (assert_idempotent, for an envelope).
assert_envelope_idempotent() {
  remember_root
  reset_calls
  run_envelope create
  assert_success || return 1
  assert_root_unchanged || return 1
  assert_no_state_changes || return 1
  refute_changes_logged
}
