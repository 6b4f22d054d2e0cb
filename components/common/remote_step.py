"""One bootstrap step on one host: a script file run over SSH as a remote.Command.

Its stdin (components/common/step_text.py bundle_stdin) carries its inputs and the sha256 of
the bundle files it runs, never the command line or SSH environment variables (those need
AcceptEnv and would show secrets in `ps`). The command itself is constant:
`sudo -n bash -s -- create|delete`. The doctor runs `check` on the steps that support it
(`python -m doctor --drift`): what create would change, changing nothing.

A changed input or file changes stdin, which Pulumi applies as an *update* that re-runs the
step on that host only. The provider's `triggers` are deliberately not used: a trigger
change *replaces* the command, which would run its delete script (a node reset).
"""

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Optional, Union

import pulumi
from pulumi_command import remote
from pydantic import SecretStr

from components.common.step_text import Script, bundle_stdin, envelope, single_quoted
from config.hosts import Host
from config.model import SshSettings


@dataclass(frozen=True)
class Endpoint:
    """Where and how to reach a machine when it is not as its host entry says: an EC2
    instance at its public address, with the host key it installs at boot, dialed for as
    long as its boot may take."""

    address: pulumi.Input[str]
    port: int
    host_key: pulumi.Input[str]
    wait_seconds: float


# The provider retries a failed dial 0.1 s after the first, each wait 1.5 times the one
# before, at most 5 s (pulumi-command provider/pkg/provider/remote/connection.go
# dialWithRetry; pulumi sdk/go/common/util/retry DefaultDelay/Backoff/MaxDelay).
_FIRST_RETRY_SECONDS, _BACKOFF, _MAX_RETRY_SECONDS = 0.1, 1.5, 5.0


def dial_attempts_for(seconds: float) -> int:
    """Dial attempts whose waits add up to at least `seconds` (more, as each dial that
    times out takes its own time too)."""
    attempts, waited, wait = 1, 0.0, _FIRST_RETRY_SECONDS
    while waited < seconds:
        waited += wait
        wait = min(wait * _BACKOFF, _MAX_RETRY_SECONDS)
        attempts += 1
    return attempts


@dataclass(frozen=True)
class SshAccess:
    """How the program logs in to hosts: gpu-cluster:ssh and the secret keys
    (sshPrivateKey, bastionPrivateKey; the bastion's defaults to the hosts')."""

    settings: SshSettings
    private_key: SecretStr
    bastion_private_key: Optional[SecretStr] = None


def connection_to(host: Host, access: SshAccess, endpoint: Optional[Endpoint] = None,
                  wait_seconds: float = 0) -> remote.ConnectionArgs:
    """SSH connection to a host, through the bastion when one is configured, or to
    `endpoint` directly; it keeps dialing for at least `wait_seconds` (a rebooting host)."""
    ssh = access.settings
    private_key = pulumi.Output.secret(access.private_key.get_secret_value())
    proxy = None
    if ssh.bastion is not None and endpoint is None:
        bastion_key = access.bastion_private_key or access.private_key
        proxy = remote.ProxyConnectionArgs(
            host=ssh.bastion.host,
            port=ssh.bastion.port,
            user=ssh.bastion.user or ssh.user,
            host_key=ssh.bastion.host_key,
            private_key=pulumi.Output.secret(bastion_key.get_secret_value()),
            dial_error_limit=ssh.dial_error_limit,
            per_dial_timeout=ssh.per_dial_timeout_seconds,
        )
    return remote.ConnectionArgs(
        host=endpoint.address if endpoint else host.ssh_address or host.address,
        port=endpoint.port if endpoint else ssh.port,
        user=host.ssh_user or ssh.user,
        host_key=endpoint.host_key if endpoint else host.ssh_host_key,
        private_key=private_key,
        proxy=proxy,
        dial_error_limit=max(ssh.dial_error_limit, dial_attempts_for(
            max(wait_seconds, endpoint.wait_seconds if endpoint else 0))),
        per_dial_timeout=ssh.per_dial_timeout_seconds,
    )


def step_command(host: str, step: str, action: str, user_hint: str) -> str:
    # Checked first so a missing sudo rule is reported as such, naming host and step. The
    # message is one quoted word whatever the names hold.
    message = single_quoted(f"gpu-cluster: {host}: {step}: {user_hint} needs passwordless sudo")
    return (
        f"sudo -n true 2>/dev/null || {{ echo {message} >&2; exit 1; }}; "
        f"sudo -n bash -s -- {action}"
    )


def machine_env(host: Host) -> dict[str, str]:
    """MACHINE_GENERATION for every step of a host whose hardware was replaced
    (hosts[].generation): a changed input makes `pulumi up` run each step again, on the new
    machine, as an update. Not a replacement, whose delete would run on the old machine
    (gone, or answering with another host key) and fail on every `pulumi up` (pulumi-command
    issue #104)."""
    return {"MACHINE_GENERATION": str(host.generation)} if host.generation else {}


@dataclass(frozen=True)
class Ssh:
    """Where a step runs: an SSH connection, the user it logs in as, and the machine's
    bundle step, which every step run there waits for (components/hosts/bundle_step.py)."""

    connection: remote.ConnectionArgs
    user: str
    bundle: Optional[pulumi.Resource] = None


def run_step(
    about: Union[Host, str],
    step: str,
    *,
    on: Ssh,
    create: Script,
    env: Optional[Mapping[str, pulumi.Input[str]]] = None,
    delete: Optional[Script] = None,
    secret_stdout: bool = False,
    depends_on: Sequence[pulumi.Resource] = (),
    parent: pulumi.Resource,
) -> remote.Command:
    """`<about>-<step>`: runs `create` (and `delete` when the resource is destroyed).

    `about` is the host the step is about, whose machine inputs (machine_env) it gets, or
    the name of what else it is about (a pool, the VPN); `on` says where it runs (a
    worker's join token and node removal run on the controller)."""
    if isinstance(about, Host):
        env = {**(env or {}), **machine_env(about)}
        about = about.name
    if on.bundle is None:
        raise ValueError(f"{about}-{step}: the machine it runs on has no bundle step")
    stdin = envelope(about, step, create, env or {}, delete, render=bundle_stdin)
    create_command = step_command(about, step, "create", on.user)
    return remote.Command(
        f"{about}-{step}",
        connection=on.connection,
        create=create_command,
        update=create_command,
        delete=step_command(about, step, "delete", on.user) if delete else None,
        stdin=stdin,
        add_previous_output_in_env=False,
        # Steps whose stdout is a credential log only their progress (stderr).
        logging=remote.Logging.STDERR if secret_stdout else remote.Logging.STDOUT_AND_STDERR,
        opts=pulumi.ResourceOptions(
            parent=parent,
            depends_on=[on.bundle, *depends_on],
            additional_secret_outputs=["stdout"] if secret_stdout else None,
        ),
    )
