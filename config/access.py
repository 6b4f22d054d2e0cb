"""`gpu-cluster:access`: the researchers' namespaces (teams) with their quotas and the
users who get a kubeconfig of their own, with a role in some of those namespaces."""

import re
from typing import Annotated, Literal, Optional

from pydantic import AfterValidator, Field, field_validator, model_validator

from config.kubeflow import Email
from config.model_base import Section
from config.queues import FlavorQuota
from config.types import DnsLabel

# Kubernetes' built-in user-facing ClusterRoles.
AccessRole = Literal["admin", "edit", "view"]

_QUANTITY = re.compile(r"(\d+(\.\d+)?)(m|k|Ki|Mi|Gi|Ti|Pi|M|G|T|P)?")


def _quantity(value: str) -> str:
    if value.strip().startswith("-"):
        raise ValueError(f"'{value}' is negative; a quota or limit must be 0 or more")
    if not _QUANTITY.fullmatch(value):
        raise ValueError(f"'{value}' is not a Kubernetes quantity such as 500m, 8, 64Gi or 2Ti")
    return value


Quantity = Annotated[str, AfterValidator(_quantity)]


class Quota(Section):
    """Hard limits on what the namespace's pods may request; unset means unlimited."""

    gpus: Optional[int] = Field(default=None, ge=0)
    """`requests.nvidia.com/gpu` of all pods (unset: unlimited)."""
    # GPUs beyond `gpus` the team's queue may borrow from the others' idle quota (Kueue's
    # borrowingLimit); the ResourceQuota caps the namespace at gpus + borrowGpus.
    borrow_gpus: int = Field(default=0, ge=0)
    """GPUs beyond `gpus` the team's Kueue queue may borrow from the others' idle quota; its
    `ResourceQuota` allows `gpus` + `borrowGpus` (needs `gpus`)."""
    cpu: Optional[Quantity] = None
    """`requests.cpu` of all pods, a quantity (`64`, `500m`)."""
    memory: Optional[Quantity] = None
    """`requests.memory` of all pods (`512Gi`)."""
    # Total of all PersistentVolumeClaims' requests.
    storage: Optional[Quantity] = None
    """`requests.storage` of all PersistentVolumeClaims (`2Ti`)."""
    # Per flavor: the team's GPUs by where they run, tried in the cluster's flavor order
    # (config/queues.py); `gpus` and `borrowGpus` are then their sums.
    flavors: list[FlavorQuota] = Field(default=[], max_length=64)
    """GPUs by flavor (`on-prem` or a pool), which the team's queue tries in `access.flavorOrder`;
    `gpus` and `borrowGpus` default to their sums ([Fair sharing](teams.md#fair-sharing-kueue))."""

    @model_validator(mode="after")
    def _totals_of_flavors(self) -> "Quota":
        if not self.flavors:
            return self
        names = [flavor.name for flavor in self.flavors]
        twice = sorted({name for name in names if names.count(name) > 1})
        if twice:
            raise ValueError(f"flavors lists {', '.join(twice)} twice")
        for key, field, total in (
                ("gpus", "gpus", sum(f.gpus for f in self.flavors)),
                ("borrowGpus", "borrow_gpus", sum(f.borrow_gpus for f in self.flavors))):
            if field not in self.model_fields_set:
                # The section is frozen; the total is filled in once, here, as if given.
                object.__setattr__(self, field, total)
            elif getattr(self, field) != total:
                raise ValueError(f"{key} ({getattr(self, field)}) is not the sum of flavors[]."
                                 f"{key} ({total}); leave it unset or make them agree")
        return self

    @model_validator(mode="after")
    def _borrowing_needs_a_share(self) -> "Quota":
        if self.borrow_gpus and self.gpus is None:
            raise ValueError("borrowGpus needs gpus: the team borrows beyond its own GPUs")
        return self


class ContainerDefaults(Section):
    """Requests and limits a container gets when it states none (a LimitRange): with a
    quota on cpu or memory, Kubernetes refuses pods without them."""

    cpu_request: Quantity = "100m"
    """A container's CPU request when it sets none (LimitRange)."""
    memory_request: Quantity = "256Mi"
    """A container's memory request when it sets none."""
    cpu_limit: Quantity = "2"
    """A container's CPU limit when it sets none."""
    memory_limit: Quantity = "4Gi"
    """A container's memory limit when it sets none."""


# Namespaces a team may not be: Kubernetes' own (default, and kube-*, "reserved for
# Kubernetes system namespaces": https://kubernetes.io/docs/concepts/overview/working-with-objects/namespaces/)
# and those the program installs into (components/addons/shared_storage.py, gpu_support.py, the
# MPI operator's manifest, Kueue's chart, the Kubeflow stages of kubeflow/manifests 26.03, and
# kubeflow-system, Kubeflow Trainer's own). A team's quota there would starve them.
RESERVED_NAMESPACES = ("default", "kube-system", "kube-public", "kube-node-lease",
                       "nfs-provisioner", "efs-provisioner", "local-path-storage",
                       "gpu-feature-discovery", "mpi-operator", "kubeflow", "kubeflow-system",
                       "istio-system", "cert-manager", "auth", "oauth2-proxy", "kueue-system")


def _team_name(value: str) -> str:
    if value in RESERVED_NAMESPACES or value.startswith("kube-"):
        raise ValueError(f"'{value}' is a namespace of Kubernetes or of what the program "
                         "installs; name the team something else")
    return value


# The Pod Security Standards level a team's namespace enforces
# (https://kubernetes.io/docs/concepts/security/pod-security-standards/). restricted by
# default; baseline (root in containers, any image's default capabilities, inline volumes
# but nfs) only by this key, which the preview warns about.
PodSecurityLevel = Literal["restricted", "baseline"]


class Team(Section):
    name: Annotated[DnsLabel, AfterValidator(_team_name)]
    """The team's namespace (a DNS label); not `default`, `kube-*` or a namespace the program
    installs into (`config/access.py` lists them)."""
    quota: Quota = Quota()
    """Hard limits on what the namespace's pods may request; unset means unlimited."""
    container_defaults: ContainerDefaults = ContainerDefaults()
    """Requests and limits a container gets when it states none (a LimitRange)."""
    pod_security: PodSecurityLevel = "restricted"
    """The Pod Security Standards level the team's namespace enforces: `restricted`, or `baseline`
    (warned at every preview)."""


class User(Section):
    # The Kubernetes user name (the certificate's CN) and part of the context name.
    name: DnsLabel
    """Kubernetes user name (certificate CN; a DNS label of at most 32 characters) and context
    `<cluster>-<name>`."""
    # Kubernetes groups come from the certificate's organization, which holds one value.
    groups: list[DnsLabel] = Field(default=[], max_length=1)
    """At most one Kubernetes group (the certificate's O)."""
    role: AccessRole = "edit"
    """`admin`, `edit` or `view` (Kubernetes' built-in roles) in the user's namespaces."""
    # Teams the role applies in; an admin without namespaces is a cluster admin.
    namespaces: list[DnsLabel] = []
    """Teams the role applies in; an `admin` without any is cluster-admin."""
    # With Kubeflow: the user's login (a Dex static user, or the identity provider's email
    # claim) and a contributor of their teams' profiles with their role. No email: no
    # Kubeflow access.
    email: Optional[Email] = None
    """With Kubeflow: the user's login (a Dex static user, or the identity provider's email) and a
    contributor of their teams' profiles with their role; none: no Kubeflow access."""

    @field_validator("email")
    @classmethod
    def _loggable(cls, value: Optional[str]) -> Optional[str]:
        # The teams' profile owners live under .invalid (components/access/kubeflow_profiles.py).
        if value and value.lower().rstrip(".").endswith(".invalid"):
            raise ValueError(f"'{value}' is under .invalid, which names the teams' profile "
                             "owners; use the user's own address")
        return value

    @field_validator("name")
    @classmethod
    def _short_name(cls, value: str) -> str:
        # It names the user's certificates, whose subject fields hold 64 characters.
        if len(value) > 32:
            raise ValueError(f"'{value}' is longer than 32 characters")
        return value

    @model_validator(mode="after")
    def _scope(self) -> "User":
        if not self.namespaces and self.role != "admin":
            raise ValueError(f"role '{self.role}' needs at least one namespace "
                             "(only an admin may have none: cluster-wide)")
        return self


class AccessSettings(Section):
    # Users' client certificates are valid this long; `pulumi up` renews them near the end.
    certificate_validity_days: int = Field(default=90, ge=1, le=825)
    """Lifetime of each user's client certificate; renewed by `pulumi up` in its last third (at most
    30 days)."""
    # Raising it issues every user a new key and client certificate (Day-2 rotation).
    certificate_generation: int = Field(default=0, ge=0, le=1_000_000)
    """Raise it by one to issue every user a new key and client certificate ([Rotating
    credentials](day-2.md#rotating-credentials)); only ever raise it."""
    teams: list[Team] = []
    """One namespace per team, with its quota and its pods' defaults."""
    users: list[User] = []
    """Users with a client certificate and a kubeconfig of their own."""
    # Kueue queues for the teams (installed only when a team exists): a job that carries
    # kueue.x-k8s.io/queue-name: <team> waits for its team's quota instead of failing on it.
    queues: bool = True
    """With teams, Kueue and a queue per team from its quota (see [Fair sharing
    (Kueue)](teams.md#fair-sharing-kueue)); `false` leaves both out."""
    # Kueue's flavors in order of preference (config/queues.py); empty: the default order.
    flavor_order: list[DnsLabel] = Field(default=[], max_length=64)
    """The order in which teams' queues try flavors (`on-prem`, pool names); default: `on-prem`,
    then reserved, On-Demand and Spot pools."""

    @field_validator("teams")
    @classmethod
    def _unique_teams(cls, teams: list[Team]) -> list[Team]:
        _refuse_duplicates("team", [team.name for team in teams])
        return teams

    @field_validator("users")
    @classmethod
    def _unique_users(cls, users: list[User]) -> list[User]:
        _refuse_duplicates("user", [user.name for user in users])
        # One login per person: Kubeflow's user id is the email (case as given).
        _refuse_duplicates("email", [user.email.lower() if user.email else None
                                     for user in users])
        return users

    @model_validator(mode="after")
    def _known_namespaces(self) -> "AccessSettings":
        teams = {team.name for team in self.teams}
        unknown = [f"users[{index}] ({user.name}): '{namespace}'"
                   for index, user in enumerate(self.users)
                   for namespace in user.namespaces if namespace not in teams]
        if unknown:
            raise ValueError("namespaces not listed under teams: " + ", ".join(unknown))
        return self


def _refuse_duplicates(what: str, names: list[Optional[str]]) -> None:
    seen: dict[str, int] = {}
    for index, name in enumerate(names):
        if name is None:
            continue
        if name in seen:
            raise ValueError(f"{what} '{name}' is listed twice (entries {seen[name]} and {index})")
        seen[name] = index
