# shellcheck shell=bash
# Runs one step from the step bundle (components/common/bundle.py). A step's stdin (or,
# at an EC2 boot, its entry in the boot plan) holds its inputs as exports and the
# files it runs, each with its sha256, for each of its actions; it checks this file's own
# sha256, sources it and calls
#   gpu_cluster_run_step ACTION 'ACTION PATH SHA256'...
# with the action `pulumi up` (or the doctor) asked for: create, delete or check.
#
# create and check run from the machine's current bundle (installed by the bundle step
# before any other step, or fetched at boot), checked whole against its digest and owned
# and writable by root only. A create also keeps its delete's files below
# /var/lib/gpu-cluster/steps/<host>/<step>/, so the delete still runs the version it was
# created with after newer bundles have replaced that one (bundle/install.sh keeps a few).
# delete runs from that copy, or from any bundle on the machine that holds the same files.
#
# The files of an action are sourced in order (libraries first, the script last) inside a
# function called without arguments and with stdin from /dev/null, as the envelope's
# functions were; check then calls check_result (check/lib.sh).

gpu_cluster_bundle_fail() {
  printf 'gpu-cluster: %s: %s: %s\n' "${GPU_CLUSTER_HOST:-}" "${GPU_CLUSTER_STEP:-}" "$*" >&2
  exit 1
}

# gpu_cluster_bundle_manifest DIR: one `MODE SHA256 PATH` line a file, in path order (the
# text whose sha256 is the bundle's digest).
gpu_cluster_bundle_manifest() {
  local path
  (
    cd "$1" || exit 1
    find . -type f -printf '%P\n' | LC_ALL=C sort | while IFS= read -r path; do
      printf '%s %s %s\n' "$(stat -c %a -- "$path")" "$(sha256sum -- "$path" | cut -c1-64)" "$path"
    done
  )
}

# gpu_cluster_bundle_loose DIR: the first file or folder below DIR that is not owned by
# root or that others may write, if any.
gpu_cluster_bundle_loose() {
  find "$1" \( ! -user 0 -o -perm /022 \) -printf '%P\n' -quit
}

# gpu_cluster_bundle_problem DIR: what is wrong with the bundle in DIR (named by its
# digest, or the `current` link to it), nothing when it is whole and only root can change it.
gpu_cluster_bundle_problem() {
  local dir digest manifest loose
  dir="$(readlink -f -- "$1")" || true
  if [[ -z "$dir" || ! -d "$dir" ]]; then
    echo "no step bundle at $1: the bundle step installs it before any other step"
    return 0
  fi
  digest="${dir##*/}"
  loose="$(gpu_cluster_bundle_loose "$dir")"
  if [[ -n "$loose" ]]; then
    echo "the step bundle $digest is not owned and writable by root only (${loose:-.})"
    return 0
  fi
  manifest="$(gpu_cluster_bundle_manifest "$dir")"
  if [[ "$(sha256sum <<<"$manifest" | cut -c1-64)" != "$digest" ]]; then
    echo "the step bundle $digest was altered on this host (its files no longer give its digest)"
  fi
}

# gpu_cluster_bundle_matches DIR 'PATH SHA256'...: DIR holds every PATH with that sha256.
gpu_cluster_bundle_matches() {
  local dir=$1 entry
  shift
  for entry in "$@"; do
    [[ -f "$dir/${entry%% *}" ]] || return 1
    [[ "$(sha256sum -- "$dir/${entry%% *}" | cut -c1-64)" == "${entry##* }" ]] || return 1
  done
}

# gpu_cluster_keep_delete FROM 'PATH SHA256'...: copies the delete's files from FROM to
# this step's folder, which is then the delete's own.
gpu_cluster_keep_delete() {
  local from=$1 entry kept
  shift
  kept="${GPU_CLUSTER_ROOT:-}/var/lib/gpu-cluster/steps/$GPU_CLUSTER_HOST/$GPU_CLUSTER_STEP"
  if gpu_cluster_bundle_matches "$kept" "$@" bundle/run-step.sh\ "$(sha256sum -- \
    "$from/bundle/run-step.sh" | cut -c1-64)"; then
    return 0
  fi
  rm -rf -- "$kept.new"
  for entry in "$@" "bundle/run-step.sh -"; do
    install -D -m 0644 -o 0 -g 0 -- "$from/${entry%% *}" "$kept.new/${entry%% *}"
  done
  chmod -R go-w,a+rX -- "$kept.new"
  rm -rf -- "$kept"
  mv -- "$kept.new" "$kept"
}

gpu_cluster_run_step() {
  local action=$1 entry current candidate dir="" problem
  local bundles="${GPU_CLUSTER_ROOT:-}/var/lib/gpu-cluster/bundles"
  local kept="${GPU_CLUSTER_ROOT:-}/var/lib/gpu-cluster/steps/$GPU_CLUSTER_HOST/$GPU_CLUSTER_STEP"
  local files=() deletes=()
  shift
  for entry in "$@"; do
    case "$entry" in
      "$action "*) files+=("${entry#* }") ;;&
      "delete "*) deletes+=("${entry#* }") ;;
    esac
  done
  if ((${#files[@]} == 0)); then
    echo "gpu-cluster: unknown action: $action" >&2
    exit 2
  fi
  current="$bundles/current"
  case "$action" in
    create | check)
      problem="$(gpu_cluster_bundle_problem "$current")"
      [[ -z "$problem" ]] || gpu_cluster_bundle_fail "refused: $problem"
      gpu_cluster_bundle_matches "$current" "${files[@]}" ||
        gpu_cluster_bundle_fail "refused: the step bundle $(basename "$(readlink -f -- "$current")")" \
          "is not the one this step was rendered with (run pulumi up, which installs it first)"
      dir="$current"
      if [[ "$action" == create ]] && ((${#deletes[@]})); then
        gpu_cluster_keep_delete "$current" "${deletes[@]}"
      fi
      ;;
    delete)
      for candidate in "$kept" "$current" "$bundles"/*/; do
        candidate="${candidate%/}"
        if [[ "$candidate" == "$kept" ]]; then
          [[ -d "$kept" && -z "$(gpu_cluster_bundle_loose "$kept")" ]] || continue
        elif [[ -n "$(gpu_cluster_bundle_problem "$candidate")" ]]; then
          continue
        fi
        if gpu_cluster_bundle_matches "$candidate" "${files[@]}"; then
          dir="$candidate"
          break
        fi
      done
      [[ -n "$dir" ]] || gpu_cluster_bundle_fail "refused: no step bundle on this host holds" \
        "the delete's scripts this step was created with (${files[*]%% *})"
      ;;
  esac
  GPU_CLUSTER_ACTION_FILES=()
  for entry in "${files[@]}"; do
    GPU_CLUSTER_ACTION_FILES+=("$(readlink -f -- "$dir")/${entry%% *}")
  done
  GPU_CLUSTER_BUNDLE_DIR="$(readlink -f -- "$dir")"
  export GPU_CLUSTER_BUNDLE_DIR
  gpu_cluster_action </dev/null
  [[ "$action" != check ]] || check_result
  if [[ "$action" == delete ]]; then
    rm -rf -- "$kept"
  fi
}

# The action's files, sourced in order; no arguments, so a script's `main "$@"` gets none.
gpu_cluster_action() {
  local gpu_cluster_file
  for gpu_cluster_file in "${GPU_CLUSTER_ACTION_FILES[@]}"; do
    # shellcheck source=/dev/null
    source "$gpu_cluster_file"
  done
}
