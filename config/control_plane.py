"""The control plane's endpoint: where nodes and users reach the Kubernetes API, derived
once from the config. Today one controller: its address (a host's, or the EC2 control
plane's fixed private one on hybrid and cloud)."""

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Optional

from config.cloud import AwsSettings, control_plane_address
from config.hosts import Host
from config.kubernetes import KubernetesSettings


@dataclass(frozen=True)
class ControlPlaneEndpoint:
    # Where nodes reach the API and the distribution's join or supervisor port (the join
    # tokens' and agents' address); users too, unless a layout gives them a public one.
    node_address: str
    # kubernetes.apiPort.
    port: int
    # kubernetes.apiSans: the API certificate's names beyond the endpoint's own.
    api_sans: tuple[str, ...] = ()

    @property
    def node_url(self) -> str:
        return f"https://{self.node_address}:{self.port}"

    def sans(self, public: Sequence[str] = ()) -> list[str]:
        """The API certificate's names: the endpoint, the layout's public addresses (known
        at `up`), kubernetes.apiSans."""
        return [self.node_address, *public, *self.api_sans]


def control_plane_endpoint(controllers: Sequence[Host], aws: Optional[AwsSettings],
                           kubernetes: KubernetesSettings) -> ControlPlaneEndpoint:
    """The first controller host's address; with none among the hosts (hybrid, cloud), the
    EC2 control plane's fixed private one."""
    address = controllers[0].address if controllers else control_plane_address(aws)
    return ControlPlaneEndpoint(node_address=address, port=kubernetes.api_port,
                                api_sans=tuple(kubernetes.api_sans))
