"""What a Kubernetes distribution gives the rest of the program: the scripts that install,
join, admit, remove and reset a node, the inputs those scripts take, the ports its control
plane needs, how workers get their join tokens, and how the NVIDIA runtime reaches its
containerd. Nothing outside components/distributions/ knows which distribution it is."""

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Optional, Protocol

import pulumi

from components.remote_step import Script
from config.model import POOL_LABEL, Host, WorkerPool


@dataclass(frozen=True)
class JoinToken:
    """A worker's join token, and the URN of the step that issued it: the join names it
    when the API refuses the token, as `pulumi up --replace` on it issues a new one."""
    value: pulumi.Output[str]
    issued_by: pulumi.Output[str]


class Distribution(Protocol):
    name: str
    install_controller: Script
    join_worker: Script
    reset_node: Script
    # Run on the controller for each worker right before its join; prints the token.
    create_join_token: Script
    admit_node: Script
    remove_node: Script
    apply_worker_profile: Script
    # kubectl on a node, as a command line, and by absolute path for systemd units.
    kubectl: str
    kubectl_path: str
    controller_service: str
    kubelet_root_dir: str
    containerd_dropin_dir: str
    # Ports beyond the API's that nodes reach the control plane at: name -> TCP port. The
    # names become the security group rules' names.
    control_plane_ports: Mapping[str, int]

    def node_env(self, node: Host | WorkerPool, node_ip: str) -> dict[str, str]: ...

    def controller_env(self, host: Host, ca_cert_pem: pulumi.Input[str],
                       extra_sans: pulumi.Input[Sequence[str]] = ()) -> dict: ...

    def ca_key_env(self, ca_key_pem: pulumi.Input[str]) -> dict:
        """The cluster CA's key for install-controller, given over SSH."""

    def ca_key_from_ssm_env(self, parameter: str) -> dict:
        """The same, read by the instance at boot from an SSM SecureString."""

    def join_env(self, token: JoinToken) -> dict:
        """join-worker's token inputs, over SSH."""

    def join_from_ssm_env(self, parameter: str) -> dict:
        """The same, read by a pool's instance at boot from an SSM SecureString."""

    def pool_join_token(self, api_endpoint: str, ca_cert_pem: str,
                        bootstrap_token: str) -> str:
        """The join token a pool's instances share, holding `bootstrap_token` (a Kubernetes
        bootstrap token `<id>.<secret>` the program registers)."""

    def worker_profile_values(self) -> str: ...

    def nvidia_runtime_dropin(self) -> Optional[str]: ...


def node_labels(node: "Host | WorkerPool") -> dict[str, str]:
    """Labels from config plus the GPU labels the GPU add-ons select nodes by."""
    labels = {POOL_LABEL: node.name} if isinstance(node, WorkerPool) else {}
    if node.gpus:
        labels["nvidia.com/gpu.present"] = "true"
        if node.gpu_model:
            labels["nvidia.com/gpu.product"] = node.gpu_model
    labels.update(node.labels)
    return labels
