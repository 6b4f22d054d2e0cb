"""Rules never crash: any shape of properties, for the types they know and for types they
do not (new resources appear as the program grows), gives messages or nothing."""

from hypothesis import given, seed, settings
from hypothesis import strategies as st

from policy.rules import RULES, Resource, check

TYPES = [
    "aws:vpc/securityGroupIngressRule:SecurityGroupIngressRule",
    "aws:ec2/securityGroup:SecurityGroup", "aws:ec2/securityGroupRule:SecurityGroupRule",
    "aws:ec2/instance:Instance", "aws:ec2/launchTemplate:LaunchTemplate",
    "aws:ebs/volume:Volume", "aws:efs/fileSystem:FileSystem",
    "kubernetes:apps/v1:DaemonSet", "kubernetes:apps/v1:Deployment", "kubernetes:core/v1:Pod",
    "kubernetes:batch/v1:CronJob", "kubernetes:helm.sh/v4:Chart", "kubernetes:yaml/v2:ConfigFile",
    "kubernetes:kustomize/v2:Directory", "kubernetes:kubeflow.org/v1:Profile",
    "gpu-cluster:addons:Kubeflow", "random:index/randomPassword:RandomPassword",
]
KEYS = ["cidrIpv4", "ipProtocol", "fromPort", "toPort", "ingress", "cidrBlocks", "type",
        "metadataOptions", "httpTokens", "rootBlockDevice", "encrypted", "blockDeviceMappings",
        "ebs", "userData", "userDataBase64", "metadata", "name", "namespace", "spec", "template",
        "containers", "image", "securityContext", "privileged", "capabilities", "add",
        "nodeSelector", "affinity", "chart", "values", "file", "directory", "files", "hostPID"]
SCALARS = st.one_of(st.none(), st.booleans(), st.integers(-2**40, 2**40),
                    st.floats(allow_nan=True), st.text(max_size=40),
                    st.sampled_from(["0.0.0.0/0", "::/0", "-1", "tcp", "required", "true",
                                     "busybox:latest", "nvidia-device-plugin", "H4sIAAAA" * 10,
                                     "Content-Type: multipart/mixed; boundary=x\n\n--x\n"
                                     "Content-Transfer-Encoding: base64\n\n!!!\n--x--"]))
VALUES = st.recursive(SCALARS, lambda inner: st.one_of(
    st.lists(inner, max_size=4), st.dictionaries(st.sampled_from(KEYS), inner, max_size=5)),
    max_leaves=25)


@seed(20260601)
@settings(max_examples=400, deadline=None, database=None)
@given(type_=st.sampled_from(TYPES), props=st.dictionaries(st.sampled_from(KEYS), VALUES, max_size=8),
       protect=st.one_of(st.none(), st.booleans()))
def test_rules_never_crash(type_, props, protect):
    found = check(Resource(type=type_, name="r", props=props, protect=protect,
                           retain_on_delete=protect, known_secrets=("a-known-secret",)))
    assert all(rule in {r.name for r in RULES} and message.startswith("r: ")
               for rule, message in found)
