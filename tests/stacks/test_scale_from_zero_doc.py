"""docs/scale-from-zero.md held to the program: its stack excerpt loads through the config
loader and previews (merged into the cloud builder's config); its MPIJob passes the pinned MPI
operator's CRD schema and its own validation, kubernetes-validate --strict and Pod Security
`restricted` (the team namespace's level), names a LocalQueue of the preview whose ClusterQueue
admits it on the pool's flavor, asks no more GPUs than a pool node has and tolerates the
pool's taints; every object the doc's table names is in the preview, the charts' objects as
the official `helm template` renders them with the plan's values."""

import re
import shlex
import textwrap
from decimal import Decimal

import pytest
import yaml
from jsonschema import Draft7Validator
from jsonschema.validators import validator_for

from components.access.team_policy import CONTROLLER_TAINT_KEYS
from config import versions
from config.instance_types import GPU_INSTANCE_TYPES
from tests.acceptance.test_team_mpijob import operator_validation
from tests.acceptance.test_validation import closed, errors_of, pod_templates
from tests.builders import PROJECT_DIR, cloud_config, shared_preview
from tests.config.loading import loads
from tests.k8s_tools import validate_strict
from tests.rbac import (RBAC_KINDS, Rbac, Request, pinned_mpi_operator_manifest,
                        rendered_efs_csi_chart, stack_rbac_objects)
from tests.security.pss import restricted_violations
from tests.stacks.test_pool_scaling import GROUP, of_pool, rke2_registered_node, template_node
from tests.stacks.test_queues import job_requests, namespaced, quantity, route

DOC = PROJECT_DIR / "docs" / "scale-from-zero.md"
GPU = "nvidia.com/gpu"
FENCE = re.compile(r"^(?P<indent> *)```(?P<lang>\w*)\n(?P<body>.*?)^(?P=indent)```$",
                   re.MULTILINE | re.DOTALL)


def doc_text() -> str:
    return DOC.read_text()


def yaml_blocks(text: str) -> list:
    """Every ```yaml block of the doc, parsed (list items' blocks dedented)."""
    return [yaml.safe_load(textwrap.dedent(m["body"])) for m in FENCE.finditer(text)
            if m["lang"] == "yaml"]


def stack_excerpt(text: str) -> dict:
    [excerpt] = [b for b in yaml_blocks(text) if isinstance(b, dict) and "config" in b]
    return excerpt["config"]


def doc_mpijob(text: str) -> dict:
    [job] = [b for b in yaml_blocks(text) if isinstance(b, dict) and b.get("kind") == "MPIJob"]
    return job


def doc_values(text: str) -> dict:
    """The builder's cloud stack with the excerpt's keys over it, as a stack file sets them."""
    values = cloud_config()
    for key, value in stack_excerpt(text).items():
        assert key.startswith("gpu-cluster:"), key
        values[key.removeprefix("gpu-cluster:")] = value
    return values


def named_objects(text: str) -> list[tuple[str, str | None, str]]:
    """(kind, namespace, name) of each row of the doc's table of objects: `ns/name` or
    `name` in backquotes."""
    rows = re.findall(r"^\| ([A-Za-z]+) \| `([^`]+)` \|", text, re.MULTILINE)
    assert rows, "the doc's table of objects is gone"
    return [(kind, *(name.split("/", 1) if "/" in name else (None, name))) for kind, name in rows]


@pytest.fixture(scope="module")
def text() -> str:
    return doc_text()


@pytest.fixture(scope="module")
def plan(text):
    return shared_preview(doc_values(text))


def test_the_stack_excerpt_loads_as_an_rke2_cloud_stack_with_a_pool_from_zero(text):
    settings = loads(doc_values(text))
    assert (settings.layout, settings.kubernetes.distribution) == ("cloud", "rke2")
    [pool] = settings.pools
    assert (pool.instance_type, pool.min, pool.max, pool.scales) == ("p5.48xlarge", 0, 2, True)
    [team] = settings.access.teams
    assert [flavor.name for flavor in team.quota.flavors] == [pool.name]


def test_the_mpijob_passes_the_pinned_crd_the_operator_kubernetes_and_restricted(text,
                                                                                tmp_path):
    job = doc_mpijob(text)
    [crd] = [o for o in pinned_mpi_operator_manifest()
             if o["kind"] == "CustomResourceDefinition"
             and o["metadata"]["name"] == "mpijobs.kubeflow.org"]
    [version] = [v for v in crd["spec"]["versions"] if v["name"] == "v2beta1"]
    assert (job["apiVersion"], job["kind"]) == (f"{crd['spec']['group']}/v2beta1", "MPIJob")
    schema = closed(version["schema"]["openAPIV3Schema"])
    assert errors_of(validator_for(schema, default=Draft7Validator)(schema), job) == []
    assert operator_validation(job) == []
    templates = pod_templates(job)
    report = validate_strict(templates, tmp_path / "pod-templates.yaml")
    assert report.count(" passed for resource ") == len(templates) == 2, report
    # The team's namespace enforces restricted (components/common/pod_security.py).
    for template in templates:
        assert restricted_violations(template["template"]["spec"]) == [], template["metadata"]
        for container in template["template"]["spec"]["containers"]:
            assert container["image"] == versions.NCCL_TESTS_IMAGE


def tolerates(toleration: dict, taint: dict) -> bool:
    """k8s.io/api core/v1 toleration.go ToleratesTaint: an empty effect matches any, an
    empty key with Exists matches any taint, Exists ignores the value, Equal compares it."""
    if toleration.get("effect") and toleration["effect"] != taint["effect"]:
        return False
    if toleration.get("key", "") and toleration["key"] != taint["key"]:
        return False
    operator = toleration.get("operator", "Equal")
    if operator == "Exists":
        return True
    return operator == "Equal" and toleration.get("value", "") == taint.get("value", "")


def test_the_mpijob_is_admitted_on_the_pool_s_flavor_and_fits_its_nodes(text, plan):
    job = doc_mpijob(text)
    # Its label names the team's LocalQueue, whose ClusterQueue admits its namespace.
    local, cluster = route(plan, job)
    namespace = job["metadata"]["namespace"]
    limit_range = namespaced(plan, "LimitRange")[(namespace, "container-defaults")]
    requests = job_requests(job, limit_range)
    # Kueue's flavor for the GPUs: the first of the GPU group where the job fits (here the
    # team's own quota, nothing borrowed); CPU and memory on their own group.
    groups = cluster["spec"]["resourceGroups"]
    assigned = {}
    for group in groups:
        for flavor in group["flavors"]:
            limits = {r["name"]: quantity(r["nominalQuota"]) for r in flavor["resources"]}
            if all(requests.get(name, Decimal(0)) <= limit for name, limit in limits.items()):
                assigned.update({name: flavor["name"] for name in group["coveredResources"]})
                break
    assert set(assigned) == {r for g in groups for r in g["coveredResources"]}, (
        f"{requests} fits no flavor of ClusterQueue {cluster['metadata']['name']}")
    pool_name = assigned[GPU]
    flavor = {o["metadata"]["name"]: o for o in namespaced(plan, "ResourceFlavor").values()}[
        pool_name]
    # The pods Kueue lets run, the ResourceQuota lets run too.
    hard = namespaced(plan, "ResourceQuota")[(namespace, "team-quota")]["spec"]["hard"]
    for key, resource in (("requests.nvidia.com/gpu", GPU), ("requests.cpu", "cpu"),
                          ("requests.memory", "memory")):
        assert requests.get(resource, Decimal(0)) <= quantity(hard[key]), key
    # A worker fits one node of the pool as cluster-autoscaler sees it before any exists
    # (the group's node template) and as the pinned instance table says.
    cluster_name = doc_values(text)["clusterName"]
    template = template_node(of_pool(plan, GROUP, pool_name, cluster_name))
    node_gpus = int(template["resources"][GPU])
    instance_type = of_pool(plan, "aws:ec2/launchTemplate:LaunchTemplate", pool_name,
                            cluster_name).inputs["instanceType"]
    assert node_gpus == GPU_INSTANCE_TYPES[instance_type][0]
    node = rke2_registered_node(plan, pool_name, cluster_name)
    hard_taints = [t for t in node["taints"] if t["effect"] != "PreferNoSchedule"]
    for role, replica in job["spec"]["mpiReplicaSpecs"].items():
        spec = replica["template"]["spec"]
        pod_gpus = sum(int(c.get("resources", {}).get("limits", {}).get(GPU, 0))
                       for c in spec["containers"])
        assert pod_gpus <= node_gpus, role
        # The worker gets the flavor's node selector and tolerations from Kueue; the
        # launcher (no GPUs) only what it says itself, and must reach the same nodes.
        own = spec.get("tolerations", [])
        given = own + (flavor["spec"].get("tolerations", []) if pod_gpus else [])
        for taint in hard_taints:
            assert any(tolerates(t, taint) for t in given), (role, taint)
        # Nothing the team pod policy refuses (components/access/team_policy.py).
        assert all(t.get("key") and t["key"] not in CONTROLLER_TAINT_KEYS for t in own), role
        if pod_gpus:
            assert all(node["labels"].get(k) == v for k, v in flavor["spec"]["nodeLabels"].items())
        if "runtimeClassName" in spec:
            assert (None, spec["runtimeClassName"]) in namespaced(plan, "RuntimeClassPatch")
    assert job["metadata"]["labels"]["kueue.x-k8s.io/queue-name"] == local["metadata"]["name"]


def _chart_objects(plan) -> dict[str, list[dict]]:
    """Every chart of the plan (by its path) rendered by the official helm with the plan's
    values."""
    return {chart.inputs["chart"]: rendered_efs_csi_chart(
        chart.inputs.get("namespace", "default"), chart.inputs.get("values", {}),
        chart=chart.inputs["chart"], release=chart.inputs.get("name") or chart.name)
        for chart in plan.of_type("kubernetes:helm.sh/v4:Chart")}


@pytest.fixture(scope="module")
def charts(plan) -> dict[str, list[dict]]:
    return _chart_objects(plan)


def test_every_object_the_doc_names_is_in_the_preview(text, plan, charts):
    present = set()
    for record in plan.resources:
        if record.custom and record.type.startswith("kubernetes:") and "metadata" in record.inputs:
            kind = record.type.rsplit(":", 1)[1].removesuffix("Patch")
            meta = record.inputs["metadata"]
            present.add((kind, meta.get("namespace"), meta.get("name")))
    rendered = [o for objects in charts.values() for o in objects]
    for obj in rendered:
        namespaced_kind = obj["kind"] not in ("ClusterRole", "ClusterRoleBinding",
                                              "CustomResourceDefinition")
        present.add((obj["kind"], obj["metadata"].get("namespace") if namespaced_kind else None,
                     obj["metadata"]["name"]))
    missing = [row for row in named_objects(text) if row not in present]
    assert missing == [], missing
    # What the walk says of them, as they are configured.
    [config] = [o for o in namespaced(plan, "ProvisioningRequestConfig").values()]
    classes = set(re.findall(r"`([a-z-]+\.autoscaling\.x-k8s\.io)`", text))
    assert classes == {config["spec"]["provisioningClassName"]}, classes
    [deployment] = [o for o in rendered if o["kind"] == "Deployment"
                    and o["metadata"]["name"] == "cluster-autoscaler"]
    command = deployment["spec"]["template"]["spec"]["containers"][0]["command"]
    unneeded = stack_excerpt(text)["gpu-cluster:autoscaling"]["scaleDownUnneededTime"]
    assert "--enable-provisioning-requests=true" in command
    assert f"--scale-down-unneeded-time={unneeded}" in command
    # The walk's prose says the same time.
    assert re.findall(r"`autoscaling\.scaleDownUnneededTime` \((\w+)\)", text) == [unneeded]


# Kubernetes' own resources the walk's commands name (kubectl's discovery of core/v1): name ->
# (group, plural, namespaced).
CORE = {name: ("", plural, namespaced) for plural, namespaced, names in (
    ("pods", True, ("pod", "pods", "po")), ("nodes", False, ("node", "nodes", "no")),
    ("events", True, ("event", "events", "ev")),
    ("configmaps", True, ("configmap", "configmaps", "cm")),
    ("podtemplates", True, ("podtemplate", "podtemplates")))
    for name in names}
# `kubectl logs TYPE/NAME`: what kubectl reads to find the pods (the object, then its pods
# by selector) before pods/log.
LOG_OWNERS = {"job": ("batch", "jobs"), "deploy": ("apps", "deployments")}


def served_resources(crds: list[dict]) -> dict[str, tuple[str, str, bool]]:
    """Every name kubectl resolves for the CRDs (plural, singular, short names), and core's."""
    names = dict(CORE)
    for crd in crds:
        spec = crd["spec"]
        entry = (spec["group"], spec["names"]["plural"], spec["scope"] == "Namespaced")
        for name in (spec["names"]["plural"], spec["names"].get("singular"),
                     *spec["names"].get("shortNames", [])):
            if name:
                names[name] = entry
    return names


def doc_commands(text: str) -> list[tuple[list[str], bool]]:
    """Each kubectl command of the doc's ```sh blocks (continuations joined, what follows a
    pipe dropped) and whether it is marked `# admin`."""
    commands = []
    for block in FENCE.finditer(text):
        if block["lang"] != "sh":
            continue
        for line in textwrap.dedent(block["body"]).replace("\\\n", " ").splitlines():
            admin = line.rstrip().endswith("# admin")
            words = shlex.split(line.split(" | ")[0], comments=True)
            if words and words[0] == "kubectl":
                commands.append((words[1:], admin))
    return commands


def requests_of(words: list[str], names: dict, job: dict) -> list[Request]:
    """The API requests kubectl makes for the command."""
    namespace, args, watch = "", [], False
    words = list(words)
    while words:
        word = words.pop(0)
        if word == "-n":
            namespace = words.pop(0)
        elif word in ("-l", "-o", "-L", "--field-selector"):
            words.pop(0)
        elif word in ("-w", "--watch"):
            watch = True
        elif word.startswith("-") and word != "-f":
            continue
        else:
            args.append(word)
    verb, *rest = args
    if verb == "create":
        assert rest[0] == "-f", rest
        group, plural = job["apiVersion"].split("/")[0], "mpijobs"
        return [Request("create", group, plural, namespace=job["metadata"]["namespace"])]
    if verb == "logs":
        owner, _, name = rest[-1].partition("/")
        group, plural = LOG_OWNERS[owner]
        return [Request("get", group, plural, name=name, namespace=namespace),
                Request("list", "", "pods", namespace=namespace),
                Request("get", "", "pods", "log", namespace=namespace)]
    assert verb in ("get", "delete"), args
    group, plural, namespaced = names[rest[0]]
    scope = namespace if namespaced else ""
    name = rest[1] if len(rest) > 1 else ""
    if verb == "delete":
        return [Request("delete", group, plural, name=name, namespace=scope)]
    found = [Request("get" if name else "list", group, plural, name=name, namespace=scope)]
    return found + ([Request("watch", group, plural, name=name, namespace=scope)] if watch
                    else [])


def test_the_team_user_may_run_every_command_not_marked_admin(text, plan, charts):
    """Under the stack's RBAC (its own, the MPI operator's and every chart's, aggregated into
    Kubernetes' view/edit/admin), the team's user may make each request of the commands left
    unmarked, and not those marked `# admin`; each resource a command names is served (a
    CRD the stack installs, or core)."""
    crd_file = (PROJECT_DIR / versions.PROVISIONING_REQUEST_CRD).read_text()
    rendered = [o for objects in charts.values() for o in objects]
    crds = [o for o in rendered + pinned_mpi_operator_manifest()
            + list(yaml.safe_load_all(crd_file)) if o and o["kind"] == "CustomResourceDefinition"]
    names = served_resources(crds)
    # stack_rbac_objects reads the EFS CSI driver's and cluster-autoscaler's charts itself.
    read = (versions.EFS_CSI_DRIVER_CHART, versions.CLUSTER_AUTOSCALER_CHART)
    rbac = Rbac.of(stack_rbac_objects(plan) + [
        o for chart, objects in charts.items() if chart not in read
        for o in objects if o["kind"] in RBAC_KINDS])
    [user] = stack_excerpt(text)["gpu-cluster:access"]["users"]
    job = doc_mpijob(text)
    commands = doc_commands(text)
    assert len(commands) > 10
    wrong = []
    for words, admin in commands:
        allowed = all(rbac.allowed(user["name"], request, ["system:authenticated"])
                      for request in requests_of(words, names, job))
        if allowed == admin:
            wrong.append((" ".join(words), "marked admin" if admin else "not marked admin"))
    assert wrong == [], wrong


# The label the MPI operator puts on every pod of an MPIJob (kubeflow/mpi-operator v0.8.0
# pkg/apis/kubeflow/v2beta1/constants.go:42 JobNameLabel, set at mpi_job_controller.go:1387).
JOB_NAME_LABEL = "training.kubeflow.org/job-name"


def test_the_commands_label_selectors_select_what_the_walk_watches(text, plan, charts):
    """`-l` of each command: the pool's nodes as they register, the kube-system pods of a
    workload the stack runs, the MPIJob's pods."""
    job = doc_mpijob(text)
    cluster_name = doc_values(text)["clusterName"]
    pool = stack_excerpt(text)["gpu-cluster:pools"][0]["name"]
    node_labels = rke2_registered_node(plan, pool, cluster_name)["labels"]
    workloads = [r.inputs for r in plan.resources if r.custom and r.type.endswith(
        (":DaemonSet", ":Deployment"))] + [o for objects in charts.values() for o in objects
                                          if o["kind"] in ("DaemonSet", "Deployment")]
    checked = 0
    for words, _ in doc_commands(text):
        if "-l" not in words:
            continue
        key, _, value = words[words.index("-l") + 1].partition("=")
        resource = words[words.index("get") + 1]
        namespace = words[words.index("-n") + 1] if "-n" in words else ""
        if resource == "nodes":
            assert node_labels.get(key) == value, (key, value)
        elif namespace == job["metadata"]["namespace"]:
            assert (key, value) == (JOB_NAME_LABEL, job["metadata"]["name"])
        else:
            assert any(w["metadata"].get("namespace") == namespace and w["spec"]["template"][
                "metadata"]["labels"].get(key) == value for w in workloads), (namespace, key)
        checked += 1
    assert checked >= 5
