"""GPU pods reach tainted GPU nodes through the API server's ExtendedResourceToleration
plugin, which each distribution's rendered config enables beside its own plugins; pods that
request no GPU stay off those nodes. The API server's list is read from what the controller's
install step carries (bash reads the rendered step), the plugin's rule and the scheduler's
taint check are transcribed from Kubernetes:

- kubernetes plugin/pkg/admission/extendedresourcetoleration/admission.go, Admit: for every
  extended resource a container or init container requests (sorted), a toleration with
  key=<resource>, operator Exists, effect NoSchedule;
- pkg/apis/core/helper/helpers.go IsExtendedResourceName: a domain-prefixed name outside
  kubernetes.io/ that does not start with `requests.`;
- staging/src/k8s.io/api/core/v1/toleration.go ToleratesTaint, and the scheduler's
  TaintToleration filter (pkg/scheduler/framework/plugins/tainttoleration/
  taint_toleration.go, Filter): every NoSchedule and NoExecute taint must be tolerated.
"""

import pytest
import yaml

from preview.stack_file import EXAMPLE_STACKS
from tests.security import cluster

# bash reads the rendered steps.
pytestmark = pytest.mark.tools

GPU_RESOURCE = "nvidia.com/gpu"
# admission.go: PluginName.
GPU_TOLERATION_PLUGIN = "ExtendedResourceToleration"


@pytest.fixture(scope="module", params=EXAMPLE_STACKS)
def stack(request, tmp_path_factory):
    directory = tmp_path_factory.mktemp("build") / request.param
    _, settings = cluster.build(request.param, directory)
    return request.param, settings, directory


def k3s_get_args(initial: dict[str, str], extra: list[str]) -> list[str]:
    """k3s pkg/util/args.go GetArgs: an extra `key=value` without a +/- suffix comes after
    the earlier extras of its key and drops the initial value; `key+=` appends to both,
    `key-=` prepends. Flags come out sorted by key, repeats in order."""
    initial, multi = dict(initial), {}
    for unsplit in extra:
        arg, _, value = unsplit.removeprefix("--").partition("=")
        cleaned = arg.rstrip("-+")
        existing = multi.get(cleaned, [])
        start = [initial[cleaned]] if cleaned in initial else []
        if arg.endswith("+"):
            values = [*start, *existing, value]
        elif arg.endswith("-"):
            values = [value, *start, *existing]
        else:
            values = [*existing, value]
        initial.pop(cleaned, None)
        multi[cleaned] = values
    for arg, value in initial.items():
        multi[arg] = [value]
    return [f"--{arg}={value}" for arg in sorted(multi) for value in multi[arg]]


def api_server_plugins(directory) -> set[str]:
    """The admission plugins the controller's kube-apiserver is started with, beyond the
    default ones (kube-apiserver --enable-admission-plugins, a list flag: repeated flags
    append, pflag string_slice.go Set)."""
    [script] = sorted(directory.glob("hosts/*/[0-9]*-install-controller.sh"))
    k0s = cluster.step_variable(script, "K0S_CONFIG")
    if k0s:
        # k0s: spec.api.extraArgs replaces its own flag of the same name (k0s v1.36.3+k0s.2
        # pkg/component/controller/apiserver.go:120 and 140-146).
        flags = {"enable-admission-plugins": "NodeRestriction",
                 **yaml.safe_load(k0s)["spec"]["api"].get("extraArgs", {})}
        return set(flags["enable-admission-plugins"].split(","))
    rke2 = yaml.safe_load(cluster.step_variable(script, "RKE2_CONFIG"))
    # RKE2 puts its default ahead of config.yaml's kube-apiserver-arg (rancher/rke2
    # v1.36.3+rke2r1 pkg/cli/defaults/defaults.go:32-34); k3s's own map holds the same.
    extra = ["enable-admission-plugins=NodeRestriction", *rke2.get("kube-apiserver-arg", [])]
    args = k3s_get_args({"enable-admission-plugins": "NodeRestriction"}, extra)
    return {plugin for flag in args if flag.startswith("--enable-admission-plugins=")
            for plugin in flag.split("=", 1)[1].split(",")}


def is_extended_resource(name: str) -> bool:
    return "/" in name and "kubernetes.io/" not in name and not name.startswith("requests.")


def admitted(pod: dict, plugins: set[str]) -> dict:
    """The pod as the API server stores it: with the plugin on, its tolerations."""
    if GPU_TOLERATION_PLUGIN not in plugins:
        return pod
    spec = pod["spec"]
    resources = sorted({name for container in [*spec.get("initContainers", []),
                                               *spec["containers"]]
                        for name in container.get("resources", {}).get("requests", {})
                        if is_extended_resource(name)})
    tolerations = list(spec.get("tolerations", []))
    for resource in resources:
        tolerations.append({"key": resource, "operator": "Exists", "effect": "NoSchedule"})
    return {**pod, "spec": {**spec, "tolerations": tolerations}}


def tolerates(toleration: dict, taint) -> bool:
    if toleration.get("effect") and toleration["effect"] != taint.effect:
        return False
    operator = toleration.get("operator", "Equal")
    if toleration.get("key", "") != taint.key and not (
            toleration.get("key", "") == "" and operator == "Exists"):
        return False
    return operator == "Exists" or toleration.get("value", "") == taint.value


def schedulable(pod: dict, taints) -> list[str]:
    """The node's taints that keep the pod off it (empty: it may land there)."""
    tolerations = pod["spec"].get("tolerations", [])
    return [f"{t.key}={t.value}:{t.effect}" for t in taints
            if t.effect in ("NoSchedule", "NoExecute")
            and not any(tolerates(tol, t) for tol in tolerations)]


def pod(requests: dict) -> dict:
    container = {"name": "main", "image": "nvcr.io/nvidia/pytorch:25.01-py3",
                 "resources": {"requests": requests, "limits": requests}}
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": "vision"},
            "spec": {"containers": [container]}}


def gpu_nodes(settings):
    return [node for node in [*settings.hosts, *settings.pools] if node.gpus]


def test_the_api_server_runs_the_gpu_toleration_plugin_beside_the_distribution_s_own(stack):
    name, _, directory = stack
    plugins = api_server_plugins(directory)
    assert GPU_TOLERATION_PLUGIN in plugins, (
        f"{name}: kube-apiserver is started with --enable-admission-plugins {sorted(plugins)}")
    # The distribution's default, which a value of ours replaces, is kept.
    assert "NodeRestriction" in plugins, name


def test_a_gpu_pod_lands_on_every_gpu_node_and_a_pod_without_gpus_on_none_tainted(stack):
    name, settings, directory = stack
    plugins = api_server_plugins(directory)
    nodes = gpu_nodes(settings)
    assert nodes, name
    gpu_pod = admitted(pod({"cpu": "4", GPU_RESOURCE: "1"}), plugins)
    cpu_pod = admitted(pod({"cpu": "4"}), plugins)
    for node in nodes:
        assert schedulable(gpu_pod, node.taints) == [], (
            f"{name}: a pod requesting {GPU_RESOURCE} is kept off {node.name} by "
            f"{schedulable(gpu_pod, node.taints)}")
        if node.taints:
            assert schedulable(cpu_pod, node.taints), (
                f"{name}: a pod without a GPU request may land on {node.name}")


def test_the_example_stacks_taint_gpu_nodes_as_the_plugin_tolerates():
    """The README's advice: a GPU node's NoSchedule taint is nvidia.com/gpu, the toleration
    the plugin adds; any other key keeps GPU pods off unless they tolerate it themselves."""
    from config import load
    from preview.stack_file import read_stack
    from tests.builders import PROJECT_DIR

    for name in EXAMPLE_STACKS:
        stack_file = read_stack(PROJECT_DIR, name)
        settings = load(stack_file.config, stack_file.secret_keys, stack=name)
        for node in gpu_nodes(settings):
            for taint in node.taints:
                assert (taint.key, taint.effect) == (GPU_RESOURCE, "NoSchedule"), (
                    name, node.name, taint)


def test_the_plugin_s_rule_reads_init_containers_and_only_extended_resources():
    spec = pod({"cpu": "1", "hugepages-2Mi": "1Gi"})
    spec["spec"]["initContainers"] = [{"name": "init", "image": "busybox:1.37", "resources": {
        "requests": {"example.com/fpga": "1", "requests.nvidia.com/gpu": "1"}}}]
    got = admitted(spec, {GPU_TOLERATION_PLUGIN})["spec"]["tolerations"]
    assert got == [{"key": "example.com/fpga", "operator": "Exists", "effect": "NoSchedule"}]


def test_k3s_get_args_keeps_repeated_flags_in_order():
    assert k3s_get_args({"a": "1", "b": "2"}, ["a=3", "a=4", "b+=5"]) == [
        "--a=3", "--a=4", "--b=2", "--b=5"]


def test_a_gpu_taint_the_plugin_does_not_tolerate_is_warned_about_by_key():
    from tests.builders import bare_metal_config, preview

    values = bare_metal_config(workers=2)
    values["hosts"][1]["taints"] = [{"key": "nvidia.com/gpu", "value": "present",
                                     "effect": "NoSchedule"},
                                    {"key": "dedicated", "value": "ml", "effect": "NoExecute"},
                                    {"key": "soft", "effect": "PreferNoSchedule"}]
    values["hosts"][2]["taints"] = [{"key": "gpu", "effect": "NoSchedule"}]
    warnings = [w for w in preview(values).warnings if "ExtendedResourceToleration" in w]
    assert [w.split(":", 1)[0] for w in warnings] == [
        "hosts[1] (gpu000).taints[1] (dedicated=ml", "hosts[2] (gpu001).taints[0] (gpu"]
