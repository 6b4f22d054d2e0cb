"""RKE2 installs the `nvidia` RuntimeClass itself (its rke2-runtimeclasses chart, rendered
here from the upstream chart by the real `helm template`: tests/stacks/fixtures/
rke2-runtimeclasses). An RKE2 stack creates none of the chart's RuntimeClasses: it waits on
the server for RKE2's `nvidia`, then patches its scheduling, then starts the GPU pods that
name it. A k0s stack keeps creating its own. The plan's RuntimeClass operations are played
against the chart's objects as the API server would take them."""

import copy
import subprocess
from pathlib import Path

import pytest
import yaml

from components.common.step_text import step_inputs
from preview.engine import unwrap_secrets
from tests.builders import bare_metal_config, example_plan, shared_preview
from tests.k8s_tools import tool, validate_strict

CHART = Path(__file__).parent / "fixtures" / "rke2-runtimeclasses"
CREATE = "kubernetes:node.k8s.io/v1:RuntimeClass"
PATCH = "kubernetes:node.k8s.io/v1:RuntimeClassPatch"
DAEMON_SET = "kubernetes:apps/v1:DaemonSet"


@pytest.fixture(scope="module")
def chart_objects() -> dict[str, dict]:
    """The chart's RuntimeClasses by name, as RKE2's helm-controller leaves them: rendered
    by helm, with the release annotations Helm sets on what it installs (helm/helm
    pkg/action/validate.go, meta.helm.sh/release-name and -namespace)."""
    helm = tool("helm")
    if helm is None:
        pytest.skip("helm is not installed (requirements-tools.txt)")
    release = yaml.safe_load((CHART / "Chart.yaml").read_text())["name"]
    rendered = subprocess.run([str(helm), "template", release, str(CHART),
                               "--namespace", "kube-system"],
                              capture_output=True, text=True, check=True).stdout
    objects = {}
    for document in yaml.safe_load_all(rendered):
        if document:
            document["metadata"]["annotations"] = {
                "meta.helm.sh/release-name": release,
                "meta.helm.sh/release-namespace": "kube-system"}
            objects[document["metadata"]["name"]] = document
    return objects


def apply_plan(plan, cluster: dict[str, dict]) -> dict[str, dict]:
    """The plan's RuntimeClass creates and patches against the objects `cluster` holds: a
    create of an existing name is refused (AlreadyExists: pulumi-kubernetes >= 4.29 creates
    client-side, CHANGELOG 4.29.0 #2926), a patch of a missing one is invalid (no handler)."""
    cluster = copy.deepcopy(cluster)
    for resource in plan.of_type(CREATE):
        name = resource.inputs["metadata"]["name"]
        assert name not in cluster, f"runtimeclasses.node.k8s.io \"{name}\" already exists"
        cluster[name] = {"apiVersion": "node.k8s.io/v1", "kind": "RuntimeClass",
                         **{k: v for k, v in resource.inputs.items() if k != "apiVersion"}}
    for resource in plan.of_type(PATCH):
        name = resource.inputs["metadata"]["name"]
        assert name in cluster, f"the patch of RuntimeClass {name} has nothing to patch"
        assert "handler" not in resource.inputs, "the handler is RKE2's (and immutable)"
        cluster[name].update({k: v for k, v in resource.inputs.items()
                              if k not in ("apiVersion", "kind", "metadata")})
    return cluster


def device_plugin(plan):
    [daemon_set] = [r for r in plan.of_type(DAEMON_SET)
                    if r.inputs["metadata"]["name"] == "nvidia-device-plugin"]
    return daemon_set


def test_an_rke2_stack_patches_rke2s_runtime_class_and_creates_none(chart_objects, tmp_path):
    plan = example_plan("rke2")
    assert sorted(chart_objects) == ["crun", "nvidia", "nvidia-experimental"]
    created = {r.inputs["metadata"]["name"] for r in plan.of_type(CREATE)}
    assert not created & set(chart_objects), f"the stack creates RKE2's {created}"
    cluster = apply_plan(plan, chart_objects)
    pod = device_plugin(plan).inputs["spec"]["template"]["spec"]
    nvidia = cluster[pod["runtimeClassName"]]
    # RKE2's handler: the runtime its agent adds to containerd once it finds the toolkit.
    assert nvidia["handler"] == "nvidia"
    assert nvidia["scheduling"] == {"nodeSelector": pod["nodeSelector"]}
    assert "tolerations" not in nvidia["scheduling"]
    validate_strict(list(cluster.values()), tmp_path / "runtimeclasses.yaml")


def test_the_rke2_add_on_order_through_the_plan(chart_objects):
    plan = example_plan("rke2")
    [patch] = plan.of_type(PATCH)
    [wait] = [r for r in plan.of_type("command:remote:Command")
              if r.name.endswith("-wait-for-runtime-class")]
    nodes_ready = next(r.name for r in plan.resources if r.name.endswith("-nodes-ready"))
    # nodes ready -> RKE2's RuntimeClass there (on the server) -> its patch -> GPU pods.
    assert nodes_ready in plan.all_dependencies(wait)
    assert wait.name in plan.all_dependencies(patch)
    assert patch.name in plan.all_dependencies(device_plugin(plan))
    stdin = unwrap_secrets(wait.inputs["stdin"])
    assert "(rke2/wait-for-runtime-class.sh)" in stdin.splitlines()[0]
    inputs = step_inputs(stdin)
    annotations = chart_objects["nvidia"]["metadata"]["annotations"]
    assert inputs["RUNTIME_CLASS"] == patch.inputs["metadata"]["name"] == "nvidia"
    assert inputs["CHART_RELEASE"] == annotations["meta.helm.sh/release-name"]
    # Removing or destroying the patch leaves RKE2's object; a stack that holds the
    # RuntimeClass the program once created moves it into the patch instead of deleting it.
    assert patch.retain_on_delete
    assert {"type": CREATE} in [{k: v for k, v in a.items() if k == "type"}
                                for a in patch.aliases if isinstance(a, dict)]


def test_a_k0s_stack_creates_its_own_before_the_gpu_pods(chart_objects):
    plan = shared_preview(bare_metal_config())
    assert not plan.of_type(PATCH)
    assert not [r for r in plan.of_type("command:remote:Command")
                if r.name.endswith("-wait-for-runtime-class")]
    [runtime_class] = plan.of_type(CREATE)
    assert runtime_class.name in plan.all_dependencies(device_plugin(plan))
    cluster = apply_plan(plan, {})
    assert cluster["nvidia"]["handler"] == "nvidia"
    # The same plan on RKE2's objects is what failed: AlreadyExists.
    with pytest.raises(AssertionError, match="already exists"):
        apply_plan(plan, chart_objects)
