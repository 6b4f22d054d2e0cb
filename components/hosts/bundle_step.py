"""The step bundle on a machine reached over SSH: `<machine>-bundle-upload` copies its
tarball to the login user's home over SFTP, then `<machine>-install-bundle` checks it and
installs it as root (bundle/receive.sh, then the bundle's bundle/install.sh). Every other
step run on the machine waits for it (Ssh.bundle).

The upload is a pulumi-command CopyToRemote of a FileAsset: the state keeps the tarball's
path and hash, not its bytes; Update copies again when the hash or remote path changed,
and there is no Delete (pulumi-command v1.2.1 provider/pkg/provider/remote/
copyController.go). It needs the host's sshd to offer SFTP, as Debian's and Ubuntu's
sshd_config do (`Subsystem sftp /usr/lib/openssh/sftp-server`)."""

import dataclasses
from collections.abc import Sequence

import pulumi
from pulumi_command import remote

from components.common.bundle import Bundle, step_bundle
from components.common.remote_step import Ssh, step_command
from components.common.step_text import Script, render_envelope

# Sent whole: it is what checks the bundle, so it cannot come from it.
RECEIVE = Script("bundle/receive.sh", standalone=True)
STEP = "install-bundle"


def upload_path(bundle: Bundle) -> str:
    """Where the tarball lands, relative to the login user's home (SFTP's and the SSH
    command's working folder), so no other user can put a file there first."""
    return f".cache/gpu-cluster/bundle-{bundle.digest}.tar.gz"


def with_bundle(name: str, ssh: Ssh, generation: int, depends_on: Sequence[pulumi.Resource],
                parent: pulumi.Resource, bundle: Bundle = None) -> Ssh:
    """`ssh` with its machine's bundle step; `generation` (hosts[].generation) uploads
    and installs again on a replaced machine."""
    bundle = bundle or step_bundle()
    upload = remote.CopyToRemote(
        f"{name}-bundle-upload",
        connection=ssh.connection,
        source=pulumi.FileAsset(str(bundle.tarball_path())),
        remote_path=upload_path(bundle),
        # A replacement only copies again: CopyToRemote deletes nothing.
        triggers=[generation] if generation else None,
        opts=pulumi.ResourceOptions(parent=parent, depends_on=list(depends_on)))
    env = {"BUNDLE_TARBALL": upload_path(bundle), "BUNDLE_SHA256": bundle.tarball_sha256,
           "BUNDLE_DIGEST": bundle.digest}
    if generation:
        env["MACHINE_GENERATION"] = str(generation)
    command = step_command(name, STEP, "create", ssh.user)
    install = remote.Command(
        f"{name}-{STEP}",
        connection=ssh.connection,
        create=command,
        update=command,
        stdin=render_envelope(name, STEP, RECEIVE, env),
        add_previous_output_in_env=False,
        logging=remote.Logging.STDOUT_AND_STDERR,
        opts=pulumi.ResourceOptions(parent=parent, depends_on=[upload]))
    return dataclasses.replace(ssh, bundle=install)
