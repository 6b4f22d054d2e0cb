"""`gpu-cluster:autoscaling`: cluster-autoscaler on the EC2 pools (hybrid and cloud layouts)
(components/addons/cluster_autoscaler.py): when an idle pool node goes. The pools' sizes
are the pools' own keys."""

import re
from typing import Annotated

from pydantic import AfterValidator

from config.model_base import Section
from config.partial import PartialConfig
from config.problems import Problem


# What the program accepts of Go's time.ParseDuration (the form of CA's duration flags,
# flag.Duration in cluster-autoscaler/config/flags/flags.go): hours, minutes and seconds, in
# that order, each at most once, whole numbers.
_DURATION = re.compile(r"(?:(?P<h>[0-9]{1,3})h)?(?:(?P<m>[0-9]{1,4})m)?(?:(?P<s>[0-9]{1,6})s)?")
# A node must stay unneeded at least a minute (CA's own loop runs every 10 s, flags.go
# `scan-interval`) and at most a week.
MIN_SECONDS, MAX_SECONDS = 60, 7 * 24 * 3600


def duration_seconds(value: str) -> int:
    """The seconds of a duration the validator accepted."""
    match = _DURATION.fullmatch(value)
    return (int(match["h"] or 0) * 3600 + int(match["m"] or 0) * 60 + int(match["s"] or 0))


def _duration(value: str) -> str:
    match = _DURATION.fullmatch(value)
    if not value or match is None:
        raise ValueError(f"'{value}' is not a duration like 30m, 1h30m or 90s (hours, minutes, "
                         "seconds, in that order)")
    if not MIN_SECONDS <= duration_seconds(value) <= MAX_SECONDS:
        raise ValueError(f"'{value}' is not between 1m and 168h")
    return value


Duration = Annotated[str, AfterValidator(_duration)]


class AutoscalingSettings(Section):
    scale_down_unneeded_time: Duration = "30m"
    """How long a pool node must stay unneeded (nothing on it but DaemonSets' pods, or pods that may
    move elsewhere) before cluster-autoscaler removes it, e.g. `30m` or `1h30m`; a node running a
    Job's or an MPIJob's pods is never removed (see [Autoscaling](layouts.md#autoscaling))."""


def autoscaling_checks(cfg: PartialConfig) -> list[Problem]:
    """`autoscaling` is about the EC2 pools (hybrid and cloud layouts): on bare metal nothing
    reads it. (Every stack is given `{}`, Pulumi.yaml's default: only a value is refused.)"""
    autoscaling = cfg.autoscaling
    if (cfg.layout == "bare-metal" and autoscaling is not None
            and autoscaling.model_dump(exclude_defaults=True)):
        return [Problem("autoscaling", "only the EC2 pools of the hybrid and cloud layouts "
                        "autoscale; remove gpu-cluster:autoscaling from this stack")]
    return []


def autoscales(pools: list) -> bool:
    """Whether the stack runs cluster-autoscaler: it has pools (hybrid or cloud), and runs it on
    its controllers, which are nodes on those layouts (components/distributions/__init__.py
    runs_aws_cloud_controller).

    The same layouts give the pools' nodes what cluster-autoscaler knows a node by, its AWS
    provider ID `aws:///<zone>/<instance id>` (cloudprovider/aws/aws_cloud_provider.go
    NodeGroupForNode :123-144, AwsRefFromProviderId :217-231 at cluster-autoscaler-1.36.1):
    where the AWS cloud controller manager runs, every EC2 node's kubelet registers with that
    ID (RKE2_CLOUD_PROVIDER, K0S_CLOUD_PROVIDER). Without it CA would take each pool instance
    for one that never registered and terminate it after --max-node-provision-time
    (clusterstate/clusterstate.go getNotRegisteredNodes :1183-1200, core/static_autoscaler.go
    removeOldUnregisteredNodes :976); tests/upstream/test_cluster_autoscaler.py holds the two
    conditions together."""
    return bool(pools)
