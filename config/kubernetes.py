"""The `gpu-cluster:kubernetes` section: the distribution and its release, the API, join
tokens, drains, the admin's certificate, and how a raised version reaches the workers."""

import re
from typing import Annotated, Literal, Optional, Union

from pydantic import BeforeValidator, Field, ValidationInfo, field_validator

from config import versions
from config.model_base import Section
from config.types import DownloadUrl, Duration, HostOrIp, InterfaceName, Port
from contract import ports


# The distributions' names, from config/versions.py.
DistributionName = Literal[tuple(versions.DISTRIBUTIONS)]  # type: ignore[valid-type]


# A count of workers (at least 1) or a percentage of them ("25%"), matched whole.
MAX_UNAVAILABLE_PERCENT = re.compile(r"(100|[1-9][0-9]?)%")


def _max_unavailable(value: object) -> Union[int, str]:
    problem = ("must be a count of workers (1 or more) or a percentage from 1% to 100% "
               "like \"25%\"")
    if isinstance(value, str) and re.fullmatch(r"[0-9]+", value):
        # `pulumi config set --path` hands numbers over as text.
        value = int(value)
    if isinstance(value, int) and not isinstance(value, bool):
        if value < 1:
            raise ValueError(f"{problem}: a rollout takes down at least one worker")
        return value
    if isinstance(value, str) and MAX_UNAVAILABLE_PERCENT.fullmatch(value):
        return value
    raise ValueError(problem)


class UpgradeSettings(Section):
    """How a raised kubernetes.version reaches the workers (docs/day-2.md: Upgrading Kubernetes)."""
    # Workers drained and upgraded at once (k0sctl's workerDisruptionPercent).
    max_unavailable: Annotated[Union[int, str], BeforeValidator(_max_unavailable)] = 1
    """Workers drained and upgraded at once when `kubernetes.version` is raised: a count (1 or more)
    or a percentage `"1%"`–`"100%"` of the workers (rounded down, at least 1), kept on the
    controller at run time; see [Upgrading Kubernetes](day-2.md#upgrading-kubernetes)."""

    def unavailable_count(self, workers: int) -> int:
        """Workers upgraded at once: a percentage rounds down, as a Deployment's maxUnavailable
        does (kubernetes.io/docs/concepts/workloads/controllers/deployment/#max-unavailable),
        but never below one."""
        value = self.max_unavailable
        if isinstance(value, str):
            value = workers * int(value[:-1]) // 100
        return max(1, min(value, max(workers, 1)))


# etcd's quorum is a majority, floor(n/2)+1: 2 members tolerate no failure and 4 tolerate
# one, as 3 do (etcd.io/docs/v3.6/faq, "Why an odd number of cluster members?"; rancher
# rke2-docs docs/install/ha.md:12-14). The program builds 1, 3 or 5.
CONTROLLER_COUNTS = (1, 3, 5)


def etcd_majority(members: int) -> int:
    """How many of `members` etcd needs up to accept a write: floor(n/2)+1
    (etcd.io/docs/v3.6/faq, "What is failure tolerance?")."""
    return members // 2 + 1
ETCD_MAJORITY = ("etcd needs a majority: 2 controllers tolerate no failure, 4 tolerate what "
                 "3 do")


def _controller_count(value: object) -> int:
    if isinstance(value, str) and re.fullmatch(r"[0-9]+", value):
        # `pulumi config set --path` hands numbers over as text.
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int) or value not in CONTROLLER_COUNTS:
        detail = f"{ETCD_MAJORITY}; " if value in (2, 4) else ""
        raise ValueError(f"must be 1, 3 or 5: {detail}the program builds 1, 3 or 5 controllers")
    return value


class VipSettings(Section):
    """The virtual IP the controllers hand between them over VRRP (loadBalancer: vip)."""
    interface: Optional[InterfaceName] = None
    """NIC the VIP is added to on each controller; unset: the controller's `hosts[].interface`, else
    the NIC of its default route (k0s's own choice)."""
    router_id: int = Field(default=51, ge=1, le=255)
    """VRRP virtual router id (1–255), unique in the LAN's broadcast domain: another VRRP group on
    the LAN with the same id and password takes the VIP over."""


class ControlPlaneSettings(Section):
    """How many controllers there are and the stable address in front of them."""
    replicas: Optional[Annotated[int, BeforeValidator(_controller_count)]] = None
    """Hybrid and cloud: EC2 controllers, 1, 3 or 5 (an even count adds no failure tolerance to
    etcd), each in its own availability zone, several behind an internal network load balancer
    (see [High availability](distributions.md#high-availability)); unset: 1. Bare
    metal: the hosts with a controller role decide; set, it must equal their count."""
    address: Optional[HostOrIp] = None
    """The stable API address when there are several controllers (required then): a free address
    of `network.lanCidr` that the controllers hold as a VIP, or an external load balancer's name
    or address; unset with one controller: that controller's address."""
    load_balancer: Literal["vip", "external"] = "vip"
    """`vip`: the controllers hold `address` themselves (VRRP; k0s's control plane load
    balancing); `external`: a load balancer of yours forwards `address` to every controller (ports
    6443, and 9443 and 8132 for k0s, 9345 for RKE2)."""
    vip: VipSettings = VipSettings()
    """With `loadBalancer: vip`: the NIC and VRRP router id of the VIP."""


class KubernetesSettings(Section):
    distribution: DistributionName = "k0s"
    """Kubernetes distribution: `k0s` or `rke2` (see
    [Distributions](distributions.md#distributions))."""
    # Defaults to the distribution's pin (config/versions.py).
    version: str = Field(default="", validate_default=True)
    """Release installed on every host, in the distribution's form (`v1.36.3+k0s.2`,
    `v1.36.3+rke2r1`); empty: the distribution's pin in `config/versions.py`."""
    api_port: Port = ports.KUBERNETES_API
    """Kubernetes API port on the controller; must be `6443` with `rke2`."""
    # Where hosts download the release file from instead of GitHub (a folder holding it
    # under its upstream name); still checked against the pinned sha256.
    release_url: Optional[DownloadUrl] = None
    """Where hosts download the release file (`k0s-<version>-<arch>`, `rke2.linux-<arch>.tar.gz`,
    under its own name) instead of GitHub: `https://...` or a folder on the host as `file:///path`;
    still checked against the pinned sha256."""
    # Extra names/addresses the API server certificate must cover (a DNS name, a VIP).
    api_sans: list[HostOrIp] = []
    """Extra names/addresses for the API server certificate."""
    # Join tokens are single-purpose and short-lived: one per worker, valid this long.
    worker_token_expiry: Duration = "2h"
    """k0s: lifetime of each worker's join token (not zero: k0s reads `0s` as never expiring); RKE2
    joins with one agent token."""
    node_ready_timeout_seconds: int = Field(default=600, ge=30, le=7200)
    """How long `admit-node` (and `uncordon-node` after an upgrade) waits for a node to be Ready."""
    # How long draining a node (an upgrade, hosts[].maintenance, a replaced machine) may
    # take before the step fails (kubectl drain --timeout); evictions respect
    # PodDisruptionBudgets, and a drain that fails stops an upgrade's rollout.
    drain_timeout_seconds: int = Field(default=600, ge=30, le=7200)
    """`kubectl drain --timeout` of a node (30–7200): before its upgrade (a drain that does not
    finish stops the rollout), for `hosts[].maintenance`, for a replaced machine."""
    # Whether drains delete pods no controller manages (`kubectl run`), which are then gone
    # for good (kubectl drain --force). Off: such a pod fails the drain, named.
    drain_force: bool = False
    """`true`: drains delete pods no controller manages (`kubectl drain --force`; an interactive
    `kubectl run` pod is gone for good); `false`: such a pod fails the drain, named (see
    [Machines](day-2.md#machines)); the preview warns when `true`."""
    # Cloud: how long `pulumi up` waits for the API the controller installs at boot.
    api_ready_timeout_seconds: int = Field(default=900, ge=60, le=7200)
    """Cloud: how long `pulumi up` waits for the API the controller installs at boot."""
    # Raising it issues the admin a new key and client certificate (Day-2 rotation).
    admin_certificate_generation: int = Field(default=0, ge=0, le=1_000_000)
    """Raise it by one to issue the admin a new key and client certificate ([Rotating
    credentials](day-2.md#rotating-credentials)); only ever raise it."""
    # Raising it renews the secrets that admit joins: RKE2's agent token, the cloud pools'
    # bootstrap tokens (Day-2 rotation).
    join_token_generation: int = Field(default=0, ge=0, le=1_000_000)
    """Raise by one to renew the secrets that admit joins: RKE2's agent token ([Rotating
    credentials](day-2.md#rotating-credentials)); the cloud pools' tokens expire and rotate by
    themselves."""
    control_plane: ControlPlaneSettings = ControlPlaneSettings()
    """How many controllers there are and the stable API address in front of them (see
    [High availability](distributions.md#high-availability))."""
    upgrade: UpgradeSettings = UpgradeSettings()
    """How a raised `kubernetes.version` reaches the workers (see [Upgrading
    Kubernetes](day-2.md#upgrading-kubernetes))."""

    def drain_warning(self) -> Optional[str]:
        """The preview's warning when drains may delete users' pods."""
        if not self.drain_force:
            return None
        return ("gpu-cluster:kubernetes.drainForce is true: drains (upgrades, maintenance, "
                "removed and replaced machines) delete pods no controller manages, such as "
                "an interactive `kubectl run` GPU pod, and nothing recreates them")

    @field_validator("version")
    @classmethod
    def _release_version(cls, value: str, info: ValidationInfo) -> str:
        distribution = info.data.get("distribution")
        if distribution not in versions.DISTRIBUTIONS:
            return value
        release = versions.DISTRIBUTIONS[distribution]
        if not value:
            return release.pin
        if not release.release_form.fullmatch(value):
            raise ValueError(f"'{value}' is not a {distribution} release version like "
                             f"{release.pin}")
        return value

    @field_validator("api_port")
    @classmethod
    def _fixed_api_port(cls, value: int, info: ValidationInfo) -> int:
        distribution = info.data.get("distribution")
        fixed = versions.DISTRIBUTIONS[distribution].fixed_api_port \
            if distribution in versions.DISTRIBUTIONS else None
        if fixed is not None and value != fixed:
            raise ValueError(f"must be {fixed} with distribution {distribution}: it serves "
                             "the API on that port only")
        return value
