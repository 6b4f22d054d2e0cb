"""Small annotated types the config models are built from. Every pattern matches the
whole value (re.fullmatch): `$` in re.match also matches before a final line break, which
a YAML block scalar (`name: |`) adds."""

import ipaddress
import re
from typing import Annotated, Any, Optional

from cryptography.exceptions import UnsupportedAlgorithm
from cryptography import x509
from cryptography.hazmat.primitives import serialization
from pydantic import AfterValidator, Field, SecretStr

from config.model_base import MULTI_LINE

_DNS_LABEL = re.compile(r"[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?")
# Kubernetes' own rules, k8s.io/apimachinery/pkg/util/validation/validation.go:
# qualifiedNameFmt (label and taint keys' name part, label values; 63 characters at most)
# and dns1123SubdomainFmt (a key's prefix; 253 characters at most, IsDNS1123Subdomain).
_QUALIFIED_NAME = re.compile(r"([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]")
_DNS1123_LABEL_FORMAT = r"[a-z0-9]([-a-z0-9]*[a-z0-9])?"
_DNS_SUBDOMAIN = re.compile(rf"{_DNS1123_LABEL_FORMAT}(\.{_DNS1123_LABEL_FORMAT})*")
_INTERFACE = re.compile(r"[A-Za-z0-9_.:@-]{1,15}")
_DURATION = re.compile(r"([0-9]+h)?([0-9]+m)?([0-9]+s)?")
# useradd(8) ("[a-z_][a-z0-9_-]*[$]?", "up to 32 characters long") and Debian's
# adduser.conf NAME_REGEX: what a login name may be, so it is safe on any command line.
_USER_NAME = re.compile(r"[a-z_][a-z0-9_-]*[$]?")
_PEM_CHAIN = re.compile(r"\s*(-----BEGIN CERTIFICATE-----\r?\n[A-Za-z0-9+/=\r\n]+"
                        r"-----END CERTIFICATE-----\s*)+")


def matching(pattern: re.Pattern, what: str, max_length: Optional[int] = None):
    """A validator: the whole value matches `pattern` and has at most `max_length`
    characters, else "'<value>' is not <what>"."""
    def check(value: str) -> str:
        if (max_length is not None and len(value) > max_length) or not pattern.fullmatch(value):
            raise ValueError(f"'{value}' is not {what}")
        return value
    return check


# Where hosts download from instead of upstream: an http(s) URL or a folder on the host as
# file:///path; no query, no credentials, nothing a shell or apt's sources line reads
# specially.
_DOWNLOAD_URL = re.compile(r"(https?://[a-z0-9]([a-z0-9.-]*[a-z0-9])?(:[1-9][0-9]{0,4})?|file://)"
                           r"(/[A-Za-z0-9._~%+-]+)*/?")


def _download_url(value: str) -> str:
    if len(value) > 1024 or not _DOWNLOAD_URL.fullmatch(value) or "/../" in f"{value}/" \
            or value in ("file://", "file:///"):
        raise ValueError(f"'{value}' is not a download location like "
                         "https://files.example.internal/k0s or file:///srv/k0s")
    return value


def _dns_label(value: str) -> str:
    if not _DNS_LABEL.fullmatch(value):
        raise ValueError(
            "must be a lowercase DNS label: letters, digits and '-', at most 63 characters, "
            "starting and ending with a letter or digit"
        )
    return value


# An S3 bucket name (https://docs.aws.amazon.com/AmazonS3/latest/userguide/
# bucketnamingrules.html: 3-63 lowercase letters, digits, '-' and '.', a letter or digit at
# each end, not `xn--`, `sthree-` or `amzn-s3-demo-` first, not `-s3alias`, `--ol-s3`,
# `.mrap` or `--x-s3` last), without dots: its virtual-hosted HTTPS name must match S3's
# wildcard certificate, which covers one label (same page, "dots").
_S3_BUCKET = re.compile(r"[a-z0-9][a-z0-9-]{1,61}[a-z0-9]")
_S3_RESERVED = (("xn--", "sthree-", "amzn-s3-demo-"), ("-s3alias", "--ol-s3", "--x-s3"))


def _s3_bucket(value: str) -> str:
    if not _S3_BUCKET.fullmatch(value) or value.startswith(_S3_RESERVED[0]) \
            or value.endswith(_S3_RESERVED[1]):
        raise ValueError(f"'{value}' is not an S3 bucket name: 3 to 63 lowercase letters, "
                         "digits and '-', a letter or digit at each end (no dots)")
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
    if len(value) > 253 or not all(_DNS_LABEL.fullmatch(part) for part in value.lower().split(".")):
        raise ValueError(f"'{value}' is neither an IP address nor a DNS name")
    return value.lower()


def is_dns_subdomain(value: str) -> bool:
    """IsDNS1123Subdomain: lowercase DNS-1123 labels joined by dots, 253 characters at most."""
    return len(value) <= 253 and bool(_DNS_SUBDOMAIN.fullmatch(value))


def qualified_name_problem(value: str) -> str | None:
    """What IsQualifiedName finds wrong with a label or taint key, or None."""
    parts = value.split("/")
    if len(parts) > 2:
        return "has more than one '/'"
    name = parts[-1]
    if len(parts) == 2:
        if not parts[0]:
            return "has an empty prefix before '/'"
        if not is_dns_subdomain(parts[0]):
            return ("has a prefix that is not a DNS subdomain (lowercase labels of letters, "
                    "digits and '-' joined by single dots, at most 253 characters)")
    if len(name) > 63 or not _QUALIFIED_NAME.fullmatch(name):
        return ("has an invalid name part: at most 63 characters of letters, digits, '-', "
                "'_' or '.', starting and ending with a letter or digit")
    return None


def _label_key(value: str) -> str:
    problem = qualified_name_problem(value)
    if problem:
        raise ValueError(f"label key '{value}' {problem}")
    return value


def _label_value(value: str) -> str:
    # IsValidLabelValue: empty, or a qualified name's name part.
    if value and (len(value) > 63 or not _QUALIFIED_NAME.fullmatch(value)):
        raise ValueError(
            f"label value '{value}' is invalid: at most 63 characters of letters, digits, "
            "'-', '_' or '.', starting and ending with a letter or digit"
        )
    return value


def _ssh_public_key(value: str) -> str:
    parts = value.split()
    # 8 KiB holds the longest key ssh-keygen makes (RSA 16384: about 2,800 characters).
    if len(parts) < 2 or len(parts[1]) > 8192 \
            or not re.fullmatch(r"ssh-(ed25519|rsa)|ecdsa-sha2-nistp(256|384|521)", parts[0]) \
            or not re.fullmatch(r"[A-Za-z0-9+/]+=*", parts[1]):
        raise ValueError("is not an SSH public host key like 'ssh-ed25519 AAAAC3Nz...' "
                         "(see /etc/ssh/ssh_host_ed25519_key.pub on the host)")
    # pulumi-command offers only the key's own type as host key algorithm (connection.go:94
    # at v1.2.1, HostKeyAlgorithms = publicKey.Type()): for RSA that is SHA-1 "ssh-rsa",
    # which OpenSSH 8.8 and later no longer offers, so no connection would be made (x/crypto:
    # "no common algorithm for host key; we offered: [ssh-rsa], peer offered: [rsa-sha2-512
    # rsa-sha2-256]", https://github.com/redpanda-data/connect/issues/4351).
    if parts[0] == "ssh-rsa":
        raise ValueError("is an RSA host key, which SSH from pulumi-command cannot verify "
                         "against OpenSSH 8.8 or later (it asks for SHA-1 signatures); give "
                         "the host's ed25519 key (`ssh-keyscan -t ed25519 ADDRESS`)")
    try:
        # The key's own encoding must say the same type (x/crypto's ParseAuthorizedKey
        # refuses a mismatch, at `pulumi up`).
        serialization.load_ssh_public_key(f"{parts[0]} {parts[1]}".encode())
    except (ValueError, UnsupportedAlgorithm):
        raise ValueError(f"is not a valid {parts[0]} public key (its base64 body does not "
                         "decode to one); copy the whole key from ssh-keyscan") from None
    return f"{parts[0]} {parts[1]}"


# An authorized_keys line without options: type, base64 body, optional comment (sshd(8),
# "AUTHORIZED_KEYS FILE FORMAT"); the types OpenSSH 9 accepts by default, no ssh-dss (off
# since OpenSSH 7.0). Mirrored by KEY_PATTERN in components/scripts/authorized-keys.sh.
_AUTHORIZED_KEY = re.compile(
    r"(ssh-ed25519|ssh-rsa|ecdsa-sha2-nistp(256|384|521)|sk-ssh-ed25519@openssh\.com"
    r"|sk-ecdsa-sha2-nistp256@openssh\.com) [A-Za-z0-9+/]{16,8192}={0,2}( [^\x00-\x1f\x7f]*)?")


def _authorized_key(value: str) -> str:
    value = value.strip()
    if len(value) > 9000 or not _AUTHORIZED_KEY.fullmatch(value):
        raise ValueError("is not an OpenSSH public key line like 'ssh-ed25519 AAAAC3Nz... "
                         "comment' (the .pub file's one line; no options, no control "
                         "characters)")
    return value


def key_body(line: str) -> str:
    """The base64 body of a public key line ('type body [comment]'): the key itself."""
    return line.split()[1]


def public_key_of(private_key: str) -> str:
    """The OpenSSH public key line of an unencrypted OpenSSH or PEM private key."""
    data = private_key.encode()
    if b"OPENSSH PRIVATE KEY" in data:
        key = serialization.load_ssh_private_key(data, password=None)
    else:
        key = serialization.load_pem_private_key(data, password=None)
    return key.public_key().public_bytes(serialization.Encoding.OpenSSH,
                                         serialization.PublicFormat.OpenSSH).decode()


_PRIVATE_KEY_MARKER = "PRIVATE KEY-----"
_KEY_BLOCK_ONLY = re.compile(r"\s*-----BEGIN ([A-Z0-9 ]+)-----\r?\n[A-Za-z0-9+/=:,\s-]*?"
                             r"\r?\n-----END \1-----\s*")


def private_key_problem(text: str) -> Optional[str]:
    if _PRIVATE_KEY_MARKER not in text:
        return ("is not a private key (expected a PEM or OpenSSH private key; was a public "
                "key given?)")
    if not _KEY_BLOCK_ONLY.fullmatch(text):
        # The key parser ignores what surrounds the block; nothing else may come with it.
        return "holds text before or after its key block; give the key alone"
    data = text.encode()
    try:
        if b"OPENSSH PRIVATE KEY" in data:
            serialization.load_ssh_private_key(data, password=None)
        else:
            serialization.load_pem_private_key(data, password=None)
    except (ValueError, TypeError, UnsupportedAlgorithm) as error:
        # The message never quotes the key.
        reason = "it is encrypted" if "password" in str(error).lower() else "it does not parse"
        return f"cannot be used as an SSH key: {reason} (an unencrypted OpenSSH or PEM key is needed)"
    return None


def public_key_or_nothing(private_key: Any) -> str:
    # A key that does not parse is reported by _private_key_problem.
    if not isinstance(private_key, str) or private_key_problem(private_key) is not None:
        return ""
    return public_key_of(private_key)


def _absolute_path(value: str) -> str:
    if not re.fullmatch(r"/[A-Za-z0-9._/-]*", value) or "/../" in f"{value}/" \
            or len(value) > 4096:
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


def distinct(values: list) -> list:
    """A validator for a list: no item twice."""
    doubled = sorted({item for item in values if values.count(item) > 1})
    if doubled:
        raise ValueError(f"lists {', '.join(doubled)} more than once")
    return values


def _duration(value: str) -> str:
    if not value or not _DURATION.fullmatch(value):
        raise ValueError(f"'{value}' is not a duration like 2h, 30m or 1h30m")
    if not any(char in "123456789" for char in value):
        # k0s reads a zero expiry as none: `k0s token create --expiry` defaults to "0s"
        # (https://docs.k0sproject.io/stable/cli/k0s_token_create/), a token for good.
        raise ValueError(f"'{value}' is zero; a duration must be longer than that")
    return value


def _pem_chain(value: str) -> str:
    if not _PEM_CHAIN.fullmatch(value):
        raise ValueError("is not a PEM certificate chain: -----BEGIN CERTIFICATE----- blocks, the "
                         "server's certificate first, then its intermediates")
    try:
        x509.load_pem_x509_certificates(value.encode())
    except ValueError:
        raise ValueError("has a CERTIFICATE block that is not an X.509 certificate") from None
    return value


DnsLabel = Annotated[str, AfterValidator(_dns_label)]
IPv4 = Annotated[str, AfterValidator(_ipv4)]
S3BucketName = Annotated[str, AfterValidator(_s3_bucket)]
IPv4Cidr = Annotated[str, AfterValidator(_ipv4_cidr)]
HostOrIp = Annotated[str, AfterValidator(_host_or_ip)]
LabelKey = Annotated[str, AfterValidator(_label_key)]
LabelValue = Annotated[str, AfterValidator(_label_value)]
InterfaceName = Annotated[str, AfterValidator(matching(
    _INTERFACE, "a network interface name (at most 15 characters)"))]
Duration = Annotated[str, AfterValidator(_duration)]
# EFS CreationInfo.Permissions: "^[0-7]{3,4}$" (EFS API reference, CreationInfo).
DirectoryMode = Annotated[str, AfterValidator(matching(
    re.compile(r"[0-7]{3,4}"), "an octal file mode like 700 or 0750"))]
AbsolutePath = Annotated[str, AfterValidator(_absolute_path)]
SshPublicKey = Annotated[str, AfterValidator(_ssh_public_key)]
AuthorizedKey = Annotated[str, AfterValidator(_authorized_key)]
UserName = Annotated[str, AfterValidator(matching(
    _USER_NAME, "a login name: lowercase letters, digits, '_' and '-', starting with a letter or "
    "'_', at most 32 characters (useradd(8))", max_length=32))]
DownloadUrl = Annotated[str, AfterValidator(_download_url)]
# EC2 instance type names (family.size, e.g. g5.xlarge, p6-b200.48xlarge).
Ec2InstanceType = Annotated[str, AfterValidator(matching(
    re.compile(r"[a-z0-9-]+\.[a-z0-9]+"), "an EC2 instance type like g5.xlarge", max_length=64))]
# EC2 CapacityReservation.CapacityReservationId: "cr-" and 17 hex digits (EC2 API reference,
# CapacityReservationTarget; the ids of Capacity Blocks for ML have the same form).
CapacityReservationId = Annotated[str, AfterValidator(matching(
    re.compile(r"cr-[0-9a-f]{17}"), "a capacity reservation id: cr- and 17 hex digits"))]
# A secret whose text spans lines (a private key, a VPN profile).
MultiLineSecret = Annotated[SecretStr, MULTI_LINE]
PemCertificateChain = Annotated[str, AfterValidator(_pem_chain), MULTI_LINE]
Port = Annotated[int, Field(ge=1, le=65535)]
NfsMountOption = Annotated[str, AfterValidator(_nfs_mount_option)]
NfsMountOptions = Annotated[list[NfsMountOption], AfterValidator(_distinct_mount_options)]
