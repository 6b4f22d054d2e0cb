"""The AWS side of the starter stack `gpu-cluster init --layout hybrid` writes: the control
plane on EC2, the OpenVPN bridge to the on-prem hosts, backups and shared storage.

None of it can be read from the hosts: each value is the user's, given on the command line,
or written as a commented line that names the key and the option that sets it, with a note.
Nothing is guessed; the keys and their rules are config/cloud.py, config/aws_checks.py and
config/backup.py's (the preview checks what is written)."""

import argparse
import json
import re
from dataclasses import dataclass
from ipaddress import IPv4Network
from typing import Optional

# An AWS region name (us-east-1, ap-southeast-2, us-gov-west-1); config.cloud checks it is one.
_REGION = re.compile(r"[a-z]{2}(-[a-z]+)+-[0-9]")
# age's X25519 recipient: "age1" and 58 characters of bech32's alphabet (C2SP age.md,
# "X25519 recipient type"; bech32's charset excludes 1, b, i, o).
_AGE_RECIPIENT = re.compile(r"age1[02-9ac-hj-np-z]{58}")


def region(value: str) -> str:
    if not _REGION.fullmatch(value):
        raise argparse.ArgumentTypeError(f"{value!r} is not an AWS region name (us-east-1)")
    return value


def age_recipient(value: str) -> str:
    if not _AGE_RECIPIENT.fullmatch(value):
        raise argparse.ArgumentTypeError(f"{value!r} is not an age public key (age1...)")
    return value


def add_arguments(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("with --layout hybrid (each left out is named as to decide)")
    group.add_argument("--region", type=region, help="the AWS region of the control plane")
    group.add_argument("--vpc-cidr", type=IPv4Network, metavar="CIDR",
                       help="the VPC's range (apart from the LAN)")
    group.add_argument("--admin-cidr", type=IPv4Network, action="append", default=[],
                       metavar="CIDR", help="a public range SSH and the API are open to "
                                            "(repeatable)")
    group.add_argument("--vpn-gateway", metavar="NAME|ADDRESS",
                       help="the on-prem host that runs the OpenVPN client")
    group.add_argument("--vpn-source-cidr", type=IPv4Network, action="append", default=[],
                       metavar="CIDR", help="the public address the gateway connects from "
                                            "(repeatable)")
    group.add_argument("--backup-recipient", type=age_recipient, action="append", default=[],
                       metavar="AGE_KEY", help="an age public key the control plane's "
                                               "snapshots are encrypted to (repeatable)")
    group.add_argument("--nfs-host", metavar="NAME|ADDRESS",
                       help="the on-prem host that exports the cluster's volumes over NFS")


@dataclass(frozen=True)
class HybridChoices:
    region: Optional[str] = None
    vpc_cidr: Optional[IPv4Network] = None
    admin_cidrs: tuple = ()
    vpn_gateway: Optional[str] = None
    vpn_sources: tuple = ()
    backup_recipients: tuple = ()
    nfs_host: Optional[str] = None

    @classmethod
    def of(cls, args: argparse.Namespace) -> "HybridChoices":
        return cls(args.region, args.vpc_cidr, tuple(args.admin_cidr), args.vpn_gateway,
                   tuple(args.vpn_source_cidr), tuple(args.backup_recipient), args.nfs_host)


def _q(value) -> str:
    return json.dumps(str(value))


def _host(wanted: Optional[str], hosts: list, option: str, notes: list) -> Optional[str]:
    """The hostname of the host `wanted` names (hostname or SSH address), or None, noted."""
    if wanted is None:
        return None
    for facts in hosts:
        if wanted in (facts.hostname, facts.ssh_address, facts.ssh_address.rpartition(":")[0]):
            return facts.hostname
    notes.append(f"{option} {wanted}: not one of the hosts written (by name or SSH address)")
    return None


def _decide(key: str, option: str, what: str, notes: list, indent: str) -> list:
    notes.append(f"{key} is not decided: {what} ({option})")
    within = key.partition(".")[2] or key  # the key below its section's line
    return [f"{indent}# {within}: to decide ({option}): {what}"]


def hybrid_lines(hosts: list, choices: HybridChoices, notes: list) -> list:
    """The aws, vpn, backup and storage sections of a hybrid stack, as YAML lines."""
    lines = ["  # The control plane runs on EC2 (hybrid layout; docs/layouts.md): these values",
             "  # are yours to choose, none could be read from the hosts.",
             "  gpu-cluster:aws:"]
    lines += ([f"    region: {_q(choices.region)}"] if choices.region else
              _decide("aws.region", "--region", "the AWS region of the control plane",
                      notes, "    "))
    lines += (["    vpc:", f"      cidr: {_q(choices.vpc_cidr)}"] if choices.vpc_cidr else
              _decide("aws.vpc.cidr", "--vpc-cidr", "the VPC's range, apart from the LAN",
                      notes, "    "))
    lines += (["    adminCidrs:"] + [f"      - {_q(c)}" for c in choices.admin_cidrs]
              if choices.admin_cidrs else
              _decide("aws.adminCidrs", "--admin-cidr", "the public ranges SSH and the "
                      "Kubernetes API are open to", notes, "    "))
    gateway = _host(choices.vpn_gateway, hosts, "--vpn-gateway", notes)
    lines += ["  gpu-cluster:vpn:"]
    lines += ([f"    onpremGateway: {_q(gateway)}"] if gateway else
              _decide("vpn.onpremGateway", "--vpn-gateway", "the on-prem host that runs the "
                      "OpenVPN client", notes, "    "))
    lines += (["    clientSourceCidrs:"] + [f"      - {_q(c)}" for c in choices.vpn_sources]
              if choices.vpn_sources else
              _decide("vpn.clientSourceCidrs", "--vpn-source-cidr", "the public addresses "
                      "the gateway connects from (the VPN port is open to them only)",
                      notes, "    "))
    lines += ["  # Snapshots of the control plane are encrypted to these age public keys; the",
              "  # identity files (age-keygen -o restore-key.txt) stay off the cluster.",
              "  gpu-cluster:backup:"]
    lines += (["    recipients:"] + [f"      - {_q(r)}" for r in choices.backup_recipients]
              if choices.backup_recipients else
              _decide("backup.recipients", "--backup-recipient", "age public keys to encrypt "
                      "the control plane's snapshots to, or backup.enabled: false",
                      notes, "    "))
    server = _host(choices.nfs_host, hosts, "--nfs-host", notes)
    if server:
        return lines + ["  gpu-cluster:storage:", "    nfs:", f"      host: {_q(server)}",
                        '      path: "/srv/nfs/gpu-cluster"']
    return lines + _decide("storage", "--nfs-host NAME", "an on-prem host that exports the "
                           "volumes, or EFS in the VPC (storage.efs, docs/layouts.md)",
                           notes, "  ")
