#!/usr/bin/env bash
# The host's operating system, read from os-release, and the one place a step asks which
# family it runs on: os_family (ubuntu | el9) and os_do VERB, which runs the family's
# ${OS_FAMILY}_VERB. Every other OS is refused, naming it.
#
# And the one place steps install and query the OS's packages, each family its own way
# through os_do: apt and dpkg on Ubuntu (lib.sh's apt_get, apt_update_once,
# package_installed, package_version), dnf and rpm on EL9. A step names a package as the
# table OS_PACKAGES does and gets its family's package:
#   os_install_packages [--no-recommends] NAME...  installs those missing, logging each
#   os_package_installed NAME                      success when it is installed
#   os_package_version NAME                        its installed version, or nothing
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
  local file line value="" unescaped="" quote char index backslash="\\" escapable="\\\$\"'\`"
  file="$(os_release_file)" || return 0
  while IFS= read -r line || [[ -n "$line" ]]; do
    if [[ "${line%%=*}" == "$1" && "$line" == *=* && "$1" =~ ^[A-Za-z0-9_]+$ ]]; then
      value=${line#*=}
      quote=${value:0:1}
      if ((${#value} >= 2)) && [[ ("$quote" == '"' || "$quote" == "'") && "${value: -1}" == "$quote" ]]; then
        value=${value:1:${#value}-2}
      fi
      unescaped=""
      for ((index = 0; index < ${#value}; index++)); do
        char=${value:index:1}
        if [[ "$char" == "$backslash" && -n "${value:index+1:1}" && "$escapable" == *"${value:index+1:1}"* ]]; then
          index=$((index + 1))
          char=${value:index:1}
        fi
        unescaped+=$char
      done
      value=$unescaped
      unescaped=1
    fi
  done <"$file"
  if [[ -z "$unescaped" ]]; then
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
# define their own: ubuntu_install_packages, el9_install_packages below).
os_do() {
  local verb=$1
  shift
  os_family >/dev/null
  if ! declare -F "${OS_FAMILY}_$verb" >/dev/null; then
    die "os_do: no ${OS_FAMILY}_$verb: $verb is not written for $OS_FAMILY hosts"
  fi
  "${OS_FAMILY}_$verb" "$@"
}

# The packages the steps install or ask about, by the name the steps use: Ubuntu's package,
# EL9's, and the EL9 repository that has it (its failure message names it).
#   Ubuntu: packages.ubuntu.com (jammy, noble), main but age (universe).
#   EL9: Red Hat's "Package manifest" of RHEL 9, chapter 2, the BaseOS and AppStream tables
#   (https://docs.redhat.com/en/documentation/red_hat_enterprise_linux/9/html/package_manifest/repositories),
#   which Rocky Linux and AlmaLinux 9 rebuild. nfs-utils is both the NFS client and the
#   server (nfs-server.service; rocky-linux/documentation docs/guides/file_sharing/nfsserver.md,
#   0542fba); dkms, which builds NVIDIA's open kernel modules on EL9, is EPEL's as the
#   driver installation guide says (install-nvidia, nvidia/el9.sh); versionlock, dnf's
#   plugin that keeps a package at its version, is dnf-plugins-core's subpackage (apt-mark
#   hold is Ubuntu's; none there). iptables is iptables-nft, the iptables command on nf_tables (named among
#   RHEL 9's packages in the 9.0 release notes, "Deprecated packages"); ping is iputils'.
#   openvpn is not in RHEL 9 but in EPEL (rocky-linux/documentation
#   docs/guides/security/openvpn.md, 0542fba, tested with 9.4: `dnf install epel-release`,
#   then `dnf install openvpn`); age is not in RHEL 9 either, and is taken to be EPEL's
#   (Fedora's package; not checked against EPEL 9 here). systemd-timesyncd is in none of
#   the distribution's repositories: chrony (BaseOS, enabled in Rocky Linux 9's images:
#   rocky-linux/kickstarts Rocky-9-GenericCloud-Base.ks, `services --enabled=`) keeps the
#   clock there.
#   container-selinux (AppStream) is the policy containers run under (k0s docs/selinux.md,
#   docs.rke2.io/security/selinux); semanage, which adds file-context rules, is
#   policycoreutils-python-utils' (taken to be BaseOS's, as on RHEL 8; not checked against
#   the manifest here). Ubuntu has neither: its containers run under AppArmor.
OS_PACKAGES='
# name              ubuntu              el9                 el9 repository
age                 age                 age                 EPEL
chrony              chrony              chrony              BaseOS
container-selinux   none                container-selinux   AppStream
dnf-plugins-core    none                dnf-plugins-core    BaseOS
dkms                dkms                dkms                EPEL
iptables            iptables            iptables-nft        BaseOS
keepalived          keepalived          keepalived          AppStream
nfs-client          nfs-common          nfs-utils           BaseOS
nfs-server          nfs-kernel-server   nfs-utils           BaseOS
nftables            nftables            nftables            BaseOS
openvpn             openvpn             openvpn             EPEL
ping                iputils-ping        iputils             BaseOS
semanage            none                policycoreutils-python-utils BaseOS
systemd-timesyncd   systemd-timesyncd   systemd-timesyncd   none
versionlock         none                python3-dnf-plugin-versionlock AppStream
'
# Set by os_package: the family's package of a name, and for EL9 the repository that has it.
OS_PACKAGE=""
OS_PACKAGE_REPOSITORY=""

# os_package NAME: OS_PACKAGE, the host family's package of NAME (a name of OS_PACKAGES),
# and OS_PACKAGE_REPOSITORY; dies naming NAME when the table has no such name.
os_package() {
  local name ubuntu el9 repository
  os_family >/dev/null
  while read -r name ubuntu el9 repository; do
    if [[ -n "$name" && "$name" != '#'* && "$name" == "$1" ]]; then
      case "$OS_FAMILY" in
        ubuntu) OS_PACKAGE=$ubuntu OS_PACKAGE_REPOSITORY="" ;;
        el9) OS_PACKAGE=$el9 OS_PACKAGE_REPOSITORY=$repository ;;
      esac
      [[ "$OS_PACKAGE" != none ]] || die "no $OS_FAMILY package is named '$1' (OS_PACKAGES)"
      return 0
    fi
  done <<<"$OS_PACKAGES"
  die "no package named '$1' in os/lib.sh's table (OS_PACKAGES)"
}

# os_package_installed NAME: success when the package of NAME is installed.
os_package_installed() {
  os_package "$1"
  os_do package_installed "$OS_PACKAGE"
}

# os_package_version NAME: the installed version of the package of NAME (Ubuntu: the
# Debian version; EL9: VERSION-RELEASE), nothing when it is not installed.
os_package_version() {
  os_package "$1"
  os_do package_version "$OS_PACKAGE"
}

# os_install_packages [--no-recommends] NAME...: installs the packages of the NAMEs that
# are missing, in one transaction, logging each ("changed: installed PACKAGE") and each
# already there ("PACKAGE is already installed"); a second run installs nothing. With
# --no-recommends, without the packages they only recommend (apt's Recommends, RPM's weak
# dependencies).
os_install_packages() {
  local options=() name to_install=()
  if [[ "${1:-}" == --no-recommends ]]; then
    options=(--no-recommends)
    shift
  fi
  for name in "$@"; do
    os_package "$name"
    # Two names may be one package (EL9's nfs-utils).
    if [[ " ${to_install[*]} " == *" $OS_PACKAGE "* ]]; then
      continue
    elif os_do package_installed "$OS_PACKAGE"; then
      log "$OS_PACKAGE is already installed"
    else
      to_install+=("$OS_PACKAGE")
    fi
  done
  if ((${#to_install[@]} == 0)); then
    return 0
  fi
  os_do install_packages "${options[@]}" "${to_install[@]}"
  for name in "${to_install[@]}"; do
    log "changed: installed $name"
  done
}

# --- Ubuntu: apt-get and dpkg-query, through lib.sh's functions.

# ubuntu_install_packages [--no-recommends] PACKAGE...: apt-get install, after the
# archive's lists are updated once per run.
ubuntu_install_packages() {
  local options=(-y)
  if [[ "${1:-}" == --no-recommends ]]; then
    options+=(--no-install-recommends)
    shift
  fi
  apt_update_once
  apt_get install "${options[@]}" "$@"
}

ubuntu_package_installed() {
  package_installed "$1"
}

ubuntu_package_version() {
  package_version "$1"
}

# --- EL9: dnf and rpm (dnf 4.14 and rpm 4.16, those of RHEL 9 and its rebuilds).

# dnf_run ARGS...: dnf, answering yes (-y, --assumeyes: "Automatically answer yes for all
# questions"), waiting for another dnf that holds its locks (the dnf-makecache timer right
# after boot): exit_on_lock=False, its default, set here so that no dnf.conf changes it
# ("Should the dnf client exit immediately when something else has the lock. Default is
# False"; with it False each lock polls every second, logging "Waiting for process with pid
# N to finish."): dnf 4.14.0 doc/command_ref.rst (-y, --setopt), doc/conf_ref.rst
# (exit_on_lock), dnf/lock.py ProcessLock.__enter__. Config files changed on the host stay:
# rpm writes a package's new one beside them (.rpmnew) by itself, so no option is needed
# (apt_get's --force-confold). Installing a package with unit files makes systemd reload
# (systemd's RPM file trigger, systemd v252 src/rpm/triggers.systemd.in: %transfiletriggerin
# on /usr/lib/systemd/system and /etc/systemd/system runs `systemctl daemon-reload`), so it
# first links the NVIDIA devices, as apt_get does (lib.sh ensure_nvidia_dev_char_links).
dnf_run() {
  ensure_nvidia_dev_char_links
  dnf -y --setopt=exit_on_lock=False "$@"
}

# el9_install_packages [--no-recommends] PACKAGE...: dnf install (dnf refreshes expired
# repository metadata itself: metadata_expire); with --no-recommends without weak
# dependencies (install_weak_deps=False: "all packages linked by weak dependency relation
# (Recommends or Supplements flags) with this package will be pulled into the transaction"
# when True, doc/conf_ref.rst). Dies naming the packages when dnf fails, and where a
# package is not in the distribution's own repositories, which one has it.
el9_install_packages() {
  local options=() status=0 index hint=""
  if [[ "${1:-}" == --no-recommends ]]; then
    options=(--setopt=install_weak_deps=False)
    shift
  fi
  dnf_run install "${options[@]}" "$@" || status=$?
  if ((status != 0)); then
    for ((index = 1; index <= $#; index++)); do
      os_package_repository "${!index}"
      case "$OS_PACKAGE_REPOSITORY" in
        EPEL)
          hint+="; ${!index} is in EPEL, not in the distribution's own repositories: set"
          hint+=" gpu-cluster:packages.epel to true for the program to enable EPEL and CRB,"
          hint+=" or enable EPEL on the host (https://docs.fedoraproject.org/en-US/epel/)"
          ;;
        none) hint+="; ${!index} is in none of the distribution's repositories" ;;
      esac
    done
    die "dnf could not install $* (exit code $status)$hint"
  fi
}

# os_package_repository PACKAGE: OS_PACKAGE_REPOSITORY, the EL9 repository of PACKAGE
# (an EL9 package of the table), empty for any other.
os_package_repository() {
  local name ubuntu el9 repository
  OS_PACKAGE_REPOSITORY=""
  while read -r name ubuntu el9 repository; do
    if [[ -n "$name" && "$name" != '#'* && "$el9" == "$1" ]]; then
      OS_PACKAGE_REPOSITORY=$repository
      return 0
    fi
  done <<<"$OS_PACKAGES"
}

# el9_package_installed PACKAGE: rpm -q exits non-zero for a package not installed
# (rpm 4.16.1.3 lib/query.c rpmcliArgIter: the count of arguments without a match) and
# says so on stdout ("package NAME is not installed"), which goes nowhere here.
el9_package_installed() {
  rpm -q --quiet "$1" >/dev/null 2>&1
}

# el9_package_version PACKAGE: VERSION-RELEASE of the installed PACKAGE (rpm's query
# format tags, rpm(8) --queryformat), one line per installed version (an installonly
# package, the kernel's, can have several); nothing when it is not installed.
el9_package_version() {
  local version
  if version="$(rpm -q --queryformat '%{VERSION}-%{RELEASE}\n' "$1" 2>/dev/null)"; then
    printf '%s\n' "$version"
  fi
}

# el9_repository FILE ID NAME BASEURL KEY_FILE GPGCHECK REPO_GPGCHECK [ENABLED]: the .repo FILE
# of one repository (dnf.conf(5), [MAIN] and repo options), named by the step that writes it.
# REPO_GPGCHECK=1: its repomd.xml must carry a signature of KEY_FILE's key; GPGCHECK=1: each
# package must. ENABLED=0 (default 1): read only by a dnf given --enablerepo=ID.
el9_repository() {
  write_file "$1" 0644 <<EOF
# Managed by gpu-cluster ($GPU_CLUSTER_STEP).
[$2]
name=$3
baseurl=$4
enabled=${8:-1}
gpgcheck=$6
repo_gpgcheck=$7
gpgkey=file://$5
EOF
}
