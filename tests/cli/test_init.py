"""`gpu-cluster init` against real sshd + sudo on loopback (tests/hosts/loopback.py), each
host a fake root (fake_hosts.py): a 4-GPU host with two NICs, an 8-GPU NVSwitch board with a
driver installed, a controller, a host whose user has no sudo, a Rocky Linux 9 GPU host, a
host on an OS the program does not support and an address nobody answers. The stack it writes is previewed as written, and its host keys are
the servers' own."""

import contextlib
import shutil
import socket
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from preview.engine import run_program
from preview.stack_file import read_stack
from tests.cli.fake_hosts import RHEL_8, ROCKY_9, FakeHost, build, readable_root
from tests.builders import PROJECT_DIR
from tests.hosts.loopback import loopback_host

pytestmark = pytest.mark.tools

HOSTS = {
    "ctl": FakeHost("ctl", {"eno1": "192.168.2.10/24"}),
    "gpu01": FakeHost("gpu01", {"eno1": "10.20.0.11/24", "eno2": "192.168.2.11/24"}, gpus=4),
    "hgx01": FakeHost("hgx01", {"ens1f0": "192.168.2.21/24"}, gpus=8, nvswitches=4,
                      gpu_name="NVIDIA H100 80GB HBM3", driver="580.95.05"),
    "nosudo": FakeHost("nosudo", {"eno1": "192.168.2.31/24"}, gpus=2),
    "rocky": FakeHost("rocky", {"eno1": "192.168.2.41/24"}, gpus=2, os_release=ROCKY_9),
    "rhel8": FakeHost("rhel8", {"eno1": "192.168.2.51/24"}, os_release=RHEL_8),
}


def _closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@pytest.fixture(scope="module")
def fleet(tmp_path_factory):
    """name -> running LoopbackHost. The client key of the first one logs in everywhere
    (the sudo-less user's authorized_keys gets it for the module's length)."""
    with contextlib.ExitStack() as stack:
        running = {}
        for name, host in HOSTS.items():
            root = stack.enter_context(readable_root())
            running[name] = stack.enter_context(loopback_host(
                tmp_path_factory.mktemp(name), sudo=name != "nosudo",
                set_env=build(root, host)))
        stack.enter_context(_trusted(running["nosudo"].user, running["ctl"].private_key))
        yield running


@contextlib.contextmanager
def _trusted(user: str, key):
    public = subprocess.run(["ssh-keygen", "-y", "-f", str(key)], capture_output=True,
                            text=True, check=True).stdout.split()[:2]
    line = " ".join(public + ["gpu-cluster-init-test"])
    home = subprocess.run(["getent", "passwd", user], capture_output=True, text=True,
                          check=True).stdout.split(":")[5]
    keys = Path(home) / ".ssh" / "authorized_keys"
    keys.write_text(keys.read_text() + line + "\n")
    try:
        yield
    finally:
        keys.write_text("".join(f"{kept}\n" for kept in keys.read_text().splitlines()
                                if kept != line))


def run_init(tmp_path, fleet, *extra, stack="found"):
    key = tmp_path / "client_key"
    shutil.copyfile(fleet["ctl"].private_key, key)
    key.chmod(0o600)
    specs = [f"{'' if name != 'nosudo' else fleet[name].user + '@'}127.0.0.1:{fleet[name].port}"
             for name in HOSTS]
    unreachable = f"127.0.0.1:{_closed_port()}"
    output = tmp_path / f"Pulumi.{stack}.yaml"
    result = subprocess.run(
        [sys.executable, "-m", "cli", "init", stack, *specs, unreachable,
         "--user", fleet["ctl"].user, "--key", str(key), "--output", str(output), *extra],
        cwd=PROJECT_DIR, capture_output=True, text=True, timeout=300)
    return result, output, unreachable


def preview(tmp_path, output, stack):
    project = tmp_path / "project"
    project.mkdir()
    shutil.copyfile(PROJECT_DIR / "Pulumi.yaml", project / "Pulumi.yaml")
    shutil.copyfile(output, project / f"Pulumi.{stack}.yaml")
    return run_program(PROJECT_DIR, read_stack(project, stack))


def test_init_writes_what_the_hosts_report_and_the_stack_previews(tmp_path, fleet):
    result, output, unreachable = run_init(tmp_path, fleet, "--lan", "192.168.2.0/24")
    # 1: written, with hosts left out (named) for the user to look at.
    assert result.returncode == 1, result.stderr
    config = yaml.safe_load(output.read_text())["config"]
    hosts = {h["name"]: h for h in config["gpu-cluster:hosts"]}
    assert sorted(hosts) == ["ctl", "gpu01", "hgx01", "rocky"]
    assert hosts["ctl"]["role"] == "controller" and "gpus" not in hosts["ctl"]
    assert (hosts["gpu01"]["address"], hosts["gpu01"]["interface"]) == ("192.168.2.11", "eno2")
    assert hosts["gpu01"]["gpus"] == 4 and "gpuModel" not in hosts["gpu01"]
    assert hosts["hgx01"]["gpus"] == 8 and hosts["hgx01"]["gpuModel"] == "NVIDIA-H100-80GB-HBM3"
    assert "4 NVSwitches" in output.read_text()
    assert config["gpu-cluster:nvidia"] == {"driverBranch": "580"}
    assert config["gpu-cluster:network"] == {"lanCidr": "192.168.2.0/24"}
    for name in hosts:  # the key each server holds, not one that was offered on the way
        assert hosts[name]["sshHostKey"] == fleet[name].host_public_key
        assert hosts[name]["sshAddress"] == "127.0.0.1"
    assert "nosudo (" in result.stdout and "no passwordless sudo" in result.stdout
    assert "rhel8 (" in result.stdout and (
        "OS is Red Hat Enterprise Linux 8.10 (Ootpa) (rhel 8.10); supported: Ubuntu 22.04, "
        "Ubuntu 24.04, Rocky Linux 9, AlmaLinux 9, RHEL 9") in result.stdout
    # Each host written is named with the OS it reported.
    assert output.read_text().count("    # Ubuntu 24.04.3 LTS (ubuntu 24.04), ") == 3
    assert output.read_text().count("    # Rocky Linux 9.6 (rocky 9.6), ") == 1
    assert f"{unreachable}: not reached" in result.stdout

    plan = preview(tmp_path, output, "found")
    names = {r.name for r in plan.resources}
    assert {"gpu01-install-nvidia", "hgx01-install-nvidia", "rocky-install-nvidia",
            "ctl-install-controller"} <= names


def test_a_host_whose_cluster_nic_is_unclear_is_named_not_guessed(tmp_path, fleet):
    result, output, _ = run_init(tmp_path, fleet, "--controller", "ctl")
    assert result.returncode == 1
    assert ("gpu01: which NIC faces the cluster is not clear (IPv4 on: eno1 10.20.0.11/24, "
            "eno2 192.168.2.11/24); run init again with --lan CIDR") in result.stdout
    hosts = {h["name"]: h for h in yaml.safe_load(output.read_text())["config"]["gpu-cluster:hosts"]}
    assert "address" not in hosts["gpu01"] and hosts["hgx01"]["address"] == "192.168.2.21"


def test_an_existing_stack_file_is_kept(tmp_path, fleet):
    (tmp_path / "Pulumi.found.yaml").write_text("config: {}\n")
    result, output, _ = run_init(tmp_path, fleet)
    assert result.returncode == 2 and "exists; --force replaces it" in result.stderr
    assert output.read_text() == "config: {}\n"


AGE_KEY = "age1k9lrxq8lust2l5ev97xfpknx3tfqr3chjvmhp8z5gsvx7xn8we3qnzlamk"
AWS_SIDE = ("--region", "us-east-1", "--vpc-cidr", "10.20.0.0/16", "--admin-cidr",
            "198.51.100.0/24", "--vpn-gateway", "ctl", "--vpn-source-cidr", "198.51.100.7/32",
            "--backup-recipient", AGE_KEY, "--nfs-host", "ctl")


def test_a_hybrid_stack_its_hosts_workers_and_the_aws_side_as_given(tmp_path, fleet):
    result, output, _ = run_init(tmp_path, fleet, "--layout", "hybrid", "--lan",
                                 "192.168.2.0/24", *AWS_SIDE, stack="hy")
    assert result.returncode == 1, result.stderr  # the hosts left out, named
    assert "to decide: left out: nosudo (" in result.stdout
    assert "not decided" not in result.stdout
    config = yaml.safe_load(output.read_text())["config"]
    assert config["gpu-cluster:layout"] == "hybrid"
    assert all("role" not in host for host in config["gpu-cluster:hosts"])
    assert config["gpu-cluster:aws"] == {"region": "us-east-1", "vpc": {"cidr": "10.20.0.0/16"},
                                         "adminCidrs": ["198.51.100.0/24"]}
    assert config["gpu-cluster:vpn"] == {"onpremGateway": "ctl",
                                         "clientSourceCidrs": ["198.51.100.7/32"]}
    assert config["gpu-cluster:backup"] == {"recipients": [AGE_KEY]}
    assert config["gpu-cluster:storage"]["nfs"]["host"] == "ctl"

    plan = preview(tmp_path, output, "hy")
    types = {r.type for r in plan.resources}
    names = {r.name for r in plan.resources}
    assert "aws:ec2/instance:Instance" in types
    assert {"gpu01-install-nvidia", "hgx01-install-nvidia", "ctl-prepare-host"} <= names


def test_a_hybrid_stack_names_each_aws_value_it_was_not_given(tmp_path, fleet):
    result, output, _ = run_init(tmp_path, fleet, "--layout", "hybrid", "--lan",
                                 "192.168.2.0/24", "--vpn-gateway", "nobody", stack="hy")
    assert result.returncode == 1
    for key, option in (("aws.region", "--region"), ("aws.vpc.cidr", "--vpc-cidr"),
                        ("aws.adminCidrs", "--admin-cidr"),
                        ("vpn.onpremGateway", "--vpn-gateway"),
                        ("vpn.clientSourceCidrs", "--vpn-source-cidr"),
                        ("backup.recipients", "--backup-recipient"),
                        ("storage", "--nfs-host NAME")):
        assert f"to decide: {key} is not decided: " in result.stdout, key
        assert f"# {key.partition('.')[2] or key}: to decide ({option}): " in output.read_text()
    assert "--vpn-gateway nobody: not one of the hosts written" in result.stdout
    config = yaml.safe_load(output.read_text())["config"]
    assert config["gpu-cluster:aws"] is None and "gpu-cluster:storage" not in config
    refused = subprocess.run([sys.executable, "-m", "cli", "init", "hy", "127.0.0.1", "--user",
                              "ops", "--layout", "hybrid", "--region", "Virginia"],
                             cwd=PROJECT_DIR, capture_output=True, text=True)
    assert refused.returncode == 2 and "'Virginia' is not an AWS region name" in refused.stderr
