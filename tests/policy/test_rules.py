"""Every policy rule with a resource that passes and one that fails it, written as the
Pulumi engine hands them to a policy (type token, input properties, options)."""

import base64
import gzip
import secrets
from email.mime.multipart import MIMEMultipart
from email.mime.text import MIMEText

import pytest

from policy.kubernetes_rules import GPU_NODE_LABEL
from policy.rules import RULES, Resource, check
from preview import credentials

KEY = credentials.ssh_private_key()
# Shaped like an AWS access key id, made up at run time so no scanner mistakes the file for one.
FAKE_KEY_ID = "AKIA" + secrets.token_hex(8).upper()
INSTANCE = "aws:ec2/instance:Instance"
TEMPLATE = "aws:ec2/launchTemplate:LaunchTemplate"
INGRESS = "aws:vpc/securityGroupIngressRule:SecurityGroupIngressRule"
GROUP = "aws:ec2/securityGroup:SecurityGroup"
GROUP_RULE = "aws:ec2/securityGroupRule:SecurityGroupRule"
EFS = "aws:efs/fileSystem:FileSystem"
DAEMON_SET = "kubernetes:apps/v1:DaemonSet"
DEPLOYMENT = "kubernetes:apps/v1:Deployment"
IMDS = {"httpTokens": "required", "httpEndpoint": "enabled"}
ROOT = {"volumeSize": 100, "volumeType": "gp3", "encrypted": True}


def multipart_gzip_base64(*scripts: str) -> str:
    """User data as the pools send it: MIME multipart, gzipped, base64."""
    message = MIMEMultipart()
    for script in scripts:
        message.attach(MIMEText(script, "x-shellscript"))
    return base64.b64encode(gzip.compress(message.as_bytes(), mtime=0)).decode()


def instance(**props) -> dict:
    return {"ami": "ami-0123456789abcdef0", "instanceType": "m6i.large",
            "metadataOptions": IMDS, "rootBlockDevice": ROOT, **props}


def template(**props) -> dict:
    return {"metadataOptions": IMDS, "blockDeviceMappings": [
        {"deviceName": "/dev/sda1", "ebs": {"volumeSize": 200, "encrypted": "true"}}], **props}


def pod_workload(name, namespace, containers, **spec) -> dict:
    return {"metadata": {"name": name, "namespace": namespace},
            "spec": {"selector": {"matchLabels": {"app": name}}, "template": {
                "metadata": {"labels": {"app": name}},
                "spec": {"containers": containers, **spec}}}}


PLUGIN = {"name": "nvidia-device-plugin", "image": "nvcr.io/nvidia/k8s-device-plugin:v0.20.0"}
GPU_SELECTOR = {"nodeSelector": dict([GPU_NODE_LABEL])}
GPU_AFFINITY = {"affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
    "nodeSelectorTerms": [{"matchExpressions": [
        {"key": GPU_NODE_LABEL[0], "operator": "In", "values": ["true"]}]}]}}}}
OTHER_AFFINITY = {"affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
    "nodeSelectorTerms": [{"matchExpressions": [
        {"key": "kubernetes.io/os", "operator": "In", "values": ["linux"]}]}]}}}}
PROVISIONER = {"name": "provisioner",
               "image": "registry.k8s.io/sig-storage/nfs-subdir-external-provisioner:v4.0.2"}
HOST_SCRIPT = "#!/bin/bash\nexport GPU_CLUSTER_STEP='join-worker'\nexport K0S_JOIN_TOKEN=''\n"

# (rule, id, type, props, options, expected fragment of the violation or None to pass)
CASES = [
    ("no-admin-ports-to-the-world", "ssh from the office", INGRESS,
     {"ipProtocol": "tcp", "fromPort": 22.0, "toPort": 22.0, "cidrIpv4": "198.51.100.0/24"}, {}, None),
    ("no-admin-ports-to-the-world", "ssh from anywhere", INGRESS,
     {"ipProtocol": "tcp", "fromPort": 22.0, "toPort": 22.0, "cidrIpv4": "0.0.0.0/0"}, {},
     "SSH (port 22) is open to 0.0.0.0/0"),
    ("no-admin-ports-to-the-world", "openvpn from anywhere is fine", INGRESS,
     {"ipProtocol": "udp", "fromPort": 1194, "toPort": 1194, "cidrIpv4": "0.0.0.0/0"}, {}, None),
    ("no-admin-ports-to-the-world", "a range over the API, ipv6", INGRESS,
     {"ipProtocol": "tcp", "fromPort": 6000, "toPort": 7000, "cidrIpv6": "::/0"}, {},
     "the Kubernetes API (port 6443) is open to ::/0"),
    ("no-admin-ports-to-the-world", "all protocols", INGRESS,
     {"ipProtocol": "-1", "cidrIpv4": "0.0.0.0/0"}, {}, "NFS (port 2049)"),
    ("no-admin-ports-to-the-world", "inline ingress", GROUP,
     {"ingress": [{"protocol": "tcp", "fromPort": 2049, "toPort": 2049,
                   "cidrBlocks": ["10.0.0.0/16", "0.0.0.0/0"]}]}, {}, "NFS (port 2049)"),
    ("no-admin-ports-to-the-world", "inline ingress from the vpc", GROUP,
     {"ingress": [{"protocol": "tcp", "fromPort": 2049, "toPort": 2049,
                   "cidrBlocks": ["10.0.0.0/16"]}]}, {}, None),
    ("no-admin-ports-to-the-world", "classic rule", GROUP_RULE,
     {"type": "ingress", "protocol": "tcp", "fromPort": 6443, "toPort": 6443,
      "cidrBlocks": ["0.0.0.0/0"]}, {}, "the Kubernetes API"),
    ("no-admin-ports-to-the-world", "the RKE2 supervisor from anywhere", INGRESS,
     {"ipProtocol": "tcp", "fromPort": 9345, "toPort": 9345, "cidrIpv4": "0.0.0.0/0"}, {},
     "the RKE2 supervisor (agent joins) (port 9345) is open to 0.0.0.0/0"),
    ("no-admin-ports-to-the-world", "the RKE2 supervisor from the vpc", INGRESS,
     {"ipProtocol": "tcp", "fromPort": 9345, "toPort": 9345, "cidrIpv4": "10.30.0.0/16"}, {},
     None),
    ("no-admin-ports-to-the-world", "egress anywhere is fine", GROUP_RULE,
     {"type": "egress", "protocol": "-1", "fromPort": 0, "toPort": 0,
      "cidrBlocks": ["0.0.0.0/0"]}, {}, None),
    ("imdsv2-required", "instance", INSTANCE, instance(), {}, None),
    ("imdsv2-required", "instance with imdsv1", INSTANCE,
     instance(metadataOptions={"httpTokens": "optional"}), {}, "httpTokens: required"),
    ("imdsv2-required", "template without options", TEMPLATE,
     {k: v for k, v in template().items() if k != "metadataOptions"}, {}, "IMDSv2"),
    ("imdsv2-required", "template", TEMPLATE, template(), {}, None),
    ("ebs-encrypted", "instance", INSTANCE, instance(), {}, None),
    ("ebs-encrypted", "unencrypted root", INSTANCE,
     instance(rootBlockDevice={"volumeSize": 100}), {}, "root volume is not encrypted"),
    ("ebs-encrypted", "unencrypted data volume", INSTANCE,
     instance(ebsBlockDevices=[{"deviceName": "/dev/sdf", "encrypted": False}]), {},
     "ebsBlockDevices[0] is not encrypted"),
    ("ebs-encrypted", "template", TEMPLATE, template(), {}, None),
    ("ebs-encrypted", "template without mappings", TEMPLATE,
     template(blockDeviceMappings=[]), {}, "no EBS block device mapping"),
    ("ebs-encrypted", "template unencrypted", TEMPLATE,
     template(blockDeviceMappings=[{"deviceName": "/dev/sda1", "ebs": {"encrypted": "false"}}]),
     {}, "EBS volume 0 is not encrypted"),
    ("ebs-encrypted", "volume", "aws:ebs/volume:Volume", {"size": 10}, {}, "not encrypted"),
    ("efs-encrypted", "encrypted", EFS, {"encrypted": True}, {}, None),
    ("efs-encrypted", "plain", EFS, {"performanceMode": "generalPurpose"}, {}, "not encrypted"),
    ("efs-protected", "protected and retained", EFS, {"encrypted": True},
     {"protect": True, "retain_on_delete": True}, None),
    ("efs-protected", "as the CLI tells it", EFS, {"encrypted": True}, {"protect": True}, None),
    ("efs-protected", "unprotected", EFS, {"encrypted": True},
     {"protect": False, "retain_on_delete": True}, "protect=True"),
    ("efs-protected", "deleted on destroy", EFS, {"encrypted": True},
     {"protect": True, "retain_on_delete": False}, "retain_on_delete=True"),
    ("no-secrets-in-user-data", "host name only", INSTANCE,
     instance(userData="#cloud-config\nhostname: control-plane\n"), {}, None),
    ("no-secrets-in-user-data", "private key in cloud-config", INSTANCE,
     instance(userData="#cloud-config\nwrite_files:\n- content: |\n    "
              + KEY.replace("\n", "\n    ")), {}, "a private key"),
    ("no-secrets-in-user-data", "pool scripts without the token", TEMPLATE,
     template(userData=multipart_gzip_base64(HOST_SCRIPT, "#!/bin/bash\nexport "
                                             "K0S_JOIN_TOKEN_SSM_PARAMETER='/gpu-cluster/x'\n")),
     {}, None),
    ("no-secrets-in-user-data", "a token inside gzip and multipart", TEMPLATE,
     template(userData=multipart_gzip_base64(HOST_SCRIPT.replace("''", "'abcdef.0123456789abcdef'"))),
     {}, "a value for K0S_JOIN_TOKEN"),
    ("no-secrets-in-user-data", "a key inside gzip and multipart", TEMPLATE,
     template(userData=multipart_gzip_base64(HOST_SCRIPT, f"KEY='{KEY}'")), {}, "a private key"),
    ("no-secrets-in-user-data", "an aws key", INSTANCE,
     instance(userDataBase64=base64.b64encode(f"AWS_ACCESS_KEY_ID={FAKE_KEY_ID}\n".encode()).decode()),
     {}, "an AWS access key"),
    ("no-secrets-in-user-data", "a kubeconfig credential", INSTANCE,
     instance(userData="users:\n- name: admin\n  user:\n    token: abcdef.0123456789abcdef\n"),
     {}, "a 'token' credential"),
    ("no-secrets-in-user-data", "a password read at boot", INSTANCE,
     instance(userData="#!/bin/bash\nPASSWORD=$(aws ssm get-parameter --name /x)\n"), {}, None),
    ("no-secrets-in-user-data", "a redacted secret", INSTANCE,
     instance(userData="#!/bin/bash\nexport KEY='[secret]'\n"), {}, "redacted as secret"),
    ("kubernetes-images-pinned", "tag", DEPLOYMENT,
     pod_workload("p", "default", [PROVISIONER]), {}, None),
    ("kubernetes-images-pinned", "digest", DEPLOYMENT,
     pod_workload("p", "default", [{"name": "a", "image": "busybox@sha256:" + "0" * 64}]), {}, None),
    ("kubernetes-images-pinned", "latest", DEPLOYMENT,
     pod_workload("p", "default", [{"name": "a", "image": "busybox:latest"}]), {}, "tag latest"),
    ("kubernetes-images-pinned", "no tag behind a registry port", DEPLOYMENT,
     pod_workload("p", "default", [{"name": "a", "image": "registry:5000/team/app"}]), {}, "no tag"),
    ("kubernetes-images-pinned", "init container", "kubernetes:core/v1:Pod",
     {"metadata": {"name": "p"}, "spec": {"initContainers": [{"name": "i", "image": "busybox"}],
                                          "containers": [PROVISIONER]}}, {}, "'i'"),
    ("kubernetes-images-pinned", "cron job", "kubernetes:batch/v1:CronJob",
     {"metadata": {"name": "c"}, "spec": {"jobTemplate": {"spec": {"template": {"spec": {
         "containers": [{"name": "c", "image": "alpine:latest"}]}}}}}}, {}, "tag latest"),
    ("privileged-only-for-system-components", "device plugin", DAEMON_SET,
     pod_workload("nvidia-device-plugin", "kube-system",
                  [{**PLUGIN, "securityContext": {"privileged": True}}], **GPU_SELECTOR), {}, None),
    ("privileged-only-for-system-components", "a privileged app", DEPLOYMENT,
     pod_workload("notebook", "team-a", [{**PROVISIONER, "securityContext": {"privileged": True}}]),
     {}, "privileged container 'provisioner'"),
    ("privileged-only-for-system-components", "a look-alike name elsewhere", DAEMON_SET,
     pod_workload("nvidia-device-plugin", "default",
                  [{**PLUGIN, "securityContext": {"privileged": True}}], **GPU_SELECTOR), {},
     "only these system components"),
    ("privileged-only-for-system-components", "SYS_ADMIN", DEPLOYMENT,
     pod_workload("app", "team-a", [{**PROVISIONER, "securityContext": {
         "capabilities": {"add": ["NET_BIND_SERVICE", "CAP_SYS_ADMIN"]}}}]), {}, "SYS_ADMIN"),
    ("privileged-only-for-system-components", "host pid", DEPLOYMENT,
     pod_workload("app", "team-a", [PROVISIONER], hostPID=True), {}, "hostPID"),
    ("privileged-only-for-system-components", "unprivileged app", DEPLOYMENT,
     pod_workload("app", "team-a", [{**PROVISIONER, "securityContext": {
         "allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]}}}]), {}, None),
    ("device-plugin-only-on-gpu-nodes", "node selector", DAEMON_SET,
     pod_workload("nvidia-device-plugin", "kube-system", [PLUGIN], **GPU_SELECTOR), {}, None),
    ("device-plugin-only-on-gpu-nodes", "node affinity", DAEMON_SET,
     pod_workload("gpu-plugin", "kube-system", [PLUGIN], **GPU_AFFINITY), {}, None),
    ("device-plugin-only-on-gpu-nodes", "every node", DAEMON_SET,
     pod_workload("gpu-plugin", "kube-system", [PLUGIN]), {}, GPU_NODE_LABEL[0]),
    ("device-plugin-only-on-gpu-nodes", "another label", DAEMON_SET,
     pod_workload("nvidia-device-plugin", "kube-system",
                  [{**PLUGIN, "image": "nvcr.io/nvidia/k8s-device-plugin@sha256:" + "1" * 64}],
                  **OTHER_AFFINITY), {}, GPU_NODE_LABEL[0]),
    ("device-plugin-only-on-gpu-nodes", "other daemon sets anywhere", DAEMON_SET,
     pod_workload("node-exporter", "monitoring",
                  [{"name": "e", "image": "quay.io/prometheus/node-exporter:v1.9.1"}]), {}, None),
    ("device-plugin-only-on-gpu-nodes", "chart without selector", "kubernetes:helm.sh/v4:Chart",
     {"chart": "nvidia-device-plugin", "version": "0.20.0", "values": {}}, {}, GPU_NODE_LABEL[0]),
    ("device-plugin-only-on-gpu-nodes", "chart with selector", "kubernetes:helm.sh/v4:Chart",
     {"chart": "nvidia-device-plugin", "version": "0.20.0", "values": GPU_SELECTOR}, {}, None),
    ("upstream-pinned", "pinned manifest", "kubernetes:yaml/v2:ConfigFile",
     {"file": "https://raw.githubusercontent.com/kubeflow/mpi-operator/v0.8.0/deploy/v2beta1/"
              "mpi-operator.yaml"}, {}, None),
    ("upstream-pinned", "manifest from master", "kubernetes:yaml/v2:ConfigFile",
     {"file": "https://raw.githubusercontent.com/kubeflow/mpi-operator/master/deploy/v2beta1/"
              "mpi-operator.yaml"}, {}, "moving branch"),
    ("upstream-pinned", "kustomize at a ref", "kubernetes:kustomize/v2:Directory",
     {"directory": "https://github.com/kubeflow/manifests/example?ref=26.03"}, {}, None),
    ("upstream-pinned", "kustomize at main", "kubernetes:kustomize/v2:Directory",
     {"directory": "https://github.com/kubeflow/manifests/example?ref=main"}, {}, "moving branch"),
    ("upstream-pinned", "a local kustomization", "kubernetes:kustomize/v2:Directory",
     {"directory": "build/kubeflow/main"}, {}, None),
    ("upstream-pinned", "chart without version", "kubernetes:helm.sh/v3:Release",
     {"chart": "nvidia-device-plugin"}, {}, "has no version"),
    ("upstream-pinned", "a vendored chart", "kubernetes:helm.sh/v4:Chart",
     {"chart": "vendor/kueue-v0.19.2/charts/kueue"}, {}, None),
    ("upstream-pinned", "a repository's chart without version", "kubernetes:helm.sh/v4:Chart",
     {"chart": "vendor/kueue", "repositoryOpts": {"repo": "https://example.com/charts"}}, {},
     "has no version"),
]


@pytest.mark.parametrize("rule_name, type_, props, options, expected",
                         [case[:1] + case[2:] for case in CASES],
                         ids=[f"{case[0]}: {case[1]}" for case in CASES])
def test_rule(rule_name, type_, props, options, expected):
    [rule] = [rule for rule in RULES if rule.name == rule_name]
    resource = Resource(type=type_, name="example", props=props, **options)
    messages = rule.check(resource)
    if expected is None:
        assert messages == []
    else:
        assert messages and all(m.startswith("example: ") for m in messages), messages
        assert any(expected in m for m in messages), messages


def test_every_rule_has_a_passing_and_a_failing_case():
    for rule in RULES:
        outcomes = {case[5] is None for case in CASES if case[0] == rule.name}
        assert outcomes == {True, False}, rule.name


def test_a_secret_of_the_stack_is_found_wherever_user_data_hides_it():
    secret = secrets.token_urlsafe(24)
    hidden = template(userData=multipart_gzip_base64(f"#!/bin/bash\nexport NOTE='{secret}'\n"))
    resource = Resource(type=TEMPLATE, name="pool", props=hidden)
    assert check(resource) == []
    found = check(Resource(type=TEMPLATE, name="pool", props=hidden, known_secrets=(secret,)))
    assert [rule for rule, _ in found] == ["no-secrets-in-user-data"]
    assert "a secret of the stack" in found[0][1] and secret not in found[0][1]


def test_a_secret_in_a_step_of_a_boot_plan_is_found():
    secret = secrets.token_urlsafe(24)
    step = base64.b64encode(f"export NOTE='{secret}'\n".encode()).decode()
    plan = {"key": "plans/a10g/0123.plan", "content": f"prepare-host {step}\n"}
    kind = "aws:s3/bucketObjectv2:BucketObjectv2"
    assert check(Resource(type=kind, name="a10g-boot-plan", props=plan)) == []
    found = check(Resource(type=kind, name="a10g-boot-plan", props=plan, known_secrets=(secret,)))
    assert [rule for rule, _ in found] == ["no-secrets-in-user-data"]
    assert "its boot plan holds a secret of the stack" in found[0][1]
    assert secret not in found[0][1]


def test_a_gzipped_join_token_inside_a_script_is_found():
    kubeconfig = "apiVersion: v1\nkind: Config\nusers:\n- name: kubelet-bootstrap\n  user:\n" \
                 "    token: abcdef.0123456789abcdef\n"
    token = base64.b64encode(gzip.compress(kubeconfig.encode(), mtime=0)).decode()
    resource = Resource(type=INSTANCE, name="cp", props=instance(
        userData=f"#!/bin/bash\nk0s worker '{token}'\n"))
    [(_, message)] = check(resource)
    assert "a 'token' credential (gzipped)" in message and token not in message


def test_messages_never_quote_a_secret():
    resource = Resource(type=INSTANCE, name="cp", props=instance(userData=f"KEY='{KEY}'"))
    messages = [m for _, m in check(resource)]
    assert messages and not any(line in m for m in messages for line in KEY.splitlines()[1:-1])


def test_the_gpu_label_is_the_one_the_project_schedules_on():
    from components.addons.gpu_support import GPU_NODE_SELECTOR

    assert dict([GPU_NODE_LABEL]) == GPU_NODE_SELECTOR


def test_rule_names_are_unique_and_described():
    names = [rule.name for rule in RULES]
    assert len(names) == len(set(names)) and all(rule.description for rule in RULES)
