"""`<host>-authorized-keys`: the public keys of ssh.authorizedKeys, kept in the SSH user's
authorized_keys on a host reached over SSH (how an SSH key is rotated: README, "Rotating
credentials"). Not a preparation step (components/hosts/steps.py): a boot needs no extra
keys, and the cloud pools' user data has no room for it."""

from collections.abc import Sequence

import pulumi
from pulumi_command import remote

from components.common.remote_step import Script, Ssh, run_step

AUTHORIZED_KEYS = Script("authorized-keys.sh")


def authorized_keys_step(host: str, on: Ssh, keys: Sequence[str],
                         depends_on: Sequence[pulumi.Resource],
                         parent: pulumi.Resource) -> remote.Command:
    """Always made, so that emptying the list empties the block. Its inputs are the keys
    and the user only: a changed key runs this step again and no other."""
    return run_step(host, "authorized-keys", on=on, create=AUTHORIZED_KEYS,
                    env={"SSH_USER": on.user, "AUTHORIZED_KEYS": "\n".join(keys)},
                    depends_on=depends_on, parent=parent)
