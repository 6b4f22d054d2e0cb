"""The policy pack's rules as plain functions: each takes a resource (its Pulumi type token,
name, input properties and the options that matter) and returns violation messages.

The same functions run under `pulumi preview --policy-pack policy` (wrapped in
`policy/__main__.py`) and without the CLI against the offline preview (`policy/offline.py`).
Here the rules on AWS resources and the list of every rule; the Kubernetes ones are in
policy/kubernetes_rules.py. The rules (and policy/user_data.py, which finds secrets in user
data) use the standard library only: the CLI installs nothing but pulumi-policy into the pack's own virtualenv.
The ports they guard and the preview's secret marker come from contract/ (standard library
only too), which policy/__main__.py puts on the path.
Types a rule does not know are never an error: they pass."""

from collections.abc import Mapping

from contract.ports import ADMIN_PORTS
from policy.kubernetes_rules import (
    device_plugin_only_on_gpu_nodes,
    images_pinned,
    privileged_only_for_system_components,
    upstream_pinned,
)
from policy.resources import Resource, Rule, get, is_true, items, port_number
from policy.user_data import decode_user_data, secret_material

WORLD = ("0.0.0.0/0", "::/0")


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
        rules = [rule for rule in items(props.get("ingress")) if isinstance(rule, Mapping)]
    return [([*items(rule.get("cidrBlocks")), *items(rule.get("ipv6CidrBlocks"))],
             rule.get("protocol"), rule.get("fromPort"), rule.get("toPort")) for rule in rules]


def no_admin_ports_to_the_world(resource: Resource) -> list:
    messages = []
    for cidrs, protocol, low, high in _ingress(resource):
        open_to = [cidr for cidr in cidrs if cidr in WORLD]
        if not open_to:
            continue
        everything = str(protocol).lower() in ("-1", "all")
        low, high = port_number(low), port_number(high)
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
    if get(options, "httpTokens") == "required" or get(options, "httpEndpoint") == "disabled":
        return []
    return [f"{resource.name}: the instance metadata service must require IMDSv2 tokens "
            "(metadataOptions.httpTokens: required)"]


def ebs_encrypted(resource: Resource) -> list:
    props, name = resource.props, resource.name
    if resource.type == "aws:ebs/volume:Volume":
        return ([] if is_true(props.get("encrypted"))
                else [f"{name}: the EBS volume is not encrypted"])
    if resource.type == _LAUNCH_TEMPLATE:
        volumes = [get(m, "ebs") for m in items(props.get("blockDeviceMappings"))]
        volumes = [v for v in volumes if isinstance(v, Mapping)]
        if not volumes:
            return [f"{name}: no EBS block device mapping, so the root volume is not encrypted "
                    "(map the root device with ebs.encrypted: true)"]
        return [f"{name}: EBS volume {index} is not encrypted"
                for index, volume in enumerate(volumes) if not is_true(volume.get("encrypted"))]
    if resource.type not in _INSTANCE_TYPES:
        return []
    messages = []
    if not is_true(get(props, "rootBlockDevice", "encrypted")):
        messages.append(f"{name}: the root volume is not encrypted (rootBlockDevice.encrypted)")
    for index, volume in enumerate(items(props.get("ebsBlockDevices"))):
        if not is_true(get(volume, "encrypted")):
            messages.append(f"{name}: EBS volume ebsBlockDevices[{index}] is not encrypted")
    return messages


# --- EFS ----------------------------------------------------------------------------------

_EFS = "aws:efs/fileSystem:FileSystem"


def efs_encrypted(resource: Resource) -> list:
    if resource.type != _EFS or is_true(resource.props.get("encrypted")):
        return []
    return [f"{resource.name}: the EFS file system is not encrypted (encrypted: true)"]


# The tag a stack puts on a file system whose data may go with it (storage.efs.protect
# false, e.g. a development stack created and destroyed at will).
DATA_PROTECTION_OFF = ("gpu-cluster/data-protection", "off")


def efs_protected(resource: Resource) -> list:
    if resource.type != _EFS:
        return []
    key, off = DATA_PROTECTION_OFF
    if get(resource.props, "tags", key) == off:
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
