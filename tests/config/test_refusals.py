"""Config layer: every invalid case names its key and what is wrong, all problems at once,
hosts by name and in natural order, never quoting a secret, and the preview prints them
as one list without a traceback."""

import subprocess
import sys

import pytest

from tests.config.loading import DELETE, problem_lines, refused_at, set_path
from tests.builders import PROJECT_DIR, bare_metal_config, cloud_config, hybrid_config


INVALID_CASES = [
    # (id, mutation, expected problem: key path, message fragment)
    ("bad layout", set_path("layout", "edge"), "gpu-cluster:layout", "'bare-metal', 'hybrid' or 'cloud'"),
    ("cloud with on-prem hosts", set_path("layout", "cloud"), "gpu-cluster:hosts",
     "a cloud stack has no on-prem hosts"),
    ("pools on bare metal", set_path("pools", [{"name": "a", "instanceType": "g5.xlarge", "count": 1}]),
     "gpu-cluster:pools", "only used by the hybrid and cloud layouts"),
    ("aws on bare metal", set_path("aws", {"region": "us-east-1", "adminCidrs": ["198.51.100.0/24"]}),
     "gpu-cluster:aws", "only used by the hybrid and cloud layouts"),
    ("efs on bare metal needs an address", set_path("storage", {"efs": {}}),
     "gpu-cluster:storage.efs.mountTargetAddress", "is required on bare-metal"),
    ("missing network", set_path("network", DELETE), "gpu-cluster:network.lanCidr",
     "is required by the bare-metal layout"),
    ("bad lan cidr", set_path("network.lanCidr", "192.168.2.1/24"), "gpu-cluster:network.lanCidr",
     "not an IPv4 network"),
    ("pod overlaps lan", set_path("network.podCidr", "192.168.0.0/16"), "gpu-cluster:network.podCidr",
     "overlaps gpu-cluster:network.lanCidr"),
    ("service overlaps pod", set_path("network.serviceCidr", "10.244.128.0/20"),
     "gpu-cluster:network.serviceCidr", "overlaps gpu-cluster:network.podCidr"),
    ("bad address", set_path("hosts[2].address", "192.168.2.300"), "gpu-cluster:hosts[2] (gpu001).address",
     "not an IPv4 address"),
    ("address off lan", set_path("hosts[1].address", "10.9.9.9"), "gpu-cluster:hosts[1] (gpu000).address",
     "outside gpu-cluster:network.lanCidr"),
    ("duplicate name", set_path("hosts[3].name", "gpu000"), "gpu-cluster:hosts[3] (gpu000).name",
     "already used by gpu-cluster:hosts[1] (gpu000)"),
    ("duplicate address", set_path("hosts[2].address", "192.168.2.1"), "gpu-cluster:hosts[2] (gpu001).address",
     "already used by gpu-cluster:hosts[0] (controller)"),
    ("negative gpus", set_path("hosts[1].gpus", -1), "gpu-cluster:hosts[1] (gpu000).gpus",
     "greater than or equal to 0"),
    ("uppercase name", set_path("hosts[1].name", "GPU0"), "gpu-cluster:hosts[1].name", "DNS label"),
    ("duplicate user", set_path("access", {
        "teams": [{"name": "vision"}],
        "users": [{"name": "alice", "namespaces": ["vision"]},
                  {"name": "alice", "role": "view", "namespaces": ["vision"]}]}),
     "gpu-cluster:access.users", "user 'alice' is listed twice (entries 0 and 1)"),
    ("unknown role", set_path("access", {"teams": [{"name": "vision"}], "users": [
        {"name": "alice", "role": "owner", "namespaces": ["vision"]}]}),
     "gpu-cluster:access.users[0].role", "'admin', 'edit' or 'view'"),
    ("negative quota", set_path("access", {"teams": [{"name": "vision", "quota": {"memory": "-1Gi"}}]}),
     "gpu-cluster:access.teams[0].quota.memory", "'-1Gi' is negative"),
    ("negative gpu quota", set_path("access", {"teams": [{"name": "vision", "quota": {"gpus": -2}}]}),
     "gpu-cluster:access.teams[0].quota.gpus", "greater than or equal to 0"),
    ("user in an unknown namespace", set_path("access", {"users": [
        {"name": "alice", "namespaces": ["nlp"]}]}),
     "gpu-cluster:access", "namespaces not listed under teams: users[0] (alice): 'nlp'"),
    ("editor without namespaces", set_path("access", {"users": [{"name": "alice"}]}),
     "gpu-cluster:access.users[0]", "role 'edit' needs at least one namespace"),
    ("long user name", set_path("access", {"users": [{"name": "u" * 33, "role": "admin"}]}),
     "gpu-cluster:access.users[0].name", "longer than 32 characters"),
    ("two groups", set_path("access", {"users": [{"name": "root", "role": "admin",
                                              "groups": ["a", "b"]}]}),
     "gpu-cluster:access.users[0].groups", "at most 1 item"),
    ("unknown role", set_path("hosts[1].role", "master"), "gpu-cluster:hosts[1] (gpu000).role",
     "'controller', 'worker' or 'controller+worker'"),
    ("two controllers", set_path("hosts[1].role", "controller+worker"), "gpu-cluster:hosts",
     "2 hosts have a controller role (gpu-cluster:hosts[0] (controller), gpu-cluster:hosts[1] "
     "(gpu000)): etcd needs a majority"),
    ("no controller", set_path("hosts[0].role", "worker"), "gpu-cluster:hosts",
     "needs a host with role 'controller'"),
    ("no workers", set_path("hosts", [{"name": "solo", "address": "192.168.2.1", "role": "controller"}]),
     "gpu-cluster:hosts", "no host runs workloads"),
    ("unknown host key", set_path("hosts[1].gpu", 2), "gpu-cluster:hosts[1] (gpu000).gpu", "unknown key"),
    ("unknown top key", set_path("tunning", {}), "gpu-cluster:tunning", "did you mean 'tuning'"),
    ("bad label", set_path("hosts[1].labels", {"team": "ml research"}),
     "gpu-cluster:hosts[1] (gpu000).labels.team", "label value"),
    ("restricted label", set_path("hosts[1].labels", {"node-role.kubernetes.io/gpu": ""}),
     "gpu-cluster:hosts[1] (gpu000).labels.node-role.kubernetes.io/gpu", "NodeRestriction"),
    ("bad taint effect", set_path("hosts[1].taints", [{"key": "gpu", "effect": "Never"}]),
     "gpu-cluster:hosts[1] (gpu000).taints[0].effect", "'NoSchedule'"),
    ("gpu model without gpus", set_path("hosts[1].gpus", 0), "gpu-cluster:hosts[1] (gpu000).gpuModel",
     "gpus is 0"),
    ("nvswitch without gpus", set_path("hosts[0].nvswitch", True), "gpu-cluster:hosts[0] (controller).nvswitch",
     "is true but gpus is 0"),
    ("bad nvswitch", set_path("hosts[1].nvswitch", "sometimes"), "gpu-cluster:hosts[1] (gpu000).nvswitch",
     "must be auto, true or false, got 'sometimes'"),
    ("controller with gpus", set_path("hosts[0].gpus", 2), "gpu-cluster:hosts[0] (controller).gpus",
     "controller+worker"),
    ("static cpu manager needs reserved cpus", set_path("tuning", {"cpuManagerPolicy": "static"}),
     "gpu-cluster:tuning.reservedCpus", "is required"),
    ("bad k0s version", set_path("kubernetes", {"version": "1.36"}), "gpu-cluster:kubernetes.version",
     "not a k0s release"),
    ("public key given", set_path("sshPrivateKey", "ssh-ed25519 AAAAC3Nza test@example"),
     "gpu-cluster:sshPrivateKey", "not a private key"),
    ("missing key", set_path("sshPrivateKey", DELETE), "gpu-cluster:sshPrivateKey",
     "pulumi config set --secret"),
    ("bad host key", set_path("hosts[1].sshHostKey", "AAAAC3NzaC1lZDI1NTE5"),
     "gpu-cluster:hosts[1] (gpu000).sshHostKey", "SSH public host key"),
    ("no storage", set_path("storage", DELETE), "gpu-cluster:storage", "is required"),
    ("no storage backend", set_path("storage", {}), "gpu-cluster:storage", "configure a backend"),
    ("unknown storage backend", set_path("storage.ceph", {}), "gpu-cluster:storage.ceph",
     "unknown storage backend 'ceph' (use nfs, efs or localPath)"),
    ("efs without mount target", set_path("storage.efs", {"default": False}),
     "gpu-cluster:storage.efs.mountTargetAddress", "is required"),
    ("two default backends", set_path("storage", {"nfs": {"host": "controller", "default": True},
                                               "localPath": {"default": True}}),
     "gpu-cluster:storage", "exactly one backend must set default: true"),
    ("no default among two", set_path("storage", {"nfs": {"host": "controller"}, "localPath": {}}),
     "gpu-cluster:storage", "now: none"),
    ("only backend not default", set_path("storage.nfs.default", False),
     "gpu-cluster:storage.nfs.default", "only backend must be the default"),
    ("nfs server and host", set_path("storage.nfs.server", "192.0.2.20"), "gpu-cluster:storage.nfs",
     "not both or neither"),
    ("nfs host unknown", set_path("storage.nfs.host", "nas"), "gpu-cluster:storage.nfs.host",
     "not one of the configured hosts"),
    # Team pods are kept off the NFS server by its address (components/access/storage_egress.py).
    ("nfs server by name beside teams", lambda values: (
        set_path("storage.nfs", {"server": "nas.example.com"})(values),
        set_path("access", {"teams": [{"name": "vision"}]})(values)),
     "gpu-cluster:storage.nfs.server", "'nas.example.com' is a DNS name; with access.teams"),
    ("relative nfs path", set_path("storage.nfs.path", "srv/nfs"), "gpu-cluster:storage.nfs.path",
     "not an absolute path"),
    ("two mount options in one item", set_path("storage.nfs.mountOptions", ["hard,timeo=600"]),
     "gpu-cluster:storage.nfs.mountOptions[0]", "list one option per item"),
    ("unknown mount option", set_path("storage.nfs.mountOptions", ["hard", "tieo=600"]),
     "gpu-cluster:storage.nfs.mountOptions[1]", "'tieo=600' is not an NFS mount option"),
    ("mount option with a blank", set_path("storage.nfs.mountOptions", ["hard timeo=600"]),
     "gpu-cluster:storage.nfs.mountOptions[0]", "is not an NFS mount option"),
    ("mount option value", set_path("storage.nfs.mountOptions", ["nfsvers=4.1 ; reboot"]),
     "gpu-cluster:storage.nfs.mountOptions[0]", "is not an NFS mount option"),
    ("hard and soft", set_path("storage.nfs.mountOptions", ["hard", "soft"]),
     "gpu-cluster:storage.nfs.mountOptions", "'hard' and 'soft' set the same mount option"),
    ("efs mount option", set_path("storage", {"efs": {"mountTargetAddress": "10.0.1.10",
                                                  "mountOptions": ["timeo=1m"]}}),
     "gpu-cluster:storage.efs.mountOptions[0]", "'timeo=1m' is not an NFS mount option"),
    ("bad mig strategy", set_path("gpu", {"migStrategy": "all"}), "gpu-cluster:gpu.migStrategy",
     "'none', 'single' or 'mixed'"),
    ("bad json", set_path("network", "{lanCidr: }"), "gpu-cluster:network", "not valid structured config"),
    ("bastion key without bastion", set_path("bastionPrivateKey", "-----BEGIN OPENSSH PRIVATE KEY-----"),
     "gpu-cluster:bastionPrivateKey", "ssh.bastion is not"),
    # Found by tests/fuzz: a key that is a digit to str.isdigit() but not to int().
    ("unicode digit as a key", set_path("tuning", {"\u00b2": 1}), "gpu-cluster:tuning.\u00b2",
     "unknown key"),
    # Found by tests/fuzz: a 63-character name made certificate common names over 64.
    ("cluster name too long for certificates", set_path("clusterName", "c" * 50),
     "gpu-cluster:clusterName", "at most 49 characters"),
    # Found by tests/fuzz: duplicate taints passed, then overflowed a pool's user data.
    ("duplicate taint", set_path("hosts[1].taints", [{"key": "gpu", "effect": "NoSchedule"},
                                                 {"key": "gpu", "value": "x", "effect": "NoSchedule"}]),
     "gpu-cluster:hosts[1] (gpu000).taints", "taint gpu:NoSchedule is listed twice"),
]


HYBRID_CASES = [
    # cloud-provider-aws v1.35.2 pkg/providers/v1/aws.go:3621-3630 (components/aws/cloud_controller.py).
    ("on-prem host named like an instance", set_path("hosts[1].name", "i-0123456789abcdef0"),
     "gpu-cluster:hosts[1] (i-0123456789abcdef0).name", "may not start with 'i-'"),
    ("efs without saying it trusts nfs clients without iam", set_path("storage", {"efs": {}}),
     "gpu-cluster:storage.efs.anonymousNfs", "the kernel's NFS client"),
    ("vpc overlaps lan", set_path("aws.vpc", {"cidr": "192.168.0.0/16"}),
     "gpu-cluster:aws.vpc.cidr", "overlaps gpu-cluster:network.lanCidr"),
    ("vpc overlaps pods", set_path("aws.vpc", {"cidr": "10.244.0.0/16"}),
     "gpu-cluster:aws.vpc.cidr", "overlaps gpu-cluster:network.podCidr"),
    ("no vpn section", set_path("vpn", DELETE), "gpu-cluster:vpn", "is required by the hybrid layout"),
    ("no aws section", set_path("aws", DELETE), "gpu-cluster:aws", "is required by the hybrid layout"),
    ("gateway is not a host", set_path("vpn.onpremGateway", "router"), "gpu-cluster:vpn.onpremGateway",
     "not one of the configured hosts"),
    ("no gateway", set_path("vpn", {"clientSourceCidrs": ["198.51.100.7/32"]}),
     "gpu-cluster:vpn.onpremGateway", "is required"),
    ("ssh open to the world", set_path("aws.adminCidrs", ["0.0.0.0/0"]), "gpu-cluster:aws.adminCidrs",
     "allowSshFromAnywhere"),
    ("on-prem controller", set_path("hosts[0].role", "controller"), "gpu-cluster:hosts[0] (gpu000).role",
     "runs on EC2"),
    ("adopted vpc without subnets", set_path("aws.vpc", {"id": "vpc-0123456789abcdef0"}),
     "gpu-cluster:aws.vpc.subnetIds", "at least two"),
    ("control plane outside the vpc", set_path("aws.controlPlane", {"privateIp": "10.99.0.10"}),
     "gpu-cluster:aws.controlPlane.privateIp", "outside gpu-cluster:aws.vpc.cidr"),
    ("cni mtu too large for the tunnel", set_path("network.mtu", 1400), "gpu-cluster:network.mtu",
     "does not fit through the tunnel"),
    ("tunnel overlaps vpc", set_path("vpn.tunnelCidr", "10.20.5.0/24"), "gpu-cluster:vpn.tunnelCidr",
     "overlaps gpu-cluster:aws.vpc.cidr"),
    ("no client source cidrs", set_path("vpn.clientSourceCidrs", []),
     "gpu-cluster:vpn.clientSourceCidrs", "is required"),
    ("existing server without profile",
     set_path("vpn", {"mode": "client-to-existing", "existingServerAddress": "192.168.2.1"}),
     "gpu-cluster:vpnClientProfile", "pulumi config set --secret gpu-cluster:vpnClientProfile"),
    ("existing server outside the lan",
     set_path("vpn", {"mode": "client-to-existing", "existingServerAddress": "10.99.0.1"}),
     "gpu-cluster:vpn.existingServerAddress", "outside gpu-cluster:network.lanCidr"),
    ("existing server needs its address", set_path("vpn", {"mode": "client-to-existing"}),
     "gpu-cluster:vpn.existingServerAddress", "is required with client-to-existing"),
    ("profile that is no client profile", set_path("vpnClientProfile", "server\nport 1194\n"),
     "gpu-cluster:vpnClientProfile", "is only used with vpn.mode client-to-existing"),
]


def test_a_profile_must_be_an_openvpn_client_profile():
    values = hybrid_config()
    values["vpn"] = {"mode": "client-to-existing", "existingServerAddress": "192.168.2.1"}
    values["vpnClientProfile"] = "server\nport 1194\n"
    problems = problem_lines(values)
    assert any(p.startswith("gpu-cluster:vpnClientProfile: is not an OpenVPN client profile")
               for p in problems), problems
    assert not any("port 1194" in p for p in problems)  # never quoted: it is a secret


CLOUD_CASES = [
    ("gpus on a cpu instance", set_path("pools[0].instanceType", "m6i.4xlarge"),
     "gpu-cluster:pools[0] (gpu).instanceType", "'m6i.4xlarge' has no NVIDIA GPU but the pool claims 4"),
    ("no pools", set_path("pools", []), "gpu-cluster:pools", "add at least one worker pool"),
    ("duplicate pool", set_path("pools[1]", {"name": "gpu", "instanceType": "g5.xlarge", "count": 1}),
     "gpu-cluster:pools[1] (gpu).name", "already used by gpu-cluster:pools[0] (gpu)"),
    ("vpn on cloud", set_path("vpn", {"onpremGateway": "x", "clientSourceCidrs": ["198.51.100.7/32"]}),
     "gpu-cluster:vpn", "no on-prem network"),
    ("lan on cloud", set_path("network", {"lanCidr": "192.168.2.0/24"}), "gpu-cluster:network.lanCidr",
     "no on-prem LAN"),
    ("nfs host on cloud", set_path("storage", {"nfs": {"host": "x"}}), "gpu-cluster:storage.nfs.host",
     "no hosts to serve NFS"),
    ("negative count", set_path("pools[0].count", -1), "gpu-cluster:pools[0] (gpu).count",
     "greater than or equal to 0"),
    # Found by tests/fuzz (see the bare-metal case).
    ("duplicate pool taint", set_path("pools[0].taints", [{"key": "gpu", "effect": "NoSchedule"}] * 2),
     "gpu-cluster:pools[0] (gpu).taints", "listed twice"),
    ("no aws", set_path("aws", DELETE), "gpu-cluster:aws", "is required by the cloud layout"),
    ("pods overlap the vpc", set_path("network", {"podCidr": "10.20.0.0/16"}),
     "gpu-cluster:aws.vpc.cidr", "overlaps gpu-cluster:network.podCidr"),
    # Found by tests/fuzz: a VPC too small for its subnets ended in an IndexError.
    ("vpc of one address", set_path("aws.vpc", {"cidr": "10.20.0.1/32"}), "gpu-cluster:aws.vpc.cidr",
     "not a size AWS allows for a VPC"),
    ("vpc too small for its subnets", set_path("aws.vpc", {"cidr": "10.20.0.0/24"}),
     "gpu-cluster:aws.vpc.cidr", "cannot hold 2 /24 subnets"),
    ("vpc larger than aws allows", set_path("aws.vpc", {"cidr": "10.0.0.0/8"}),
     "gpu-cluster:aws.vpc.cidr", "/16 to /28"),
    ("subnet too small", set_path("aws.vpc", {"cidr": "10.20.0.0/16", "subnetCidrs": [
        "10.20.0.0/28", "10.20.1.0/24"]}), "gpu-cluster:aws.vpc.subnetCidrs[0]", "too small"),
]


def cloud_config_with_cpu_pool() -> dict:
    values = cloud_config()
    values["pools"].append({"name": "cpu", "instanceType": "m6i.large", "count": 1})
    return values


# Every layout's invalid cases, each applied to a valid stack of that layout.
ALL_CASES = [(bare_metal_config, *case) for case in INVALID_CASES] + \
    [(hybrid_config, *case) for case in HYBRID_CASES] + \
    [(cloud_config_with_cpu_pool, *case) for case in CLOUD_CASES]


@pytest.mark.parametrize("valid, mutate, path, fragment", [(c[0], *c[2:]) for c in ALL_CASES],
                         ids=[f"{c[0].__name__.split('_')[0]}: {c[1]}" for c in ALL_CASES])
def test_invalid_config_names_the_key_and_the_problem(valid, mutate, path, fragment):
    values = valid()
    mutate(values)
    refused_at(values, path, fragment)


def test_encrypted_or_broken_keys_are_refused_without_quoting_them():
    values = bare_metal_config()
    values["sshPrivateKey"] = ("-----BEGIN OPENSSH PRIVATE KEY-----\nnot-base64-secret-part\n"
                               "-----END OPENSSH PRIVATE KEY-----\n")
    problems = problem_lines(values)
    assert any("cannot be used as an SSH key" in p for p in problems)
    assert not any("secret-part" in p for p in problems)


def test_plaintext_secret_is_refused_with_the_command_to_fix_it():
    problems = problem_lines(bare_metal_config(), secret=())
    assert problems == [
        "gpu-cluster:sshPrivateKey: must be a secret, but it is set in plain text; remove it "
        "and set it with `pulumi config set --secret gpu-cluster:sshPrivateKey "
        "< ~/.ssh/id_ed25519`"
    ]


def test_all_problems_are_reported_at_once():
    values = bare_metal_config()
    values["hosts"][2]["name"] = "gpu000"             # duplicate host
    values["network"]["podCidr"] = "192.168.2.0/25"   # overlaps the LAN
    values["hosts"][3]["address"] = "not-an-ip"       # field error beside cross errors
    problems = problem_lines(values, secret=())        # plaintext SSH key
    paths = [p.split(": ")[0] for p in problems]
    assert paths == [
        "gpu-cluster:hosts[2] (gpu000).name",
        "gpu-cluster:hosts[3] (gpu002).address",
        "gpu-cluster:network.podCidr",
        "gpu-cluster:sshPrivateKey",
    ], problems


def test_secret_values_never_appear_in_errors():
    values = bare_metal_config()
    values["sshPrivateKey"] = "not a key but a secret-looking value 12345"
    problems = problem_lines(values, secret=())
    assert not any("12345" in p for p in problems)


def test_hosts_are_sorted_naturally_in_the_error_list():
    values = bare_metal_config(workers=12)
    values["hosts"][10]["gpus"] = -1
    values["hosts"][2]["gpus"] = -1
    paths = [p.split(": ")[0] for p in problem_lines(values)]
    assert paths == ["gpu-cluster:hosts[2] (gpu001).gpus", "gpu-cluster:hosts[10] (gpu009).gpus"]


def test_invalid_lab_variant_prints_one_error_list_without_traceback(tmp_path):
    project = tmp_path / "project"
    project.mkdir()
    for name in ("Pulumi.yaml", "__main__.py"):
        (project / name).write_text((PROJECT_DIR / name).read_text())
    lab = (PROJECT_DIR / "Pulumi.lab.yaml").read_text()
    broken = (lab.replace("name: madrid", "name: moscow")
                 .replace("podCidr: 10.244.0.0/16", "podCidr: 192.168.0.0/16")
              + "  gpu-cluster:sshPrivateKey: |\n    -----BEGIN OPENSSH PRIVATE KEY-----\n")
    (project / "Pulumi.broken.yaml").write_text(broken)
    script = (
        "import sys; sys.path.insert(0, sys.argv[1]);"
        "import preview.__main__ as m; from pathlib import Path;"
        "m.PROJECT_DIR = Path(sys.argv[2]); sys.exit(m.main(['broken', '--build-dir', sys.argv[3]]))"
    )
    result = subprocess.run(
        [sys.executable, "-c", script, str(PROJECT_DIR), str(project), str(tmp_path / "build")],
        capture_output=True, text=True, timeout=120,
    )
    assert result.returncode == 1
    assert "Traceback" not in result.stderr + result.stdout
    assert ("gpu-cluster:hosts[2] (moscow).name: 'moscow' is already used by "
            "gpu-cluster:hosts[1] (moscow)") in result.stderr
    assert "gpu-cluster:network.podCidr: 192.168.0.0/16 overlaps" in result.stderr
    assert "gpu-cluster:sshPrivateKey: must be a secret" in result.stderr
    assert not (tmp_path / "build").exists()
