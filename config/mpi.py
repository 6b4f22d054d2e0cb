"""The MPI section: the operator, and NCCL's transport for the acceptance MPIJob."""

import re
from typing import Annotated, Literal, Optional

from pydantic import AfterValidator, model_validator

from config.model_base import Section
from config.types import InterfaceName


# A device plugin's extended resource, e.g. rdma/rdma_shared_device_a. Kubernetes' rule
# (pkg/apis/core/helper/helpers.go IsExtendedResourceName): a '/' outside kubernetes.io, no
# "requests." prefix, and "requests.<name>" a qualified name (DNS-subdomain prefix of at most
# 253 characters, name part of at most 63).
_RESOURCE_PREFIX = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")
_RESOURCE_NAME = re.compile(r"[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?")


def _extended_resource_name(value: str) -> str:
    prefix, slash, name = value.partition("/")
    if (not slash or "kubernetes.io" in prefix or value.startswith("requests.")
            or len(f"requests.{prefix}") > 253 or not _RESOURCE_PREFIX.fullmatch(prefix)
            or len(name) > 63 or not _RESOURCE_NAME.fullmatch(name)):
        raise ValueError(f"'{value}' is not an extended resource name like "
                         "rdma/rdma_shared_device_a (<domain>/<name>, outside kubernetes.io)")
    return value


ExtendedResourceName = Annotated[str, AfterValidator(_extended_resource_name)]


class NcclSettings(Section):
    # NCCL over InfiniBand/RoCE (its IB transport) between nodes; off sends NCCL traffic over
    # TCP sockets. On, the acceptance MPIJob's workers ask for `rdma_resource` and fail unless
    # NCCL reports the IB transport.
    infiniband: bool = False
    """NCCL over InfiniBand/RoCE (its IB transport, required by the acceptance MPIJob); off uses TCP
    sockets."""
    # The RDMA device plugin's resource (one per worker): NVIDIA Network Operator's / the
    # k8s-rdma-shared-dev-plugin's shared HCA resource by default.
    rdma_resource: ExtendedResourceName = "rdma/rdma_shared_device_a"
    """RDMA device plugin resource each acceptance MPI worker asks for (one) with `infiniband`."""
    # NIC NCCL uses for sockets; defaults to the GPU hosts' configured interface.
    socket_interface: Optional[InterfaceName] = None
    """NIC for NCCL sockets; defaults to the GPU hosts' `interface`."""
    debug: Literal["WARN", "INFO", "TRACE"] = "INFO"
    """`NCCL_DEBUG` level of the acceptance MPIJob; `INFO` or `TRACE` with `infiniband` (the check
    reads NCCL's INFO lines)."""

    @model_validator(mode="after")
    def _transport_visible(self) -> "NcclSettings":
        # The IB check reads NCCL's INFO lines ("Using network IB"); WARN prints none.
        if self.infiniband and self.debug == "WARN":
            raise ValueError("debug WARN hides the NCCL INFO lines that show the InfiniBand "
                             "transport in use; with infiniband set debug to INFO or TRACE")
        return self


class MpiSettings(Section):
    operator: bool = True
    """Install the Kubeflow MPI operator."""
    nccl: NcclSettings = NcclSettings()
    """How NCCL talks between the acceptance MPIJob's workers."""
