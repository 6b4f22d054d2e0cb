"""Small annotated types the config models are built from."""

import ipaddress
import re
from typing import Annotated

from pydantic import AfterValidator, Field

_DNS_LABEL = re.compile(r"^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$")
_LABEL_NAME = re.compile(r"^([A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?)$")
_LABEL_VALUE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]{0,61})?[A-Za-z0-9])?$")
_DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?$")
_INTERFACE = re.compile(r"^[A-Za-z0-9_.:@-]{1,15}$")
_DURATION = re.compile(r"^([0-9]+h)?([0-9]+m)?([0-9]+s)?$")


def _dns_label(value: str) -> str:
    if not _DNS_LABEL.match(value):
        raise ValueError(
            "must be a lowercase DNS label: letters, digits and '-', at most 63 characters, "
            "starting and ending with a letter or digit"
        )
    return value


def _ipv4(value: str) -> str:
    try:
        return str(ipaddress.IPv4Address(value))
    except ValueError:
        raise ValueError(f"'{value}' is not an IPv4 address") from None


def _ipv4_cidr(value: str) -> str:
    try:
        network = ipaddress.IPv4Network(value, strict=True)
    except ValueError as error:
        raise ValueError(f"'{value}' is not an IPv4 network in CIDR form ({error})") from None
    return str(network)


def _host_or_ip(value: str) -> str:
    try:
        return str(ipaddress.ip_address(value))
    except ValueError:
        pass
    if len(value) > 253 or not all(_DNS_LABEL.match(part) for part in value.lower().split(".")):
        raise ValueError(f"'{value}' is neither an IP address nor a DNS name")
    return value.lower()


def _label_key(value: str) -> str:
    prefix, _, name = value.rpartition("/")
    if prefix and (len(prefix) > 253 or not _DNS_SUBDOMAIN.match(prefix)):
        raise ValueError(f"label key '{value}' has an invalid prefix (a DNS subdomain)")
    if not _LABEL_NAME.match(name):
        raise ValueError(
            f"label key '{value}' is invalid: name part must be at most 63 characters of "
            "letters, digits, '-', '_' or '.', starting and ending with a letter or digit"
        )
    return value


def _label_value(value: str) -> str:
    if not _LABEL_VALUE.match(value):
        raise ValueError(
            f"label value '{value}' is invalid: at most 63 characters of letters, digits, "
            "'-', '_' or '.', starting and ending with a letter or digit"
        )
    return value


def _interface(value: str) -> str:
    if not _INTERFACE.match(value):
        raise ValueError(f"'{value}' is not a network interface name (at most 15 characters)")
    return value


def _ssh_public_key(value: str) -> str:
    parts = value.split()
    if len(parts) < 2 or not re.match(r"^(ssh-(ed25519|rsa)|ecdsa-sha2-nistp(256|384|521))$", parts[0]) \
            or not re.match(r"^[A-Za-z0-9+/]+=*$", parts[1]):
        raise ValueError("is not an SSH public host key like 'ssh-ed25519 AAAAC3Nz...' "
                         "(see /etc/ssh/ssh_host_ed25519_key.pub on the host)")
    return f"{parts[0]} {parts[1]}"


def _absolute_path(value: str) -> str:
    if not re.match(r"^/[A-Za-z0-9._/-]*$", value) or "/../" in f"{value}/":
        raise ValueError(f"'{value}' is not an absolute path")
    return value.rstrip("/") or "/"


# NFS mount options as nfs(5) spells them (nfs-utils 2.6,
# https://man7.org/linux/man-pages/man5/nfs.5.html) and mount(8)'s generic ones that apply:
# one option per list item (Kubernetes joins the list with commas into `mount -o`).
_UINT = r"[0-9]{1,9}"
_NFS_VALUED_OPTIONS = {
    **dict.fromkeys(("nfsvers", "vers"), r"2|3|4(\.[0-2])?"),
    **dict.fromkeys(("timeo", "retrans", "rsize", "wsize", "acregmin", "acregmax", "acdirmin",
                     "acdirmax", "actimeo", "nconnect", "max_connect", "retry", "port",
                     "mountport", "mountvers", "namlen", "minorversion"), _UINT),
    "sec": r"(none|sys|krb5|krb5i|krb5p)(:(none|sys|krb5|krb5i|krb5p))*",
    "lookupcache": r"all|none|pos|positive",
    **dict.fromkeys(("proto", "mountproto"), r"udp6?|tcp6?|rdma6?"),
    "local_lock": r"all|flock|posix|none",
    "mounthost": r"[A-Za-z0-9]([A-Za-z0-9.-]{0,251}[A-Za-z0-9])?",
    "clientaddr": r"[0-9A-Fa-f.:]{2,45}",
}
# Flags; those in one tuple set the same thing (the last one given would win).
_NFS_FLAG_GROUPS = (
    ("hard", "soft"), ("intr", "nointr"), ("ac", "noac"), ("bg", "fg"),
    ("rdirplus", "nordirplus"), ("sharecache", "nosharecache"), ("resvport", "noresvport"),
    ("fsc", "nofsc"), ("lock", "nolock"), ("cto", "nocto"), ("acl", "noacl"),
    ("migration", "nomigration"), ("softreval", "nosoftreval"), ("sloppy",),
    ("tcp", "udp", "rdma"), ("ro", "rw"), ("sync", "async"),
    ("atime", "noatime", "relatime", "strictatime"), ("nodiratime",), ("nosuid",),
    ("nodev",), ("noexec",), ("_netdev",),
)
_NFS_SETTING = {flag: group[0] for group in _NFS_FLAG_GROUPS for flag in group}
_NFS_SETTING.update({"vers": "nfsvers", "tcp": "proto", "udp": "proto", "rdma": "proto"})


def _nfs_mount_option(value: str) -> str:
    name, equals, setting = value.partition("=")
    pattern = _NFS_VALUED_OPTIONS.get(name)
    if "," in value:
        raise ValueError(f"'{value}' holds several options; list one option per item, like "
                         f"{value.split(',')}")
    if (pattern is None and (equals or name not in _NFS_SETTING)) or \
            (pattern is not None and not re.fullmatch(pattern, setting)):
        raise ValueError(f"'{value}' is not an NFS mount option of nfs(5), like hard, "
                         "timeo=600 or nfsvers=4.1")
    return value


def _distinct_mount_options(options: list[str]) -> list[str]:
    seen: dict[str, str] = {}
    for option in options:
        name = option.partition("=")[0]
        setting = _NFS_SETTING.get(name, name)
        if setting in seen:
            raise ValueError(f"'{seen[setting]}' and '{option}' set the same mount option; "
                             "keep one")
        seen[setting] = option
    return options


def _duration(value: str) -> str:
    if not value or not _DURATION.match(value):
        raise ValueError(f"'{value}' is not a duration like 2h, 30m or 1h30m")
    return value


DnsLabel = Annotated[str, AfterValidator(_dns_label)]
IPv4 = Annotated[str, AfterValidator(_ipv4)]
IPv4Cidr = Annotated[str, AfterValidator(_ipv4_cidr)]
HostOrIp = Annotated[str, AfterValidator(_host_or_ip)]
LabelKey = Annotated[str, AfterValidator(_label_key)]
LabelValue = Annotated[str, AfterValidator(_label_value)]
InterfaceName = Annotated[str, AfterValidator(_interface)]
Duration = Annotated[str, AfterValidator(_duration)]
AbsolutePath = Annotated[str, AfterValidator(_absolute_path)]
SshPublicKey = Annotated[str, AfterValidator(_ssh_public_key)]
Port = Annotated[int, Field(ge=1, le=65535)]
NfsMountOption = Annotated[str, AfterValidator(_nfs_mount_option)]
NfsMountOptions = Annotated[list[NfsMountOption], AfterValidator(_distinct_mount_options)]
