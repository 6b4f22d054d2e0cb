"""mpi.nccl settings the acceptance MPIJob depends on: the RDMA resource name and a debug level
that shows the transport."""

import pytest

from config import load
from config.problems import ConfigError
from tests.builders import as_cli_config, bare_metal_config


def load_nccl(nccl: dict):
    values = bare_metal_config(workers=2, gpus=4)
    values["mpi"] = {"nccl": nccl}
    cli = as_cli_config(values)
    return load(cli.config, cli.secret_keys, stack="test")


def problems_of(nccl: dict) -> list[str]:
    with pytest.raises(ConfigError) as caught:
        load_nccl(nccl)
    return [str(problem) for problem in caught.value.problems]


def test_defaults():
    nccl = load_nccl({}).mpi.nccl
    assert (nccl.infiniband, nccl.rdma_resource, nccl.debug) == (
        False, "rdma/rdma_shared_device_a", "INFO")


@pytest.mark.parametrize("name", ["rdma/rdma_shared_device_a", "rdma/hca_shared_devices_a",
                                  "rdma/ib", "nvidia.com/hostdev", "example.com/mlx5_vf-1"])
def test_extended_resource_names_are_accepted(name):
    assert load_nccl({"infiniband": True, "rdmaResource": name}).mpi.nccl.rdma_resource == name


# Kubernetes' IsExtendedResourceName (pkg/apis/core/helper/helpers.go) refuses each of these.
@pytest.mark.parametrize("name", [
    "rdma",  # no domain: a native resource name
    "kubernetes.io/rdma", "rdma.kubernetes.io/hca",  # the kubernetes.io namespace
    "requests.rdma/hca",  # quota's prefix
    "RDMA/hca", "rdma..x/hca", "-rdma/hca",  # not a DNS subdomain
    "rdma/", "rdma/-hca", "rdma/hca/a", "rdma/" + "h" * 64,  # not a qualified name part
    'rdma/hca"; echo',
])
def test_other_resource_names_are_refused_naming_the_key(name):
    (problem,) = problems_of({"rdmaResource": name})
    assert problem.startswith("gpu-cluster:mpi.nccl.rdmaResource: ")
    assert "is not an extended resource name" in problem


def test_infiniband_needs_a_debug_level_that_logs_the_transport():
    (problem,) = problems_of({"infiniband": True, "debug": "WARN"})
    assert problem.startswith("gpu-cluster:mpi.nccl: debug WARN hides the NCCL INFO lines")
    assert load_nccl({"infiniband": False, "debug": "WARN"}).mpi.nccl.debug == "WARN"
    assert load_nccl({"infiniband": True, "debug": "TRACE"}).mpi.nccl.debug == "TRACE"
