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
