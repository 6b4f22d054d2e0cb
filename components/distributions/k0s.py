"""The k0s boundary: which scripts install, join and reset a node, the cluster config,
and k0s's own containerd paths. A second distribution implements the same attributes."""

import json
from collections.abc import Mapping, Sequence
from typing import Optional

import pulumi
import yaml

from components.distributions.registry_mirror import RegistryFile, containerd_files
from components.distributions.base import (
    DistributionSettings,
    JoinToken,
    PrefixedInputs,
    read_at_boot,
)
from components.common import audit, pod_security
from components.common.step_text import Script
from components.distributions.k0s_api import api_server_args, api_server_raw_args, endpoint_config
from config.images import ImageMirror
from config.hosts import Host, WorkerPool
from config.node_labels import node_labels, node_taints
from contract import ports

# k0s runs its own containerd and reloads drop-ins from this folder by itself.
CONTAINERD_DROPIN_DIR = "/etc/k0s/containerd.d"
CONTAINERD_SOCKET = "/run/k0s/containerd.sock"
# The image mirror as k0s docs/runtime.md ("Configuring OCI registry mirrors") lays it out:
# a drop-in naming config_path, the hosts.toml folders below it.
REGISTRY_DROPIN = f"{CONTAINERD_DROPIN_DIR}/registries.toml"
REGISTRY_HOSTS_DIR = f"{CONTAINERD_DROPIN_DIR}/certs.d"
REGISTRY_CA = f"{REGISTRY_HOSTS_DIR}/gpu-cluster-mirror-ca.crt"
WORKER_PROFILE = "gpu-cluster"
# The kubelet's usual root instead of k0s's /var/lib/k0s/kubelet, so upstream device
# plugins and CSI drivers, which hard-code /var/lib/kubelet, work unmodified.
KUBELET_ROOT_DIR = "/var/lib/kubelet"
# Worker joins (k0s's join API) and konnectivity agents.
CONTROL_PLANE_PORTS = {"k0s-join-api": (ports.K0S_JOIN_API, "tcp"),
                       "konnectivity": (ports.KONNECTIVITY, "tcp")}
# What a host's firewall admits from the nodes only: docs/networking.md at v1.36.3+k0s.2,
# "Required ports and protocols" (lines 58-64; hack/ostests/modules/os/
# k0s-controller.firewalld-service.xml and k0s-worker.firewalld-service.xml): a
# controller's etcd peers, join API and konnectivity; a worker's kubelet and its CNI's port,
# BGP for kube-router and VXLAN for Calico (cluster_config sets its vxlan mode). etcd's
# client port listens on loopback; 6443 stays open to users.
CONTROLLER_FIREWALL_PORTS = {"etcd-peer": (ports.ETCD_PEER, "tcp"), **CONTROL_PLANE_PORTS}
WORKER_FIREWALL_PORTS = {"kubelet": (ports.KUBELET, "tcp")}
CNI_FIREWALL_PORTS = {"kuberouter": {"kube-router-bgp": (179, "tcp")},
                      "calico": {"calico-vxlan": (4789, "udp")}}
# kube-router's IP in IP (IP protocol 4, IANA's "Assigned Internet Protocol Numbers"), a
# rule without a port (components/aws/network.py IP_IN_IP).
KUBE_ROUTER_IPIP = {"kube-router-ipip": (0, "4")}
# The label the AWS layouts' controllers' nodes carry, which the cloud controller manager
# and cluster-autoscaler select (Distribution.controller_node_labels). install-controller
# gives it with the admin credential: a kubelet may set no label under
# node-restriction.kubernetes.io/ on its Node (NodeRestriction, kubernetes
# plugin/pkg/admission/noderestriction/admission.go). k0s's own controller label is no
# such fence: its node-role controller turns any node's node.k0sproject.io/role=X, a label
# a kubelet may set on itself, into node-role.kubernetes.io/X=true (v1.36.3+k0s.2
# pkg/component/controller/noderole.go:82-101).
CONTROLLER_LABEL = "node-restriction.kubernetes.io/gpu-cluster-controller"
# kube-router on the AWS layouts: IP in IP between every two nodes, not only those of
# different subnets (--overlay-type, kube-router v2.10.0 pkg/options/options.go:229-233):
# EC2 drops a packet whose source or destination is not the instance's own address
# (pods' addresses, routed directly between nodes of one subnet) unless its
# source/destination check is off, and a security group admits nodes by their own
# addresses. kube-router would turn the check off itself on every node with an aws:///
# providerID (pkg/controllers/routing/aws.go:26-86, network_routes_controller.go:191-195)
# with ec2:ModifyInstanceAttribute, which can also change any instance's groups and user
# data: no node's role has it, and --disable-source-dest-check=false keeps it from trying.
# k0s passes spec.network.kuberouter.extraArgs to kube-router over its own
# (v1.36.3+k0s.2 pkg/apis/k0s/v1beta1/kuberouter.go:47-49, controller/kuberouter.go:140).
AWS_KUBE_ROUTER_ARGS = {"overlay-type": "full", "disable-source-dest-check": "false"}


class K0s(PrefixedInputs):
    name = "k0s"
    containerd_dropin_dir = CONTAINERD_DROPIN_DIR
    containerd_socket = CONTAINERD_SOCKET
    install_controller = Script("k0s/install-controller.sh")
    join_worker = Script("k0s/join-worker.sh")
    reset_node = Script("k0s/reset-node.sh")
    create_join_token = Script("k0s/create-join-token.sh")
    # A controller join token (`k0s token create --role=controller`, k0s docs/high-availability.md).
    create_controller_token = Script("k0s/create-controller-token.sh")
    # A bootstrap token with an expiration, in a worker join token (k0s cmd/token/create.go
    # at v1.36.3+k0s.2, lines 33 and 91: --expiry, a Go duration).
    pool_token_command = "/usr/local/bin/k0s token create --role=worker --expiry"
    service_account_key = Script("k0s/service-account-key.sh")
    apply_worker_profile = Script("k0s/apply-worker-profile.sh")
    etcd_quorum = Script("k0s/etcd-quorum.sh")
    etcd_member = Script("k0s/etcd-member.sh")
    leave_etcd = Script("k0s/leave-etcd.sh")
    # A controller's embedded worker reads the profile from the cluster config, whose change
    # restarts it (install-controller).
    controller_profile_step = False
    # Its control plane load balancing (endpoint_config).
    serves_vip = True
    upgrade_node = Script("k0s/upgrade-node.sh")
    cluster_state = "k0s/cluster-state.sh"
    kubectl_path = "/usr/local/bin/k0s kubectl"
    # The kubelet's kubeconfig of a k0s worker (K0S_KUBELET_KUBECONFIG, k0s/lib.sh).
    node_kubectl = "/usr/local/bin/k0s kubectl --kubeconfig /var/lib/k0s/kubelet.conf"
    controller_service = "k0scontroller.service"
    # The unit `k0s install controller` writes and `k0s reset` removes.
    controller_file = "/etc/systemd/system/k0scontroller.service"
    # What `k0s install controller|worker` creates (k0s docs/install.md, "Run k0s as a
    # service").
    node_services = ("k0scontroller.service", "k0sworker.service")
    kubelet_root_dir = KUBELET_ROOT_DIR
    # Behind an external address, k0s's join API and konnectivity as well as the API
    # (docs/high-availability.md at v1.36.3+k0s.2, "Load Balancer").
    load_balanced_ports = CONTROL_PLANE_PORTS
    # The CA key is its only secret; join tokens are issued per node.
    cluster_secrets: Sequence[str] = ()
    join_secrets: Sequence[str] = ()

    # What its scripts' inputs are named after (PrefixedInputs): K0S_VERSION, the binary's
    # sha256 per architecture (K0S_SHA256_AMD64, ...), K0S_CA_KEY.
    input_prefix = "K0S"

    def __init__(self, settings: DistributionSettings):
        self.settings = settings

    @property
    def controller_runs_kubelet(self) -> bool:
        """On the AWS layouts (settings.aws_cloud_provider) a controller runs a kubelet,
        tainted with k0s's control-plane taint (`--enable-worker` without `--no-taints`,
        v1.36.3+k0s.2 cmd/controller/controller.go:721-730), as the home of the cloud
        controller manager and cluster-autoscaler, whose IAM policies its instance role
        alone holds; elsewhere a pure controller runs none (docs/layouts.md)."""
        return self.settings.aws_cloud_provider

    @property
    def controller_node_labels(self) -> dict[str, str]:
        return {CONTROLLER_LABEL: "true"} if self.controller_runs_kubelet else {}

    @property
    def _node_network_ports(self) -> dict[str, tuple[int, str]]:
        """What a node's kubelet and CNI answer other nodes at (metrics-server scrapes every
        kubelet; kube-router peers in BGP and tunnels in IP in IP)."""
        return {**WORKER_FIREWALL_PORTS, **CNI_FIREWALL_PORTS[self.settings.cni],
                **(KUBE_ROUTER_IPIP if self.settings.cni == "kuberouter" else {})}

    @property
    def control_plane_ports(self) -> dict[str, tuple[int, str]]:
        """The join API and konnectivity; a controller that is a node also its kubelet's and
        its CNI's."""
        return {**CONTROL_PLANE_PORTS,
                **(self._node_network_ports if self.controller_runs_kubelet else {})}

    @property
    def node_ports(self) -> dict[str, tuple[int, str]]:
        """What the EC2 nodes admit from the controllers: where those are nodes, their
        kubelet's and CNI's ports; otherwise none, the control plane reaches kubelets
        through the konnectivity tunnels that the nodes open."""
        return self._node_network_ports if self.controller_runs_kubelet else {}

    def cluster_config(self, controller: Host, extra_sans: Sequence[str] = ()) -> str:
        """/etc/k0s/k0s.yaml for the controller; `extra_sans` for its public address."""
        settings = self.settings
        spec: dict = {
            "api": {
                "address": controller.address,
                "port": settings.endpoint.port,
                "sans": settings.endpoint.sans(extra_sans, controller.address),
                "extraArgs": api_server_args(settings.service_account_issuer),
            },
            "network": {
                "provider": settings.cni,
                "podCIDR": settings.pod_cidr,
                "serviceCIDR": settings.service_cidr,
            },
            "workerProfiles": [{"name": WORKER_PROFILE, "values": self._kubelet_settings()}],
            "telemetry": {"enabled": False},
        }
        raw_args = api_server_raw_args(settings.service_account_issuer)
        if raw_args:
            spec["api"]["rawArgs"] = raw_args
        external, load_balancing = endpoint_config(settings.endpoint, controller)
        spec["api"].update(external)
        spec["network"].update(load_balancing)
        if settings.cni == "calico":
            # The node IP is pinned per host (kubelet --node-ip); Calico uses the same
            # address, so multi-NIC and VPN hosts never pick the wrong interface.
            spec["network"]["calico"] = {
                "mode": "vxlan",
                "mtu": settings.cni_mtu,
                "ipAutodetectionMethod": "kubernetes-internal-ip",
            }
        elif settings.cni_mtu:
            spec["network"]["kuberouter"] = {"autoMTU": False, "mtu": settings.cni_mtu}
        if settings.cni == "kuberouter" and settings.aws_cloud_provider:
            kube_router = spec["network"].setdefault("kuberouter", {})
            kube_router["extraArgs"] = dict(AWS_KUBE_ROUTER_ARGS)
        document = {
            "apiVersion": "k0s.k0sproject.io/v1beta1",
            "kind": "ClusterConfig",
            "metadata": {"name": settings.cluster_name},
            "spec": spec,
        }
        return yaml.safe_dump(document, sort_keys=False)

    @property
    def cni_interfaces(self) -> tuple[str, ...]:
        """Calico's, as its guidance for NetworkManager lists them (quoted in Mirantis MKE's
        docs, install/predeployment/configure-networking/calico-networking: [keyfile]
        unmanaged-devices=interface-name:cali*;interface-name:tunl*;
        interface-name:vxlan.calico;interface-name:wireguard.cali); kube-router documents
        none."""
        if self.settings.cni == "calico":
            return ("cali*", "tunl*", "vxlan.calico", "wireguard.cali")
        return ()

    @property
    def overlay_between_subnets(self) -> dict[str, tuple[int, str]]:
        """kube-router's IP in IP: k0s leaves its --enable-overlay at its default, true
        (v1.36.3+k0s.2 pkg/component/controller/kuberouter.go:112-124; kube-router v2.10.0
        pkg/options/options.go:113,162-165), which tunnels pods' packets in IP in IP between
        nodes of different subnets (pkg/controllers/routing/network_routes_controller.go:676),
        and on the AWS layouts between all nodes (AWS_KUBE_ROUTER_ARGS). Calico's overlay is
        VXLAN, a port of CNI_FIREWALL_PORTS."""
        return dict(KUBE_ROUTER_IPIP) if self.settings.cni == "kuberouter" else {}

    def host_firewall_ports(self, host: Host) -> dict[str, tuple[int, str]]:
        """A controller's ports; a host that runs workloads (a worker, a controller+worker)
        adds its kubelet's and its CNI's, as does a controller that is a node (the AWS
        layouts' controllers, to each other: components/aws/controller_groups.py)."""
        ports = dict(CONTROLLER_FIREWALL_PORTS) if host.runs_control_plane else {}
        if host.runs_workloads:
            ports.update({**WORKER_FIREWALL_PORTS, **CNI_FIREWALL_PORTS[self.settings.cni]})
        elif host.runs_control_plane and self.controller_runs_kubelet:
            ports.update(self._node_network_ports)
        return ports

    def worker_profile_values(self) -> str:
        """The kubelet settings of the workers' profile, as JSON (a change restarts the
        workers that run with them; workers read them only when they start)."""
        return json.dumps(self._kubelet_settings(), sort_keys=True)

    def _kubelet_settings(self) -> dict:
        tuning = self.settings.tuning
        values: dict = {"resolvConf": tuning.kubelet_resolv_conf}
        if tuning.cpu_manager_policy == "static":
            values["cpuManagerPolicy"] = "static"
            values["reservedSystemCPUs"] = tuning.reserved_cpus
        return values

    def runtime_class_wait(self, name: str) -> None:
        """None: k0s installs no RuntimeClass; the program creates its own."""
        return None

    def nvidia_runtime_dropin(self) -> str:
        """containerd 2 (config v3) drop-in adding the `nvidia` runtime."""
        lines = ["# Written by gpu-cluster: the NVIDIA container runtime for k0s's containerd.",
                 "version = 3", ""]
        if self.settings.nvidia_default_runtime:
            lines += ['[plugins."io.containerd.cri.v1.runtime".containerd]',
                      '  default_runtime_name = "nvidia"', ""]
        lines += [
            '[plugins."io.containerd.cri.v1.runtime".containerd.runtimes.nvidia]',
            '  runtime_type = "io.containerd.runc.v2"',
            "",
            '[plugins."io.containerd.cri.v1.runtime".containerd.runtimes.nvidia.options]',
            '  BinaryName = "/usr/bin/nvidia-container-runtime"',
            "",
        ]
        return "\n".join(lines)

    # k0s reloads containerd on a drop-in's change by itself (docs/runtime.md), and
    # containerd reads hosts.toml at every pull (hosts.go ConfigureHosts).
    registry_hosts_dir = REGISTRY_HOSTS_DIR
    registry_services: Sequence[str] = ()

    def registry_files(self, mirror: ImageMirror, upstreams: Sequence[str]) -> list[RegistryFile]:
        return containerd_files(mirror, upstreams, REGISTRY_DROPIN, REGISTRY_HOSTS_DIR,
                                REGISTRY_CA)

    def node_env(self, node: "Host | WorkerPool", node_ip: str) -> dict[str, str]:
        """Inputs shared by install-controller (controller+worker) and join-worker; an
        empty `node_ip` lets the kubelet pick the instance's address (cloud pools)."""
        return {
            **self.version_env(),
            **self.cloud_provider_env(isinstance(node, WorkerPool)),
            "NODE_IP": node_ip,
            "KUBELET_EXTRA_ARGS": "",
            "NODE_LABELS": ",".join(f"{k}={v}" for k, v in node_labels(node).items()),
            "NODE_TAINTS": ",".join(
                f"{t.key}={t.value}:{t.effect}" if t.value else f"{t.key}:{t.effect}"
                for t in node_taints(node)
            ),
            "K0S_PROFILE": WORKER_PROFILE,
            "KUBELET_ROOT_DIR": KUBELET_ROOT_DIR,
        }

    def cluster_secrets_env(self, secrets: Mapping[str, pulumi.Input[str]]) -> dict:
        return {}

    def cluster_secrets_from_ssm_env(self, parameters: Mapping[str, str]) -> dict:
        return {}

    def worker_profile_env(self, host: Host) -> dict[str, str]:
        return {
            "WORKER_PROFILE_VALUES": self.worker_profile_values(),
            "CPU_MANAGER_POLICY": self.settings.tuning.cpu_manager_policy,
            "NODE_NAME": host.name,
            "KUBELET_ROOT_DIR": KUBELET_ROOT_DIR,
        }

    def join_env(self, token: JoinToken) -> dict:
        return {"K0S_JOIN_TOKEN": token.value, "K0S_JOIN_ISSUER_URN": token.issued_by}

    def join_from_ssm_env(self, parameter: str) -> dict:
        return read_at_boot("K0S_JOIN_TOKEN", parameter)

    def controller_join_env(self, token: Optional[JoinToken]) -> dict:
        return ({"K0S_CONTROLLER_TOKEN": token.value, "K0S_JOIN_ISSUER_URN": token.issued_by}
                if token is not None else {})

    def controller_join_from_ssm_env(self, parameter: str) -> dict:
        return read_at_boot("K0S_CONTROLLER_TOKEN", parameter)

    def controller_env(self, host: Host, ca_cert_pem: pulumi.Input[str],
                       extra_sans: pulumi.Input[Sequence[str]] = ()) -> dict[str, pulumi.Input[str]]:
        """install-controller's inputs but the CA key, which comes as K0S_CA_KEY (over
        SSH) or K0S_CA_KEY_SSM_PARAMETER (read at boot by the instance)."""
        # A kubelet for the cluster's own pods only (controller_runs_kubelet).
        tainted = self.controller_runs_kubelet and not host.runs_workloads
        return {
            **self.node_env(host, host.address),
            # The controllers of the layouts where it runs are EC2 instances.
            **self.cloud_provider_env(True),
            **({"K0S_CONTROL_PLANE_TAINT": "true", "NODE_NAME": host.name,
                "CONTROLLER_NODE_LABEL": f"{CONTROLLER_LABEL}=true"} if tainted else {}),
            "K0S_CONFIG": pulumi.Output.from_input(extra_sans).apply(
                lambda sans: self.cluster_config(host, sans)),
            "K0S_ENABLE_WORKER": "true" if host.runs_workloads or tainted else "false",
            "API_PORT": str(self.settings.kubernetes.api_port),
            "K0S_CA_CERT": ca_cert_pem,
            "K0S_ADMISSION_CONFIG": pod_security.admission_configuration(
                pod_security.version_of(self.settings.kubernetes.version)),
            "K0S_AUDIT_POLICY": audit.policy(),
        }



# What components/distributions/__init__.py loads for this distribution.
DISTRIBUTION = K0s
