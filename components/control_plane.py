"""The Kubernetes control plane on one host: installs the controller, reads the admin
kubeconfig and issues a short-lived join token per worker, all without a manual step."""

from dataclasses import dataclass
from typing import Optional

import pulumi
import yaml
from pulumi_command import remote

from components.distributions.k0s import K0s
from components.host_bootstrap import HostBootstrap
from components.remote_step import run_step
from config.model import Host, StackConfig


@dataclass
class ControlPlaneArgs:
    host: Host
    settings: StackConfig
    distribution: K0s
    bootstrap: HostBootstrap
    # The address users and `pulumi up` reach the API at (an Elastic IP), when it is not
    # the host's own; it is added to the API certificate.
    public_address: Optional[pulumi.Input[str]] = None


class ControlPlane(pulumi.ComponentResource):
    def __init__(self, name: str, args: ControlPlaneArgs, opts: pulumi.ResourceOptions = None):
        super().__init__("gpu-cluster:cluster:ControlPlane", name, None, opts)
        self._args = args
        self.host = args.host
        self.ssh = args.bootstrap.ssh
        port = args.settings.kubernetes.api_port
        self.api_endpoint: pulumi.Input[str] = f"https://{args.host.address}:{port}"
        if args.public_address is not None:
            self.api_endpoint = pulumi.Output.concat("https://", args.public_address, f":{port}")

        self.installed = self._create_install_controller()
        read = self._create_read_admin_kubeconfig()
        self.kubeconfig: pulumi.Output[str] = pulumi.Output.secret(
            pulumi.Output.all(read.stdout, self.api_endpoint).apply(
                lambda values: admin_kubeconfig(values[0], values[1], args.settings.cluster_name)
            )
        )
        self.register_outputs({"apiEndpoint": self.api_endpoint, "kubeconfig": self.kubeconfig})

    def _step(self, step: str, script, env: dict, about: str = None,
              **kwargs) -> remote.Command:
        """A step on the controller, named after the node (or pool) it is about."""
        return run_step(
            about or self.host.name,
            step,
            on=self.ssh,
            create=script,
            env=env,
            parent=self,
            **kwargs,
        )

    def _create_install_controller(self) -> remote.Command:
        distribution = self._args.distribution
        return self._step(
            "install-controller",
            distribution.install_controller,
            distribution.controller_env(
                self.host, [self._args.public_address] if self._args.public_address else []),
            delete=distribution.reset_node,
            depends_on=[self._args.bootstrap.ready],
        )

    def _create_read_admin_kubeconfig(self) -> remote.Command:
        return self._step(
            "read-admin-kubeconfig",
            self._args.distribution.read_admin_kubeconfig,
            {},
            secret_stdout=True,
            depends_on=[self.installed],
        )

    def create_join_token(self, node: str, expiry: str) -> pulumi.Output[str]:
        """A worker-role join token for one worker (or pool), issued on the controller."""
        step = self._step(
            "create-join-token",
            self._args.distribution.create_join_token,
            {"TOKEN_EXPIRY": expiry},
            about=node,
            secret_stdout=True,
            depends_on=[self.installed],
        )
        return pulumi.Output.secret(step.stdout.apply(lambda text: text.strip()))


def admin_kubeconfig(text: str, api_endpoint: str, cluster_name: str) -> str:
    """The distribution's admin kubeconfig, pointed at the API endpoint users reach and
    named after the cluster so it merges cleanly with other kubeconfigs."""
    document = yaml.safe_load(text)
    cluster = dict(document["clusters"][0]["cluster"], server=api_endpoint)
    user = document["users"][0]["user"]
    admin = f"{cluster_name}-admin"
    merged = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": cluster_name, "cluster": cluster}],
        "users": [{"name": admin, "user": user}],
        "contexts": [{"name": admin, "context": {"cluster": cluster_name, "user": admin}}],
        "current-context": admin,
        "preferences": {},
    }
    return yaml.safe_dump(merged, sort_keys=False)
