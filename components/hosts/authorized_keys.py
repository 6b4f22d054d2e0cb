"""`<host>-authorized-keys`: the public keys of ssh.authorizedKeys, kept in the SSH user's
authorized_keys on a host reached over SSH, and those of ssh.revokedKeys taken out (how an
SSH key is rotated: docs/day-2.md, "Rotating credentials"). Not a preparation step (components/hosts/steps.py): a boot needs no extra
keys, and the cloud pools' user data has no room for it."""

from collections.abc import Sequence

import pulumi
from pulumi_command import remote

from components.common.remote_step import Ssh, run_step
from components.common.step_text import Script
from config.hosts import Host
from config.model import SshSettings

AUTHORIZED_KEYS = Script("authorized-keys.sh", checks=True)


def authorized_keys_step(host: Host, on: Ssh, ssh: SshSettings,
                         depends_on: Sequence[pulumi.Resource],
                         parent: pulumi.Resource) -> remote.Command:
    """Always made, so that emptying the list empties the block. Its inputs are the keys
    and the user only: a changed key runs this step again and no other."""
    revoked = {"REVOKED_KEYS": "\n".join(ssh.revoked_keys)} if ssh.revoked_keys else {}
    return run_step(host, "authorized-keys", on=on, create=AUTHORIZED_KEYS,
                    # A replaced machine (hosts[].generation) gets the keys anew.
                    env={"SSH_USER": on.user, "AUTHORIZED_KEYS": "\n".join(ssh.authorized_keys),
                         **revoked},
                    depends_on=depends_on, parent=parent)
