"""What the acceptance workloads share: their namespace, placement helpers, Job defaults
and a YAML dumper that prints embedded scripts as readable blocks."""

import hashlib
from collections.abc import Iterable
from dataclasses import dataclass

import yaml

from config.hosts import Host, Taint
from config.model import StackConfig
from contract.names import POOL_LABEL


NAMESPACE = "gpu-acceptance"


# The RuntimeClass components/addons/gpu_support.py creates (patches, where the distribution
# installs its own) for GPU pods.
RUNTIME_CLASS = "nvidia"


GPU_RESOURCE = "nvidia.com/gpu"


HOSTNAME_LABEL = "kubernetes.io/hostname"


# Finished Jobs (and their logs) are kept this long, then removed so the files apply again.
TTL_SECONDS = 3600


# Covers image pulls and volume provisioning; a stuck check fails instead of hanging.
JOB_DEADLINE_SECONDS = 1800


ANNOTATION_CHECK = "gpu-cluster/check"


class _Dumper(yaml.SafeDumper):
    """Safe YAML with scripts as literal blocks, so a reader sees them as written."""

    def ignore_aliases(self, data) -> bool:
        return True


def _represent_str(dumper: yaml.SafeDumper, value: str) -> yaml.ScalarNode:
    return dumper.represent_scalar("tag:yaml.org,2002:str", value,
                                   style="|" if "\n" in value else None)


_Dumper.add_representer(str, _represent_str)


def dump(objects: list[dict]) -> str:
    """One rendered file as multi-document YAML (`yaml.safe_dump_all` gives the same data;
    this keeps the scripts readable)."""
    return yaml.dump_all(objects, Dumper=_Dumper, sort_keys=False)


def workload_hosts(settings: StackConfig) -> list[Host]:
    return [host for host in settings.hosts if host.runs_workloads]


def gpu_hosts(settings: StackConfig) -> list[Host]:
    """Hosts whose node offers GPUs to pods."""
    return [host for host in workload_hosts(settings) if host.gpus > 0]


@dataclass(frozen=True)
class GpuTarget:
    """Where a GPU check runs: a host (its node) or a cloud pool (any node of it)."""

    name: str
    gpus: int
    taints: tuple[Taint, ...]
    node_selector: dict
    description: str


def gpu_targets(settings: StackConfig) -> list[GpuTarget]:
    hosts = [GpuTarget(h.name, h.gpus, tuple(h.taints), {HOSTNAME_LABEL: h.name},
                       f"node {h.name}") for h in gpu_hosts(settings)]
    pools = [GpuTarget(p.name, p.gpus, tuple(p.taints), {POOL_LABEL: p.name},
                       f"a node of pool {p.name}")
             for p in settings.pools if p.gpus and p.count]
    return hosts + pools


def workload_node_count(settings: StackConfig) -> int:
    return len(workload_hosts(settings)) + sum(pool.count for pool in settings.pools)


def workload_taints(settings: StackConfig) -> list[Taint]:
    return ([t for host in workload_hosts(settings) for t in host.taints]
            + [t for pool in settings.pools if pool.count for t in pool.taints])


def gpu_shared(settings: StackConfig) -> bool:
    """Whether a nvidia.com/gpu is something other than one whole physical GPU."""
    return settings.gpu.time_slicing_replicas > 1 or settings.gpu.mig_strategy != "none"


def tolerations(taints: Iterable[Taint]) -> list[dict]:
    """Tolerations for exactly these taints, without duplicates."""
    seen = set()
    result = []
    for taint in taints:
        key = (taint.key, taint.value, taint.effect)
        if key not in seen:
            seen.add(key)
            result.append({"key": taint.key, "operator": "Equal", "value": taint.value,
                           "effect": taint.effect})
    return result


# The admin applies these files into a namespace of their own, which no team user has a role
# in. Its level is stated because the cluster's default is restricted
# (components/common/pod_security.py), for the fabric benchmark (mpijob-benchmark.yaml),
# which measures the hosts' NICs: its workers use the host network (NCCL over the hosts'
# interfaces and their RoCE/IPoIB addresses; baseline refuses hostNetwork,
# pod-security-admission policy/check_hostNamespaces.go) and, with InfiniBand, keep IPC_LOCK
# to pin their buffers for the HCAs (no level but privileged admits it:
# check_capabilities_baseline.go). The same job as researchers run it, under restricted, is
# each team's mpijob-team-<team>.yaml (acceptance/mpi_team.py).
POD_SECURITY_LABELS = {"pod-security.kubernetes.io/enforce": "privileged"}


def namespace() -> dict:
    return {"apiVersion": "v1", "kind": "Namespace",
            "metadata": {"name": NAMESPACE, "labels": {**component_labels("namespace"),
                                                        **POD_SECURITY_LABELS}}}


def bounded_name(name: str, limit: int = 63) -> str:
    """`name`, or a shortened form with a hash suffix when it is too long for a Job name (the
    Job controller puts it into a label value)."""
    if len(name) <= limit:
        return name
    digest = hashlib.sha256(name.encode()).hexdigest()[:8]
    return f"{name[:limit - 9].rstrip('-')}-{digest}"


def component_labels(component: str) -> dict:
    return {"app.kubernetes.io/name": "gpu-acceptance",
            "app.kubernetes.io/part-of": "gpu-cluster",
            "app.kubernetes.io/component": component}


def restricted_container() -> dict:
    # The NVIDIA images run as root (no runAsNonRoot); everything else is dropped.
    return {"allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]}}


def job_spec(labels: dict, pod_spec: dict) -> dict:
    """A run-once Job: no retries, bounded in time, removed a while after it finished."""
    return {
        "backoffLimit": 0,
        "activeDeadlineSeconds": JOB_DEADLINE_SECONDS,
        "ttlSecondsAfterFinished": TTL_SECONDS,
        "template": {
            "metadata": {"labels": dict(labels)},
            "spec": {
                "restartPolicy": "Never",
                "automountServiceAccountToken": False,
                "securityContext": {"seccompProfile": {"type": "RuntimeDefault"}},
                **pod_spec,
            },
        },
    }

