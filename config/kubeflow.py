"""The `gpu-cluster:kubeflow` section: which Kubeflow components to install from the pinned
kubeflow/manifests release, where the manifests come from, the fixes for known failures,
the Dex user and how the web UI is reached. Every default lives here; rules that span
sections (storage, layout, the password secret) are in `config/kubeflow_checks.py`."""

import re
from typing import Annotated, Literal, Optional

from pydantic import AfterValidator, Field, field_validator

from config import versions
from config.kubeflow_login import Connector
from config.model_base import Section
from config.types import (AbsolutePath, DnsLabel, HostOrIp, IPv4, IPv4Cidr, PemCertificateChain,
                          Port, distinct, matching)

# Components a stack may select, in install order; see components/addons/kubeflow/catalog.py.
KubeflowComponent = Literal["profiles", "dashboard", "notebooks", "volumes", "tensorboards",
                            "katib", "trainer", "pipelines"]
DEFAULT_COMPONENTS = ["profiles", "dashboard", "notebooks", "volumes", "tensorboards", "katib",
                      "trainer", "pipelines"]
# What each component needs beside it (the web apps list namespaces through profiles).
COMPONENT_REQUIRES = {"dashboard": "profiles", "notebooks": "profiles", "volumes": "profiles",
                      "tensorboards": "profiles", "pipelines": "profiles"}

_EMAIL = re.compile(r"[A-Za-z0-9._%+-]+@[A-Za-z0-9-]+(\.[A-Za-z0-9-]+)+")
# An image reference prefix: a registry host[:port] and optional path, no tag.
_REGISTRY_PREFIX = re.compile(r"[a-z0-9]([a-z0-9.-]*[a-z0-9])?(:\d{1,5})?(/[a-z0-9._-]+)*")
# No query (kustomize adds ?ref=) and nothing a shell or YAML would read specially.
_GIT_URL = re.compile(r"(https://|ssh://|git@)[A-Za-z0-9._~:/@%+=-]{1,2048}")
_QUANTITY = re.compile(r"[1-9][0-9]*(Mi|Gi|Ti)")


# RFC 5321 4.5.3.1: a path holds 256 octets, an address 254 of them.
Email = Annotated[str, AfterValidator(matching(
    _EMAIL, "an email address like admin@example.com", max_length=254))]
# The distribution spec caps a repository name at 255 characters, prefix included.
RegistryPrefix = Annotated[str, AfterValidator(matching(
    _REGISTRY_PREFIX, "a registry prefix like registry.example.internal:5000/kubeflow (host, "
    "optional port and path, no scheme or tag)", max_length=255))]


class ManifestsSource(Section):
    """Where kustomize reads kubeflow/manifests from."""

    # The upstream repository or a git mirror of it, read by kustomize at `pulumi up` for a
    # `ref` other than the pinned one, which is vendored (vendor/) and read from there.
    repository: str = versions.KUBEFLOW_MANIFESTS_REPOSITORY
    """Git URL of kubeflow/manifests or a mirror; read only for a `ref` other than the vendored
    26.03."""
    ref: str = versions.KUBEFLOW_MANIFESTS
    """Git tag (or commit); `26.03` is read from `vendor/`."""
    # A local copy (checkout of `ref`) on the machine that runs `pulumi up`; replaces
    # vendor/ and `repository`.
    path: Optional[AbsolutePath] = None
    """A local copy on the machine running `pulumi up`; replaces `vendor/` and `repository`."""

    @property
    def vendored(self) -> bool:
        """The pinned release, read from vendor/ (a git mirror of the same tag holds the same
        files): `repository` is not read."""
        return self.path is None and self.ref == versions.KUBEFLOW_MANIFESTS

    @field_validator("repository")
    @classmethod
    def _git_url(cls, value: str) -> str:
        if not _GIT_URL.fullmatch(value):
            raise ValueError(f"'{value}' is not a git URL like {versions.KUBEFLOW_MANIFESTS_REPOSITORY}")
        return value.rstrip("/")

    @field_validator("ref")
    @classmethod
    def _ref(cls, value: str) -> str:
        if not re.fullmatch(r"[A-Za-z0-9._/-]{1,255}", value):
            raise ValueError(f"'{value}' is not a git tag, branch or commit")
        return value


class KubeflowUser(Section):
    """The single Dex static user of earlier versions (its password the secret
    `gpu-cluster:kubeflowPassword`): still a login, with its own profile, but owner of no
    team's; each `access.users` entry's own login replaces it (the preview warns)."""

    email: Email
    """Deprecated (warned): the email of one shared Dex login; use `access.users[].email`."""
    # Dex's username; defaults to the email's local part.
    name: Optional[DnsLabel] = None
    """Its Dex username; default: the email's local part."""
    # The user's Kubeflow profile (namespace); defaults to kubeflow-<email as a DNS label>.
    profile: Optional[DnsLabel] = None
    """Its own profile (namespace); default: `kubeflow-<email as a DNS label>`."""

    @property
    def username(self) -> str:
        return self.name or re.sub(r"[^a-z0-9-]", "-", self.email.split("@")[0].lower()).strip("-")

    @property
    def profile_name(self) -> str:
        if self.profile:
            return self.profile
        label = re.sub(r"[^a-z0-9]+", "-", self.email.lower()).strip("-")
        return f"kubeflow-{label}"[:63].rstrip("-")


class MysqlDatabase(Section):
    """A MySQL Deployment of a component (Katib's, Pipelines'), on the cluster's storage."""

    # MySQL initialises its database on first start, which takes minutes on slow
    # (network) storage; katib-mysql's upstream liveness probe kills it after ~60 s and the
    # half initialised data dir then never recovers (seed 000). A startup probe allows this
    # long, and Pulumi waits this long (plus a margin) for the database and its clients.
    startup_timeout_seconds: int = Field(default=900, ge=60, le=7200)
    """Time the MySQL database may take to initialise before it counts as failed; Pulumi waits this
    plus 600 s."""
    # The claim's StorageClass; none uses the cluster's default StorageClass.
    storage_class: Optional[DnsLabel] = None
    """StorageClass of its claim; unset: the cluster's default."""
    storage_size: str = "10Gi"
    """Size of its claim."""
    # MySQL on NFS: no Linux native AIO (NFS does not support it with O_DIRECT) and an
    # init container that fails clearly when the volume is not writable by MySQL's user.
    nfs_safe: bool = True
    """No native AIO, and a clear failure when the volume is not writable by MySQL."""

    @field_validator("storage_size")
    @classmethod
    def _size(cls, value: str) -> str:
        if not _QUANTITY.fullmatch(value):
            raise ValueError(f"'{value}' is not a size like 10Gi")
        return value


class KatibMysql(MysqlDatabase):
    pass


class PipelinesMysql(MysqlDatabase):
    # Upstream's claim size (third-party/mysql/base/mysql-pv-claim.yaml).
    storage_size: str = "20Gi"
    """Size of its claim."""


class KatibSettings(Section):
    mysql: KatibMysql = KatibMysql()
    """Katib's MySQL database (katib-mysql)."""


class PipelinesSettings(Section):
    mysql: PipelinesMysql = PipelinesMysql()
    """Pipelines' MySQL database (its claim `mysql-pv-claim`)."""


class ImageMirror(Section):
    """Pull every image from a mirror: `ghcr.io/kubeflow/x:v1` becomes
    `<registry>/ghcr.io/kubeflow/x:v1` (Docker Hub images as docker.io/library/...)."""

    registry: RegistryPrefix
    """Deprecated (warned): read as `images.mirror.registry`; refused beside `images.mirror`."""
    # Per upstream registry, a different prefix that replaces the registry host, e.g.
    # {"docker.io": "registry.example.internal/dockerhub"} (a pull-through cache each).
    registries: dict[str, RegistryPrefix] = {}
    """Deprecated: read as `images.mirror.registries`."""
    pull_policy: Literal["IfNotPresent", "Always", "Never"] = "IfNotPresent"
    """Deprecated: read as `images.mirror.pullPolicy`."""


AccessMode = Literal["nodePort", "loadBalancer", "portForward"]
TlsMode = Literal["selfSigned", "certificate", "off"]


class GatewayTls(Section):
    """TLS at the Istio ingress gateway. Kubeflow's Jupyter, Volumes and Tensorboards web
    apps set Secure cookies: over plain HTTP, on any address but localhost, browsers drop
    them and every form answers 403 (kubeflow/manifests 26.03 README, "NodePort /
    LoadBalancer / Ingress")."""

    # selfSigned: a certificate the program makes for the names users open (stack output
    # kubeflowTlsCertificate, to trust in browsers and clients); certificate: `certificate`
    # with its key in the secret gpu-cluster:kubeflowTlsKey; off: plain HTTP with the web
    # apps' Secure cookies turned off (warned at every preview and update).
    mode: TlsMode = "selfSigned"
    """`selfSigned` (a certificate the program makes; output `kubeflowTlsCertificate`),
    `certificate` (yours) or `off` (plain HTTP, Secure cookies off; warned)."""
    # certificate: the PEM server certificate, then its intermediates.
    certificate: Optional[PemCertificateChain] = None
    """With `certificate`: the PEM server certificate, then its intermediates."""


class KubeflowAccess(Section):
    """How the Istio ingress gateway (the Kubeflow UI) is reached."""

    # nodePort: every node on `nodePort`; loadBalancer: a Service of type LoadBalancer
    # (AWS layouts); portForward: a systemd unit on the controller (SSH layouts, seed 000).
    mode: AccessMode = "nodePort"
    """`nodePort`, `loadBalancer` (hybrid, cloud) or `portForward` (bare-metal, hybrid)."""
    node_port: int = Field(default=31380, ge=30000, le=32767)
    """The gateway's node port (`nodePort`)."""
    # portForward: the port and address the controller listens on.
    port: Port = 8080
    """The controller's port (`portForward`)."""
    listen_address: IPv4 = "127.0.0.1"
    """The controller's address (`portForward`; `0.0.0.0` on bare-metal for the LAN)."""
    # loadBalancer: who may connect (default: gpu-cluster:aws.adminCidrs).
    source_ranges: list[IPv4Cidr] = []
    """Who may reach the load balancer; default: `aws.adminCidrs`."""
    # The name users type (a DNS name pointing at the gateway); required with loadBalancer.
    hostname: Optional[HostOrIp] = None
    """The name in `kubeflowUrl` (required with `loadBalancer`, and with `nodePort` on cloud)."""
    tls: GatewayTls = GatewayTls()
    """TLS at the Istio ingress gateway."""

    @property
    def scheme(self) -> str:
        return "http" if self.tls.mode == "off" else "https"

    def url_host(self, workload_addresses: list[str],
                 controller_address: Optional[str]) -> Optional[str]:
        """The host in the URL users open: `hostname`, else the forwarder's address
        (loopback as localhost, reached through `ssh -L`) or the first workload node's."""
        if self.hostname:
            return self.hostname
        if self.mode == "portForward":
            return {"127.0.0.1": "localhost", "0.0.0.0": controller_address}.get(
                self.listen_address, self.listen_address)
        if self.mode == "nodePort" and workload_addresses:
            return workload_addresses[0]
        return None

    def url(self, workload_addresses: list[str], controller_address: Optional[str]) -> str:
        host = self.url_host(workload_addresses, controller_address)
        port = {"portForward": f":{self.port}", "nodePort": f":{self.node_port}"}.get(self.mode, "")
        return f"{self.scheme}://{host}{port}/"


class KubeflowSettings(Section):
    source: ManifestsSource = ManifestsSource()
    """Where kustomize reads kubeflow/manifests from."""
    components: Annotated[list[KubeflowComponent], AfterValidator(distinct)] = DEFAULT_COMPONENTS
    """Components to install."""
    # Deprecated: one login for everyone (KubeflowUser); access.users[].email instead.
    user: Optional[KubeflowUser] = None
    """Deprecated (warned): the single shared Dex login of earlier versions; use
    `access.users[].email`."""
    # The organisation's identity providers (config/kubeflow_login.py); without them each
    # access.users entry with an email is a Dex static user, its bcrypt hash the secret
    # gpu-cluster:kubeflowPasswordHashes.<user>.
    connectors: list[Connector] = []
    """The organisation's identity providers users log in through instead of passwords, by `type`
    (`oidc` or `ldap`, below); no `$` anywhere (Dex expands it)."""
    katib: KatibSettings = KatibSettings()
    """Katib's settings."""
    pipelines: PipelinesSettings = PipelinesSettings()
    """Kubeflow Pipelines' settings."""
    image_mirror: Optional[ImageMirror] = None
    """Deprecated (warned): read as `images.mirror`; refused beside it."""
    access: KubeflowAccess = KubeflowAccess()
    """How the Istio ingress gateway (the Kubeflow UI) is reached."""

    @field_validator("connectors")
    @classmethod
    def _connector_ids(cls, value: list) -> list:
        ids = [connector.id for connector in value]
        doubled = sorted({i for i in ids if ids.count(i) > 1})
        if doubled:
            raise ValueError(f"connector id {', '.join(doubled)} is listed more than once")
        if "local" in ids:
            raise ValueError("connector id 'local' is Dex's password database; choose another")
        return value
