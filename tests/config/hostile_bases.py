"""What the hostile-value test starts each key from: the stack file it edits, the
settings that put the key in use, and a valid value where the stack file has none."""

import copy

from tests.kubeflow.certificates import make_certificate

# Values for keys the stack files leave unset.
CERTIFICATE, TLS_KEY = make_certificate("192.168.2.2", days=3650)
PROFILE = "client\ndev tun\nproto udp\nremote 192.168.10.5 1194\n"
EXAMPLES = {
    "access.flavorOrder[]": "on-prem",
    "access.teams[].quota.flavors[].name": "on-prem",
    "access.teams[].containerDefaults.cpuLimit": "2",
    "access.teams[].containerDefaults.cpuRequest": "100m",
    "access.teams[].containerDefaults.memoryLimit": "4Gi",
    "access.teams[].containerDefaults.memoryRequest": "256Mi",
    "access.teams[].podSecurity": "baseline",
    "access.teams[].quota.cpu": "8",
    "access.teams[].quota.memory": "64Gi",
    "access.teams[].quota.storage": "1Ti",
    "access.users[].groups[]": "researchers",
    "access.users[].namespaces[]": "vision",
    "aws.controlPlane.ami": "ami-0123456789abcdef0",
    "aws.controlPlane.generations{key}": "control-plane-2",
    "aws.controlPlane.generations{value}": 1,
    "aws.controlPlane.name": "control-plane",
    "aws.controlPlane.privateIp": "10.30.0.10",
    "aws.controlPlane.sshHostKey": "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIKPvBQLorBQY59OKCmXrgRZHMkIaXzJ4GpXZeV6uGFIw",
    "aws.vpc.egress": "public",
    "aws.vpc.id": "vpc-0123456789abcdef0",
    "aws.vpc.privateSubnetCidrs[]": "10.30.10.0/24",
    "aws.vpc.poolSubnetCidrs[]": "10.20.1.0/24",
    "aws.vpc.privateSubnetIds[]": "subnet-0123456789abcdef0",
    "aws.vpc.routeTableIds[]": "rtb-0123456789abcdef0",
    "aws.vpc.subnetCidrs[]": "10.30.0.0/24",
    "aws.vpc.subnetIds[]": "subnet-0123456789abcdef1",
    "bastionPrivateKey": None,  # the stack's SSH key
    "gpu.migStrategy": "none",
    "hosts[].labels{key}": "example.com/rack",
    "hosts[].labels{value}": "r1",
    "hosts[].nvswitch": "auto",
    "hosts[].role": "worker",
    "hosts[].sshAddress": "203.0.113.20",
    "hosts[].sshHostKey": "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIKPvBQLorBQY59OKCmXrgRZHMkIaXzJ4GpXZeV6uGFIw",
    "hosts[].sshUser": "ops",
    "hosts[].taints[].effect": "NoSchedule",
    "hosts[].taints[].key": "nvidia.com/gpu",
    "hosts[].taints[].value": "present",
    "kubeflow.access.hostname": "kubeflow.example.com",
    "kubeflow.access.listenAddress": "127.0.0.1",
    "kubeflow.access.mode": "nodePort",
    "kubeflow.access.sourceRanges[]": "198.51.100.0/24",
    "kubeflow.access.tls.certificate": CERTIFICATE,
    "kubeflow.access.tls.mode": "selfSigned",
    "kubeflow.components[]": "profiles",
    "images.mirror.registry": "harbor.example.internal/proxy",
    "images.mirror.registries{key}": "docker.io",
    "images.mirror.registries{value}": "harbor.example.internal/dockerhub",
    "images.mirror.upstreams[]": "registry.example.com",
    "images.mirror.ca": CERTIFICATE,
    "images.mirror.username": "robot$proxy+nodes",
    "images.mirror.pullPolicy": "IfNotPresent",
    "imageMirrorPassword": "a-long-test-password",
    "kubernetes.releaseUrl": "https://files.example.internal/k0s",
    "nvidia.aptMirror": "https://apt.example.internal/nvidia",
    "kubeflow.imageMirror.pullPolicy": "IfNotPresent",
    "kubeflow.imageMirror.registries{key}": "docker.io",
    "kubeflow.imageMirror.registries{value}": "registry.example.internal/dockerhub",
    "kubeflow.imageMirror.registry": "registry.example.internal/kubeflow",
    "kubeflow.katib.mysql.storageClass": "nfs",
    "kubeflow.katib.mysql.storageSize": "10Gi",
    "kubeflow.pipelines.mysql.storageClass": "nfs",
    "backup.path": "/mnt/backups",
    "backup.recipients[]": "age1jrhjtn2rvyheaj4zywcdp6e2ugecmx9aveej8syxafje9qvah9nqe2cz9y",
    "backup.schedule": "*-*-* 03:30:00",
    "backup.restorePrincipals[]": "arn:aws:iam::123456789012:role/restore-operators",
    "kubeflow.pipelines.mysql.storageSize": "20Gi",
    "kubeflow.source.path": "/opt/kubeflow-manifests",
    "kubeflow.source.ref": "26.03",
    "kubeflow.source.repository": "https://github.com/kubeflow/manifests",
    "kubeflow.user.email": "ada@example.com",
    "kubeflow.user.name": "ada",
    "kubeflowPassword": "a long test passphrase",
    "access.users[].email": "ops@example.com",
    "kubeflowConnectorSecrets{key}": "corp",
    "kubeflowConnectorSecrets{value}": "a client secret",
    **{f"kubeflow.connectors[].{key}": value for key, value in {
        "type": "oidc", "id": "corp", "name": "Corp SSO", "issuer": "https://login.example.com",
        "clientId": "kubeflow", "scopes[]": "email", "host": "ldap.example.com:636",
        "bindDn": "cn=kubeflow,dc=example,dc=com", "rootCa": CERTIFICATE,
        "userSearch.baseDn": "dc=example,dc=com", "userSearch.filter": "(objectClass=person)",
        "userSearch.username": "mail", "userSearch.idAttr": "uid",
        "userSearch.emailAttr": "mail", "userSearch.nameAttr": "cn"}.items()},
    "kubeflow.user.profile": "kubeflow-ada",
    "kubeflowTlsKey": TLS_KEY,
    "kubernetes.apiSans[]": "k8s.example.com",
    "kubernetes.controlPlane.address": "api.lab.example.com",
    "kubernetes.controlPlane.loadBalancer": "external",
    "kubernetes.controlPlane.vip.interface": "bond0",
    "kubernetes.distribution": "k0s",
    "kubernetes.version": "v1.36.3+k0s.2",
    "kubernetes.workerTokenExpiry": "2h",
    "kubernetes.upgrade.maxUnavailable": "25%",
    "monitoring.grafana.access.hostname": "grafana.example.com",
    "monitoring.grafana.access.mode": "portForward",
    "monitoring.grafana.access.sourceRanges[]": "198.51.100.0/24",
    "monitoring.namespace": "monitoring",
    "monitoring.retention": "15d",
    "monitoring.scrapeInterval": "30s",
    "monitoring.storageClass": "nfs",
    "monitoring.storageSize": "20Gi",
    "mpi.nccl.debug": "INFO",
    "mpi.nccl.rdmaResource": "rdma/rdma_shared_device_a",
    "mpi.nccl.socketInterface": "eno1",
    "network.cni": "calico",
    "nvidia.containerToolkitVersion": "1.19.1-1",
    "nvidia.driverBranch": "580",
    "pools[].ami": "ami-0123456789abcdef0",
    "pools[].capacity": "spot",
    "pools[].capacityReservation": "cr-0123456789abcdef0",
    "pools[].instanceTypes[]": "g5.24xlarge",
    "pools[].gpuModel": "NVIDIA-A10G",
    "pools[].labels{key}": "example.com/tier",
    "pools[].labels{value}": "batch",
    "pools[].taints[].effect": "NoSchedule",
    "pools[].taints[].key": "example.com/batch",
    "pools[].taints[].value": "yes",
    "ssh.authorizedKeys[]": "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIGZ0b29sZWRtZWFuZDI1NTE5a2V5Zm9ydGVzdHM ops@new",
    "ssh.revokedKeys[]": "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIG9sZGtleW9mdGhlbGFwdG9wdGhhdGlzZ29uZW5vdw old@laptop",
    "ssh.bastion.hostKey": "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIKPvBQLorBQY59OKCmXrgRZHMkIaXzJ4GpXZeV6uGFIw",
    "ssh.bastion.user": "jump",
    "storage.efs.mountTargetAddress": "10.20.0.20",
    "storage.efs.mountOptions[]": "hard",
    "storage.efs.path": "/",
    "storage.efs.directoryPerms": "700",
    "storage.efs.issuerBucket": "gpu-lab-issuer",
    "storage.localPath.path": "/opt/local-path-provisioner",
    "storage.nfs.server": "192.168.2.50",
    "storage.nfs.mountOptions[]": "hard",
    "tuning.cpuManagerPolicy": "none",
    "tuning.extraKernelArgs[]": "pcie_aspm=off",
    "tuning.kubeletResolvConf": "/run/systemd/resolve/resolv.conf",
    "tuning.reservedCpus": "0-1",
    "versions.releaseSha256{key}": "amd64",
    "versions.releaseSha256{value}": "0123456789abcdef" * 4,
    "versions.airgapBundleSha256{key}": "amd64",
    "versions.airgapBundleSha256{value}": "0123456789abcdef" * 4,
    "packages.aptMirror": "https://apt.example.internal/ubuntu",
    "packages.aptSecurityMirror": "https://apt.example.internal/ubuntu-security",
    "packages.epelMirror": "https://rpm.example.internal/epel",
    "time.ntpServers[]": "ntp1.example.internal",
    "autoscaling.scaleDownUnneededTime": "30m",
    "hostFirewall.extraSources[]": "172.27.232.2/32",
    "vpn.existingServerAddress": "192.168.10.5",
    "vpn.tunnelCidr": "10.8.0.0/24",
    "vpn.mode": "server-on-ec2",
    "vpn.userNetworks{key}": "carol",
    "vpn.userNetworks{value}": ["192.168.10.0/24"],
    "vpn.userNetworks{value}[]": "192.168.10.0/24",
    "vpn.protocol": "udp",
    "vpnClientProfile": PROFILE,
}


def stack_for(path: str) -> str:
    # Route tables route the on-prem LAN, the pools' adopted subnets are admitted there:
    # hybrid only.
    if path.startswith(("aws.vpc.routeTableIds", "aws.vpc.poolSubnetCidrs")):
        return "prod"  # hybrid
    # The access points' keys are the cloud layout's (its StorageClass renders them).
    if path.startswith(("aws.", "pools", "autoscaling.", "backup.restorePrincipals",
                        "storage.efs.directoryPerms")):
        return "dev"  # cloud
    if path.startswith(("vpn", "storage.efs", "kubeflow.access.sourceRanges",
                        "monitoring.grafana.access.sourceRanges")):
        return "prod"  # hybrid
    return "lab"  # bare metal


def _client_to_existing(values: dict) -> None:
    values["vpn"] = {"mode": "client-to-existing", "existingServerAddress": "192.168.10.5"}


def _own_certificate(values: dict) -> None:
    values["kubeflow"]["access"] = {"tls": {"mode": "certificate", "certificate": CERTIFICATE}}
    values["kubeflowTlsKey"] = TLS_KEY


def _local_path_beside_nfs(values: dict) -> None:
    values["storage"]["nfs"]["default"] = True
    values["storage"]["localPath"] = {}


def _nat(values: dict) -> None:
    values["aws"]["vpc"]["egress"] = "nat"
    values["aws"]["vpc"]["privateSubnetCidrs"] = ["10.30.10.0/24", "10.30.11.0/24"]


def _two_subnets(values: dict) -> None:
    values["aws"]["vpc"]["subnetCidrs"] = ["10.30.0.0/24", "10.30.1.0/24"]


def _three_controllers(values: dict) -> None:
    values["aws"]["vpc"]["availabilityZones"] = 3
    values.setdefault("kubernetes", {})["controlPlane"] = {"replicas": 3}


def _adopted_vpc(values: dict) -> None:
    values["aws"]["vpc"].update(id="vpc-0123456789abcdef0",
                                subnetIds=["subnet-0123456789abcdef0", "subnet-0123456789abcdef1"])


def _adopted_pool_subnets(values: dict) -> None:
    """prod (hybrid) with a pool in an adopted VPC, whose two subnets' CIDRs it gives."""
    _adopted_vpc(values)
    values["aws"]["vpc"].update(routeTableIds=[EXAMPLES["aws.vpc.routeTableIds[]"]],
                                poolSubnetCidrs=["10.20.0.0/24", "10.20.1.0/24"])
    values["aws"]["controlPlane"]["privateIp"] = "10.20.0.10"
    values["storage"]["efs"]["mountTargetAddress"] = "10.20.0.20"
    values["pools"] = [{"name": "burst", "instanceType": "g5.2xlarge", "count": 1, "gpus": 1}]


def _spot_pool(values: dict) -> None:
    values["pools"][0]["capacity"] = "spot"


def _external_api_load_balancer(values: dict) -> None:
    values.setdefault("kubernetes", {}).setdefault("controlPlane", {})["loadBalancer"] = "external"


def _load_balancer(values: dict) -> None:
    values["kubeflow"]["access"]["mode"] = "loadBalancer"


def _grafana_load_balancer(values: dict) -> None:
    values["monitoring"] = {"grafana": {"access": {"mode": "loadBalancer",
                                                   "hostname": "grafana.example.com"}}}


def _backups_in_a_path(values: dict) -> None:
    values.setdefault("backup", {})["path"] = "/mnt/backups"


def _backups_encrypted(values: dict) -> None:
    values.setdefault("backup", {})["recipients"] = [EXAMPLES["backup.recipients[]"]]


def _shared_user(values: dict) -> None:
    values["kubeflow"]["user"] = {"email": "ada@example.com"}
    values["kubeflowPassword"] = "a long test passphrase"


def _ops_lead_logs_in(values: dict) -> None:
    hashes = values["kubeflowPasswordHashes"]
    hashes["ops-lead"] = next(iter(hashes.values()))


_OIDC = {"type": "oidc", "id": "corp", "name": "Corp SSO", "issuer": "https://login.example.com",
         "clientId": "kubeflow"}
_LDAP = {"type": "ldap", "id": "corp", "name": "Directory", "host": "ldap.example.com:636",
         "bindDn": "cn=kubeflow,dc=example,dc=com", "userSearch": {"baseDn": "dc=example,dc=com"}}


def _connector(template: dict):
    def settings(values: dict) -> None:
        values["kubeflow"]["connectors"] = [copy.deepcopy(template)]
        values["kubeflowConnectorSecrets"] = {"corp": "a client secret"}
        values["kubeflowPasswordHashes"] = {}  # users log in through the connector
    return settings


def _rke2(values: dict) -> None:
    """Where cluster-autoscaler runs once the pools' nodes carry AWS provider IDs: the
    controllers run a kubelet (RKE2's servers; config/autoscaling.py autoscales)."""
    values.setdefault("kubernetes", {})["distribution"] = "rke2"


def _epel(values: dict) -> None:
    values.setdefault("packages", {})["epel"] = True


def _mirror_login(values: dict) -> None:
    mirror = values.setdefault("images", {}).setdefault("mirror", {})
    mirror.setdefault("registry", EXAMPLES["images.mirror.registry"])
    mirror.setdefault("username", EXAMPLES["images.mirror.username"])
    values.setdefault("imageMirrorPassword", EXAMPLES["imageMirrorPassword"])


# What a key needs around it to be in use.
SETTINGS_FOR = {
    "pools[].instanceTypes[]": _spot_pool,
    "images.mirror.username": _mirror_login,
    "imageMirrorPassword": _mirror_login,
    "packages.epelMirror": _epel,
    "autoscaling.scaleDownUnneededTime": _rke2,
    "kubeflow.user.email": _shared_user,
    "kubeflow.user.name": _shared_user,
    "kubeflow.user.profile": _shared_user,
    "kubeflowPassword": _shared_user,
    "access.users[].email": _ops_lead_logs_in,
    "kubeflowConnectorSecrets{key}": _connector(_OIDC),
    "kubeflowConnectorSecrets{value}": _connector(_OIDC),
    **{f"kubeflow.connectors[].{key}": _connector(_OIDC) for key in (
        "type", "id", "name", "issuer", "clientId", "scopes[]")},
    **{f"kubeflow.connectors[].{key}": _connector(_LDAP) for key in (
        "host", "bindDn", "rootCa", "userSearch.baseDn", "userSearch.filter",
        "userSearch.username", "userSearch.idAttr", "userSearch.emailAttr",
        "userSearch.nameAttr")},
    "aws.vpc.privateSubnetCidrs[]": _nat,
    "aws.vpc.privateSubnetIds[]": _nat,
    "aws.vpc.subnetCidrs[]": _two_subnets,
    "aws.vpc.subnetIds[]": _adopted_vpc,
    "aws.vpc.routeTableIds[]": _adopted_vpc,
    "aws.vpc.poolSubnetCidrs[]": _adopted_pool_subnets,
    "aws.controlPlane.generations{key}": _three_controllers,
    "kubeflow.access.sourceRanges[]": _load_balancer,
    "monitoring.grafana.access.sourceRanges[]": _grafana_load_balancer,
    "vpnClientProfile": _client_to_existing,
    "vpn.existingServerAddress": _client_to_existing,
    "kubeflowTlsKey": _own_certificate,
    "kubeflow.access.tls.certificate": _own_certificate,
    "storage.localPath.path": _local_path_beside_nfs,
    "backup.recipients[]": _backups_in_a_path,
    "backup.path": _backups_encrypted,
    "backup.schedule": _backups_encrypted,
    # One controller: its address may name a load balancer of yours, not a VIP.
    "kubernetes.controlPlane.address": _external_api_load_balancer,
}
TEMPLATES = {  # first item of a list, or a section, a key needs
    # lab's first team has 8 GPUs, all on-prem.
    "access.teams[].quota.flavors": {"name": "on-prem", "gpus": 8},
    "hosts[].taints": {"key": "nvidia.com/gpu", "effect": "NoSchedule"},
    "pools[].taints": {"key": "example.com/batch", "effect": "NoSchedule"},
    "kubeflow.imageMirror": {"registry": "registry.example.internal/kubeflow"},
    "images.mirror": {"registry": "harbor.example.internal/proxy"},
    "storage.nfs": {"host": "controller"},
}
