"""Stacks the acceptance workloads are rendered for, with what each one must produce.

Expectations are written out by hand from the config values, not computed with the code
under test."""

import copy
from dataclasses import dataclass, field
from typing import Callable, Optional

from config import StackConfig, load
from preview.stack_file import read_stack
from tests.builders import PROJECT_DIR, TEST_HOST_KEY, as_cli_config, bare_metal_config

ALL_FILES = ("gpu-smoke.yaml", "rwx-check.yaml", "mpijob-benchmark.yaml")

GPU_TAINTS = [{"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"},
              {"key": "dedicated", "value": "", "effect": "NoExecute"}]
CPU_TAINTS = [{"key": "pool", "value": "cpu", "effect": "PreferNoSchedule"}]
PROD_GPU_TAINTS = [{"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}]


@dataclass
class Case:
    # Stack config values (key -> value), or the name of a stack file (Pulumi.<name>.yaml).
    values: "Callable[[], dict] | str"
    # GPU host that runs workloads -> its GPU count.
    gpu_hosts: dict[str, int]
    # Taints of every host that runs workloads (host -> taints).
    taints: dict[str, list[dict]] = field(default_factory=dict)
    files: tuple[str, ...] = ALL_FILES
    storage_class: str = "nfs"
    rwx_mode: str = "cross-node"
    # Expected NCCL environment of the MPI workers (None: no MPIJob).
    nccl: Optional[dict[str, str]] = None
    # RDMA device plugin resource each MPI worker asks for (None: sockets, no RDMA).
    rdma_resource: Optional[str] = None
    # Value of EXPECTED_GPUS in the smoke Jobs: the host's count, or "" when GPUs are shared.
    gpu_count_checked: bool = True


def _nccl(ifname: Optional[str] = "eno2", ib: bool = False, debug: str = "INFO") -> dict:
    env = {"NCCL_DEBUG": debug, "NCCL_IB_DISABLE": "0" if ib else "1",
           "NCCL_NET": "IB" if ib else "Socket", "NCCL_NET_PLUGIN": "none"}
    if ifname:
        env["NCCL_SOCKET_IFNAME"] = ifname
    return env


def _mixed_gpus() -> dict:
    values = bare_metal_config(workers=2, gpus=8)
    values["hosts"][2]["gpus"] = 4
    return values


def _tainted() -> dict:
    values = bare_metal_config(workers=2, gpus=4)
    for host in values["hosts"][1:]:
        host["taints"] = copy.deepcopy(GPU_TAINTS)
    values["hosts"].append({"name": "cpu000", "address": "192.168.2.20", "interface": "eno1",
                            "taints": copy.deepcopy(CPU_TAINTS), "sshHostKey": TEST_HOST_KEY})
    return values


def _single_node() -> dict:
    values = bare_metal_config(workers=0)
    values["hosts"] = [{"name": "tower", "address": "192.168.2.1", "interface": "eno2",
                        "role": "controller+worker", "gpus": 2,
                        "gpuModel": "NVIDIA-GeForce-RTX-4090", "sshHostKey": TEST_HOST_KEY}]
    values["storage"] = {"nfs": {"host": "tower", "path": "/srv/nfs"}}
    return values


def _local_path() -> dict:
    values = bare_metal_config(workers=3, gpus=4)
    values["storage"] = {"localPath": {}}
    return values


def _local_path_default_of_two() -> dict:
    values = bare_metal_config(workers=2, gpus=4)
    values["storage"] = {"nfs": {"host": "controller"}, "localPath": {"default": True}}
    return values


def _efs() -> dict:
    values = bare_metal_config(workers=2, gpus=4)
    values["storage"] = {"efs": {"mountTargetAddress": "10.20.1.25", "default": True},
                         "localPath": {}}
    return values


def _infiniband() -> dict:
    values = bare_metal_config(workers=2, gpus=4)
    values["mpi"] = {"nccl": {"infiniband": True, "socketInterface": "ib0", "debug": "TRACE"}}
    return values


def _infiniband_one_worker() -> dict:
    values = bare_metal_config(workers=1, gpus=8)
    values["mpi"] = {"nccl": {"infiniband": True, "rdmaResource": "rdma/hca_shared_devices_a"}}
    return values


def _mixed_interfaces() -> dict:
    values = bare_metal_config(workers=2, gpus=4)
    values["hosts"][2]["interface"] = "enp65s0f0"
    return values


def _cpu_only() -> dict:
    values = bare_metal_config(workers=2, gpus=0)
    for host in values["hosts"]:
        host.pop("gpuModel", None)
    return values


def _gpu_and_cpu_workers() -> dict:
    values = bare_metal_config(workers=2, gpus=4)
    values["hosts"][2]["gpus"] = 0
    del values["hosts"][2]["gpuModel"]
    return values


def _no_operator() -> dict:
    values = bare_metal_config(workers=2, gpus=4)
    values["mpi"] = {"operator": False}
    return values


def _time_sliced() -> dict:
    values = bare_metal_config(workers=2, gpus=4)
    values["gpu"] = {"timeSlicingReplicas": 4}
    return values


CASES = {
    "lab": Case("lab", {"moscow": 4, "madrid": 4, "campos": 4}, nccl=_nccl(),
                files=(*ALL_FILES, "mpijob-team-vision.yaml", "mpijob-team-nlp.yaml")),
    # Two 8-GPU servers on InfiniBand (hybrid: the VPN gateway runs workloads too).
    "prod": Case("prod", {"gpu01": 8, "gpu02": 8},
                 taints={"gpu01": PROD_GPU_TAINTS, "gpu02": PROD_GPU_TAINTS, "vpn-gw": []},
                 storage_class="efs", nccl=_nccl(ifname="eno1", ib=True),
                 rdma_resource="rdma/rdma_shared_device_a",
                 files=(*ALL_FILES, "mpijob-team-research.yaml")),
    # The controller runs no kubelet: one node runs workloads.
    "one-worker": Case(lambda: bare_metal_config(workers=1, gpus=4), {"gpu000": 4},
                       rwx_mode="single-node", nccl=_nccl()),
    "mixed-8-4": Case(_mixed_gpus, {"gpu000": 8, "gpu001": 4}, nccl=_nccl()),
    "tainted-gpus": Case(_tainted, {"gpu000": 4, "gpu001": 4},
                         taints={"gpu000": GPU_TAINTS, "gpu001": GPU_TAINTS,
                                 "cpu000": CPU_TAINTS},
                         nccl=_nccl()),
    "controller+worker": Case(_single_node, {"tower": 2}, rwx_mode="single-node", nccl=_nccl()),
    "local-path": Case(_local_path, {"gpu000": 4, "gpu001": 4, "gpu002": 4},
                       storage_class="local-path", rwx_mode="node-local", nccl=_nccl()),
    "local-path-default-of-two": Case(_local_path_default_of_two, {"gpu000": 4, "gpu001": 4},
                                      storage_class="local-path", rwx_mode="node-local",
                                      nccl=_nccl()),
    "efs-default": Case(_efs, {"gpu000": 4, "gpu001": 4}, storage_class="efs", nccl=_nccl()),
    "infiniband": Case(_infiniband, {"gpu000": 4, "gpu001": 4},
                       nccl=_nccl(ifname="ib0", ib=True, debug="TRACE"),
                       rdma_resource="rdma/rdma_shared_device_a"),
    "infiniband-one-worker": Case(_infiniband_one_worker, {"gpu000": 8}, rwx_mode="single-node",
                                  nccl=_nccl(ib=True),
                                  rdma_resource="rdma/hca_shared_devices_a"),
    "mixed-interfaces": Case(_mixed_interfaces, {"gpu000": 4, "gpu001": 4},
                             nccl=_nccl(ifname=None)),
    # Two nodes run workloads, one has GPUs.
    "gpu-and-cpu-workers": Case(_gpu_and_cpu_workers, {"gpu000": 4}, nccl=_nccl()),
    "time-sliced": Case(_time_sliced, {"gpu000": 4, "gpu001": 4}, nccl=_nccl(),
                        gpu_count_checked=False),
    "cpu-only": Case(_cpu_only, {}, files=("rwx-check.yaml",)),
    "no-mpi-operator": Case(_no_operator, {"gpu000": 4, "gpu001": 4},
                            files=("gpu-smoke.yaml", "rwx-check.yaml")),
}

MPI_CASES = [name for name, case in CASES.items() if "mpijob-benchmark.yaml" in case.files]


def settings_of(case: Case) -> StackConfig:
    if isinstance(case.values, str):
        stack = read_stack(PROJECT_DIR, case.values)
        return load(stack.config, stack.secret_keys, stack=case.values)
    cli = as_cli_config(case.values())
    return load(cli.config, cli.secret_keys, stack="test")


def objects_of_kind(objects: list[dict], kind: str) -> list[dict]:
    return [obj for obj in objects if obj["kind"] == kind]


def tolerates(toleration: dict, taint: dict) -> bool:
    """Kubernetes' rule for a toleration matching a taint."""
    if toleration.get("effect") and toleration["effect"] != taint["effect"]:
        return False
    if toleration.get("operator", "Equal") == "Exists":
        return toleration.get("key") in (None, "", taint["key"])
    return (toleration.get("key") == taint["key"]
            and toleration.get("value", "") == taint.get("value", ""))


def untolerated(tolerations: list[dict], taints: list[dict]) -> list[dict]:
    return [taint for taint in taints
            if not any(tolerates(toleration, taint) for toleration in tolerations)]
