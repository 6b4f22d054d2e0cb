#!/usr/bin/env bats
# Static checks of the step scripts: shellcheck findings and the script conventions
# the envelope relies on.

bats_require_minimum_version 1.5.0
load helpers

# find_shellcheck: $SHELLCHECK, shellcheck on PATH, or the one installed next to
# bats (both come from requirements-dev.txt into the same virtualenv).
find_shellcheck() {
  local dir
  if [[ -n "${SHELLCHECK:-}" ]]; then
    echo "$SHELLCHECK"
    return 0
  fi
  if command -v shellcheck; then
    return 0
  fi
  dir=$BATS_ROOT
  while [[ -n "$dir" && "$dir" != / ]]; do
    if [[ -x "$dir/bin/shellcheck" ]]; then
      echo "$dir/bin/shellcheck"
      return 0
    fi
    dir="$(dirname "$dir")"
  done
  echo "shellcheck not found: install requirements-dev.txt or set SHELLCHECK" >&2
  return 1
}

step_scripts() {
  # Not steps: the services the controller runs for the pools (installed by
  # watch-pools.sh) and the pool instances' Spot notices service (spot-notices.sh), the distributions' snapshot functions (pasted into the backup
  # commands, like a lib.sh), check/: a step's check mode and additions, pasted into its
  # check after the step, and bundle/ and boot/: what receives, installs and runs the step
  # bundle and the boot plan, before any lib.sh is there.
  # Nor the libraries beside lib.sh that a step sources (nvidia/<family>.sh, cluster-state.sh),
  # which open with their shellcheck directive instead of a shebang.
  find "$SCRIPTS_DIR" -name '*.sh' ! -name lib.sh \
    ! -path '*/aws/pool-node-watcher.sh' ! -path '*/aws/rotate-pool-tokens.sh' \
    ! -path '*/aws/spot-notice-handler.sh' ! -path '*/check/*' \
    ! -path '*/bundle/*' ! -path '*/boot/*' -exec awk 'FNR == 1 && !/^# shellcheck shell=bash/ { print FILENAME } { nextfile }' {} + |
    LC_ALL=C sort
}

@test "shellcheck: every script under components/scripts is clean" {
  local shellcheck files=()
  shellcheck="$(find_shellcheck)"
  mapfile -t files < <(cd "$REPO_ROOT" && find components/scripts -name '*.sh' | LC_ALL=C sort)
  [ "${#files[@]}" -ge 12 ]
  cd "$REPO_ROOT"
  run "$shellcheck" -x "${files[@]}"
  if [ "$status" -ne 0 ]; then
    echo "$output" >&2
    return 1
  fi
}

@test "shellcheck: the test stubs and helpers are clean" {
  local shellcheck
  shellcheck="$(find_shellcheck)"
  cd "$REPO_ROOT"
  run "$shellcheck" -x tests/scripts/stubs/stub tests/scripts/helpers.bash tests/scripts/helpers/*.bash
  if [ "$status" -ne 0 ]; then
    echo "$output" >&2
    return 1
  fi
}

@test "conventions: step scripts follow the envelope rules" {
  local script folder guard problems=()
  while IFS= read -r script; do
    # A script loads one library through its include guard: its folder's lib.sh (k0s/,
    # openvpn/), which loads ../lib.sh through lib.sh's guard, or else lib.sh itself.
    folder=${script#"$SCRIPTS_DIR"/}
    folder=${folder%"${folder##*/}"}
    if [[ "$(sed -n 1p "$script")" != '#!/usr/bin/env bash' ]]; then
      problems+=("$script: first line is not #!/usr/bin/env bash")
    fi
    # 1-3 comment lines saying what it does and why, then set -euo pipefail.
    if ! sed -n '2,$p' "$script" | awk '/^# / { n++; next } { exit !(n >= 1 && n <= 3 && $0 == "set -euo pipefail") }'; then
      problems+=("$script: not 1-3 comment lines and then set -euo pipefail after the shebang")
    fi
    if [[ -n "$folder" && -f "$SCRIPTS_DIR/${folder}lib.sh" ]]; then
      guard="GPU_CLUSTER_$(tr 'a-z-' 'A-Z_' <<<"${folder%/}")_LIB_LOADED"
      if ! grep -qxF '[[ -n "${'"$guard"':-}" ]] || source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"' "$script"; then
        problems+=("$script: ${folder}lib.sh is not loaded through the include guard $guard")
      fi
      if ! grep -qx "$guard=1" "$SCRIPTS_DIR/${folder}lib.sh"; then
        problems+=("${folder}lib.sh: does not set its include guard $guard=1")
      fi
      if ! grep -qxF '[[ -n "${GPU_CLUSTER_LIB_LOADED:-}" ]] || source "$(dirname "${BASH_SOURCE[0]}")/../lib.sh"' "$SCRIPTS_DIR/${folder}lib.sh"; then
        problems+=("${folder}lib.sh: does not load ../lib.sh through the include guard")
      fi
      if grep -qF 'GPU_CLUSTER_LIB_LOADED' "$script"; then
        problems+=("$script: loads lib.sh, which ${folder}lib.sh loads")
      fi
    elif ! grep -qxF '[[ -n "${GPU_CLUSTER_LIB_LOADED:-}" ]] || source "$(dirname "${BASH_SOURCE[0]}")/'"${folder:+../}"'lib.sh"' "$script"; then
      problems+=("$script: lib.sh is not loaded through the include guard")
    fi
    if grep -nE '^local ' "$script"; then
      problems+=("$script: top-level local")
    fi
    # ($0 inside awk programs is fine.)
    if grep -nE '"\$0"|\$\{0|dirname \$0|basename \$0' "$script"; then
      problems+=("$script: uses \$0")
    fi
    if [[ "$(grep -v '^$' "$script" | tail -n 1)" != 'main "$@"' ]]; then
      problems+=("$script: does not end with main \"\$@\"")
    fi
  done < <(step_scripts)
  if ((${#problems[@]} > 0)); then
    printf '%s\n' "${problems[@]}" >&2
    return 1
  fi
}
