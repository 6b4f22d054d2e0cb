"""How hosts are reached and shared, as config says: which SSH connections would accept
any host key, and which hosts several teams share with CPU mitigations off: the preview's
warnings, each naming the hosts and the key that decides (the refusal of unchecked host
keys is a rule of the hosts, in config/checks.py)."""

from collections.abc import Sequence
from typing import Optional

from config.access import AccessSettings
from config.checks import ACCEPT_ANY_KEY, unchecked_ssh, unchecked_what
from config.hosts import Host
from config.model import HostTuning, SshSettings

MITIGATIONS_KEY = "tuning.disableCpuMitigations"


def host_key_warning(layout: str, ssh: SshSettings, hosts: Sequence[Host]) -> Optional[str]:
    names, bastion = unchecked_ssh(layout, ssh, list(enumerate(hosts)))
    if not (names or bastion):
        return None
    return (f"gpu-cluster:{ACCEPT_ANY_KEY} is true: SSH to {unchecked_what(names, bastion)} "
            "accepts any host key, so a machine in the middle receives the cluster CA's key, join "
            "tokens and VPN keys; pin each host key (docs/layouts.md, \"SSH host keys\")")


def shared_hosts(hosts: Sequence[Host], access: AccessSettings) -> list[Host]:
    """Hosts more than one team can run pods on. No team is bound to a node (a team's
    namespace has a quota, no node selector, and its pods may tolerate any taint), so
    with two teams or more every host that runs workloads is shared."""
    if len(access.teams) < 2:
        return []
    return [host for host in hosts if host.runs_workloads]


def mitigations_warning(tuning: HostTuning, hosts: Sequence[Host],
                        access: AccessSettings) -> Optional[str]:
    shared = shared_hosts(hosts, access)
    if not tuning.disable_cpu_mitigations or not shared:
        return None
    teams = ", ".join(team.name for team in access.teams)
    return (f"gpu-cluster:{MITIGATIONS_KEY} is true on {', '.join(h.name for h in shared)}, "
            f"which teams {teams} share: a pod of one team may read another's memory "
            "through CPU side channels (Spectre, MDS); set it to false on shared hosts")


def host_warnings(layout: str, ssh: SshSettings, hosts: Sequence[Host],
                  tuning: HostTuning, access: AccessSettings) -> list[str]:
    """The preview's warnings about hosts (pulumi.log.warn)."""
    warnings = [mitigations_warning(tuning, hosts, access)]
    if ssh.accept_any_host_key:
        warnings.append(host_key_warning(layout, ssh, hosts))
    return [warning for warning in warnings if warning]
