"""Config errors that used to be tracebacks, silence or unreadable: each case is a stack as
the CLI hands it over and the problem it must produce (key path, message fragment), every
message bounded and free of secret values."""

import copy
import time
from dataclasses import dataclass, field
from typing import Callable

import pytest

from config import ConfigError, load
from config.loader import MAX_HOSTS, MAX_POOLS
from config.model import SECRET_KEYS
from tests.builders import (TEST_HOST_KEY, as_cli_config, bare_metal_config, cloud_config,
                            hybrid_config)

LONG = "e" * 20_000
# What the longest problem line may be: the path, the message and the namespace.
MAX_LINE = 700


@dataclass
class Case:
    id: str
    make: Callable[[], dict]
    path: str  # the problem's full key path, as printed
    fragment: str
    # Text no problem may contain (a secret, a value too long to echo).
    absent: tuple[str, ...] = ()
    # Keys (without the namespace) the CLI lists as secret.
    secret: tuple[str, ...] = SECRET_KEYS
    # Keys of other namespaces, as the CLI passes them.
    extra: dict = field(default_factory=dict)


def changed(base: Callable[[], dict], change: Callable[[dict], None]) -> Callable[[], dict]:
    def make() -> dict:
        values = copy.deepcopy(base())
        change(values)
        return values
    return make


def client_to_existing_without_lan(values: dict) -> None:
    values["vpn"] = {"mode": "client-to-existing", "existingServerAddress": "192.168.2.1"}
    values["vpnClientProfile"] = "client\ndev tun\nremote vpn.example.com 1194\n"
    del values["network"]


def efs_in_a_small_vpc(values: dict) -> None:
    values["aws"]["vpc"] = {"cidr": "10.20.0.0/26"}
    values["storage"] = {"efs": {"mountTargetAddress": "10.20.0.20", "anonymousNfs": True}}


def no_parsed_hosts_and_no_key(values: dict) -> None:
    del values["sshPrivateKey"]
    for host in values["hosts"]:
        host["address"] = "not-an-address"


def with_kubeflow(change: Callable[[dict], None]) -> Callable[[dict], None]:
    def apply(values: dict) -> None:
        values["kubeflow"] = {"user": {"email": "ml@example.com"}}
        values["kubeflowPassword"] = "a-long-enough-password"
        change(values["kubeflow"])
    return apply


def many_hosts(count: int) -> Callable[[dict], None]:
    def apply(values: dict) -> None:
        values["network"]["lanCidr"] = "172.16.0.0/12"
        # From 172.16.0.1: 172.16.0.0 is the LAN's network address.
        values["hosts"] = [{"name": f"h{i}", "address": f"172.{16 + (i + 1) // 65536}."
                            f"{(i + 1) // 256 % 256}.{(i + 1) % 256}",
                            "role": "controller" if i == 0 else "worker",
                            "sshHostKey": TEST_HOST_KEY}
                           for i in range(count)]
    return apply


def set_path(path: str, value) -> Callable[[dict], None]:
    def apply(values: dict) -> None:
        target = values
        keys = path.replace("]", "").replace("[", ".").split(".")
        for key in keys[:-1]:
            target = target[int(key)] if key.isdigit() else target.setdefault(key, {})
        target[int(keys[-1]) if keys[-1].isdigit() else keys[-1]] = value
    return apply


def cloud_with_cpu_pool() -> dict:
    values = cloud_config()
    values["pools"].append({"name": "cpu", "instanceType": "m6i.large", "count": 1})
    return values


BARE, HYBRID, CLOUD = bare_metal_config, hybrid_config, cloud_config
CASES = [
    # 1. Tracebacks that are config errors: each check runs only on what it needs.
    Case("client-to-existing without lanCidr", changed(HYBRID, client_to_existing_without_lan),
         "gpu-cluster:network.lanCidr", "is required by the hybrid layout"),
    Case("efs mount target in a vpc too small for its subnets (hybrid)",
         changed(HYBRID, efs_in_a_small_vpc), "gpu-cluster:aws.vpc.cidr",
         "cannot hold 2 /24 subnets"),
    Case("efs mount target in a vpc too small for its subnets (cloud)",
         changed(CLOUD, efs_in_a_small_vpc), "gpu-cluster:aws.vpc.cidr",
         "cannot hold 2 /24 subnets"),
    Case("cloud without sshPrivateKey", changed(CLOUD, lambda v: v.pop("sshPrivateKey")),
         "gpu-cluster:sshPrivateKey", "EC2 key pair"),
    Case("hybrid without sshPrivateKey, no host parsed", changed(HYBRID, no_parsed_hosts_and_no_key),
         "gpu-cluster:sshPrivateKey", "is required to reach the hosts and the control-plane"),
    # 3. Keys in a misspelt namespace were ignored without a word.
    Case("namespace gpu-clustr", BARE, "gpu-clustr:kubeflow",
         "did you mean 'gpu-cluster:kubeflow'?", extra={"gpu-clustr:kubeflow": "{}"}),
    Case("namespace gpu_cluster", BARE, "gpu_cluster:hosts",
         "did you mean 'gpu-cluster:hosts'?", extra={"gpu_cluster:hosts": "[]"}),
    Case("namespace gpucluster", BARE, "gpucluster:x", "did you mean 'gpu-cluster:x'?",
         extra={"gpucluster:x": "1"}),
    Case("namespace GPU-Cluster", BARE, "GPU-Cluster:layout", "unknown namespace 'GPU-Cluster'",
         extra={"GPU-Cluster:layout": "cloud"}),
    # 4. Secrets: a `secure:` value inside an object makes the whole key secret.
    Case("nested secret quoted by a validator", changed(HYBRID, set_path(
        "aws.vpc.cidr", "10.20.0.0/16-s3cr3t-value")), "gpu-cluster:aws.vpc.cidr",
         "is not an IPv4 network", absent=("s3cr3t",), secret=SECRET_KEYS + ("aws",)),
    Case("nested secret given as a number", changed(BARE, set_path("ssh.port", 99999)),
         "gpu-cluster:ssh.port", "less than or equal to 65535", absent=("99999",),
         secret=SECRET_KEYS + ("ssh",)),
    Case("nested secret that is not a number", changed(BARE, set_path("ssh.port", "22-s3cr3t")),
         "gpu-cluster:ssh.port", "must be a whole number", absent=("s3cr3t",),
         secret=SECRET_KEYS + ("ssh",)),
    Case("nested secret quoted by a cross check", changed(BARE, set_path(
        "network.podCidr", "192.168.2.0/25")), "gpu-cluster:network.podCidr", "overlaps",
         absent=("192.168.2.0",), secret=SECRET_KEYS + ("network",)),
    # 4. Long values are cut wherever a message quotes them.
    Case("20,000-character interface", changed(BARE, set_path("hosts[1].interface", LONG)),
         "gpu-cluster:hosts[1] (gpu000).interface", "is not a network interface name",
         absent=(LONG[:200],)),
    Case("20,000-character LAN", changed(BARE, set_path("network.lanCidr", LONG)),
         "gpu-cluster:network.lanCidr", "is not an IPv4 network", absent=(LONG[:200],)),
    Case("20,000-character k0s version", changed(BARE, set_path("kubernetes.version", LONG)),
         "gpu-cluster:kubernetes.version", "is not a k0s release", absent=(LONG[:200],)),
    Case("20,000-character kernel argument", changed(BARE, set_path(
        "tuning.extraKernelArgs", [LONG + '"'])), "gpu-cluster:tuning.extraKernelArgs",
         "single words", absent=(LONG[:200],)),
    Case("20,000-character unknown key", changed(BARE, set_path(f"hosts[1].{LONG}", 1)),
         "gpu-cluster:hosts[1] (gpu000).eeee", "unknown key", absent=(LONG[:200],)),
    Case("nfs host among hundreds of host names", changed(changed(BARE, many_hosts(400)),
                                                          set_path("storage.nfs.host", "nas")),
         "gpu-cluster:storage.nfs.host", "'nas' is not one of the configured hosts",
         absent=("h200,",)),
    # 4. Misspelt keys get the nearest key at every level.
    Case("hosts[0].adress", changed(BARE, set_path("hosts[0].adress", "192.168.2.9")),
         "gpu-cluster:hosts[0] (controller).adress", "did you mean 'address'?"),
    Case("taint efect", changed(BARE, set_path("hosts[1].taints", [
        {"key": "gpu", "efect": "NoSchedule"}])), "gpu-cluster:hosts[1] (gpu000).taints[0].efect",
         "did you mean 'effect'?"),
    Case("kubeflow.acess", changed(BARE, with_kubeflow(set_path("acess", {}))),
         "gpu-cluster:kubeflow.acess", "did you mean 'access'?"),
    Case("kubeflow.access.tls.mod", changed(BARE, with_kubeflow(set_path("access.tls.mod", "off"))),
         "gpu-cluster:kubeflow.access.tls.mod", "did you mean 'mode'?"),
    Case("storage backend nsf", changed(BARE, set_path("storage.nsf", {})),
         "gpu-cluster:storage.nsf", "unknown storage backend 'nsf'; did you mean 'nfs'?"),
    Case("storage.nfs.serer", changed(BARE, set_path("storage.nfs.serer", "10.0.0.1")),
         "gpu-cluster:storage.nfs.serer", "did you mean 'server'?"),
    Case("aws.vpc.cidrr", changed(HYBRID, set_path("aws.vpc.cidrr", "10.20.0.0/16")),
         "gpu-cluster:aws.vpc.cidrr", "did you mean 'cidr'?"),
    Case("pools[0].instancetype", changed(CLOUD, set_path("pools[0].instancetype", "g5.xlarge")),
         "gpu-cluster:pools[0] (gpu).instancetype", "did you mean 'instanceType'?"),
    # 4. Entries are named by their names, references to them too.
    Case("a host's bad address", changed(BARE, set_path("hosts[2].address", "192.168.2.300")),
         "gpu-cluster:hosts[2] (gpu001).address", "is not an IPv4 address"),
    Case("a duplicate address names both hosts", changed(BARE, set_path(
        "hosts[3].address", "192.168.2.2")), "gpu-cluster:hosts[3] (gpu002).address",
         "already used by gpu-cluster:hosts[1] (gpu000)"),
    Case("a pool's instance type", changed(cloud_with_cpu_pool, set_path(
        "pools[1].gpus", 2)), "gpu-cluster:pools[1] (cpu).instanceType", "has no NVIDIA GPU"),
    # 7. Limits, checked before anything else looks at the entries.
    Case("one host too many", changed(BARE, many_hosts(MAX_HOSTS + 1)), "gpu-cluster:hosts",
         f"lists {MAX_HOSTS + 1} hosts; a stack holds at most {MAX_HOSTS}"),
    Case("one pool too many", changed(CLOUD, set_path("pools", [
        {"name": f"p{i}", "instanceType": "g5.xlarge", "count": 1, "gpus": 1}
        for i in range(MAX_POOLS + 1)])), "gpu-cluster:pools",
         f"lists {MAX_POOLS + 1} pools; a stack holds at most {MAX_POOLS}"),
]


def problems_of(case: Case) -> list[str]:
    cli = as_cli_config(case.make(), secret=case.secret)
    with pytest.raises(ConfigError) as caught:
        load({**cli.config, **case.extra}, cli.secret_keys, stack="test")
    return [str(problem) for problem in caught.value.problems]


@pytest.mark.parametrize("case", CASES, ids=[case.id for case in CASES])
def test_config_problem(case: Case):
    problems = problems_of(case)
    assert any(p.startswith(f"{case.path}") and case.fragment in p for p in problems), problems
    assert not [p for p in problems for text in case.absent if text in p], problems
    assert all(len(p) <= MAX_LINE for p in problems), [len(p) for p in problems]


@pytest.mark.parametrize("key", ["aws:region", "pulumi:tags", "kubernetes:context",
                                 "gpu-operator:driver", "gpu:cluster", "cluster:name"])
def test_keys_of_other_programs_are_left_alone(key):
    cli = as_cli_config(bare_metal_config())
    assert load({**cli.config, key: "x"}, cli.secret_keys, stack="test").layout == "bare-metal"


def test_problems_sort_by_index_with_names_in_the_path():
    values = bare_metal_config(workers=12)
    for index in (11, 2, 10):
        values["hosts"][index]["gpus"] = -1
    cli = as_cli_config(values)
    with pytest.raises(ConfigError) as caught:
        load(cli.config, cli.secret_keys, stack="test")
    assert [p.path for p in caught.value.problems] == [
        "hosts[2] (gpu001).gpus", "hosts[10] (gpu009).gpus", "hosts[11] (gpu010).gpus"]


def test_ten_thousand_hosts_fail_at_the_limit_without_checking_each_host():
    values = bare_metal_config()
    many_hosts(10_000)(values)
    for host in values["hosts"]:
        host["address"] = "not-an-address"  # a per-host check would report each one
    cli = as_cli_config(values)
    start = time.perf_counter()
    with pytest.raises(ConfigError) as caught:
        load(cli.config, cli.secret_keys, stack="test")
    seconds = time.perf_counter() - start
    assert [str(p) for p in caught.value.problems] == [
        f"gpu-cluster:hosts: lists 10000 hosts; a stack holds at most {MAX_HOSTS} (split the "
        "cluster into several stacks)"]
    assert seconds < 10, seconds  # about 0.1 s here; 10,000 hosts used to take minutes


def test_the_largest_allowed_stack_loads():
    values = bare_metal_config()
    many_hosts(MAX_HOSTS)(values)
    values["storage"] = {"nfs": {"host": "h0", "path": "/srv/nfs"}}
    cli = as_cli_config(values)
    assert len(load(cli.config, cli.secret_keys, stack="test").hosts) == MAX_HOSTS
