#!/usr/bin/env bash
# The host's operating system, read from os-release, and the one place a step asks which
# family it runs on: os_family (ubuntu | el9) and os_do VERB, which runs the family's
# ${OS_FAMILY}_VERB. Every other OS is refused, naming it.
# shellcheck shell=bash disable=SC2034 # its globals are read by the scripts that source it

# shellcheck source=../lib.sh
[[ -n "${GPU_CLUSTER_LIB_LOADED:-}" ]] || source "$(dirname "${BASH_SOURCE[0]}")/../lib.sh"

GPU_CLUSTER_OS_LIB_LOADED=1
# The family, once os_family has read it.
OS_FAMILY=""
# What os_family accepts, for its refusal (the releases preflight accepts are its input).
OS_FAMILIES_KNOWN="Ubuntu, Rocky Linux 9, AlmaLinux 9, RHEL 9"

# os_release_file: the os-release the host has: /etc/os-release, else /usr/lib/os-release;
# failure when neither exists (os-release(5): "Applications should check for the former,
# and exclusively use its data if it exists, and only fall back to /usr/lib/os-release if
# it is missing", https://www.freedesktop.org/software/systemd/man/latest/os-release.html).
os_release_file() {
  local file
  for file in /etc/os-release /usr/lib/os-release; do
    if [[ -r "$ROOT$file" ]]; then
      printf '%s\n' "$ROOT$file"
      return 0
    fi
  done
  return 1
}

# os_release_field KEY: KEY's value in the host's os-release, nothing when it has none.
# os-release(5), Syntax: KEY=VALUE lines, the value optionally in double or single quotes,
# "$", quotes, backslash and backtick escaped with a backslash; "#" lines are comments.
# Parsed as Python's platform.freedesktop_os_release does (CPython Lib/platform.py
# _parse_os_release: a line is NAME=QUOTE?VALUE QUOTE, the same quote at both ends, the five
# escapes undone, the last line of a key wins, ID, NAME and PRETTY_NAME default to "linux",
# "Linux" and "Linux" as os-release(5) says); tests/scripts/test_os_release.py holds the two
# to the same values.
os_release_field() {
  local file line value="" found="" quote char index backslash="\\" escapable="\\\$\"'\`"
  file="$(os_release_file)" || return 0
  while IFS= read -r line || [[ -n "$line" ]]; do
    if [[ "${line%%=*}" == "$1" && "$line" == *=* && "$1" =~ ^[A-Za-z0-9_]+$ ]]; then
      value=${line#*=}
      quote=${value:0:1}
      if ((${#value} >= 2)) && [[ ("$quote" == '"' || "$quote" == "'") && "${value: -1}" == "$quote" ]]; then
        value=${value:1:${#value}-2}
      fi
      found=""
      for ((index = 0; index < ${#value}; index++)); do
        char=${value:index:1}
        if [[ "$char" == "$backslash" && -n "${value:index+1:1}" && "$escapable" == *"${value:index+1:1}"* ]]; then
          index=$((index + 1))
          char=${value:index:1}
        fi
        found+=$char
      done
      value=$found
      found=1
    fi
  done <"$file"
  if [[ -z "$found" ]]; then
    case "$1" in
      ID) value=linux ;;
      NAME | PRETTY_NAME) value=Linux ;;
    esac
  fi
  [[ -z "$value" ]] || printf '%s\n' "$value"
}

# os_family_of ID VERSION_ID: the family of that os-release ID and VERSION_ID (ubuntu, el9),
# failure for any other. The RHEL family by its major release: 9.x is el9.
os_family_of() {
  case "$1" in
    ubuntu) echo ubuntu ;;
    rhel | rocky | almalinux)
      [[ "$2" =~ ^9(\.[0-9]+)*$ ]] || return 1
      echo el9
      ;;
    *) return 1 ;;
  esac
}

# os_name ID: how messages name the OS of an os-release ID.
os_name() {
  case "$1" in
    ubuntu) echo Ubuntu ;;
    rocky) echo "Rocky Linux" ;;
    almalinux) echo AlmaLinux ;;
    rhel) echo RHEL ;;
    *) printf '%s\n' "$1" ;;
  esac
}

# os_found: "PRETTY_NAME (ID VERSION_ID)", what the host's os-release says it is.
os_found() {
  printf '%s (%s %s)\n' "$(os_release_field PRETTY_NAME)" "$(os_release_field ID)" \
    "$(os_release_field VERSION_ID)"
}

# os_family: the host's family (ubuntu, el9), kept in OS_FAMILY; dies naming the OS found
# and the families known on any other.
os_family() {
  if [[ -z "$OS_FAMILY" ]]; then
    if ! os_release_file >/dev/null; then
      die "no /etc/os-release or /usr/lib/os-release: cannot tell the OS; supported: $OS_FAMILIES_KNOWN"
    fi
    OS_FAMILY="$(os_family_of "$(os_release_field ID)" "$(os_release_field VERSION_ID)")" ||
      die "OS is $(os_found); supported: $OS_FAMILIES_KNOWN"
  fi
  printf '%s\n' "$OS_FAMILY"
}

# os_do VERB ARGS...: the family's ${OS_FAMILY}_VERB with ARGS (each family's libraries
# define their own: ubuntu_pkg_install, el9_pkg_install).
os_do() {
  local verb=$1
  shift
  os_family >/dev/null
  if ! declare -F "${OS_FAMILY}_$verb" >/dev/null; then
    die "os_do: no ${OS_FAMILY}_$verb: $verb is not written for $OS_FAMILY hosts"
  fi
  "${OS_FAMILY}_$verb" "$@"
}
