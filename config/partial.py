"""The sections of a stack config that parsed, for the cross-field checks."""

from dataclasses import dataclass, field
from typing import Optional

from config.access import AccessSettings
from config.backup import BackupSettings
from config.cloud import AwsSettings, VpnSettings
from config.firewall import HostFirewallSettings
from config.images import ImagesSettings
from config.kubeflow import KubeflowSettings
from config.kubernetes import KubernetesSettings
from config.monitoring import MonitoringSettings
from config.model import Host, HostTuning, NetworkSettings, NvidiaSettings, SshSettings
from config.release_pins import VersionOverrides
from config.storage import StorageSettings


@dataclass
class PartialConfig:
    """The sections of a stack config that parsed; None where a section did not."""

    layout: Optional[str] = None
    network: Optional[NetworkSettings] = None
    ssh: Optional[SshSettings] = None
    tuning: Optional[HostTuning] = None
    nvidia: Optional[NvidiaSettings] = None
    host_firewall: Optional[HostFirewallSettings] = None
    hosts: list[tuple[int, Host]] = field(default_factory=list)
    all_hosts_parsed: bool = True
    storage: Optional[StorageSettings] = None
    aws: Optional[AwsSettings] = None
    vpn: Optional[VpnSettings] = None
    pools: list = field(default_factory=list)
    all_pools_parsed: bool = True
    has_aws: bool = False
    has_vpn: bool = False
    has_ssh_private_key: bool = False
    # The public half of sshPrivateKey when it parses; "" otherwise.
    ssh_public_key: str = ""
    has_bastion_private_key: bool = False
    vpn_client_profile: str = ""
    kubeflow: Optional[KubeflowSettings] = None
    has_kubeflow: bool = False
    kubeflow_password: str = ""
    kubeflow_tls_key: str = ""
    # kubeflowPasswordHashes and kubeflowConnectorSecrets: name -> secret text.
    kubeflow_password_hashes: dict = field(default_factory=dict)
    kubeflow_connector_secrets: dict = field(default_factory=dict)
    access: Optional[AccessSettings] = None
    backup: Optional[BackupSettings] = None
    monitoring: Optional[MonitoringSettings] = None
    kubernetes: Optional[KubernetesSettings] = None
    versions: Optional[VersionOverrides] = None
    images: Optional[ImagesSettings] = None
    image_mirror_password: str = ""
