"""The RKE2 boundary: configs use only keys RKE2 accepts, the Canal HelmChartConfig only
the rke2-canal chart's values, the agent token pins the CA as RKE2's agent checks it,
and the class offers what K0s offers."""

import hashlib
import inspect
import re

import yaml

from components.distributions import distribution_settings
from components.distributions.k0s import K0s
from components.distributions.rke2 import (AGENT_TOKEN_FILE, SERVER_ONLY_TAINT, Rke2,
                                           address_regex, join_token)
from config import versions
from config.model import StackConfig
from tests.components.conftest import settings_for
from tests.builders import bare_metal_config, cloud_config

# Config-file keys RKE2 v1.36 accepts: the flags rancher/rke2 pkg/cli/cmds/server.go and
# agent.go keep from k3s (copyFlag or a changed default; commit 6ce1a80, v1.36.4 branch),
# plus RKE2's own serverFlag (cni, ingress-controller, enable-servicelb; audit-policy-file,
# pod-security-admission-config-file: rke2-docs docs/reference/server_config.md). Flags marked
# dropFlag there (flannel-iface, https-listen-port, supervisor-port, ...) are refused.
RKE2_SERVER_KEYS = set("""
config debug bind-address advertise-address tls-san tls-san-security data-dir cluster-cidr
service-cidr cluster-reset cluster-reset-restore-path cluster-dns cluster-domain token
token-file write-kubeconfig write-kubeconfig-mode write-kubeconfig-group write-kubeconfig-name
kube-apiserver-arg etcd-arg kube-scheduler-arg kube-controller-manager-arg
kube-cloud-controller-manager-arg datastore-endpoint datastore-cafile datastore-certfile
datastore-keyfile disable disable-scheduler disable-cloud-controller disable-kube-proxy
disable-apiserver disable-controller-manager disable-etcd etcd-disable-snapshots
etcd-snapshot-schedule-cron etcd-snapshot-reconcile-interval etcd-snapshot-retention
etcd-snapshot-dir etcd-snapshot-name etcd-snapshot-compress node-name with-node-id node-label
node-taint image-credential-provider-bin-dir image-credential-provider-config
container-runtime-endpoint disable-default-registry-endpoint nonroot-devices embedded-registry
supervisor-metrics default-runtime private-registry system-default-registry node-ip
node-external-ip node-internal-dns node-external-dns resolv-conf egress-selector-mode
kubelet-arg kube-proxy-arg agent-token agent-token-file server secrets-encryption-provider
protect-kernel-defaults snapshotter selinux lb-server-port service-node-port-range
etcd-expose-metrics airgap-extra-registry helm-job-image helm-controller-arg enable-pprof
servicelb-namespace cni ingress-controller enable-servicelb
audit-policy-file pod-security-admission-config-file
""".split())
RKE2_AGENT_KEYS = set("""
config debug data-dir token token-file node-name with-node-id node-label node-taint
image-credential-provider-bin-dir image-credential-provider-config container-runtime-endpoint
disable-default-registry-endpoint nonroot-devices default-runtime private-registry node-ip
node-external-ip node-internal-dns node-external-dns resolv-conf kubelet-arg kube-proxy-arg
server protect-kernel-defaults snapshotter selinux lb-server-port airgap-extra-registry
bind-address enable-pprof
""".split())
# rancher/rke2-charts packages/rke2-canal/charts/values.yaml (commit 262e21a): the keys we
# may set, with the type the chart's templates expect (config.yaml: canal_iface,
# canal_iface_regex quoted strings; veth_mtu from calico.vethuMTU).
CANAL_VALUES = {("flannel", "iface"): str, ("flannel", "regexIface"): str,
                ("calico", "vethuMTU"): int}

CA = "-----BEGIN CERTIFICATE-----\nMIIBtest\n-----END CERTIFICATE-----\n"


def rke2_config(values: dict = None) -> StackConfig:
    values = values or bare_metal_config()
    values.setdefault("kubernetes", {})["distribution"] = "rke2"
    return settings_for(values)


def rke2_for(values: dict = None) -> Rke2:
    return Rke2(distribution_settings(rke2_config(values)))


def config_keys(text: str) -> set[str]:
    return set(yaml.safe_load(text))


def static_cpu_config() -> dict:
    values = bare_metal_config()
    values["tuning"] = {"cpuManagerPolicy": "static", "reservedCpus": "0-1"}
    values["nvidia"] = {"defaultRuntime": True}
    values["hosts"][1]["taints"] = [{"key": "gpu", "value": "a100", "effect": "NoSchedule"}]
    return values


def test_the_pin_is_an_rke2_release():
    assert versions.RKE2 == "v1.36.3+rke2r1"
    assert rke2_for().version == versions.RKE2


def test_rke2_offers_what_k0s_offers():
    public = {name for name in vars(K0s) if not name.startswith("_")}
    missing = public - set(vars(Rke2))
    assert not missing
    for name in ("cluster_config", "worker_profile_values", "nvidia_runtime_dropin",
                 "node_env", "controller_env"):
        k0s_params = list(inspect.signature(getattr(K0s, name)).parameters)
        rke2_params = list(inspect.signature(getattr(Rke2, name)).parameters)
        assert rke2_params[:len(k0s_params)] == k0s_params, name


def test_server_config_uses_only_rke2_server_keys():
    settings = rke2_config(static_cpu_config())
    rke2 = Rke2(distribution_settings(settings))
    text = rke2.cluster_config(settings.controller, ["203.0.113.9"])
    config = yaml.safe_load(text)
    assert config_keys(text) <= RKE2_SERVER_KEYS, config_keys(text) - RKE2_SERVER_KEYS
    assert config["tls-san"] == ["192.168.2.1", "203.0.113.9"]
    assert config["cni"] == ["canal"]
    assert config["token-file"] == "/etc/rancher/rke2/server-token"
    assert config["agent-token-file"] == AGENT_TOKEN_FILE
    assert config["cluster-cidr"] == "10.244.0.0/16"
    # A pure controller keeps workloads off (an RKE2 server always runs a kubelet);
    # without GPUs it has no nvidia runtime to default to.
    assert config["node-taint"] == [SERVER_ONLY_TAINT]
    assert "default-runtime" not in config


def test_agent_config_uses_only_rke2_agent_keys():
    settings = rke2_config(static_cpu_config())
    rke2, worker = Rke2(distribution_settings(settings)), settings.hosts[1]
    text = rke2.agent_config(worker, worker.address)
    config = yaml.safe_load(text)
    assert config_keys(text) <= RKE2_AGENT_KEYS, config_keys(text) - RKE2_AGENT_KEYS
    assert config["server"] == "https://192.168.2.1:9345"
    assert config["token-file"] == AGENT_TOKEN_FILE
    assert config["node-ip"] == worker.address
    assert config["node-taint"] == ["gpu=a100:NoSchedule"]
    assert "nvidia.com/gpu.present=true" in config["node-label"]
    assert config["default-runtime"] == "nvidia"


def test_no_secret_in_any_config():
    settings = rke2_config()
    rke2 = Rke2(distribution_settings(settings))
    env = rke2.node_env(settings.hosts[1], "192.168.2.3")
    for text in (rke2.cluster_config(settings.controller), env["RKE2_CONFIG"]):
        assert not {"token", "agent-token"} & config_keys(text)


def test_kubelet_dropin_holds_the_cpu_manager_and_resolv_conf():
    static = yaml.safe_load(rke2_for(static_cpu_config()).worker_profile_values())
    assert set(static) <= RKE2_AGENT_KEYS & RKE2_SERVER_KEYS
    assert static == {"resolv-conf": "/run/systemd/resolve/resolv.conf",
                      "kubelet-arg": ["cpu-manager-policy=static", "reserved-cpus=0-1"]}
    assert "kubelet-arg" not in yaml.safe_load(rke2_for().worker_profile_values())


def check_helm_chart_config(text: str) -> dict:
    """What the helm-controller needs of a HelmChartConfig (k3s-io/helm-controller
    pkg/apis/helm.cattle.io/v1/types.go: HelmChartConfigSpec.ValuesContent string), and
    that the values are the rke2-canal chart's own. Returns the values."""
    document = yaml.safe_load(text)
    assert set(document) == {"apiVersion", "kind", "metadata", "spec"}
    assert document["apiVersion"] == "helm.cattle.io/v1"
    assert document["kind"] == "HelmChartConfig"
    # It must match the bundled chart's HelmChart name and namespace (docs:
    # networking/basic_network_options.md).
    assert document["metadata"] == {"name": "rke2-canal", "namespace": "kube-system"}
    assert set(document["spec"]) == {"valuesContent"}
    assert isinstance(document["spec"]["valuesContent"], str)
    values = yaml.safe_load(document["spec"]["valuesContent"])
    for section, keys in values.items():
        for key, value in keys.items():
            assert (section, key) in CANAL_VALUES, (section, key)
            assert isinstance(value, CANAL_VALUES[(section, key)]), (section, key)
    return values


def test_canal_config_sets_flannel_interface_and_pod_mtu():
    values = check_helm_chart_config(rke2_for().canal_config("tun0", 1350))
    assert values == {"flannel": {"iface": "tun0"}, "calico": {"vethuMTU": 1350}}
    assert rke2_for().canal_config() is None


def test_default_canal_config_pins_every_host_address_and_the_vpn_mtu():
    values_in = bare_metal_config(workers=2)
    values_in["network"]["mtu"] = 1400
    rke2 = rke2_for(values_in)
    values = check_helm_chart_config(rke2.default_canal_config(["10.0.1.5"]))
    regex = re.compile(values["flannel"]["regexIface"])
    for address in ("10.0.1.5", "192.168.2.1", "192.168.2.2", "192.168.2.3"):
        assert regex.search(address)
    # Anchored and escaped: no other address or interface name matches.
    for other in ("192.168.2.10", "10.0.1.50", "192x168.2.1", "eth0"):
        assert not regex.search(other)
    assert values["calico"] == {"vethuMTU": 1400}


def test_default_canal_config_leaves_pool_nodes_to_their_default_route():
    # Pool instances' addresses are unknown: a regex of known ones would stop flannel
    # on them ("Could not match pattern"), so none is set.
    assert rke2_for(cloud_config()).default_canal_config(["10.0.1.5"]) is None


def test_join_token_pins_the_ca_as_served():
    token = join_token(CA.rstrip("\n") + "\n\n", "s3cret")
    digest = hashlib.sha256(CA.encode()).hexdigest()
    assert token == f"K10{digest}::node:s3cret"
    # The format join-agent.sh accepts.
    assert re.fullmatch(r"K10[0-9a-f]{64}::node:\S+", token)


def test_address_regex_is_anchored():
    assert address_regex(["10.0.0.2", "10.0.0.1"]) == r"^(10\.0\.0\.1|10\.0\.0\.2)$"


def test_nvidia_runtime_needs_no_dropin():
    assert rke2_for().nvidia_runtime_dropin() is None


def test_control_plane_ports_cover_rke2s_inbound_rules():
    # The API's rule (6443) is every distribution's (aws_control_plane_host.ingress_rules).
    ports = Rke2.control_plane_ports
    assert ports["rke2-supervisor"] == (9345, "tcp")
    assert 6443 not in {port for port, _ in ports.values()}
    assert ports["canal-vxlan"] == (8472, "udp")
    assert ports["kubelet"] == (10250, "tcp")
