"""Kubernetes distributions behind one interface (components/distributions/base.py): the
one `kubernetes.distribution` names (config/versions.py DISTRIBUTIONS) is the only one the
program knows. Each lives in components/distributions/<name>.py as its DISTRIBUTION."""

import importlib

from components.distributions.base import Distribution, DistributionSettings
from config import versions
from config.model import StackConfig
from config.cloud import pool_subnet_cidrs
from config.release_pins import release_sha256
from config.storage import service_account_issuer


def distribution_class(name: str) -> type:
    return importlib.import_module(f"components.distributions.{name}").DISTRIBUTION


DISTRIBUTIONS = {name: distribution_class(name) for name in versions.DISTRIBUTIONS}


# The layouts whose controllers are EC2 instances.
AWS_LAYOUTS = ("cloud", "hybrid")


def runs_aws_cloud_controller(config: StackConfig) -> bool:
    """Whether the AWS cloud controller manager runs (components/aws/cloud_controller.py): on
    the AWS layouts. It runs on the controllers alone, whose instance role is the only one
    with its IAM policy; there every distribution's controllers are nodes (RKE2's servers;
    k0s's controllers run a tainted kubelet there, components/distributions/k0s.py
    `controller_runs_kubelet`)."""
    return config.layout in AWS_LAYOUTS


def distribution_settings(config: StackConfig) -> DistributionSettings:
    """The one place a distribution's settings are read from the stack config."""
    return DistributionSettings(
        cluster_name=config.cluster_name,
        kubernetes=config.kubernetes,
        pod_cidr=config.network.pod_cidr,
        service_cidr=config.network.service_cidr,
        cni=config.network.cni,
        cni_mtu=config.cni_mtu,
        tuning=config.tuning,
        nvidia_default_runtime=config.nvidia.default_runtime,
        endpoint=config.control_plane_endpoint,
        host_addresses=tuple(host.address for host in config.hosts),
        has_pools=bool(config.pools),
        pool_cidrs=(tuple(pool_subnet_cidrs(config.aws.vpc))
                    if config.layout == "hybrid" and config.pools and config.aws else ()),
        release_sha256=release_sha256(config.kubernetes.distribution, config.kubernetes.version,
                                      config.versions),
        airgap_bundle_sha256=dict(config.versions.airgap_bundle_sha256),
        service_account_issuer=service_account_issuer(
            config.storage.efs, config.layout, config.aws.region if config.aws else None),
        aws_cloud_provider=runs_aws_cloud_controller(config),
    )


def distribution_for(settings: DistributionSettings) -> Distribution:
    return DISTRIBUTIONS[settings.kubernetes.distribution](settings)
