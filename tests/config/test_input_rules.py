"""Values that were accepted and then broke a script, failed later or were silently
ignored: each is a config problem at its key, with what is wrong."""

import re

import pytest
from pydantic import TypeAdapter, ValidationError

import config
from config.problems import ConfigError
from config.types import DnsLabel, Duration, InterfaceName, LabelKey, LabelValue, UserName
from tests.builders import (
    PROJECT_DIR,
    as_cli_config,
    bare_metal_config,
    cloud_config,
    hybrid_config,
)

BASES = {"bare-metal": bare_metal_config, "cloud": cloud_config, "hybrid": hybrid_config}


def _problems(values: dict) -> list:
    cli = as_cli_config(values)
    try:
        config.load(cli.config, cli.secret_keys, "test")
    except ConfigError as error:
        return error.problems
    return []


def _set(*path_and_value):
    *path, value = path_and_value

    def change(values: dict) -> None:
        node = values
        for key in path[:-1]:
            node = node.setdefault(key, {}) if isinstance(key, str) else node[key]
        node[path[-1]] = value
    return change


def _host_label(key, value="x"):
    return _set("hosts", 1, "labels", {key: value})


def _host_taint(**taint):
    return _set("hosts", 1, "taints", [{"effect": "NoSchedule", **taint}])


def _team_and_kubeflow(team: str, profile="research"):
    def change(values: dict) -> None:
        values["access"] = {"teams": [{"name": team}]}
        user = {"email": "ada@example.com", **({"profile": profile} if profile else {})}
        values["kubeflow"] = {"user": user}
        values["kubeflowPassword"] = "a long test passphrase"
    return change


PREFIX_253 = ".".join(["a" * 63] * 4)[:253]
# (id, layout, change, problem path, message fragment)
REFUSED = [
    # 1: a line break after a valid value (YAML `name: |`) breaks the line it lands on.
    ("host name ends in a line break", "bare-metal", _set("hosts", 1, "name", "gpu000\n"),
     "hosts[1].name", "line break (U+000A)"),
    ("pool name ends in a line break", "cloud", _set("pools", 0, "name", "gpu\n"),
     "pools[0].name", "line break"),
    ("control plane name ends in a line break", "cloud",
     _set("aws", "controlPlane", {"name": "cp\n"}), "aws.controlPlane.name", "line break"),
    ("interface ends in a line break", "bare-metal", _set("hosts", 1, "interface", "eno2\n"),
     "hosts[1].interface", "line break"),
    ("label value ends in a line break", "bare-metal", _host_label("rack", "r1\n"),
     "hosts[1].labels", "the value of key 'rack' has a line break"),
    ("k0s version ends in a line break", "bare-metal",
     _set("kubernetes", "version", "v1.36.3+k0s.2\n"), "kubernetes.version", "line break"),
    ("kernel argument ends in a line break", "bare-metal",
     _set("tuning", "extraKernelArgs", ["quiet", "pci=noaer\n"]), "tuning.extraKernelArgs",
     "item 1 has a line break"),
    ("ssh user ends in a line break", "bare-metal", _set("ssh", "user", "ops\n"), "ssh.user",
     "line break"),
    ("kubeflow ref ends in a line break", "bare-metal",
     _set("kubeflow", {"user": {"email": "a@example.com"}, "source": {"ref": "26.03\n"}}),
     "kubeflow.source.ref", "line break"),
    ("nfs path ends in a line break", "bare-metal",
     _set("storage", "nfs", "path", "/srv/nfs\n"), "storage.nfs.path", "line break"),
    ("escape in a tag value", "cloud", _set("aws", "tags", {"team": "ml\x1b[2J"}), "aws.tags",
     "control character (U+001B)"),
    ("NUL in a cluster name", "bare-metal", _set("clusterName", "lab\x00"), "clusterName",
     "control character (U+0000)"),
    ("C1 control in a gpu model", "bare-metal", _set("hosts", 1, "gpuModel", "A100\x85"),
     "hosts[1].gpuModel", "U+0085"),
    ("line break in the password", "bare-metal",
     _set("kubeflowPassword", "correct horse\n"), "kubeflowPassword", "line break"),
    ("NUL in the SSH key", "bare-metal",
     lambda values: values.update(sshPrivateKey=values["sshPrivateKey"] + "\x00"),
     "sshPrivateKey", "control character (U+0000)"),
    ("text after the SSH key block", "bare-metal",
     lambda values: values.update(sshPrivateKey=values["sshPrivateKey"] + "$(touch /tmp/x)\n"),
     "sshPrivateKey", "holds text before or after its key block"),
    # 2: login names as useradd(8) allows them, nothing a command line would read.
    ("ssh user with a command", "bare-metal", _set("ssh", "user", "ops;id"), "ssh.user",
     "is not a login name"),
    ("ssh user as an option", "bare-metal", _set("ssh", "user", "-oProxyCommand=id"),
     "ssh.user", "is not a login name"),
    ("ssh user with a quote", "bare-metal", _set("ssh", "user", "o'ps"), "ssh.user",
     "is not a login name"),
    ("ssh user uppercase", "bare-metal", _set("ssh", "user", "Ops"), "ssh.user",
     "is not a login name"),
    ("ssh user of 33 characters", "bare-metal", _set("ssh", "user", "u" * 33), "ssh.user",
     "at most 32 characters"),
    ("host ssh user with a space", "bare-metal", _set("hosts", 1, "sshUser", "a b"),
     "hosts[1].sshUser", "is not a login name"),
    ("bastion user with a dollar inside", "bare-metal",
     _set("ssh", "bastion", {"host": "203.0.113.10", "user": "a$b"}), "ssh.bastion.user",
     "is not a login name"),
    # 3: folders a cluster host must not export or fill with volumes.
    *[(f"nfs path {path}", "bare-metal", _set("storage", "nfs", "path", path),
       "storage.nfs.path", fragment)
      for path, fragment in [("/", "root folder"), ("/etc", "system folder"),
                             ("/etc/exports.d", "in /etc"), ("/root", "in /root"),
                             ("/usr/local/share", "in /usr"), ("/tmp/nfs", "in /tmp"),
                             ("/var", "holds /var/lib/k0s"), ("/var/lib", "holds /var/lib/k0s"),
                             ("/var/lib/k0s", "k0s reset deletes"),
                             ("/var/lib/k0s/nfs", "in /var/lib/k0s"),
                             ("/var/lib/kubelet/pods", "in /var/lib/kubelet"),
                             ("/var/lib/rancher", "in /var/lib/rancher"),
                             ("/home", "every user's files"),
                             ("/srv/./../etc", "not an absolute path")]],
    ("local path under the kubelet", "bare-metal",
     _set("storage", {"localPath": {"path": "/var/lib/kubelet/volumes"}}),
     "storage.localPath.path", "in /var/lib/kubelet"),
    ("local path in the k0s data dir", "bare-metal",
     _set("storage", {"localPath": {"path": "/var/lib/k0s"}}), "storage.localPath.path",
     "k0s reset deletes"),
    ("local path at the root", "bare-metal", _set("storage", {"localPath": {"path": "/"}}),
     "storage.localPath.path", "root folder"),
    # 4: accepted, then failing later or silently ignored.
    *[(f"team {name}", "bare-metal", _set("access", {"teams": [{"name": name}]}),
       "access.teams[0].name", "is a namespace of Kubernetes or of what the program installs")
      for name in ("kube-system", "default", "kube-public", "kube-node-lease", "kube-team",
                   "kubeflow", "nfs-provisioner", "local-path-storage", "mpi-operator",
                   "gpu-feature-discovery", "istio-system")],
    ("team named as the Kubeflow user's profile", "bare-metal", _team_and_kubeflow("research"),
     "access.teams[0].name", "is the Kubeflow user's profile namespace"),
    ("team named as the Kubeflow user's default profile", "bare-metal",
     _team_and_kubeflow("kubeflow-ada-example-com", profile=None),
     "access.teams[0].name", "is the Kubeflow user's profile namespace"),
    ("label prefix with an empty label", "bare-metal", _host_label("example..com/x"),
     "hosts[1].labels.example..com/x (the key)", "prefix that is not a DNS subdomain"),
    ("gpus true", "bare-metal", _set("hosts", 1, "gpus", True), "hosts[1].gpus",
     "must be a whole number, not true"),
    ("gpus 2.0", "bare-metal", _set("hosts", 1, "gpus", 2.0), "hosts[1].gpus",
     "must be a whole number, not 2.0"),
    ("gpus '2.5' as text", "bare-metal", _set("hosts", 1, "gpus", "2.5"), "hosts[1].gpus",
     "must be a whole number"),
    ("pool count false", "cloud", _set("pools", 0, "count", False), "pools[0].count",
     "must be a whole number, not false"),
    ("quota gpus true", "bare-metal",
     _set("access", {"teams": [{"name": "a", "quota": {"gpus": True}}]}),
     "access.teams[0].quota.gpus", "whole number"),
    ("snake_case tuning key", "bare-metal", _set("tuning", {"disable_iommu": False}),
     "tuning.disable_iommu", "did you mean 'disableIommu'?"),
    ("snake_case host key", "bare-metal", _set("hosts", 1, "gpu_model", "A100"),
     "hosts[1].gpu_model", "did you mean 'gpuModel'?"),
    ("snake_case kubeflow key", "bare-metal",
     _set("kubeflow", {"user": {"email": "a@example.com"}, "image_mirror": {"registry": "r.io"}}),
     "kubeflow.image_mirror", "did you mean 'imageMirror'?"),
    ("tag key aws:", "cloud", _set("aws", "tags", {"aws:team": "ml"}),
     "aws.tags.aws:team (the key)", "prefix AWS reserves"),
    ("tag key AWS: in capitals", "cloud", _set("aws", "tags", {"AWS:x": "y"}),
     "aws.tags.AWS:x (the key)", "prefix AWS reserves"),
    ("tag value with a dollar", "cloud", _set("aws", "tags", {"team": "$(id)"}),
     "aws.tags.team", "AWS tag rules"),
    ("tag value of 257 characters", "cloud", _set("aws", "tags", {"team": "t" * 257}),
     "aws.tags.team", "at most 256"),
    ("worker token expiry 0s", "bare-metal", _set("kubernetes", "workerTokenExpiry", "0s"),
     "kubernetes.workerTokenExpiry", "is zero"),
    ("worker token expiry 0h0m", "bare-metal", _set("kubernetes", "workerTokenExpiry", "0h0m"),
     "kubernetes.workerTokenExpiry", "is zero"),
    ("mount options as free text", "bare-metal",
     _set("storage", "nfs", "mountOptions", ["hard,intr"]), "storage.nfs.mountOptions[0]",
     "holds several options"),
    ("mount option with a command", "bare-metal",
     _set("storage", "nfs", "mountOptions", ["rw;rm -rf /"]), "storage.nfs.mountOptions[0]",
     "is not an NFS mount option"),
    ("subnet id with a command", "cloud",
     _set("aws", "vpc", {"id": "vpc-0123456789abcdef0", "subnetIds": ["subnet-1$(id)"]}),
     "aws.vpc.subnetIds[0]", "is not a subnet id"),
    ("route table id", "cloud", _set("aws", "vpc", {"routeTableIds": ["rtb-x"]}),
     "aws.vpc.routeTableIds[0]", "is not a route table id"),
    ("kubelet resolv.conf relative", "bare-metal",
     _set("tuning", "kubeletResolvConf", "resolv.conf"), "tuning.kubeletResolvConf",
     "is not an absolute path"),
    ("git URL with a command", "bare-metal",
     _set("kubeflow", {"user": {"email": "a@example.com"},
                       "source": {"repository": "https://x/$(id)"}}),
     "kubeflow.source.repository", "is not a git URL"),
    # 5: label and taint syntax as the API server checks it (IsQualifiedName,
    # IsValidLabelValue in k8s.io/apimachinery/pkg/util/validation/validation.go).
    ("label key with an empty prefix", "bare-metal", _host_label("/rack"),
     "hosts[1].labels./rack (the key)", "empty prefix"),
    ("label key with two slashes", "bare-metal", _host_label("a/b/c"),
     "hosts[1].labels.a/b/c (the key)", "more than one '/'"),
    ("label prefix uppercase", "bare-metal", _host_label("Example.com/x"),
     "hosts[1].labels.Example.com/x (the key)", "not a DNS subdomain"),
    ("label prefix of 254 characters", "bare-metal", _host_label(f"{PREFIX_253}b/x"),
     f"hosts[1].labels.{PREFIX_253}b/x (the key)", "at most 253 characters"),
    ("label name of 64 characters", "bare-metal", _host_label("n" * 64),
     f"hosts[1].labels.{'n' * 64} (the key)", "at most 63 characters"),
    ("label name starting with a dash", "bare-metal", _host_label("example.com/-x"),
     "hosts[1].labels.example.com/-x (the key)", "invalid name part"),
    ("label value of 64 characters", "bare-metal", _host_label("rack", "v" * 64),
     "hosts[1].labels.rack", "at most 63 characters"),
    ("label value with a space", "bare-metal", _host_label("rack", "a b"),
     "hosts[1].labels.rack", "label value 'a b' is invalid"),
    ("taint key with an empty label", "bare-metal", _host_taint(key="example..com/t"),
     "hosts[1].taints[0].key", "not a DNS subdomain"),
    ("taint value of 64 characters", "bare-metal", _host_taint(key="t", value="v" * 64),
     "hosts[1].taints[0].value", "at most 63 characters"),
    ("taint value ending in a dot", "bare-metal", _host_taint(key="t", value="v."),
     "hosts[1].taints[0].value", "starting and ending with a letter or digit"),
]


def _at(shown: str, path: str) -> bool:
    """Whether a problem's path is `path`: entries are named in it (`hosts[1] (gpu000).gpus`),
    and a long key is cut (the rows' fragments then say which key it was)."""
    shown = re.sub(r"\] \([^)]*\)", "]", shown)
    return shown == path or (len(path) > 80 and shown.startswith(path[:40]))


@pytest.mark.parametrize("layout, change, path, fragment",
                         [row[1:] for row in REFUSED], ids=[row[0] for row in REFUSED])
def test_refused_at_its_key(layout, change, path, fragment):
    assert_refused_at(layout, change, path, fragment)


def assert_refused_at(layout: str, change, path: str, fragment: str) -> None:
    """The config of `layout`, changed, is refused at `path` with `fragment` in the
    message. Host and pool entries are named in paths; rows give the index."""
    values = BASES[layout]()
    change(values)
    problems = _problems(values)
    at_path = [problem for problem in problems if _at(problem.path, path)]
    assert at_path, problems
    assert any(fragment in problem.message for problem in at_path), at_path


ACCEPTED = [
    ("gpus as text", "bare-metal", _set("hosts", 1, "gpus", "4")),
    ("pool count as text", "cloud", _set("pools", 0, "count", "3")),
    ("login name with underscore and dollar", "bare-metal", _set("ssh", "user", "_svc$")),
    ("login name of 32 characters", "bare-metal", _set("hosts", 1, "sshUser", "u" * 32)),
    *[(f"nfs path {path}", "bare-metal", _set("storage", "nfs", "path", path))
      for path in ("/srv", "/srv/nfs", "/var/nfs", "/var/lib/gpu-data", "/home/shared", "/data")],
    ("an external server's root export", "bare-metal",
     _set("storage", "nfs", {"server": "192.0.2.20", "path": "/"})),
    ("local path /dfs", "bare-metal", _set("storage", {"localPath": {"path": "/dfs"}})),
    ("team research", "bare-metal", _set("access", {"teams": [{"name": "research"}]})),
    ("label prefix of 253 characters", "bare-metal", _host_label(f"{PREFIX_253}/x")),
    ("label name of 63 and value of 63", "bare-metal", _host_label("n" * 63, "v" * 63)),
    ("label value empty", "bare-metal", _host_label("example.com/a_b.c", "")),
    ("taint with an empty value", "bare-metal", _host_taint(key="nvidia.com/gpu")),
    ("tags with spaces and @", "cloud", _set("aws", "tags", {"owner": "Ada L @ml", "Name x": ""})),
    ("worker token expiry 10m", "bare-metal", _set("kubernetes", "workerTokenExpiry", "10m")),
    ("a PEM SSH key ending in a line break", "bare-metal",
     lambda values: values.update(sshPrivateKey=values["sshPrivateKey"].rstrip("\n") + "\n")),
]


@pytest.mark.parametrize("layout, change", [row[1:] for row in ACCEPTED],
                         ids=[row[0] for row in ACCEPTED])
def test_accepted(layout, change):
    assert_accepted(layout, change)


def assert_accepted(layout: str, change) -> None:
    """The config of `layout`, changed, loads without a problem."""
    values = BASES[layout]()
    change(values)
    assert _problems(values) == []


@pytest.mark.parametrize("annotation, value", [
    (DnsLabel, "gpu000\n"), (LabelKey, "example.com/x\n"), (LabelValue, "v\n"),
    (InterfaceName, "eno2\n"), (Duration, "2h\n"), (UserName, "ops\n"),
], ids=["DnsLabel", "LabelKey", "LabelValue", "InterfaceName", "Duration", "UserName"])
def test_typed_validators_match_the_whole_value(annotation, value):
    # Outside a config section too: `$` in re.match matched before the final line break.
    with pytest.raises(ValidationError):
        TypeAdapter(annotation).validate_python(value)


def test_no_config_validator_matches_only_a_prefix():
    # re.match(...$) accepts a trailing line break; every rule in config/ is a full match.
    for path in sorted((PROJECT_DIR / "config").glob("*.py")):
        text = path.read_text()
        assert not re.search(r"\bre\.match\(|\b_[A-Z_]+\.match\(", text), path.name
