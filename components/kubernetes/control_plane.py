"""The Kubernetes control plane on one host, with the cluster CA the program owns: the
controller is installed over SSH (bare metal, hybrid) or installs itself from its user
data at boot (cloud); the admin kubeconfig is built here from the CA, never read back."""

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Optional

import pulumi
from pulumi_command import local, remote

from components.kubernetes.pki import ClusterPki
from components.distributions.base import Distribution, JoinToken
from components.hosts.bootstrap import PreparedHost
from components.kubernetes.kubeconfig import client_kubeconfig
from components.common.remote_step import Ssh, run_step
from components.common.step_text import Script, envelope
from components.kubernetes.upgrade import check_version
from config.control_plane import ControlPlaneEndpoint
from config.kubernetes import KubernetesSettings
from config.hosts import Host
from contract.names import API_ENDPOINT_OUTPUT

WAIT_FOR_API = Script("local/wait-for-api.sh")


@dataclass(frozen=True, kw_only=True)
class ControlPlaneArgs:
    host: Host
    # Where nodes reach the API (the join tokens' address), and users unless
    # `public_address` is given.
    endpoint: ControlPlaneEndpoint
    # The admin kubeconfig's and certificate's cluster name.
    cluster_name: str
    # The workers' join token expiry, how long to wait for an API the
    # controller installs at boot.
    kubernetes: KubernetesSettings
    distribution: Distribution
    pki: ClusterPki
    # How the controller gets installed: by these steps over SSH, or (None) by the host
    # itself from its user data at boot, once `booted` (the instance) exists.
    prepared: Optional[PreparedHost]
    # The address users and `pulumi up` reach the API at (an Elastic IP), when it is not
    # the host's own; it is added to the API certificate.
    public_address: Optional[pulumi.Input[str]] = None
    booted: Optional[pulumi.Resource] = None
    # The distribution's cluster_secrets, by name.
    secrets: Mapping[str, pulumi.Output[str]] = field(default_factory=dict)
    # SSH to the host that installed itself at boot (cloud): once its API answers, the
    # version check and the install step run there too, so a raised kubernetes.version
    # upgrades it as on the other layouts (cloud-init runs user data only once).
    booted_ssh: Optional[Ssh] = None


class ControlPlane(pulumi.ComponentResource):
    def __init__(self, name: str, args: ControlPlaneArgs, opts: pulumi.ResourceOptions = None):
        super().__init__("gpu-cluster:cluster:ControlPlane", name, None, opts)
        self._args = args
        self.host = args.host
        # Where nodes reach the API (the join tokens' address).
        self.node_endpoint = args.endpoint.node_url
        self.api_endpoint: pulumi.Input[str] = self.node_endpoint
        if args.public_address is not None:
            self.api_endpoint = pulumi.Output.concat("https://", args.public_address,
                                                     f":{args.endpoint.port}")
        pki = args.pki
        admin = f"{args.cluster_name}-admin"
        self.kubeconfig: pulumi.Output[str] = pulumi.Output.secret(pulumi.Output.all(
            self.api_endpoint, pki.ca_cert_pem, pki.admin.cert_pem, pki.admin.private_key_pem,
        ).apply(lambda v: client_kubeconfig(args.cluster_name, v[0], v[1], admin,
                                            v[2], v[3])))
        if args.prepared is not None:
            self.ssh = args.prepared.ssh
            self.installed: pulumi.Resource = self._create_install_controller()
            if args.distribution.controller_runs_kubelet:
                # Its kubelet restarts with new settings: nothing uses the API meanwhile.
                self.installed = self._step(
                    "apply-worker-profile", args.distribution.apply_worker_profile,
                    args.distribution.worker_profile_env(self.host),
                    depends_on=[self.installed])
        else:
            self.ssh = args.booted_ssh
            self.installed = self._create_wait_for_api()
            if self.ssh is not None:
                self.installed = self._create_install_controller(after=[self.installed])
        self._shared_token = (self._cluster_join_token()
                              if args.distribution.create_join_token is None else None)
        self.register_outputs({API_ENDPOINT_OUTPUT: self.api_endpoint,
                               "kubeconfig": self.kubeconfig})

    def _step(self, step: str, script, env: dict, about: Optional[Host] = None,
              **kwargs) -> remote.Command:
        """A step on the controller, named after the node it is about (a worker: with its
        machine inputs)."""
        return run_step(
            about or self.host.name,
            step,
            on=self.ssh,
            create=script,
            env=env,
            parent=self,
            **kwargs,
        )

    def _create_install_controller(self, after: Sequence[pulumi.Resource] = ()
                                   ) -> remote.Command:
        """The install step; `after`: what it waits for besides the host's preparation."""
        args = self._args
        ready = [args.prepared.ready] if args.prepared is not None else []
        distribution = args.distribution
        sans = [args.public_address] if args.public_address else []
        # A version bump upgrades the controller first, through this step: refused
        # before anything changes when the running cluster cannot take it.
        checked = check_version(self.host, distribution, self.ssh,
                                depends_on=[*ready, *after], parent=self)
        return self._step(
            "install-controller",
            distribution.install_controller,
            {**distribution.controller_env(self.host, args.pki.ca_cert_pem, sans),
             **distribution.ca_key_env(args.pki.ca_private_key_pem),
             **distribution.cluster_secrets_env(args.secrets)},
            # A controller that installed itself at boot goes with its instance: no reset
            # over SSH (which would hold up `pulumi destroy` when SSH is closed).
            delete=distribution.reset_node if args.prepared is not None else None,
            depends_on=[*ready, *after, checked],
        )

    def _create_wait_for_api(self) -> local.Command:
        """Runs where `pulumi up` runs: waits until the API the instance installs at boot
        answers, with the admin certificate (the distributions allow no anonymous requests)."""
        args = self._args
        stdin = envelope(self.host.name, "wait-for-api", WAIT_FOR_API, {
            "API_SERVER": self.api_endpoint,
            "API_CA_CERT": args.pki.ca_cert_pem,
            "API_CLIENT_CERT": args.pki.admin.cert_pem,
            "API_CLIENT_KEY": args.pki.admin.private_key_pem,
            "API_READY_TIMEOUT": str(args.kubernetes.api_ready_timeout_seconds),
        })
        return local.Command(
            f"{self.host.name}-wait-for-api",
            create="bash -s -- create",
            stdin=stdin,
            logging=local.Logging.STDERR,
            opts=pulumi.ResourceOptions(parent=self, depends_on=[args.booted]),
        )

    def join_token_for(self, node: Host, after: Sequence[pulumi.Resource] = ()) -> JoinToken:
        """The token `node` joins with: its own, issued once `after` is done (again for a
        replaced machine), or the one every node shares, usable once the control plane is
        installed."""
        if self._shared_token is not None:
            return self._shared_token
        return self.create_join_token(node, self._args.kubernetes.worker_token_expiry, after)

    def _cluster_join_token(self) -> JoinToken:
        """The distribution's one join token, from the CA and the cluster's secrets; it
        waits for the control plane (a pool's instances use it as soon as it is stored)."""
        args = self._args
        names = list(args.secrets)
        value = pulumi.Output.all(
            args.pki.ca_cert_pem, self.installed.urn, *(args.secrets[n] for n in names),
        ).apply(lambda v: args.distribution.shared_join_token(
            self.node_endpoint, v[0], dict(zip(names, v[2:]))))
        return JoinToken(pulumi.Output.secret(value), self.installed.urn)

    def service_account_key(self) -> pulumi.Output[str]:
        """The public key the API server signs service-account tokens with, read on the
        controller once it is installed (the public issuer's key set)."""
        step = self._step("service-account-key", self._args.distribution.service_account_key,
                          {}, depends_on=[self.installed])
        return step.stdout.apply(lambda text: text.strip() + "\n")

    def create_join_token(self, node: Host, expiry: str,
                          after: Sequence[pulumi.Resource] = ()) -> JoinToken:
        """A worker-role join token for one worker, issued on the controller over SSH once
        `after` (the worker's own preparation) is done: right before its join, so a host
        that takes long to prepare does not get a token that expires before it joins."""
        step = self._step(
            "create-join-token",
            self._args.distribution.create_join_token,
            {"TOKEN_EXPIRY": expiry},
            about=node,
            secret_stdout=True,
            depends_on=[self.installed, *after],
        )
        return JoinToken(pulumi.Output.secret(step.stdout.apply(lambda text: text.strip())),
                         step.urn)
