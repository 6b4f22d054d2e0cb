"""The policy pack's rules as plain functions: each takes a resource (its Pulumi type token,
name, input properties and the options that matter) and returns violation messages.

The same functions run under `pulumi preview --policy-pack policy` (wrapped in
`policy/__main__.py`) and without the CLI against the offline preview (`policy/offline.py`).
The rules (and policy/user_data.py, which finds secrets in user data) use the standard
library only: the CLI installs nothing but pulumi-policy into the pack's own virtualenv.
Types a rule does not know are never an error: they pass."""

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Callable, Optional

from policy.user_data import decode_user_data, secret_material

# The label the bootstrap sets on every GPU node; the device plugin must require it.
GPU_NODE_LABEL = ("nvidia.com/gpu.present", "true")

# Ports that must never be open to the internet, with what listens there.
ADMIN_PORTS = {22: "SSH", 2049: "NFS", 6443: "the Kubernetes API", 9443: "the k0s join API",
               9345: "the RKE2 supervisor (agent joins)", 10250: "the kubelet API"}
WORLD = ("0.0.0.0/0", "::/0")

# Workloads that may run privileged (or with SYS_ADMIN / the host's PID namespace), by
# namespace and name, with why they need it.
PRIVILEGED_ALLOWED = {
    ("kube-system", "nvidia-device-plugin"): "GPU device plugin: device specs with the static "
                                             "CPU manager, SYS_ADMIN for MIG",
    ("kube-system", "calico-node"): "CNI: programs the host's network",
    ("kube-system", "kube-router"): "CNI: programs the host's network",
    ("nfs-provisioner", "nfs-subdir-external-provisioner"): "NFS provisioner: owns volume folders",
    ("efs-provisioner", "efs-subdir-provisioner"): "NFS provisioner on EFS: owns volume folders",
}


@dataclass(frozen=True)
class Resource:
    type: str
    name: str
    props: Mapping[str, Any]
    # None where the caller cannot know (the CLI passes no retainOnDelete to a policy).
    protect: Optional[bool] = None
    retain_on_delete: Optional[bool] = None
    # Plain values of the stack's secrets, when the caller has them (the offline preview).
    known_secrets: tuple = ()


@dataclass(frozen=True)
class Rule:
    name: str
    description: str
    check: Callable[[Resource], list]


def _get(value: Any, *path: str) -> Any:
    for key in path:
        if not isinstance(value, Mapping):
            return None
        value = value.get(key)
    return value


def _items(value: Any) -> list:
    return list(value) if isinstance(value, Sequence) and not isinstance(value, (str, bytes)) else []


def _true(value: Any) -> bool:
    return value is True or (isinstance(value, str) and value.strip().lower() == "true")


def _port(value: Any) -> Optional[int]:
    return int(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


# --- network ------------------------------------------------------------------------------

def _ingress(resource: Resource) -> list:
    """(cidrs, protocol, from port, to port) of each ingress the resource opens."""
    props = resource.props
    if resource.type == "aws:vpc/securityGroupIngressRule:SecurityGroupIngressRule":
        cidrs = [props.get("cidrIpv4"), props.get("cidrIpv6")]
        return [(cidrs, props.get("ipProtocol"), props.get("fromPort"), props.get("toPort"))]
    rules = []
    if resource.type == "aws:ec2/securityGroupRule:SecurityGroupRule" and \
            props.get("type") == "ingress":
        rules = [props]
    elif resource.type == "aws:ec2/securityGroup:SecurityGroup":
        rules = [rule for rule in _items(props.get("ingress")) if isinstance(rule, Mapping)]
    return [([*_items(rule.get("cidrBlocks")), *_items(rule.get("ipv6CidrBlocks"))],
             rule.get("protocol"), rule.get("fromPort"), rule.get("toPort")) for rule in rules]


def no_admin_ports_to_the_world(resource: Resource) -> list:
    messages = []
    for cidrs, protocol, low, high in _ingress(resource):
        open_to = [cidr for cidr in cidrs if cidr in WORLD]
        if not open_to:
            continue
        everything = str(protocol).lower() in ("-1", "all")
        low, high = _port(low), _port(high)
        for port, what in ADMIN_PORTS.items():
            if everything or (str(protocol).lower() in ("tcp", "6", "udp", "17")
                              and low is not None and high is not None and low <= port <= high):
                messages.append(f"{resource.name}: {what} (port {port}) is open to "
                                f"{open_to[0]}; open it to the admin or cluster networks only")
    return messages


# --- instances and volumes --------------------------------------------------------------------

_INSTANCE_TYPES = ("aws:ec2/instance:Instance", "aws:ec2/spotInstanceRequest:SpotInstanceRequest",
                   "aws:ec2/launchConfiguration:LaunchConfiguration")
_LAUNCH_TEMPLATE = "aws:ec2/launchTemplate:LaunchTemplate"


def imdsv2_required(resource: Resource) -> list:
    if resource.type not in (*_INSTANCE_TYPES, _LAUNCH_TEMPLATE):
        return []
    options = resource.props.get("metadataOptions")
    if _get(options, "httpTokens") == "required" or _get(options, "httpEndpoint") == "disabled":
        return []
    return [f"{resource.name}: the instance metadata service must require IMDSv2 tokens "
            "(metadataOptions.httpTokens: required)"]


def ebs_encrypted(resource: Resource) -> list:
    props, name = resource.props, resource.name
    if resource.type == "aws:ebs/volume:Volume":
        return [] if _true(props.get("encrypted")) else [f"{name}: the EBS volume is not encrypted"]
    if resource.type == _LAUNCH_TEMPLATE:
        volumes = [_get(m, "ebs") for m in _items(props.get("blockDeviceMappings"))]
        volumes = [v for v in volumes if isinstance(v, Mapping)]
        if not volumes:
            return [f"{name}: no EBS block device mapping, so the root volume is not encrypted "
                    "(map the root device with ebs.encrypted: true)"]
        return [f"{name}: EBS volume {index} is not encrypted"
                for index, volume in enumerate(volumes) if not _true(volume.get("encrypted"))]
    if resource.type not in _INSTANCE_TYPES:
        return []
    messages = []
    if not _true(_get(props, "rootBlockDevice", "encrypted")):
        messages.append(f"{name}: the root volume is not encrypted (rootBlockDevice.encrypted)")
    for index, volume in enumerate(_items(props.get("ebsBlockDevices"))):
        if not _true(_get(volume, "encrypted")):
            messages.append(f"{name}: EBS volume ebsBlockDevices[{index}] is not encrypted")
    return messages


# --- EFS ----------------------------------------------------------------------------------

_EFS = "aws:efs/fileSystem:FileSystem"


def efs_encrypted(resource: Resource) -> list:
    if resource.type != _EFS or _true(resource.props.get("encrypted")):
        return []
    return [f"{resource.name}: the EFS file system is not encrypted (encrypted: true)"]


# The tag a stack puts on a file system whose data may go with it (storage.efs.protect
# false, e.g. a development stack created and destroyed at will).
DATA_PROTECTION_OFF = ("gpu-cluster/data-protection", "off")


def efs_protected(resource: Resource) -> list:
    if resource.type != _EFS:
        return []
    key, off = DATA_PROTECTION_OFF
    if _get(resource.props, "tags", key) == off:
        return []
    messages = []
    if resource.protect is False:
        messages.append(f"{resource.name}: the EFS file system is not protected from deletion "
                        "(resource option protect=True)")
    if resource.retain_on_delete is False:
        messages.append(f"{resource.name}: the EFS file system is not retained on destroy "
                        "(resource option retain_on_delete=True)")
    return messages


_USER_DATA_FIELDS = ("userData", "userDataBase64")


# A machine's boot plan (components/aws/boot.py): an S3 object the instance fetches at boot,
# one `NAME BASE64` line a step.
_BUCKET_OBJECT = "aws:s3/bucketObjectv2:BucketObjectv2"


def no_secrets_in_user_data(resource: Resource) -> list:
    if resource.type == _BUCKET_OBJECT:
        return _no_secrets_in_boot_plan(resource)
    if resource.type not in (*_INSTANCE_TYPES, _LAUNCH_TEMPLATE):
        return []
    messages = []
    for field in _USER_DATA_FIELDS:
        value = resource.props.get(field)
        if not isinstance(value, str):
            continue
        found = sorted({what for text in decode_user_data(value)
                        for what in secret_material(text, resource.known_secrets)})
        if found:
            messages.append(f"{resource.name}: {field} holds {', '.join(found)}; user data is "
                            "readable by anyone who can describe the instance: read secrets at "
                            "boot from a secret store instead")
    return messages


def _no_secrets_in_boot_plan(resource: Resource) -> list:
    content = resource.props.get("content")
    if not (isinstance(content, str) and str(resource.props.get("key", "")).startswith("plans/")):
        return []
    found = sorted({what for line in content.splitlines() for field in line.split()[1:2]
                    for text in decode_user_data(field)
                    for what in secret_material(text, resource.known_secrets)})
    return [f"{resource.name}: its boot plan holds {', '.join(found)}; the plan is kept in the "
            "stack's state and readable by the machine's role: read secrets at boot from a "
            "secret store instead"] if found else []


# --- Kubernetes ---------------------------------------------------------------------------

_KUBERNETES_KIND = re.compile(r"^kubernetes:[^:]+:(?P<kind>\w+)$")
_POD_SPEC_PATHS = {
    "Pod": ("spec",), "PodTemplate": ("template", "spec"),
    "CronJob": ("spec", "jobTemplate", "spec", "template", "spec"),
    **{kind: ("spec", "template", "spec") for kind in (
        "Deployment", "DaemonSet", "StatefulSet", "ReplicaSet", "ReplicationController", "Job")},
}
_CONTAINER_LISTS = ("initContainers", "containers", "ephemeralContainers")


def _workload(resource: Resource):
    """(namespace, name, pod spec) of a Kubernetes workload, or None."""
    match = _KUBERNETES_KIND.match(resource.type)
    if not match:
        return None
    path = _POD_SPEC_PATHS.get(match["kind"].removesuffix("Patch"))
    spec = _get(resource.props, *path) if path else None
    if not isinstance(spec, Mapping):
        return None
    metadata = resource.props.get("metadata")
    return _get(metadata, "namespace"), _get(metadata, "name"), spec


def _containers(spec: Mapping) -> list:
    return [c for key in _CONTAINER_LISTS for c in _items(spec.get(key)) if isinstance(c, Mapping)]


def image_problem(image: Any) -> Optional[str]:
    """Why an image reference is not pinned to a tag or digest, or None when it is."""
    if not isinstance(image, str):
        return None  # not known until deployment
    if "@sha256:" in image:
        return None
    _, _, tag = image.rpartition("/")[2].partition(":")
    if not tag:
        return "has no tag (it means latest)"
    if tag == "latest":
        return "uses the tag latest"
    return None


def images_pinned(resource: Resource) -> list:
    workload = _workload(resource)
    if workload is None:
        return []
    messages = []
    for container in _containers(workload[2]):
        problem = image_problem(container.get("image"))
        if problem:
            messages.append(f"{resource.name}: container {container.get('name')!r} image "
                            f"{container.get('image')!r} {problem}; pin a version tag or digest")
    return messages


def _privileges(spec: Mapping) -> list:
    found = ["hostPID"] if spec.get("hostPID") is True else []
    for container in _containers(spec):
        context = container.get("securityContext")
        if _get(context, "privileged") is True:
            found.append(f"privileged container {container.get('name')!r}")
        added = {str(c).upper().removeprefix("CAP_") for c in _items(_get(context, "capabilities", "add"))}
        if added & {"SYS_ADMIN", "ALL"}:
            found.append(f"{'/'.join(sorted(added & {'SYS_ADMIN', 'ALL'}))} in container "
                         f"{container.get('name')!r}")
    return found


def privileged_only_for_system_components(resource: Resource) -> list:
    workload = _workload(resource)
    if workload is None:
        return []
    namespace, name, spec = workload
    found = _privileges(spec)
    if not found or (namespace, name) in PRIVILEGED_ALLOWED:
        return []
    allowed = ", ".join(f"{ns}/{n}" for ns, n in PRIVILEGED_ALLOWED)
    return [f"{resource.name}: {', '.join(found)}; only these system components may run "
            f"privileged: {allowed}"]


def _repository(image: str) -> str:
    """`nvcr.io/nvidia/k8s-device-plugin` of `nvcr.io/nvidia/k8s-device-plugin:v0.20.0`."""
    image = image.split("@")[0]
    head, slash, last = image.rpartition("/")
    return head + slash + last.split(":")[0]


def _is_device_plugin(name: Any, spec: Mapping) -> bool:
    repositories = [_repository(str(c.get("image", ""))) for c in _containers(spec)]
    return name == "nvidia-device-plugin" or any(
        repo.rpartition("/")[2] == "k8s-device-plugin" for repo in repositories)


def _requires_gpu_label(spec: Any) -> bool:
    key, value = GPU_NODE_LABEL
    if _get(spec, "nodeSelector", key) == value:
        return True
    terms = _items(_get(spec, "affinity", "nodeAffinity",
                        "requiredDuringSchedulingIgnoredDuringExecution", "nodeSelectorTerms"))

    def term_requires(term: Any) -> bool:
        return any(_get(e, "key") == key and (
            _get(e, "operator") == "Exists" or
            (_get(e, "operator") == "In" and _items(_get(e, "values")) == [value]))
            for e in _items(_get(term, "matchExpressions")))

    return bool(terms) and all(term_requires(term) for term in terms)


_HELM_CHART = re.compile(r"^kubernetes:helm\.sh/v\d+:(Chart|Release)$")


def device_plugin_only_on_gpu_nodes(resource: Resource) -> list:
    key, value = GPU_NODE_LABEL
    message = (f"{resource.name}: the NVIDIA device plugin must run on GPU nodes only: require "
               f"the node label {key}={value} (nodeSelector or required node affinity)")
    if _HELM_CHART.match(resource.type):
        chart = str(resource.props.get("chart", ""))
        if chart.rsplit("/", 1)[-1] == "nvidia-device-plugin" and \
                not _requires_gpu_label(resource.props.get("values")):
            return [message]
        return []
    workload = _workload(resource)
    if workload is None or not _is_device_plugin(workload[1], workload[2]):
        return []
    return [] if _requires_gpu_label(workload[2]) else [message]


_FLOATING_REFS = {"master", "main", "HEAD", "latest"}
_URL_REF = re.compile(r"[?&]ref=(?P<ref>[^&#]+)")


def _floating(location: str) -> bool:
    if "://" not in location and not location.startswith("github.com/"):
        return False  # a local path is pinned by the repository it lives in
    ref = _URL_REF.search(location)
    segments = set(location.split("?")[0].split("/"))
    return (ref is not None and ref["ref"] in _FLOATING_REFS) or bool(segments & _FLOATING_REFS)


def _in_repository(chart: object, props: dict) -> bool:
    """A chart folder of the project (vendored): pinned by the repository it lives in."""
    options = props.get("repositoryOpts")
    return (isinstance(chart, str) and chart.startswith(("vendor/", "./", "../"))
            and not (isinstance(options, dict) and options.get("repo")))


def upstream_pinned(resource: Resource) -> list:
    """Manifests and charts the Kubernetes provider fetches must be a fixed version."""
    props = resource.props
    if _HELM_CHART.match(resource.type):
        chart = props.get("chart")
        if chart and not props.get("version") and not _in_repository(chart, props):
            return [f"{resource.name}: chart {chart!r} has no version; pin one"]
        return []
    if not resource.type.startswith(("kubernetes:yaml", "kubernetes:kustomize")):
        return []
    locations = [props.get("file"), props.get("directory"), *_items(props.get("files"))]
    return [f"{resource.name}: {location!r} follows a moving branch or tag; pin a release"
            for location in locations if isinstance(location, str) and _floating(location)]


RULES = [
    Rule("no-admin-ports-to-the-world",
         "No security group opens SSH, the Kubernetes API or NFS to 0.0.0.0/0 or ::/0.",
         no_admin_ports_to_the_world),
    Rule("imdsv2-required", "Every EC2 instance and launch template requires IMDSv2.",
         imdsv2_required),
    Rule("ebs-encrypted", "Every EBS volume (root and data) is encrypted.", ebs_encrypted),
    Rule("efs-encrypted", "Every EFS file system is encrypted.", efs_encrypted),
    Rule("efs-protected", "Every EFS file system is protected from deletion and retained on "
         "destroy, unless its stack says its data may go with it (tag "
         "gpu-cluster/data-protection=off): data outlives the cluster.", efs_protected),
    Rule("no-secrets-in-user-data", "EC2 user data and boot plans hold no secret material (keys, "
         "tokens, passwords), also inside gzip, base64 or MIME multipart.",
         no_secrets_in_user_data),
    Rule("kubernetes-images-pinned", "Every container image is pinned to a tag or digest "
         "(never latest).", images_pinned),
    Rule("privileged-only-for-system-components", "Only the named system components (device "
         "plugin, CNI, NFS provisioner) run privileged.", privileged_only_for_system_components),
    Rule("device-plugin-only-on-gpu-nodes", "The NVIDIA device plugin requires the GPU node "
         "label.", device_plugin_only_on_gpu_nodes),
    Rule("upstream-pinned", "Upstream manifests and charts are pinned to a release.",
         upstream_pinned),
]


def check(resource: Resource, rules=None) -> list:
    """(rule name, message) of every violation of `resource`."""
    return [(rule.name, message) for rule in (RULES if rules is None else rules)
            for message in rule.check(resource)]
