"""cluster-autoscaler against its pinned release (vendor/cluster-autoscaler-1.36.1, the chart
of vendor/cluster-autoscaler-chart-9.59.0): the chart through the official `helm template`
with the values a cloud stack's plan hands the provider, with the ProvisioningRequest CRD and
the program's MutatingAdmissionPolicy through kubernetes-validate --strict; every flag it
runs with against the flags the release registers (config/flags/flags.go); the policy's
match condition run by a CEL engine on the pods CA would otherwise take."""

import functools
import re
import subprocess
import tempfile
from pathlib import Path

import pytest
import yaml

from components.addons.cluster_autoscaler import (JOB_POD_CONDITION, NAMESPACE, RELEASE,
                                                  SAFE_TO_EVICT, TOLERATIONS,
                                                  not_safe_to_evict_policy)
from components.distributions.rke2 import SERVER_ONLY_TAINT
from components.distributions import distribution_for, distribution_settings
from config import versions
from config.instance_types import ACCELERATOR_LABEL
from config.pool_tags import ENABLED_TAG, cluster_tag
from config.warnings import preview_warnings
from tests.builders import PROJECT_DIR, cloud_config, preview
from tests.config.loading import loads
from tests.k8s_tools import validate_strict
from tests.stacks.steps import boot_step
from tests.upstream.test_pinned_upstream import by_kind, helm

CHART = PROJECT_DIR / versions.CLUSTER_AUTOSCALER_CHART
SOURCE = PROJECT_DIR / versions.CLUSTER_AUTOSCALER_SOURCE / "cluster-autoscaler"
UNNEEDED = "45m"


@functools.cache
def plan():
    values = cloud_config()
    values["kubernetes"] = {"distribution": "rke2"}
    values["autoscaling"] = {"scaleDownUnneededTime": UNNEEDED}
    return preview(values)


@pytest.mark.parametrize("distribution", ["rke2", "k0s"])
def test_where_it_runs_every_pool_node_registers_with_its_aws_provider_id(distribution):
    """CA knows a node only by `aws:///<zone>/<instance id>` and terminates the instances no
    node names (config/autoscaling.py autoscales): wherever the plan installs it, every
    pool's join step has the kubelet register with that ID (RKE2_CLOUD_PROVIDER=aws, which
    rke2/lib.sh turns into kubelet-arg provider-id from IMDS: tests/scripts/rke2-agent.bats;
    K0S_CLOUD_PROVIDER=aws, k0s's --enable-cloud-provider and the kubelet's --provider-id:
    tests/scripts/join-worker.bats), and it runs on the controllers alone."""
    values = cloud_config()
    values["kubernetes"] = {"distribution": distribution}
    found = preview(values)
    [chart] = [r for r in found.of_type("kubernetes:helm.sh/v4:Chart")
               if r.name.endswith("-cluster-autoscaler-chart")]
    controllers = distribution_for(distribution_settings(loads(values)))
    assert chart.inputs["values"]["nodeSelector"] == controllers.controller_node_labels
    templates = found.of_type("aws:ec2/launchTemplate:LaunchTemplate")
    assert templates
    for template in templates:
        join = boot_step(found, template, "join-worker")
        assert join[f"{distribution.upper()}_CLOUD_PROVIDER"] == "aws", template.name
    assert not [w for w in preview_warnings(loads(values)) if "autoscale" in w]


@functools.cache
def rendered_chart() -> tuple:
    """The chart as `helm template` renders it with the values of the plan's Chart."""
    [chart] = [r for r in plan().of_type("kubernetes:helm.sh/v4:Chart")
               if r.name.endswith("-cluster-autoscaler-chart")]
    assert chart.inputs["chart"] == versions.CLUSTER_AUTOSCALER_CHART
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "values.yaml"
        path.write_text(yaml.safe_dump(chart.inputs["values"]))
        out = subprocess.run([str(helm()), "template", RELEASE, str(CHART), "-n",
                              chart.inputs["namespace"], "-f", str(path)],
                             capture_output=True, text=True, check=True).stdout
    return tuple(o for o in yaml.safe_load_all(out) if o)


def pod_spec() -> dict:
    [deployment] = by_kind(rendered_chart(), "Deployment")
    return deployment["spec"]["template"]["spec"]


def command() -> list[str]:
    [container] = pod_spec()["containers"]
    return container["command"]


def registered_flags() -> set[str]:
    """The flags the release registers: config/flags/flags.go's (flag.<Type>("name", ...) and
    multiStringFlag("name", ...)), and klog's, which main.go adds (klog.InitFlags(nil)) from
    the klog its go.mod pins (v2.140.0 klog.go, commandLine.<Type>Var(&..., "name", ...))."""
    text = (SOURCE / "config" / "flags" / "flags.go").read_text()
    flags = set(re.findall(r'(?:flag\.[A-Za-z0-9]+|multiStringFlag)\(\s*"([a-z0-9-]+)"', text))
    main = (SOURCE / "main.go").read_text()
    assert "\tklog.InitFlags(nil)\n" in main and '\t"k8s.io/klog/v2"\n' in main
    klog = (PROJECT_DIR / "vendor" / "klog-v2.140.0" / "klog.go").read_text()
    return flags | set(re.findall(r'commandLine\.[A-Za-z0-9]*Var\(&[^,]+, "([a-z_]+)"', klog))


def test_the_chart_and_the_sources_are_the_pinned_ones():
    chart = yaml.safe_load((CHART / "Chart.yaml").read_text())
    assert (chart["name"], chart["version"]) == ("cluster-autoscaler",
                                                  versions.CLUSTER_AUTOSCALER_CHART_VERSION)
    crd = yaml.safe_load((PROJECT_DIR / versions.PROVISIONING_REQUEST_CRD).read_text())
    assert crd["metadata"]["name"] == "provisioningrequests.autoscaling.x-k8s.io"
    assert {v["name"] for v in crd["spec"]["versions"] if v["served"]} >= {"v1"}


def test_every_flag_it_runs_with_is_registered_by_the_release():
    flags = registered_flags()
    # The parse finds the file's flags (a broken pattern would find none).
    assert {"scale-down-unneeded-time", "expander", "cloud-provider", "namespace",
            "node-group-auto-discovery", "enable-provisioning-requests"} <= flags
    assert len(flags) > 100 and {"v", "logtostderr", "stderrthreshold", "vmodule"} <= flags
    passed = [arg for arg in command()[1:]]
    assert command()[0] == "./cluster-autoscaler"
    for arg in passed:
        name = re.fullmatch(r"--([a-z0-9-]+)(=.*)?", arg)
        assert name and name[1] in flags, arg


def test_it_discovers_this_cluster_s_groups_and_takes_the_configured_time():
    args = dict(arg[2:].split("=", 1) for arg in command()[1:])
    assert args["cloud-provider"] == "aws"
    assert args["node-group-auto-discovery"] == \
        f"asg:tag={ENABLED_TAG},{cluster_tag('test')}"
    assert args["scale-down-unneeded-time"] == UNNEEDED
    assert args["enable-provisioning-requests"] == "true"
    assert args["expander"] == "least-waste"
    # What keeps a node running pods CA may not move (rules.go Default skips these rules
    # when the flags are false).
    for flag in ("skip-nodes-with-custom-controller-pods", "skip-nodes-with-local-storage",
                 "skip-nodes-with-system-pods"):
        assert args[flag] == "true", flag
    assert args["namespace"] == NAMESPACE


def test_what_it_renders_with_the_crd_and_the_policy_is_valid(tmp_path):
    objects = [*rendered_chart(),
               yaml.safe_load((PROJECT_DIR / versions.PROVISIONING_REQUEST_CRD).read_text()),
               *not_safe_to_evict_policy()]
    assert {o["kind"] for o in objects} >= {
        "Deployment", "ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Role",
        "CustomResourceDefinition", "MutatingAdmissionPolicy",
        "MutatingAdmissionPolicyBinding"}
    # No Service: nothing scrapes it.
    assert not by_kind(objects, "Service")
    validate_strict(objects, tmp_path / "cluster-autoscaler.yaml")


def test_the_plan_applies_the_policy_and_the_crd_before_the_chart():
    resources = {r.name: r for r in plan().resources}
    [policy] = [r for r in plan().resources
                if r.type == "kubernetes:admissionregistration.k8s.io/v1:MutatingAdmissionPolicy"]
    assert policy.inputs["spec"] == not_safe_to_evict_policy()[0]["spec"]
    [chart] = [r for name, r in resources.items() if name.endswith("-cluster-autoscaler-chart")]
    waits_for = {u.rsplit("::", 1)[1] for u in chart.dependencies}
    assert policy.name in waits_for
    assert any(name.endswith("-provisioning-request-crd") for name in waits_for)


def test_it_runs_on_a_controller_with_the_host_s_network_and_the_pinned_image():
    spec = pod_spec()
    # The instance's role through IMDS (hop limit 1: the host's network only).
    assert spec["hostNetwork"] is True
    assert spec["nodeSelector"] == {"node-role.kubernetes.io/control-plane": "true"}
    # RKE2's server taint (key=value:effect), tolerated.
    key, _, effect = SERVER_ONLY_TAINT.partition(":")
    assert any(t["key"] == key.split("=")[0] and t["operator"] == "Exists"
               for t in spec["tolerations"]), effect
    assert spec["tolerations"] == list(TOLERATIONS)
    [container] = spec["containers"]
    assert container["image"] == versions.CLUSTER_AUTOSCALER_IMAGE
    assert "@sha256:" in container["image"]
    assert container["securityContext"]["allowPrivilegeEscalation"] is False
    assert spec["securityContext"]["runAsNonRoot"] is True
    env = {e["name"]: e.get("value") for e in container["env"]}
    assert env["AWS_REGION"] == "us-west-2"
    assert not {"AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"} & set(env)


def test_the_policy_pack_admits_what_the_chart_runs():
    from policy.rules import Resource, check

    for obj in rendered_chart():
        group = obj["apiVersion"].rpartition("/")[0] or "core"
        kind = f"kubernetes:{group}/{obj['apiVersion'].rpartition('/')[2]}:{obj['kind']}"
        assert check(Resource(type=kind, name=obj["metadata"]["name"], props=obj)) == [], obj[
            "metadata"]["name"]


def test_the_policy_pack_admits_what_the_plan_registers():
    from policy.rules import Resource, check

    found = [r for r in plan().resources if r.type.startswith("kubernetes:") and (
        "cluster-autoscaler" in r.name or "jobs-keep-their-nodes" in r.name)]
    assert len(found) == 4
    for resource in found:
        assert check(Resource(type=resource.type, name=resource.name,
                              props=resource.inputs)) == [], resource.name


def test_a_job_s_pods_would_be_taken_without_the_policy():
    """Why the policy exists, read from the release: rules.go Default runs Replicated, whose
    replicatedKind counts a Job as replicated (so its pod is drainable), and NotSafeToEvict,
    a blocking check that reads the annotation the policy sets; an MPIJob is no replicated
    kind, so its workers block their node on their own."""
    rules = (SOURCE / "simulator/drainability/rules/rules.go").read_text()
    assert "{rule: notsafetoevict.New()}," in rules
    assert "{rule: replicated.New(deleteOptions.SkipNodesWithCustomControllerPods)}," in rules
    replicated = (SOURCE / "simulator/drainability/rules/replicated/rule.go").read_text()
    kinds = set(re.findall(r'"([A-Za-z]+)":\s+true', replicated))
    assert kinds == {"ReplicationController", "Job", "ReplicaSet", "StatefulSet"}
    assert SAFE_TO_EVICT == "cluster-autoscaler.kubernetes.io/safe-to-evict"
    mutation = not_safe_to_evict_policy()[0]["spec"]["mutations"][0]
    assert mutation["applyConfiguration"]["expression"] == (
        'Object{metadata: Object.metadata{annotations: '
        '{"cluster-autoscaler.kubernetes.io/safe-to-evict": "false"}}}')


cel = pytest.importorskip("cel", reason="common-expression-language is not installed "
                                        "(requirements-dev.txt)")


def _pod(*owners) -> dict:
    metadata = {"name": "p", "namespace": "vision"}
    if owners:
        metadata["ownerReferences"] = [dict(o) for o in owners]
    return {"apiVersion": "v1", "kind": "Pod", "metadata": metadata,
            "spec": {"containers": [{"name": "main", "image": "busybox"}]}}


JOB = {"apiVersion": "batch/v1", "kind": "Job", "name": "train", "uid": "1", "controller": True}
MPIJOB = {"apiVersion": "kubeflow.org/v2beta1", "kind": "MPIJob", "name": "nccl", "uid": "2",
          "controller": True}
REPLICASET = {"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "web", "uid": "3",
              "controller": True}


@pytest.mark.parametrize("pod, marked", [
    (_pod(JOB), True),
    (_pod(MPIJOB), True),
    (_pod(REPLICASET), False),
    (_pod(), False),
    # Owned, not controlled: a garbage-collection owner is not the pod's controller.
    (_pod({**JOB, "controller": False}), False),
    (_pod({k: v for k, v in JOB.items() if k != "controller"}), False),
    # A Job of another group is not batch's.
    (_pod({**JOB, "apiVersion": "example.com/v1"}), False),
], ids=["Job", "MPIJob", "ReplicaSet", "bare pod", "owned not controlled", "no controller field",
        "another group's Job"])
def test_the_policy_marks_the_pods_of_jobs_only(pod, marked):
    [condition] = not_safe_to_evict_policy()[0]["spec"]["matchConditions"]
    assert condition["expression"] == JOB_POD_CONDITION
    assert cel.evaluate(JOB_POD_CONDITION, {"object": pod}) is marked


def test_the_gpu_label_is_the_aws_provider_s():
    provider = (SOURCE / "cloudprovider/aws/aws_cloud_provider.go").read_text()
    assert f'GPULabel = "{ACCELERATOR_LABEL}"' in provider
