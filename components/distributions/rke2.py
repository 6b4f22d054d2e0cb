"""The RKE2 boundary (components/distributions/base.py): its scripts, configs, step
inputs, ports and the agent token (the Canal settings: rke2_canal.py). Pure functions of the settings;
no resources."""

import hashlib
from collections.abc import Mapping, Sequence
from typing import Optional

import pulumi
import yaml

from components.distributions.base import (DistributionSettings, JoinToken, PrefixedInputs,
                                          admission_plugins, jwks_uri, read_at_boot)
from components.distributions.registry_mirror import RegistryFile, rke2_files
from components.distributions.rke2_canal import address_regex, canal_config
from components.common import audit, pod_security
from components.common.step_text import Script
from config import versions
from config.images import ImageMirror
from config.hosts import Host, WorkerPool
from config.node_labels import node_labels, node_taints
from contract import ports

ETC = "/etc/rancher/rke2"
DATA_DIR = "/var/lib/rancher/rke2"
TOKEN_FILE = f"{ETC}/server-token"
AGENT_TOKEN_FILE = f"{ETC}/agent-token"
ADMIN_KUBECONFIG = f"{ETC}/rke2.yaml"
# The API server's Pod Security default and audit policy, which install-server writes. RKE2's
# own PSA file (/etc/rancher/rke2/rke2-pss.yaml) enforces privileged everywhere unless
# `profile: cis` (docs: security/pod_security_standards.md); its own audit policy file logs
# to server/logs/audit.log with 30/10/100 rotation (security/cis_self_assessment110.md,
# the API server's arguments, 1.2.16-1.2.19). Ours replace both files by RKE2's config keys
# pod-security-admission-config-file and audit-policy-file (reference/server_config.md).
ADMISSION_CONFIG_FILE = f"{ETC}/gpu-cluster-pss.yaml"
AUDIT_POLICY_FILE = f"{ETC}/gpu-cluster-audit-policy.yaml"
AUDIT_LOG_FILE = f"{DATA_DIR}/server/logs/audit.log"
# RKE2's --enable-admission-plugins: it puts enable-admission-plugins=NodeRestriction ahead of
# the kube-apiserver-arg entries (rancher/rke2 v1.36.3+rke2r1 pkg/cli/defaults/defaults.go:32-34),
# as k3s's own default (k3s pkg/daemons/control/server.go, apiServer: argsMap
# ["enable-admission-plugins"] = "NodeRestriction"); k3s pkg/util/args.go GetArgs passes an
# entry without a +/- suffix after the earlier ones, and kube-apiserver's list flag
# appends repeated values. The CIS profile adds no plugin (pkg/rke2/rke2.go). Ours repeats
# NodeRestriction, so the list holds whatever GetArgs keeps.
DEFAULT_ADMISSION_PLUGINS = ("NodeRestriction",)
# install-server's and join-agent's pins of rke2-selinux, for hosts where SELinux labels files.
SELINUX_ENV = {"RKE2_SELINUX_VERSION": versions.RKE2_SELINUX,
               "RANCHER_RPM_KEY_FINGERPRINT": versions.RANCHER_RPM_KEY_FINGERPRINT}


def issuer_args(issuer: Optional[str]) -> list[str]:
    """A public service-account issuer, first, before RKE2's own, which stays accepted:
    `flag-=value` prepends to RKE2's default instead of replacing it (k3s GetArgs,
    "Prepend value to initial args": pkg/util/args.go, formerly pkg/daemons/config/types.go;
    RKE2 passes its kube-apiserver-arg through it). RKE2's api-audiences stays its own (k3s pkg/daemons/control/server.go
    apiServer: the old issuer and "rke2"), so tokens already in pods keep working."""
    if not issuer:
        return []
    return [f"service-account-issuer-={issuer}", f"service-account-jwks-uri={jwks_uri(issuer)}"]
# RKE2's embedded containerd: its config (and config-v3.toml.tmpl, when a template is
# ever needed) and socket (k3s pkg/agent/config; docs: advanced.md).
CONTAINERD_DROPIN_DIR = f"{DATA_DIR}/agent/etc/containerd"
CONTAINERD_SOCKET = "/run/k3s/containerd/containerd.sock"
# The supervisor agents register with; fixed (rancher/rke2 pkg/cli/cmds/server.go drops
# supervisor-port and https-listen-port, so the API stays on 6443).
SUPERVISOR_PORT = ports.RKE2_SUPERVISOR
API_PORT = ports.KUBERNETES_API
# docs (rancher/rke2-docs): install/requirements.md "Inbound Network Rules" and its Canal
# tab. name -> (port, protocol); etcd's ports matter between servers only. The API's
# (6443) is every distribution's rule. Between all nodes: the kubelet (the API server
# dials it: logs, exec), Canal's VXLAN and its health checks.
NODE_PORTS = {
    "kubelet": (ports.KUBELET, "tcp"),
    "canal-vxlan": (8472, "udp"),
    "canal-health": (9099, "tcp"),
}
CONTROL_PLANE_PORTS = {"rke2-supervisor": (SUPERVISOR_PORT, "tcp"), **NODE_PORTS}
# What an on-prem server answers the nodes on and nobody else (the same "Inbound Network
# Rules"): the supervisor and etcd's client, peer and metrics ports ("RKE2 server nodes").
# Canal's WireGuard ports (51820-51821/udp) only with flannel's wireguard backend, which
# canal_config never sets (docs: networking/basic_network_options.md, Canal); 6443 and the
# NodePort range stay open to users.
SERVER_FIREWALL_PORTS = {"rke2-supervisor": (SUPERVISOR_PORT, "tcp"),
                         "etcd-client": (ports.ETCD_CLIENT, "tcp"),
                         "etcd-peer": (ports.ETCD_PEER, "tcp"),
                         "etcd-metrics": (ports.ETCD_METRICS, "tcp")}
# Keeps workloads off a server that is not to run them (docs: install/ha.md, "node-taint:
# CriticalAddonsOnly=true:NoExecute"); an RKE2 server always runs a kubelet.
SERVER_ONLY_TAINT = "CriticalAddonsOnly=true:NoExecute"
# k3s pkg/clientaccess/token.go: "K10" + hex SHA-256 of the server CA + "::" + user:password.
AGENT_TOKEN_USER = "node"
# The program's random secrets (base.py cluster_secrets): RKE2's server token and the
# agents' secret.
SERVER_TOKEN, AGENT_SECRET = "server-token", "agent-token"
SECRET_ENV = {SERVER_TOKEN: "RKE2_TOKEN", AGENT_SECRET: "RKE2_AGENT_TOKEN"}
# RKE2's chart of RuntimeClasses, installed by its helm-controller, and what it holds
# (see Rke2.runtime_class_wait).
RUNTIME_CLASSES_CHART = "rke2-runtimeclasses"
RUNTIME_CLASSES = ("nvidia", "nvidia-experimental", "crun")
WAIT_FOR_RUNTIME_CLASS = Script("rke2/wait-for-runtime-class.sh")
# The chart's install job needs a node with its CNI: minutes on a fresh server.
RUNTIME_CLASS_WAIT_SECONDS = 900


class Rke2(PrefixedInputs):
    name = "rke2"
    containerd_dropin_dir = CONTAINERD_DROPIN_DIR
    containerd_socket = CONTAINERD_SOCKET
    install_controller = Script("rke2/install-server.sh")
    join_worker = Script("rke2/join-agent.sh")
    reset_node = Script("rke2/reset-node.sh")
    # Agents join with the agent token the program generates (join_token below); RKE2
    # issues no per-node tokens to fetch from the server.
    create_join_token = None
    # Servers join with the server token, a cluster secret (controller_join_env).
    create_controller_token = None
    # A bootstrap token Secret with a TTL, printed as K10<CA hash>::<id>.<secret>: `rke2
    # token create` (rancher/rke2 v1.36.3+rke2r1 pkg/cli/cmds/token.go, lines 18-24, wraps
    # k3s pkg/cli/token/token.go create). Agents may join with it, servers may not, and a
    # joined agent starts again after it expired, on its node authorization (k3s
    # docs/adrs/agent-join-token.md, "Decision").
    pool_token_command = (f"/usr/local/bin/rke2 token create --kubeconfig {ADMIN_KUBECONFIG} "
                          "--description gpu-cluster-pool --ttl")
    service_account_key = Script("rke2/service-account-key.sh")
    apply_worker_profile = Script("rke2/apply-agent-args.sh")
    etcd_quorum = Script("rke2/etcd-quorum.sh")
    etcd_member = Script("rke2/etcd-member.sh")
    leave_etcd = Script("rke2/leave-etcd.sh")
    # RKE2 has no VIP of its own: its HA setup wants "a fixed registration address that is
    # placed in front of server nodes" (https://docs.rke2.io/install/ha), which the
    # program's keepalived holds.
    serves_vip = False
    upgrade_node = Script("rke2/upgrade-node.sh")
    cluster_state = "rke2/cluster-state.sh"
    # An RKE2 server always runs a kubelet (SERVER_ONLY_TAINT keeps workloads off it).
    controller_runs_kubelet = True
    controller_profile_step = True
    # The server labels its node so once it registered (k3s pkg/server/server.go
    # setNodeLabelsAndAnnotations: ControlPlaneRoleLabelKey "true").
    controller_node_labels = {"node-role.kubernetes.io/control-plane": "true"}
    # Every node has RKE2's kubectl (the runtime image's bin/, k3s pkg/agent/config); the
    # admin kubeconfig is on the server only.
    kubectl_path = f"{DATA_DIR}/bin/kubectl --kubeconfig {ADMIN_KUBECONFIG}"
    # The agent's kubelet kubeconfig (RKE2_KUBELET_KUBECONFIG, rke2/lib.sh).
    node_kubectl = f"{DATA_DIR}/bin/kubectl --kubeconfig {DATA_DIR}/agent/kubelet.kubeconfig"
    controller_service = "rke2-server.service"
    # RKE2's admin kubeconfig on a server (write-kubeconfig's default); rke2-uninstall.sh removes it.
    controller_file = ADMIN_KUBECONFIG
    # The tarball install's units (rke2 install.sh; bundle/lib/systemd/system).
    node_services = ("rke2-server.service", "rke2-agent.service")
    kubelet_root_dir = "/var/lib/kubelet"  # the upstream default (rke2/lib.sh)
    control_plane_ports = CONTROL_PLANE_PORTS
    # The supervisor, which agents and joining servers register at, beside the API
    # (docs.rke2.io install/ha, "Configure the Fixed Registration Address").
    load_balanced_ports = {"rke2-supervisor": (SUPERVISOR_PORT, "tcp")}
    node_ports = NODE_PORTS
    cni_interfaces = ("cali*", "flannel*")  # Canal's (docs.rke2.io/known_issues, NetworkManager)
    cluster_secrets = (SERVER_TOKEN, AGENT_SECRET)
    # The agent token may change on a running cluster, the server token may not: it
    # encrypts the datastore's bootstrap data (k3s docs/adrs/agent-join-token.md).
    join_secrets = (AGENT_SECRET,)

    # Its scripts' inputs (PrefixedInputs): RKE2_VERSION, RKE2_SHA256_<ARCH>, RKE2_CA_KEY.
    input_prefix = "RKE2"

    def __init__(self, settings: DistributionSettings):
        self.settings = settings

    @property
    def version(self) -> str:
        return self.settings.kubernetes.version

    def server_address(self) -> str:
        """Where agents reach the server: the control plane's endpoint."""
        return self.settings.endpoint.node_address

    def cluster_config(self, controller: Host, extra_sans: Sequence[str] = ()) -> str:
        """/etc/rancher/rke2/config.yaml of the server; `extra_sans` for its public
        address. Tokens are named by file, so the text holds no secret."""
        settings = self.settings
        config: dict = {
            "node-name": controller.name,
            "node-ip": controller.address,
            "advertise-address": controller.address,
            "tls-san": settings.endpoint.sans(extra_sans, controller.address),
            "cni": ["canal"],
            "cluster-cidr": settings.pod_cidr,
            "service-cidr": settings.service_cidr,
            "write-kubeconfig-mode": "0600",
            "token-file": TOKEN_FILE,
            "agent-token-file": AGENT_TOKEN_FILE,
            "pod-security-admission-config-file": ADMISSION_CONFIG_FILE,
            "audit-policy-file": AUDIT_POLICY_FILE,
            # Stated, not left to RKE2's defaults: the rotation is part of the documented policy.
            "kube-apiserver-arg": [f"audit-log-path={AUDIT_LOG_FILE}",
                                   "enable-admission-plugins="
                                   + admission_plugins(DEFAULT_ADMISSION_PLUGINS),
                                   *(f"{flag}={value}" for flag, value in audit.ROTATION.items()),
                                   *issuer_args(settings.service_account_issuer)],
            **self._node_settings(controller),
        }
        if not controller.runs_workloads:
            config["node-taint"] = [*config.get("node-taint", []), SERVER_ONLY_TAINT]
        if settings.endpoint.joins(controller.address):
            # Every server after the first registers with the supervisor at the fixed
            # address, with the same token (rke2-docs docs/install/ha.md:75-92; flag
            # `server`, rancher/rke2 v1.36.3+rke2r1 pkg/cli/cmds/server.go:159).
            config = {"server": f"https://{settings.endpoint.node_address}:{SUPERVISOR_PORT}",
                      **config}
        return yaml.safe_dump(config, sort_keys=False)

    def agent_config(self, node: "Host | WorkerPool", node_ip: str) -> str:
        """/etc/rancher/rke2/config.yaml of an agent; an empty `node_ip`: it picks its own."""
        config: dict = {"server": f"https://{self.server_address()}:{SUPERVISOR_PORT}",
                        "token-file": AGENT_TOKEN_FILE}
        if isinstance(node, Host):
            config["node-name"] = node.name
        if node_ip:
            config["node-ip"] = node_ip
        config.update(self._node_settings(node))
        return yaml.safe_dump(config, sort_keys=False)

    def _node_settings(self, node: "Host | WorkerPool") -> dict:
        values: dict = {}
        labels = node_labels(node)
        if labels:
            values["node-label"] = [f"{k}={v}" for k, v in labels.items()]
        if node_taints(node):
            values["node-taint"] = [f"{t.key}={t.value}:{t.effect}" if t.value
                                    else f"{t.key}:{t.effect}" for t in node_taints(node)]
        # RKE2 adds the `nvidia` runtime itself (nvidia_runtime_dropin); only GPU nodes have it.
        if node.gpus and self.settings.nvidia_default_runtime:
            values["default-runtime"] = "nvidia"
        return values

    def worker_profile_values(self) -> str:
        """The kubelet drop-in (config.yaml.d) every node runs with; a change restarts
        RKE2 through apply-agent-args (RKE2 reads it only when it starts)."""
        tuning = self.settings.tuning
        values: dict = {"resolv-conf": tuning.kubelet_resolv_conf}
        if tuning.cpu_manager_policy == "static":
            values["kubelet-arg"] = ["cpu-manager-policy=static",
                                     f"reserved-cpus={tuning.reserved_cpus}"]
        return yaml.safe_dump(values, sort_keys=False)

    # RKE2 reads registries.yaml when it starts (rancher/rke2 docs, "In order for the
    # registry changes to take effect, ... restart RKE2 on each configured node").
    registry_hosts_dir = ""
    registry_services: Sequence[str] = node_services

    def registry_files(self, mirror: ImageMirror, upstreams: Sequence[str]) -> list[RegistryFile]:
        return rke2_files(mirror, upstreams, f"{ETC}/registries.yaml",
                          f"{ETC}/gpu-cluster-mirror-ca.crt")

    def nvidia_runtime_dropin(self) -> None:
        """None: RKE2's agent finds nvidia-container-runtime (PATH, /usr/bin, the GPU
        operator's /usr/local/nvidia/toolkit) when it starts and adds an `nvidia` runtime
        to the containerd config it renders (k3s pkg/agent/containerd/runtimes.go
        findNvidiaContainerRuntimes; nvidia.go in older releases). install-nvidia must
        therefore restart rke2-server/rke2-agent if the toolkit arrives after RKE2."""
        return None

    def runtime_class_wait(self, name: str) -> Optional[tuple[Script, dict[str, str]]]:
        """RKE2 installs RuntimeClasses `nvidia`, `nvidia-experimental` and `crun` with its
        rke2-runtimeclasses chart (rancher/rke2 v1.36.3+rke2r1 charts/chart_versions.yaml:
        60-63; rancher/rke2-charts packages/rke2-runtimeclasses/charts/values.yaml:1-7),
        only their name and handler (templates/runtimeclasses.yaml:1-8), a while after the
        server starts. Creating `nvidia` too fails (pulumi-kubernetes >= 4.29 creates
        client-side: AlreadyExists, CHANGELOG 4.29.0 #2926) or races the chart, whose
        adoption would drop the fields it does not set. So the program waits for RKE2's
        and patches it."""
        if name not in RUNTIME_CLASSES:
            return None
        return WAIT_FOR_RUNTIME_CLASS, {"RUNTIME_CLASS": name,
                                        "CHART_RELEASE": RUNTIME_CLASSES_CHART,
                                        "WAIT_TIMEOUT": str(RUNTIME_CLASS_WAIT_SECONDS)}

    canal_config = staticmethod(canal_config)

    def default_canal_config(self, extra_addresses: Sequence[str] = ()) -> Optional[str]:
        """Canal pinned to the interface carrying each node's configured address (the
        VPN's tun0 on a hybrid controller rather than the default route's eth0), when
        every node is a configured host or in `extra_addresses` (a controller outside
        `hosts`); the CNI MTU (below the tunnel's) in any case, the same on every node
        (one HelmChartConfig for the cluster's DaemonSet). Pools' instances have no address
        known in advance: on hybrid the pattern takes any address of the pools' subnets
        (pool_cidrs; their eth0, whose VPC route table sends the LAN to the VPN server),
        since flannel exits on a node where no interface matches (flannel v0.28.8, RKE2's
        pinned hardened-flannel: main.go:341-366; pkg/ipmatch/match.go:124-175 matches the
        pattern against each interface's addresses first); on cloud, with no tunnel,
        flannel keeps its default route."""
        settings = self.settings
        addresses = [*extra_addresses, *settings.host_addresses]
        pinned = bool(addresses) and (not settings.has_pools or bool(settings.pool_cidrs))
        regex = address_regex(addresses, settings.pool_cidrs) if pinned else None
        return self.canal_config(mtu=self.settings.cni_mtu, interface_regex=regex)

    # Canal's overlay is VXLAN, a port of NODE_PORTS.
    overlay_between_subnets: Mapping[str, tuple[int, str]] = {}

    def host_firewall_ports(self, host: Host) -> dict[str, tuple[int, str]]:
        """Every node's NODE_PORTS (a server runs a kubelet and Canal too), and a server's
        SERVER_FIREWALL_PORTS."""
        return {**(SERVER_FIREWALL_PORTS if host.runs_control_plane else {}), **NODE_PORTS}

    def node_env(self, node: "Host | WorkerPool", node_ip: str) -> dict[str, str]:
        """join-agent's inputs but the agent token (RKE2_AGENT_TOKEN or
        RKE2_AGENT_TOKEN_SSM_PARAMETER, see join_token)."""
        return {
            **self.version_env(), **SELINUX_ENV,
            "RKE2_CONFIG": self.agent_config(node, node_ip),
            "RKE2_KUBELET_CONFIG": self.worker_profile_values(),
            # A pool's instance is on EC2; a host (hybrid's on-prem ones) never is.
            **self.cloud_provider_env(isinstance(node, WorkerPool)),
        }

    def controller_env(self, host: Host, ca_cert_pem: pulumi.Input[str],
                       extra_sans: pulumi.Input[Sequence[str]] = ()) -> dict[str, pulumi.Input[str]]:
        """install-server's inputs but its secrets: RKE2_CA_KEY, RKE2_TOKEN and
        RKE2_AGENT_TOKEN (each also as <NAME>_SSM_PARAMETER)."""
        return {
            **self.version_env(), **SELINUX_ENV,
            "RKE2_CONFIG": pulumi.Output.from_input(extra_sans).apply(
                lambda sans: self.cluster_config(host, sans)),
            "RKE2_KUBELET_CONFIG": self.worker_profile_values(),
            "RKE2_CA_CERT": ca_cert_pem,
            "RKE2_CANAL_CONFIG": self.default_canal_config([host.address]) or "",
            "RKE2_ADMISSION_CONFIG": pod_security.admission_configuration(
                pod_security.version_of(self.version)),
            "RKE2_AUDIT_POLICY": audit.policy(),
            # The controllers of the layouts where it runs are EC2 instances.
            **self.cloud_provider_env(True),
        }

    def agent_args_env(self, node: "Host | WorkerPool", service: str = "rke2-agent") -> dict[str, str]:
        """apply-agent-args' inputs (service rke2-server on the server)."""
        return {
            "RKE2_KUBELET_CONFIG": self.worker_profile_values(),
            "CPU_MANAGER_POLICY": self.settings.tuning.cpu_manager_policy,
            "NODE_NAME": node.name,
            "RKE2_SERVICE": service,
        }

    def cluster_secrets_env(self, secrets: Mapping[str, pulumi.Input[str]]) -> dict:
        return {SECRET_ENV[name]: value for name, value in secrets.items()}

    def cluster_secrets_from_ssm_env(self, parameters: Mapping[str, str]) -> dict:
        return {key: value for name, parameter in parameters.items()
                for key, value in read_at_boot(SECRET_ENV[name], parameter).items()}

    def join_env(self, token: JoinToken) -> dict:
        return {"RKE2_AGENT_TOKEN": token.value}

    def join_from_ssm_env(self, parameter: str) -> dict:
        return read_at_boot("RKE2_AGENT_TOKEN", parameter)

    def controller_join_env(self, token: Optional[JoinToken]) -> dict:
        """Nothing: a server joins with the server token (RKE2_TOKEN, a cluster secret) at
        the supervisor its config's `server` names."""
        return {}

    def controller_join_from_ssm_env(self, parameter: str) -> dict:
        return {}

    def shared_join_token(self, api_endpoint: str, ca_cert_pem: str,
                          secrets: Mapping[str, str]) -> str:
        return join_token(ca_cert_pem, secrets[AGENT_SECRET])


    def worker_profile_env(self, host: Host) -> dict[str, str]:
        return self.agent_args_env(
            host, "rke2-server" if host.runs_control_plane else "rke2-agent")


def join_token(ca_cert_pem: str, agent_secret: str) -> str:
    """The agents' token: the server CA's hash pins the server they join (k3s
    pkg/clientaccess/token.go hashCA: for a single certificate, SHA-256 of the bytes the
    server serves at /cacerts, i.e. server-ca.crt, which install-server writes as the PEM
    with one trailing newline)."""
    served = ca_cert_pem.rstrip("\n") + "\n"
    digest = hashlib.sha256(served.encode()).hexdigest()
    return f"K10{digest}::{AGENT_TOKEN_USER}:{agent_secret}"


# What components/distributions/__init__.py loads for this distribution.
DISTRIBUTION = Rke2
