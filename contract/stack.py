"""What the stack says the cluster is: its outputs `nodes`, `pools`, `defaultStorageClass`,
`gateways` and `apiEndpoint` (built in components/cluster.py and components/layouts/), and
the admin kubeconfig, as the doctor and the validation read them. The controllers are the
`nodes` of a control plane role: every layout lists its controllers there (the EC2 one too),
so no output of their own is needed."""

import json
from dataclasses import dataclass, field
from typing import Any, Optional

from contract import ContractError
from contract import outputs as stack_outputs
from contract.kubeconfig import Handout, parse_handout
from contract.names import (
    ADMIN_KUBECONFIG_OUTPUT,
    API_ENDPOINT_OUTPUT,
    CONTROL_PLANE_ROLES,
    DEFAULT_STORAGE_CLASS_OUTPUT,
    GATEWAYS_OUTPUT,
    NODES_OUTPUT,
    ON_PREM_GATEWAY,
    POOLS_OUTPUT,
    REDACTED,
    WORKER_ROLES,
)


@dataclass(frozen=True)
class ExpectedNode:
    name: str
    address: str
    role: str
    gpus: int
    gpu_model: Optional[str] = None

    @property
    def runs_kubelet(self) -> bool:
        # A k0s controller-only host runs no kubelet; an RKE2 server does: either is fine.
        return self.role in WORKER_ROLES

    @property
    def runs_control_plane(self) -> bool:
        return self.role in CONTROL_PLANE_ROLES


@dataclass(frozen=True)
class ExpectedPool:
    name: str
    count: int
    gpus: int
    # The fewest nodes the pool may have: cluster-autoscaler moves it between min and max
    # (outputs written before pools scaled have no min: count).
    min: Optional[int] = None

    @property
    def fewest(self) -> int:
        return self.count if self.min is None else self.min


@dataclass
class Stack:
    source: str
    kubeconfig: Handout
    nodes: list[ExpectedNode] = field(default_factory=list)
    pools: list[ExpectedPool] = field(default_factory=list)
    default_storage_class: Optional[str] = None
    # Hybrid stacks export their VPN's on-premises end (`gateways.onPrem`,
    # components/layouts/hybrid.py): nodes on the other side are reached through the tunnel, never
    # the default route.
    vpn: bool = False
    # `apiEndpoint`: where nodes and users reach the API (the control plane's endpoint).
    api_endpoint: Optional[str] = None

    @property
    def controllers(self) -> list[ExpectedNode]:
        """The hosts that run the control plane, in config order."""
        return [node for node in self.nodes if node.runs_control_plane]

    def node(self, name: str) -> Optional[ExpectedNode]:
        return next((node for node in self.nodes if node.name == name), None)

    def pool(self, name: str) -> Optional[ExpectedPool]:
        return next((pool for pool in self.pools if pool.name == name), None)


def planned_source(stack: Optional[str], outputs_file: Optional[str]) -> str:
    """The source as read() names it, for a report written when it could not be read."""
    if outputs_file is not None:
        return ("the outputs on standard input" if outputs_file == "-"
                else f"outputs file '{outputs_file}'")
    return f"stack '{stack}'" if stack else "no stack named"


def read(stack: Optional[str], outputs_file: Optional[str], cwd: Optional[str]) -> Stack:
    """The outputs of `stack` (through the Pulumi CLI) or of an export; ContractError when
    they cannot be read or do not have the program's shape."""
    if outputs_file is not None:
        values = stack_outputs.from_file(outputs_file)
    else:
        values = stack_outputs.from_stack(stack, cwd)
    kubeconfig = parse_handout(values.admin_kubeconfig(),
                               f"output '{ADMIN_KUBECONFIG_OUTPUT}' of {values.source}")
    nodes = _list(values, NODES_OUTPUT, required=True)
    pools = _list(values, POOLS_OUTPUT, required=False)
    source = values.source
    try:
        return Stack(
            source, kubeconfig,
            nodes=[ExpectedNode(str(n["name"]), str(n["address"]), str(n.get("role", "worker")),
                                int(n.get("gpus") or 0), n.get("gpuModel")) for n in nodes],
            pools=[ExpectedPool(str(p["name"]), int(p.get("count") or 0),
                                int(p.get("gpus") or 0),
                                None if p.get("min") is None else int(p["min"]))
                   for p in pools],
            default_storage_class=_optional_string(
                values.values.get(DEFAULT_STORAGE_CLASS_OUTPUT)),
            vpn=ON_PREM_GATEWAY in (values.values.get(GATEWAYS_OUTPUT) or {}),
            api_endpoint=_optional_string(values.values.get(API_ENDPOINT_OUTPUT)))
    except (KeyError, TypeError, ValueError, AttributeError):
        raise ContractError(f"outputs '{NODES_OUTPUT}'/'{POOLS_OUTPUT}' of {source} are not "
                            "lists of objects with name, address, role and gpus (as the program "
                            "exports them)") from None


def _list(values: stack_outputs.StackOutputs, name: str, required: bool) -> list[dict]:
    value: Any = values.require(name) if required else values.values.get(name) or []
    if isinstance(value, str):  # a stringified output
        try:
            value = json.loads(value)
        except ValueError:
            value = None
    if not isinstance(value, list) or not all(isinstance(item, dict) for item in value):
        raise ContractError(f"output '{name}' of {values.source} is not a list of objects")
    return value


def _optional_string(value: Any) -> Optional[str]:
    return value if isinstance(value, str) and value and value != REDACTED else None
