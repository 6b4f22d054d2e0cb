# shellcheck shell=bash
# The release downloads of the install steps (k0s and RKE2, download-and-verify in lib.sh):
# the stubbed curl serves a fake release whose sha256 run_script pins (pin_fake_releases),
# or, with STUB_BAD_CHECKSUM=1, other bytes, as a tampered or truncated download would be.

# assert_tampered_download_refused SCRIPT FILE PIN_VARIABLE BINARY: with other bytes than
# the pinned ones, SCRIPT fails naming the release FILE and the pin (the value of
# PIN_VARIABLE, e.g. K0S_SHA256_AMD64), and installs nothing at BINARY (a host path).
assert_tampered_download_refused() {
  local step=${1##*/}
  export STUB_BAD_CHECKSUM=1
  run_script "$1"
  assert_failure || return 1
  assert_output_contains "gpu-cluster: $GPU_CLUSTER_HOST: ${step%.sh}: checksum mismatch for $2: pinned ${!3:?}" ||
    return 1
  if [[ -e "$GPU_CLUSTER_ROOT$4" ]]; then
    echo "$4 was installed from a download that does not match its pin" >&2
    return 1
  fi
}
