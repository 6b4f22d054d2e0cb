"""How hosts are reached and shared, as config says: which SSH connections would accept
any host key, and which hosts several teams share with CPU mitigations off. One refusal
and the preview's warnings, each naming the hosts and the key that decides."""

from collections.abc import Sequence
from typing import Optional

from config.access import AccessSettings
from config.model import Host, HostTuning, SshSettings
from config.problems import Problem

# Layouts whose hosts the program prepares over SSH (cloud boots its machines itself, and
# the EC2 control plane's host key is the one the program makes and installs at boot).
SSH_LAYOUTS = ("bare-metal", "hybrid")

ACCEPT_ANY_KEY = "ssh.acceptAnyHostKey"
MITIGATIONS_KEY = "tuning.disableCpuMitigations"


def unchecked_ssh(layout: Optional[str], ssh: Optional[SshSettings],
                  hosts: Sequence[tuple[int, Host]]) -> tuple[list[str], bool]:
    """(names of hosts reached over SSH without a host key, whether the bastion has
    none). pulumi-command checks a host key only when one is given: without it every
    key is accepted, every time (provider/pkg/provider/remote/connection.go:88-97 at
    v1.2.1, ssh.InsecureIgnoreHostKey; the proxy's connection alike, :204)."""
    if layout not in SSH_LAYOUTS or not hosts:
        return [], False
    names = [host.name for _, host in hosts if host.ssh_host_key is None]
    bastion = ssh is not None and ssh.bastion is not None and ssh.bastion.host_key is None
    return names, bastion


def _what(names: list[str], bastion: bool) -> str:
    parts = [f"hosts {', '.join(names)} (hosts[].sshHostKey)"] if names else []
    if bastion:
        parts.append("the bastion (ssh.bastion.hostKey)")
    return " and ".join(parts)


def host_key_problems(layout: Optional[str], ssh: Optional[SshSettings],
                      hosts: Sequence[tuple[int, Host]]) -> list[Problem]:
    names, bastion = unchecked_ssh(layout, ssh, hosts)
    if not (names or bastion) or (ssh is not None and ssh.accept_any_host_key):
        return []
    return [Problem(
        "hosts" if names else "ssh.bastion.hostKey",
        f"no SSH host key for {_what(names, bastion)}: their steps would send the cluster's "
        "keys and join tokens to whatever answers. Set each to the host's key from "
        "`ssh-keyscan -t ed25519 ADDRESS`, its fingerprint checked on the host (README, "
        f"\"SSH host keys\"), or set {ACCEPT_ANY_KEY}: true")]


def host_key_warning(layout: str, ssh: SshSettings, hosts: Sequence[Host]) -> Optional[str]:
    names, bastion = unchecked_ssh(layout, ssh, list(enumerate(hosts)))
    if not (names or bastion):
        return None
    return (f"gpu-cluster:{ACCEPT_ANY_KEY} is true: SSH to {_what(names, bastion)} accepts "
            "any host key, so a machine in the middle receives the cluster CA's key, join "
            "tokens and VPN keys; pin each host key (README, \"SSH host keys\")")


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
