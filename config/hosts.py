"""The machines of the stack config: on-prem hosts (`gpu-cluster:hosts`), their taints,
and the EC2 worker pools of the cloud layout (`gpu-cluster:pools`). StackConfig
(config/model.py) holds them as two of its fields."""

from typing import Annotated, Literal, Optional, Union

from pydantic import AfterValidator, BeforeValidator, Field

from contract.names import CONTROL_PLANE_ROLES, WORKER_ROLES

from config.model_base import Section
from config.types import (
    CapacityReservationId,
    DnsLabel,
    Ec2InstanceType,
    HostOrIp,
    InterfaceName,
    IPv4,
    LabelKey,
    LabelValue,
    SshPublicKey,
    UserName,
)

Role = Literal["controller", "worker", "controller+worker"]
# Roles whose host runs the Kubernetes control plane / a kubelet: CONTROL_PLANE_ROLES,
# WORKER_ROLES (contract/names.py, which the tools read too).

# The machine generation (hosts[].generation) of a replaced host's node.
MACHINE_GENERATION_LABEL = "gpu-cluster/machine-generation"


class Taint(Section):
    key: LabelKey
    """The taint's key, a Kubernetes label key."""
    value: LabelValue = ""
    """The taint's value, a Kubernetes label value (may be empty)."""
    effect: Literal["NoSchedule", "PreferNoSchedule", "NoExecute"]
    """What the taint does to pods that do not tolerate it."""


def _unique_taints(taints: list[Taint]) -> list[Taint]:
    # A node refuses to register with two taints of the same key and effect.
    seen = set()
    for taint in taints:
        if (taint.key, taint.effect) in seen:
            raise ValueError(f"taint {taint.key}:{taint.effect} is listed twice; Kubernetes "
                             "allows one taint per key and effect")
        seen.add((taint.key, taint.effect))
    return taints


Taints = Annotated[list[Taint], AfterValidator(_unique_taints)]


def _nvswitch(value):
    # `pulumi config set --path` stores true/false as strings unless told otherwise.
    if isinstance(value, bool) or value == "auto":
        return value
    if value in ("true", "false"):
        return value == "true"
    raise ValueError(f"must be auto, true or false, got {value!r}")


NvSwitch = Annotated[Union[Literal["auto"], bool], BeforeValidator(_nvswitch)]


class Host(Section):
    name: DnsLabel
    """Host name; must equal the host's hostname; unique."""
    # Address on the cluster LAN: the node IP and where the CNI is pinned.
    address: IPv4
    """The host's LAN address (node IP); unique, inside `network.lanCidr`."""
    ssh_address: Optional[HostOrIp] = None
    """Where SSH reaches the host, when different; unset: `address`."""
    ssh_user: Optional[UserName] = None
    """SSH user for this host; unset: `ssh.user`."""
    ssh_host_key: Optional[SshPublicKey] = None
    """The host's SSH host key (`ssh-ed25519 AAAA...` or ECDSA; not RSA), from `ssh-keyscan -t
    ed25519 ADDRESS` with its fingerprint checked out of band ([SSH host
    keys](layouts.md#ssh-host-keys)); required on bare-metal and hybrid unless
    `ssh.acceptAnyHostKey`."""
    interface: Optional[InterfaceName] = None
    """NIC carrying `address`; preflight checks it (multi-NIC hosts)."""
    role: Role = "worker"
    """`controller`, `worker` or `controller+worker`; 1, 3 or 5 controllers (an even count adds no
    failure tolerance to etcd)."""
    gpus: int = Field(default=0, ge=0, le=64)
    """NVIDIA GPUs in the host; > 0 installs the driver and toolkit (as `nvidia.installDriver` and
    `nvidia.installToolkit` say), and `verify-boot` requires `nvidia-smi` to list this many."""
    # Written to the node as nvidia.com/gpu.product, the label GPU Feature Discovery uses.
    gpu_model: Optional[LabelValue] = None
    """Node label `nvidia.com/gpu.product`, e.g. `NVIDIA-A100-SXM4-80GB`."""
    # NVSwitches (HGX A100/H100/H200 boards): their GPUs run CUDA only with NVIDIA Fabric
    # Manager, which install-nvidia installs at the driver's version. auto: when they are on
    # the PCI bus; false: never (it is yours to run).
    nvswitch: NvSwitch = "auto"
    """NVIDIA Fabric Manager and NSCQ at the driver's version (HGX boards with NVSwitches need them
    for CUDA): `auto` when NVSwitches are on the PCI bus, `true` always, `false` never."""
    labels: dict[LabelKey, LabelValue] = {}
    """Node labels (GPU hosts also get `nvidia.com/gpu.present=true`)."""
    taints: Taints = []
    """Node taints: `key`, `value`, `effect`; a GPU host's `nvidia.com/gpu:NoSchedule` is tolerated
    by every pod that requests `nvidia.com/gpu`."""
    maintenance: Optional[bool] = None
    """`true` cordons and drains the node from the controller (it stays in the cluster); `false`
    uncordons; unset leaves the cordon alone ([Machines](day-2.md#machines))."""
    install_driver: Optional[bool] = None
    """This host's own answer: `false` keeps its driver, of any branch (a vGPU guest's, an image's);
    preflight names the branch it found; unset: `nvidia.installDriver`."""
    install_toolkit: Optional[bool] = None
    """This host's own answer: `false` leaves the container toolkit and containerd's `nvidia`
    runtime to the host (the preview warns); unset: `nvidia.installToolkit`."""
    # Raised by the user when the machine behind this name is new hardware: its steps run
    # again on it, and the old node object is removed before it joins (README, Day-2).
    generation: int = Field(default=0, ge=0, le=1_000_000)
    """Raise it by one when the machine behind the name is new hardware: its steps run again on it
    and the old node object is removed first ([Machines](day-2.md#machines)); workers, and
    with 3 or 5 controllers every controller but the first."""

    @property
    def runs_control_plane(self) -> bool:
        return self.role in CONTROL_PLANE_ROLES

    @property
    def runs_workloads(self) -> bool:
        return self.role in WORKER_ROLES


class WorkerPool(Section):
    """EC2 instances of one type that join the cluster at boot (cloud layout)."""

    name: DnsLabel
    """Pool name (a DNS label)."""
    instance_type: str = Field(pattern=r"^[a-z0-9-]+\.[a-z0-9]+$",
                               max_length=64)
    """EC2 instance type; GPU pools must use an NVIDIA GPU family (`p3`, `p4d`, `p5`, `g4dn`, `g5`,
    `g6`, `g6e`, ...); Kepler families (`p2`, `g2`) are refused: the pinned driver branch does not
    support them."""
    count: int = Field(ge=0, le=1000)
    """Instances: the auto scaling group's size when it is created; afterwards cluster-autoscaler
    sets it between `min` and `max` (a fixed pool, `min` = `max` = `count`, follows `count`)."""
    min: Optional[int] = Field(default=None, ge=0, le=1000)
    """The fewest instances cluster-autoscaler may leave (0 lets the pool scale to zero); unset:
    `count`."""
    max: Optional[int] = Field(default=None, ge=0, le=1000)
    """The most instances cluster-autoscaler may start; unset: `count`. A pool with `min` < `max` is
    tagged for cluster-autoscaler's auto-discovery ([Scaling pools](layouts.md#scaling-pools))."""
    capacity: Literal["on-demand", "spot", "mixed"] = "on-demand"
    """Which EC2 capacity the instances run on: `on-demand`, `spot` (interruptible), or `mixed`
    (`onDemandBase` instances and `onDemandPercentage` of the rest on-demand, the others spot)."""
    instance_types: list[Ec2InstanceType] = []
    """More instance types for `spot` and `mixed` pools, beside `instanceType` (tried first), each
    with the same GPUs (count, model, architecture) as `instanceType`; more types, deeper spot
    pools."""
    on_demand_base: Optional[int] = Field(default=None, ge=0, le=1000)
    """`mixed` only: the first instances that are on-demand; unset: `min`."""
    on_demand_percentage: int = Field(default=0, ge=0, le=99)
    """`mixed` only: the percentage of instances above `onDemandBase` that are on-demand (the rest
    are spot)."""
    capacity_reservation: Optional[CapacityReservationId] = None
    """An EC2 capacity reservation (`cr-...`) the instances launch into, and only into; its
    instance type and Availability Zone must be the pool's ([Reserved
    capacity](layouts.md#reserved-capacity))."""
    capacity_block: bool = False
    """`capacityReservation` is a Capacity Block for ML: instances launch with market type
    `capacity-block`, and only while the block is active."""
    gpus: int = Field(default=0, ge=0, le=16)
    """NVIDIA GPUs per instance."""
    gpu_model: Optional[LabelValue] = None
    """Node label `nvidia.com/gpu.product`."""
    # Default: AWS's Deep Learning Base GPU AMI (Ubuntu 22.04) pinned by name in
    # config/versions.py, which ships the NVIDIA driver, the container toolkit and the
    # AWS CLI.
    ami: Optional[str] = Field(default=None, pattern=r"^ami-[0-9a-f]{8,17}$")
    """Image id; default: AWS's Deep Learning Base GPU AMI (Ubuntu 22.04), with the driver, pinned
    by name in `config/versions.py` (the id is the `images` output)."""
    install_driver: bool = False
    """Install the pinned driver at boot (an `ami` without one)."""
    root_volume_gb: int = Field(default=200, ge=50, le=16384)
    """Encrypted gp3 root volume size."""
    labels: dict[LabelKey, LabelValue] = {}
    """Node labels."""
    taints: Taints = []
    """Node taints, set when the node registers."""
    # All instances in one cluster placement group (one zone, low-latency network) for
    # multi-node training.
    placement_group: bool = False
    """One cluster placement group (one zone) for multi-node training."""

    @property
    def min_size(self) -> int:
        return self.count if self.min is None else self.min

    @property
    def max_size(self) -> int:
        return self.count if self.max is None else self.max

    @property
    def scales(self) -> bool:
        """cluster-autoscaler may change its size."""
        return self.min_size < self.max_size

    @property
    def on_demand_base_size(self) -> int:
        return self.min_size if self.on_demand_base is None else self.on_demand_base
