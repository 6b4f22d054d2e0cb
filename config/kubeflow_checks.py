"""Kubeflow rules that span sections: the password secret, the default StorageClass, the
component set, the image mirror and how the UI is exposed on the stack's layout."""

import re

from config.kubeflow import COMPONENT_REQUIRES
from config.partial import PartialConfig
from config.problems import Problem

# kubeflow/manifests' example user: its password and the bcrypt hash it ships.
UPSTREAM_EXAMPLE_PASSWORD = "12341234"
UPSTREAM_EXAMPLE_HASH = "$2y$12$4K/VkmDd1q1Orb3xAt82zu8gk7Ad6ReFR4LCP9UeYE90NLiN9Df72"
BCRYPT_HASH = re.compile(r"^\$2[aby]\$(0[4-9]|[12][0-9]|3[01])\$[./A-Za-z0-9]{53}$")
MIN_PASSWORD_LENGTH = 12
_REGISTRY_HOST = re.compile(r"^([a-z0-9-]+\.)+[a-z0-9-]+(:\d{1,5})?$|^localhost(:\d{1,5})?$")
_SET_PASSWORD = "pulumi config set --secret gpu-cluster:kubeflowPassword"


def kubeflow_checks(cfg: PartialConfig) -> list[Problem]:
    if not cfg.has_kubeflow:
        if cfg.kubeflow_password:
            return [Problem("kubeflowPassword", "is set but gpu-cluster:kubeflow is not")]
        return []
    problems = _password(cfg.kubeflow_password)
    problems += _default_storage_class(cfg)
    kubeflow = cfg.kubeflow
    if kubeflow is None:  # the section itself did not parse; its problems are reported
        return problems
    problems += _components(kubeflow.components)
    if kubeflow.image_mirror is not None:
        problems += [
            Problem(f"kubeflow.imageMirror.registries.{host}",
                    "must be a registry host like docker.io, ghcr.io or quay.io")
            for host in kubeflow.image_mirror.registries if not _REGISTRY_HOST.match(host)
        ]
    problems += _access(cfg)
    return problems


def _password(password: str) -> list[Problem]:
    # Messages never quote the value: it is a secret.
    if not password:
        return [Problem("kubeflowPassword",
                        "is required with gpu-cluster:kubeflow: the Dex user's password (or its "
                        f"bcrypt hash); set it with `{_SET_PASSWORD}`")]
    if password in (UPSTREAM_EXAMPLE_PASSWORD, UPSTREAM_EXAMPLE_HASH):
        return [Problem("kubeflowPassword", "is kubeflow/manifests' published example password; "
                        "choose your own")]
    if password.startswith("$2"):
        if not BCRYPT_HASH.match(password):
            return [Problem("kubeflowPassword", "looks like a bcrypt hash but is not one "
                            "($2a$/$2b$/$2y$, cost, 53 characters of salt and hash)")]
        return []
    if len(password.encode()) > 72:
        return [Problem("kubeflowPassword", "is longer than bcrypt's 72 bytes; use a shorter "
                        "password or set its bcrypt hash")]
    if len(password) < MIN_PASSWORD_LENGTH:
        return [Problem("kubeflowPassword",
                        f"is shorter than {MIN_PASSWORD_LENGTH} characters")]
    return []


def _default_storage_class(cfg: PartialConfig) -> list[Problem]:
    storage = cfg.storage
    if storage is None:
        return []
    backends = storage.backends
    defaults = [b for b in backends.values() if b.default] if len(backends) > 1 else \
        [b for b in backends.values() if b.default is not False]
    if len(defaults) != 1:
        return [Problem("kubeflow", "needs the stack's default StorageClass (Kubeflow's volumes "
                        "claim it: Katib's and Pipelines' databases, notebook workspaces); "
                        "gpu-cluster:storage has none")]
    return []


def _components(components: list[str]) -> list[Problem]:
    return [
        Problem("kubeflow.components", f"{component} needs {COMPONENT_REQUIRES[component]} "
                "(add it to the list)")
        for component in components
        if component in COMPONENT_REQUIRES and COMPONENT_REQUIRES[component] not in components
    ]


def _access(cfg: PartialConfig) -> list[Problem]:
    access = cfg.kubeflow.access
    layout = cfg.layout
    problems = []
    if access.mode == "loadBalancer":
        if layout not in ("hybrid", "cloud"):
            problems.append(Problem("kubeflow.access.mode",
                                    f"loadBalancer needs an AWS layout (hybrid or cloud), not "
                                    f"{layout}; use nodePort or portForward"))
        if access.hostname is None:
            problems.append(Problem("kubeflow.access.hostname",
                                    "is required with loadBalancer: the DNS name users open, "
                                    "pointing at the load balancer"))
    elif access.mode == "nodePort" and layout == "cloud" and access.hostname is None:
        problems.append(Problem("kubeflow.access.hostname",
                                "is required with nodePort on cloud: pool nodes have no fixed "
                                "addresses; a DNS name resolving to them"))
    if access.mode != "loadBalancer" and access.source_ranges:
        problems.append(Problem("kubeflow.access.sourceRanges", "is only used with loadBalancer"))
    if access.mode == "portForward":
        if layout == "cloud":
            problems.append(Problem("kubeflow.access.mode",
                                    "portForward runs on the controller over SSH; the cloud "
                                    "layout's controller is not reached over SSH: use nodePort "
                                    "or loadBalancer"))
        elif layout == "hybrid" and access.listen_address != "127.0.0.1":
            problems.append(Problem("kubeflow.access.listenAddress",
                                    "must be 127.0.0.1 on hybrid: the control-plane instance's "
                                    "security group does not open the port; reach it through "
                                    "`ssh -L`"))
    return problems
