"""The Kubernetes control plane, with the cluster CA the program owns: the first controller
is installed over SSH (bare metal, hybrid) or installs itself from its user data at boot
(cloud), and on bare metal the others join it over SSH, one after the other; the admin
kubeconfig is built here from the CA, never read back.

With several controllers, each controller's install step (the join, later each upgrade)
waits for the one before it and for its own etcd-quorum check, so one etcd member at a
time is down and only while every other is healthy; the workers wait for the last (a
kubelet must never be newer than the oldest API server: kubernetes.io/releases/
version-skew-policy, "kubelet"). Once a controller joined, `<host>-etcd-member` on the first waits for
its member, and its delete takes the member out of etcd before the controller's own
reset runs (Pulumi deletes a resource before what it depends on)."""

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Optional

import pulumi
from pulumi_command import local, remote

from components.kubernetes.pki import ClusterPki
from components.distributions.base import Distribution, JoinToken
from components.hosts.bootstrap import PreparedHost
from components.hosts.vip import controller_keepalived_conf
from components.kubernetes.kubeconfig import client_kubeconfig
from components.common.remote_step import Ssh, run_step
from components.common.step_text import Script, envelope
from components.kubernetes.upgrade import check_version, kubernetes_version
from config.control_plane import ControlPlaneEndpoint
from config.kubernetes import KubernetesSettings
from config.hosts import Host
from contract.names import API_ENDPOINT_OUTPUT

WAIT_FOR_API = Script("local/wait-for-api.sh")
KEEPALIVED = Script("vip/keepalived.sh")
KEEPALIVED_REMOVE = Script("vip/keepalived-remove.sh")
# A controller join token is used minutes after it is made, by the step right after (or
# the boot of the instance launched right after): an hour covers that, and what the state
# keeps of it is useless afterwards.
CONTROLLER_TOKEN_EXPIRY = "1h"
# How long the first controller waits for the etcd member of one that joins at boot: the
# instance's whole boot (host preparation, a reboot, the install and its API's readiness).
JOIN_AT_BOOT_SECONDS = 1800


@dataclass(frozen=True, kw_only=True)
class BootedController:
    """A controller that installs itself at boot (cloud): its instance, and SSH to it, so a
    raised kubernetes.version upgrades it over SSH as on the other layouts."""

    instance: pulumi.Resource
    ssh: Ssh


@dataclass(frozen=True)
class JoiningController:
    """A controller that joins the first one after the one before it: over SSH once
    `prepared` (bare metal, hybrid), or at boot (cloud) once `launch(after, join_token)`
    started its instance after `after`, its boot reading `join_token` (a token the first
    issued, where the distribution issues one)."""

    host: Host
    prepared: Optional[PreparedHost] = None
    launch: Optional[Callable[[Sequence[pulumi.Resource], Optional[pulumi.Output[str]]],
                              BootedController]] = None


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
    # The controllers after the first, in config order (endpoint.controller_addresses):
    # all prepared, or (with `booted`) all launched.
    joining: Sequence[JoiningController] = ()
    # Names of the endpoint made at `up` (a load balancer's DNS name), in every
    # controller's API certificate.
    endpoint_names: Sequence[pulumi.Input[str]] = ()


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
        # The controllers reached over SSH, in config order, with where their steps run.
        self.over_ssh: list[tuple[Host, Ssh]] = []
        if args.prepared is not None:
            self.ssh = args.prepared.ssh
            # With several controllers: the last one's, which the workers wait for.
            self.installed: pulumi.Resource = self._install(args.host, args.prepared)
            for joining in args.joining:
                self.installed = self._install(joining.host, joining.prepared,
                                               after=[self.installed])
            if args.joining and args.public_address is not None:
                # `pulumi up` reaches the API through a load balancer, which forwards only
                # once its health checks passed.
                self.installed = self._create_wait_for_api([self.installed])
        else:
            self.ssh = args.booted_ssh
            self.installed = self._create_wait_for_api([args.booted])
            booted = [(self.host, self.ssh, None)]
            for joining in args.joining:
                booted.append(self._launch(joining))
            if self.ssh is not None:
                # Then, with every member in, each install step over SSH, one after the
                # other: a no-op the first time, the upgrades after.
                for host, ssh, token in booted:
                    self.over_ssh.append((host, ssh))
                    self.installed = self._create_install_controller(
                        host, ssh, [self.installed], booted=True, token=token)
        self._shared_token = (self._cluster_join_token()
                              if args.distribution.create_join_token is None else None)
        self.register_outputs({API_ENDPOINT_OUTPUT: self.api_endpoint,
                               "kubeconfig": self.kubeconfig})

    def _step(self, step: str, script, env: dict, about: Optional[Host] = None,
              on: Optional[Ssh] = None, **kwargs) -> remote.Command:
        """A step on the first controller, or `on` another, named after the node it is
        about (a worker: with its machine inputs)."""
        return run_step(
            about or self.host.name,
            step,
            on=on or self.ssh,
            create=script,
            env=env,
            parent=self,
            **kwargs,
        )

    def _is_first(self, host: Host) -> bool:
        """Whether `host` is the controller that initialises the cluster."""
        return host.name == self.host.name

    def _install(self, host: Host, prepared: PreparedHost,
                 after: Sequence[pulumi.Resource] = ()) -> pulumi.Resource:
        """A controller installed over SSH once `prepared` and `after` (the controller
        before it): its install step (the first initialises, the others join), the kubelet
        settings where it runs a kubelet, and on the first the joined one's etcd member."""
        distribution = self._args.distribution
        self.over_ssh.append((host, prepared.ssh))
        installed = self._create_install_controller(host, prepared.ssh,
                                                    [prepared.ready, *after])
        if distribution.controller_profile_step:
            # Its kubelet restarts with new settings: nothing uses the API meanwhile.
            installed = self._step(
                "apply-worker-profile", distribution.apply_worker_profile,
                distribution.worker_profile_env(host), about=host, on=prepared.ssh,
                depends_on=[installed])
        if not self._is_first(host):
            installed = self._step(
                "etcd-member", distribution.etcd_member,
                self._member_env(host), about=host, delete=distribution.leave_etcd,
                depends_on=[installed])
        return installed

    def _launch(self, joining: JoiningController
                ) -> tuple[Host, Ssh, Optional[JoinToken]]:
        """A controller that joins at boot, once the one before it joined: its token
        issued on the first where the distribution issues one, its instance launched with
        it, then on the first its etcd member waited for (its boot included)."""
        distribution, host = self._args.distribution, joining.host
        before = self._retired(host, [self.installed])
        issued = None
        if distribution.create_controller_token is not None:
            issued = self._create_controller_token(host, before)
            before.append(issued.step)
        booted = joining.launch(before, issued.token.value if issued else None)
        self.installed = self._step(
            "etcd-member", distribution.etcd_member,
            {**self._member_env(host), "MEMBER_WAIT_SECONDS": str(JOIN_AT_BOOT_SECONDS)},
            about=host, delete=distribution.leave_etcd, depends_on=[booted.instance])
        return host, booted.ssh, issued and issued.token

    def _retired(self, host: Host, before: Sequence[pulumi.Resource]) -> list[pulumi.Resource]:
        """`before`, and for a new machine under a joining controller's name
        (`generation`) the old one's etcd member and node taken out on the first (again at
        each raise: MACHINE_GENERATION), or the new one could not join under the same name
        and address."""
        if not host.generation:
            return list(before)
        return [*before, self._step("retire-member", self._args.distribution.leave_etcd,
                                    self._member_env(host), about=host, depends_on=before)]

    def _member_env(self, host: Host) -> dict[str, str]:
        """The inputs of a step on the first controller about `host`'s etcd member."""
        return {"NODE_NAME": self.host.name, "MEMBER_NODE": host.name,
                "MEMBER_ADDRESS": host.address}

    def _several_controllers(self, host: Host, ssh: Ssh, before: Sequence[pulumi.Resource]
                             ) -> list[pulumi.Resource]:
        """What a controller's install waits for beyond `before` when there are several:
        the VIP's keepalived where the distribution holds none itself, and the etcd-quorum
        check (again with every new version: one member down at a time)."""
        args = self._args
        endpoint, distribution = args.endpoint, args.distribution
        if endpoint.replicas == 1:
            return []
        steps = []
        if endpoint.vrrp is not None and not distribution.serves_vip:
            steps.append(self._step(
                "control-plane-vip", KEEPALIVED,
                {"KEEPALIVED_CONF": controller_keepalived_conf(endpoint, host)},
                about=host, on=ssh, delete=KEEPALIVED_REMOVE, depends_on=before[:1]))
        steps.append(self._step(
            "etcd-quorum", distribution.etcd_quorum,
            {"NODE_NAME": host.name, "NODE_ADDRESS": host.address,
             "EXPECTED_MEMBERS": str(endpoint.replicas),
             "KUBERNETES_VERSION": kubernetes_version(distribution)},
            about=host, on=ssh, depends_on=before))
        return steps

    def _create_install_controller(self, host: Host, ssh: Ssh,
                                   before: Sequence[pulumi.Resource], booted: bool = False,
                                   token: Optional[JoinToken] = None) -> remote.Command:
        """`host`'s install step, after `before` (its preparation, the controller before
        it). The first controller gets the CA key and initialises the cluster; another
        joins it, with a token from the first where the distribution issues one. One
        `booted` installed itself at boot (with `token`, where the distribution issues one):
        this step upgrades it, and its delete resets nothing."""
        args = self._args
        distribution = args.distribution
        sans = [*([args.public_address] if args.public_address else []),
                *args.endpoint_names]
        before = [*before, *self._several_controllers(host, ssh, before)]
        # A version bump upgrades the controller first, through this step: refused
        # before anything changes when the running cluster cannot take it.
        checked = check_version(host, distribution, ssh, depends_on=before, parent=self)
        if self._is_first(host):
            access = distribution.ca_key_env(args.pki.ca_private_key_pem)
        else:
            if not booted:
                before = self._retired(host, before)
                if distribution.create_controller_token is not None:
                    issued = self._create_controller_token(host, before)
                    before, token = [*before, issued.step], issued.token
            access = distribution.controller_join_env(token)
        return self._step(
            "install-controller",
            distribution.install_controller,
            {**distribution.controller_env(host, args.pki.ca_cert_pem, sans),
             **access,
             **distribution.cluster_secrets_env(args.secrets)},
            about=host,
            on=ssh,
            # A controller that installed itself at boot goes with its instance: no reset
            # over SSH (which would hold up `pulumi destroy` when SSH is closed).
            delete=None if booted else distribution.reset_node,
            depends_on=[*before, checked],
        )

    def _create_controller_token(self, host: Host, before: Sequence[pulumi.Resource]
                                 ) -> "_IssuedToken":
        """A controller join token for `host`, issued on the first controller right before
        its join (after the controller before it is in)."""
        step = self._step(
            "create-controller-token", self._args.distribution.create_controller_token,
            {"TOKEN_EXPIRY": CONTROLLER_TOKEN_EXPIRY}, about=host, secret_stdout=True,
            depends_on=before)
        value = pulumi.Output.secret(step.stdout.apply(lambda text: text.strip()))
        return _IssuedToken(JoinToken(value, step.urn), step)

    def _create_wait_for_api(self, after: Sequence[pulumi.Resource]) -> local.Command:
        """Runs where `pulumi up` runs, once `after`: waits until the API answers where it
        reaches it (one the instance installs at boot, or behind a load balancer), with the
        admin certificate (the distributions allow no anonymous requests)."""
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
            opts=pulumi.ResourceOptions(parent=self, depends_on=list(after)),
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


@dataclass(frozen=True)
class _IssuedToken:
    token: JoinToken
    step: remote.Command
