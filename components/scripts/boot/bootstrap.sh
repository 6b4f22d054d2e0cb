#!/usr/bin/env bash
# The whole of an EC2 machine's boot user data, with bundle/receive.sh as a function: fetches
# the step bundle and the machine's boot plan from S3 with the instance's role, checks both
# against the digests it carries, and runs the plan from the bundle (boot/run-boot.sh).
set -euo pipefail

# Inputs: AWS_REGION BOOT_BUCKET BOOT_BUNDLE_DIGEST BOOT_BUNDLE_KEY BOOT_BUNDLE_SHA256 BOOT_PLAN_KEY BOOT_PLAN_SHA256 BOOT_STATUS_PARAMETER S3_GET
# What they hold (the part's exports): GPU_CLUSTER_HOST, GPU_CLUSTER_STEP (boot),
# AWS_REGION, BOOT_BUCKET, BOOT_BUNDLE_KEY, BOOT_BUNDLE_SHA256 (the tarball's),
# BOOT_BUNDLE_DIGEST (the bundle's), BOOT_PLAN_KEY, BOOT_PLAN_SHA256, BOOT_STATUS_PARAMETER
# (for run-boot.sh), S3_GET (the text of boot/s3-get.py, run by python3). cloud-init runs
# the part again after a reboot a step asked for: what is in place is then kept.
# Until the bundle is there its SSM client is not, so a failure here is told only in the
# console log (cloud-init-output.log, `aws ec2 get-console-output`).

boot_fail() {
  printf 'gpu-cluster: %s: %s: %s\n' "$GPU_CLUSTER_HOST" "$GPU_CLUSTER_STEP" "$*" >&2
  exit 1
}

# fetch KEY FILE: object KEY of the boot bucket, to FILE.
fetch() {
  python3 - "$AWS_REGION" "$BOOT_BUCKET" "$1" "$2" <<<"$S3_GET" ||
    boot_fail "could not fetch s3://$BOOT_BUCKET/$1 with the instance's role"
}

main() {
  local root="${GPU_CLUSTER_ROOT:-}" dir bundles plan
  dir="$root/var/lib/gpu-cluster/boot"
  bundles="$root/var/lib/gpu-cluster/bundles"
  mkdir -p -- "$dir"
  chmod 0700 -- "$dir"
  if [[ ! -d "$bundles/$BOOT_BUNDLE_DIGEST" ]]; then
    fetch "$BOOT_BUNDLE_KEY" "$dir/bundle-$BOOT_BUNDLE_DIGEST.tar.gz"
    BUNDLE_TARBALL="$dir/bundle-$BOOT_BUNDLE_DIGEST.tar.gz" BUNDLE_SHA256=$BOOT_BUNDLE_SHA256 \
      BUNDLE_DIGEST=$BOOT_BUNDLE_DIGEST gpu_cluster_receive
  fi
  plan="$dir/plan"
  if [[ ! -f "$plan" || "$(sha256sum -- "$plan" | cut -c1-64)" != "$BOOT_PLAN_SHA256" ]]; then
    fetch "$BOOT_PLAN_KEY" "$plan.new"
    if [[ "$(sha256sum -- "$plan.new" | cut -c1-64)" != "$BOOT_PLAN_SHA256" ]]; then
      rm -f -- "$plan.new"
      boot_fail "refused: the boot plan s3://$BOOT_BUCKET/$BOOT_PLAN_KEY is not the one" \
        "this machine was launched with (sha256 $BOOT_PLAN_SHA256)"
    fi
    mv -- "$plan.new" "$plan"
  fi
  exec bash "$bundles/$BOOT_BUNDLE_DIGEST/boot/run-boot.sh" "$plan"
}

main "$@"
