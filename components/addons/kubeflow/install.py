"""Kubeflow from the pinned kubeflow/manifests release, installed in stages so one
`pulumi up` succeeds: each stage is a kustomize overlay (components/addons/kubeflow/overlay.py)
applied by the Kubernetes provider, and the next stage waits until every Deployment and
Job of the previous one is ready. The users' password hashes, the connectors' secrets and
the OIDC and cookie secrets are Secrets the program creates; upstream's published values
are never applied."""

import ipaddress
import os
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

import bcrypt
import pulumi
import pulumi_kubernetes as k8s
import pulumi_random as random
import pulumi_tls as tls
from pydantic import SecretStr

from components.common import kube
from components.addons.kubeflow import catalog
from components.addons.kubeflow import overlay, sources
from components.addons.kubeflow.dex import StaticLogin, connector_env
from components.common.remote_step import Ssh, run_step
from components.common.certificates import ecdsa_key
from components.common.step_text import Script
from config.access import User
from config.kubeflow import KubeflowAccess, KubeflowSettings
from config.hosts import Host

PROJECT_DIR = Path(__file__).resolve().parents[3]
# The overlays live in the (git-ignored) build folder, at a path relative to the project
# so the provider's input is the same on every machine.
OVERLAYS_DIR = "build/{stack}/kubeflow"
PORT_FORWARD = Script("kubeflow/port-forward.sh")
PORT_FORWARD_REMOVE = Script("kubeflow/port-forward-remove.sh")
BCRYPT_COST = 12
# The self-signed gateway certificate: a `pulumi up` in its last 30 days makes a new one.
SELF_SIGNED_VALIDITY_HOURS = 365 * 24
SELF_SIGNED_EARLY_RENEWAL_HOURS = 30 * 24
PLAIN_HTTP_WARNING = (
    "Kubeflow is served over plain HTTP at {url} (kubeflow.access.tls.mode is off): the "
    "password and session cookies cross the network unencrypted, and the Jupyter, Volumes "
    "and Tensorboards web apps run with their Secure cookies turned off. Use selfSigned or "
    "certificate unless the network path is trusted.")
SHARED_USER_WARNING = (
    "kubeflow.user is deprecated: one Dex login ({email}, password gpu-cluster:kubeflowPassword) "
    "that whoever knows the password shares. It owns its own profile only, no team's; give each "
    "access.users entry an email (its own login) and remove kubeflow.user and kubeflowPassword.")
_BCRYPT_ALPHABET = bytes.maketrans(
    b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/",
    b"./ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789")


@dataclass(frozen=True, kw_only=True)
class KubeflowArgs:
    kubeflow: KubeflowSettings
    # gpu-cluster:kubeflowPassword (or its bcrypt hash), with the deprecated kubeflow.user.
    password: Optional[SecretStr]
    # In the self-signed certificate's subject.
    cluster_name: str
    provider: k8s.Provider
    # The default StorageClass Kubeflow's volumes are claimed on (the add-ons' provider
    # waits for the nodes).
    depends_on: list
    # gpu-cluster:kubeflowTlsKey, with kubeflow.access.tls.mode certificate.
    tls_key: Optional[SecretStr] = None
    # The addresses of the configured hosts that run workloads: nodePort reaches the
    # gateway at any of them.
    workload_addresses: Sequence[str] = ()
    # aws.adminCidrs: who may reach a load balancer when kubeflow.access.sourceRanges
    # is empty.
    admin_cidrs: Sequence[str] = ()
    # The controller and its SSH connection, where the portForward unit runs, with the
    # distribution's kubectl there and the unit of its controller service.
    controller: Optional[Host] = None
    controller_ssh: Optional[Ssh] = None
    controller_kubectl: str = ""
    controller_service: str = ""
    # access.users: those with an email log in, with their hash from
    # gpu-cluster:kubeflowPasswordHashes unless kubeflow.connectors are configured.
    users: Sequence[User] = ()
    password_hashes: Optional[dict[str, SecretStr]] = None
    # gpu-cluster:kubeflowConnectorSecrets: connector id -> secret.
    connector_secrets: Optional[dict[str, SecretStr]] = None


class Kubeflow(pulumi.ComponentResource):
    def __init__(self, name: str, args: KubeflowArgs, opts: pulumi.ResourceOptions = None):
        super().__init__("gpu-cluster:addons:Kubeflow", name, None, opts)
        self._name, self._args = name, args
        kubeflow = args.kubeflow
        self.url = kubeflow_url(kubeflow.access, args.workload_addresses, args.controller)
        # The self-signed certificate users trust (None with tls certificate or off).
        self.tls_certificate: Optional[pulumi.Output[str]] = None
        if kubeflow.access.tls.mode == "off":
            pulumi.log.warn(PLAIN_HTTP_WARNING.format(url=self.url), resource=self)
        if kubeflow.user is not None:
            pulumi.log.warn(SHARED_USER_WARNING.format(email=kubeflow.user.email), resource=self)
        dex_secrets = self._dex_secrets()
        self.overlay_dirs = write_overlays(kubeflow, args.admin_cidrs, self.logins, self.url)
        previous: list = list(args.depends_on)
        self.stages: dict[str, k8s.kustomize.v2.Directory] = {}
        for stage in catalog.stages_for(kubeflow):
            if stage.name == catalog.AUTH.name:
                previous += self._create_auth_secrets(dex_secrets)
            if stage.name == catalog.ISTIO.name and kubeflow.access.tls.mode != "off":
                # In istio-system (istio-crds made it) before the gateway starts.
                previous.append(self._create_gateway_tls_secret())
            self.stages[stage.name] = k8s.kustomize.v2.Directory(
                f"{name}-{stage.name}",
                directory=self.overlay_dirs[stage.name],
                opts=pulumi.ResourceOptions(parent=self, provider=args.provider,
                                            depends_on=previous))
            previous = [self.stages[stage.name]]
        self._roll_dex_on_new_password(dex_secrets)
        if kubeflow.access.mode == "portForward":
            self._create_port_forward()
        # The stage that installs the Profile CRD and controller (with the apps).
        self.profiles_installed = [self.stages[catalog.APPS]] if catalog.APPS in self.stages \
            else []
        self.register_outputs({"url": self.url, "tlsCertificate": self.tls_certificate})

    @property
    def logins(self) -> list[StaticLogin]:
        """The users who log in with a Dex password of their own (none with connectors)."""
        if self._args.kubeflow.connectors:
            return []
        return [StaticLogin(user.name, user.email) for user in self._args.users if user.email]

    def _dex_secrets(self) -> dict[str, pulumi.Output[str]]:
        """Dex's environment from the dex-passwords Secret: each login's hash, each
        connector's secret (the config checks made sure every one is there)."""
        args = self._args
        hashes, secrets = args.password_hashes or {}, args.connector_secrets or {}
        values = {login.env: pulumi.Output.secret(hashes[login.name].get_secret_value())
                  for login in self.logins}
        values.update({connector_env(connector.id): pulumi.Output.secret(
            secrets[connector.id].get_secret_value()) for connector in args.kubeflow.connectors})
        if args.kubeflow.user is not None:
            values["DEX_USER_PASSWORD"] = self._dex_password_hash()
        return values

    def _dex_password_hash(self) -> pulumi.Output[str]:
        """Dex's bcrypt hash of the configured password (a configured hash as it is). Its
        salt is random per stack, kept as secret state, so the hash is stable across runs
        and nothing but bcrypt itself tests a guess."""
        password = self._args.password.get_secret_value()
        if password.startswith("$2"):
            return pulumi.Output.secret(password)
        salt = random.RandomBytes(f"{self._name}-dex-password-salt", length=16,
                                  opts=pulumi.ResourceOptions(parent=self))
        return pulumi.Output.secret(salt.base64.apply(
            lambda value: dex_password_hash(password, value)))

    def _roll_dex_on_new_password(self, dex_secrets: dict[str, pulumi.Output[str]]) -> None:
        """Dex reads the hashes and secrets from its environment at start: a new one
        restarts it. The pod template's annotation is a random id renewed with them, not
        derived from them, so the cluster publishes nothing about a password."""
        keepers = {"passwordHash": dex_secrets["DEX_USER_PASSWORD"]} \
            if set(dex_secrets) == {"DEX_USER_PASSWORD"} else dict(dex_secrets)
        version = random.RandomId(f"{self._name}-dex-password-version", byte_length=8,
                                  keepers=keepers,
                                  opts=pulumi.ResourceOptions(parent=self))
        k8s.apps.v1.DeploymentPatch(
            f"{self._name}-dex-password-rollout",
            metadata={"name": "dex", "namespace": "auth"},
            spec={"template": {"metadata": {"annotations": {
                "gpu-cluster/dex-password-version": version.hex}}}},
            opts=kube.k8s_provider_opts(self._args.provider, self,
                                        [self.stages[catalog.AUTH.name]]))

    def _create_gateway_tls_secret(self) -> pulumi.Resource:
        """The gateway's certificate and key: from config, or made here for the names
        users open (served by the gateway as Kubeflow's Gateway names it)."""
        tls_settings = self._args.kubeflow.access.tls
        if tls_settings.mode == "certificate":
            certificate = tls_settings.certificate
            key = pulumi.Output.secret(self._args.tls_key.get_secret_value())
        else:
            certificate, key = self._self_signed_certificate()
            self.tls_certificate = certificate
        opts = kube.k8s_provider_opts(self._args.provider, self,
                                      [self.stages[catalog.ISTIO_CRDS.name]])
        return kube.apply({"apiVersion": "v1", "kind": "Secret", "type": "kubernetes.io/tls",
                           "metadata": {"name": overlay.GATEWAY_TLS_SECRET,
                                        "namespace": overlay.GATEWAY_NAMESPACE},
                           "stringData": {"tls.crt": certificate, "tls.key": key}}, opts)

    def _self_signed_certificate(self) -> tuple[pulumi.Output[str], pulumi.Output[str]]:
        """A server certificate (not a CA: browsers refuse a CA certificate as a server's)
        for every name that reaches the gateway, so one trusted file works for all."""
        args = self._args
        dns_names, ip_addresses = gateway_names(args.kubeflow.access, args.workload_addresses,
                                                args.controller)
        mine = pulumi.ResourceOptions(parent=self)
        key = ecdsa_key(f"{self._name}-gateway-tls", mine)
        cert = tls.SelfSignedCert(
            f"{self._name}-gateway-tls-cert",
            private_key_pem=key.private_key_pem,
            subject=tls.SelfSignedCertSubjectArgs(
                common_name=(dns_names + ip_addresses)[0][:64],
                organization=f"gpu-cluster {args.cluster_name}"),
            dns_names=dns_names, ip_addresses=ip_addresses,
            allowed_uses=["digital_signature", "server_auth"],
            validity_period_hours=SELF_SIGNED_VALIDITY_HOURS,
            early_renewal_hours=SELF_SIGNED_EARLY_RENEWAL_HOURS,
            opts=mine)
        return cert.cert_pem, pulumi.Output.secret(key.private_key_pem)

    def _create_auth_secrets(self, dex_secrets: dict[str, pulumi.Output[str]]
                             ) -> list[pulumi.Resource]:
        """Dex's password hashes and connector secrets, and the OIDC client and cookie
        secrets, in the namespaces the istio-crds stage created, before Dex and
        oauth2-proxy start."""
        opts = kube.k8s_provider_opts(self._args.provider, self,
                                      [self.stages[catalog.ISTIO_CRDS.name]])
        mine = pulumi.ResourceOptions(parent=self)
        client = random.RandomBytes(f"{self._name}-oidc-client-secret", length=24, opts=mine)
        # oauth2-proxy wants 16, 24 or 32 bytes; 32 hex characters are 32 bytes.
        cookie = random.RandomBytes(f"{self._name}-cookie-secret", length=16, opts=mine)
        client_id = "kubeflow-oidc-authservice"

        def secret(name: str, namespace: str, data: dict) -> pulumi.Resource:
            return kube.apply({"apiVersion": "v1", "kind": "Secret", "type": "Opaque",
                               "metadata": {"name": name, "namespace": namespace},
                               "stringData": data}, opts)

        return [
            secret(overlay.DEX_PASSWORDS_SECRET, "auth", dex_secrets),
            secret(overlay.DEX_CLIENT_SECRET, "auth",
                   {"OIDC_CLIENT_ID": client_id, "OIDC_CLIENT_SECRET": client.hex}),
            secret(overlay.OAUTH2_PROXY_SECRET, "oauth2-proxy",
                   {"client-id": client_id, "client-secret": client.hex,
                    "cookie-secret": cookie.hex}),
        ]

    def _create_port_forward(self) -> None:
        """A systemd unit on the controller forwarding to the gateway (seed 000)."""
        access = self._args.kubeflow.access
        run_step(self._args.controller.name, "kubeflow-port-forward",
                 on=self._args.controller_ssh, create=PORT_FORWARD, delete=PORT_FORWARD_REMOVE,
                 env={"LISTEN_ADDRESS": access.listen_address, "LISTEN_PORT": str(access.port),
                      "GATEWAY_NAMESPACE": overlay.GATEWAY_NAMESPACE,
                      "GATEWAY_SERVICE": overlay.GATEWAY_SERVICE,
                      "GATEWAY_PORT": str(overlay.gateway_port(self._args.kubeflow)),
                      "KUBECTL": self._args.controller_kubectl,
                      "CONTROLLER_SERVICE": self._args.controller_service},
                 depends_on=[self.stages[catalog.ISTIO.name]], parent=self)


def kubeflow_url(access: KubeflowAccess, workload_addresses: Sequence[str],
                 controller: Optional[Host]) -> str:
    return access.url(list(workload_addresses), controller.address if controller else None)


def gateway_names(access: KubeflowAccess, workload_addresses: Sequence[str],
                  controller: Optional[Host]) -> tuple[list[str], list[str]]:
    """(DNS names, IP addresses) users reach the gateway by: `hostname`, the URL's host,
    and for nodePort every workload node (any node answers), for portForward the
    forwarder's address."""
    workloads = list(workload_addresses)
    controller_address = controller.address if controller else None
    names = [access.url_host(workloads, controller_address)]
    if access.mode == "nodePort":
        names += workloads
    elif access.mode == "portForward":
        names += ["localhost", "127.0.0.1"] if access.listen_address == "127.0.0.1" \
            else [controller_address]
    dns_names, ip_addresses = [], []
    for name in dict.fromkeys(n for n in names if n):
        try:
            ipaddress.ip_address(name)
            ip_addresses.append(name)
        except ValueError:
            dns_names.append(name)
    return dns_names, ip_addresses


def dex_password_hash(password: str, salt_base64: str) -> str:
    """bcrypt of `password` at BCRYPT_COST with the salt's first 128 bits."""
    salt = salt_base64.encode().translate(_BCRYPT_ALPHABET)[:22]
    return bcrypt.hashpw(password.encode(), f"$2b${BCRYPT_COST:02d}$".encode() + salt).decode()


def write_overlays(kubeflow: KubeflowSettings, admin_cidrs: Sequence[str],
                   logins: Sequence[StaticLogin] = (), public_url: str = "") -> dict[str, str]:
    """Writes each stage's overlay under build/<stack>/kubeflow/NN-<stage>/ and returns
    the folders (relative to the project) the provider reads at `pulumi up`."""
    root = OVERLAYS_DIR.format(stack=pulumi.get_stack())
    access = kubeflow.access
    if access.mode == "loadBalancer" and not access.source_ranges:
        # Never a load balancer open to the world by default: the admins' networks (an
        # empty loadBalancerSourceRanges would admit every address).
        if not admin_cidrs:
            raise ValueError("a loadBalancer without sourceRanges needs aws.adminCidrs")
        access = access.model_copy(update={"source_ranges": list(admin_cidrs)})
        kubeflow = kubeflow.model_copy(update={"access": access})
    folders = {}
    stages = catalog.stages_for(kubeflow)
    write_upstream_copy(kubeflow, stages, PROJECT_DIR / root / sources.UPSTREAM_COPY)
    for number, stage in enumerate(stages, start=1):
        relative = f"{root}/{number:02d}-{stage.name}"
        folder = PROJECT_DIR / relative
        folder.mkdir(parents=True, exist_ok=True)
        files = overlay.render_stage(kubeflow, stage, folder, logins, public_url)
        # Hidden names are other runs' files being written; a file another run removed
        # first is gone all the same.
        for stale in {name for name in os.listdir(folder) if not name.startswith(".")} \
                - set(files):
            (folder / stale).unlink(missing_ok=True)
        for file_name, text in files.items():
            _write_atomically(folder / file_name, text)
        folders[stage.name] = relative
    return folders


def write_upstream_copy(kubeflow: KubeflowSettings, stages: list[catalog.Stage],
                        copy_dir: Path) -> None:
    """Writes sources.upstream_copy under `copy_dir` (only the files that changed) and
    removes what it no longer holds."""
    files = sources.upstream_copy(kubeflow, stages, copy_dir)
    for name, data in files.items():
        path = copy_dir / name
        if not path.is_file() or path.read_bytes() != data:
            path.parent.mkdir(parents=True, exist_ok=True)
            _write_atomically(path, data)
    if copy_dir.is_dir():
        for path in copy_dir.rglob("*"):
            if path.is_file() and not path.name.startswith(".") \
                    and path.relative_to(copy_dir).as_posix() not in files:
                path.unlink(missing_ok=True)


def _write_atomically(path: Path, text: str | bytes) -> None:
    # Another run (a preview in a second shell) never reads half a file.
    with tempfile.NamedTemporaryFile("wb" if isinstance(text, bytes) else "w", dir=path.parent,
                                     prefix=".", suffix=".tmp", delete=False) as temporary:
        temporary.write(text)
    os.replace(temporary.name, path)
