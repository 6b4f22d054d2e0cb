"""Pod Security: the effective level of every namespace the example stacks create (their
labels over the API server's default, as the controller's install step configures it), every
pod the program runs there admitted at that level, and representative pods a team user could
submit admitted or refused as intended. Judged by tests/security/pss.py, which follows
k8s.io/pod-security-admission's checks."""

import copy

import pytest

from components.access.queues import TEAM_LABEL
from components.common import pod_security
from preview.stack_file import EXAMPLE_STACKS
from tests.conftest import bare_metal_config, preview
from tests.security import cluster, pss
from validate import manifests as vm

# bash reads the rendered steps.
pytestmark = pytest.mark.tools


@pytest.fixture(scope="module", params=EXAMPLE_STACKS)
def stack(request, tmp_path_factory):
    directory = tmp_path_factory.mktemp("build") / request.param
    plan, settings = cluster.build(request.param, directory)
    objects = cluster.program_objects(plan, directory)
    objects.append(cluster.validate_namespace())
    return request.param, settings, directory, objects


def levels(configuration, objects) -> dict[str, str]:
    """Each namespace's effective enforce level."""
    if configuration is None:
        default, exempt = cluster.KUBERNETES_DEFAULT, frozenset()
    else:
        default = configuration["defaults"]["enforce"]
        exempt = frozenset(configuration["exemptions"]["namespaces"])
    namespaces = {o["metadata"]["name"]: o for o in objects if o["kind"] == "Namespace"}
    names = {*namespaces, *cluster.DISTRIBUTION_NAMESPACES}
    names |= {o["metadata"]["namespace"] for o in objects
              if (o.get("metadata") or {}).get("namespace")}
    return {name: pss.effective_level(namespaces.get(name), name, default, exempt)
            for name in sorted(names)}


def test_the_api_server_defaults_to_restricted_exempting_only_named_system_namespaces(stack):
    name, settings, directory, _ = stack
    configuration = cluster.admission_configuration(directory)
    assert configuration is not None, (
        f"{name}: the controller's API server gets no AdmissionConfiguration: every "
        f"unlabelled namespace is {cluster.KUBERNETES_DEFAULT}")
    version = pod_security.version_of(settings.kubernetes.version)
    assert configuration["defaults"] == {
        "enforce": "restricted", "enforce-version": version, "audit": "restricted",
        "audit-version": version, "warn": "restricted", "warn-version": version}
    assert set(configuration["exemptions"]["namespaces"]) == set(pod_security.SYSTEM_EXEMPTIONS)
    assert configuration["exemptions"]["usernames"] == []
    assert configuration["exemptions"]["runtimeClasses"] == []


def test_every_namespace_has_the_intended_level_and_admits_what_the_program_runs_there(stack):
    name, settings, directory, objects = stack
    found = levels(cluster.admission_configuration(directory), objects)
    teams = {team.name for team in settings.access.teams}
    expected = {ns: "restricted" for ns in found}
    expected.update({ns: "privileged" for ns in pod_security.SYSTEM_EXEMPTIONS if ns in found})
    expected.update({"nfs-provisioner": "baseline", "efs-provisioner": "baseline",
                     "gpu-acceptance": "privileged", "gpu-validate-run1": "privileged"})
    expected = {ns: level for ns, level in expected.items() if ns in found}
    assert found == expected, f"{name}: effective Pod Security levels"
    assert {found[team] for team in teams} <= {"restricted"}
    refused = [f"{o['metadata'].get('namespace')}/{o['kind']}/{pod}: {problems}"
               for o in objects for pod, spec in pss.pod_specs(o)
               if (problems := pss.violations(
                   spec, found.get(o["metadata"].get("namespace", "default"), "restricted")))]
    assert refused == [], f"{name}: pods the program runs that their namespace refuses"


def test_team_namespaces_enforce_audit_and_warn_restricted_at_the_cluster_minor(stack):
    name, settings, _, objects = stack
    version = pod_security.version_of(settings.kubernetes.version)
    assert version.startswith("v1.") and version.count(".") == 1
    for team in settings.access.teams:
        [namespace] = [o for o in objects if o["kind"] == "Namespace"
                       and o["metadata"]["name"] == team.name]
        labels = namespace["metadata"]["labels"]
        assert labels[TEAM_LABEL] == team.name
        for mode in pod_security.MODES:
            assert labels.get(f"pod-security.kubernetes.io/{mode}") == "restricted", (name, mode)
            assert labels.get(f"pod-security.kubernetes.io/{mode}-version") == version


# A team user's pods: (name, pod spec, admitted under restricted, under baseline).
def _container(**security) -> dict:
    return {"name": "main", "image": "busybox:1.37",
            "securityContext": {"allowPrivilegeEscalation": False,
                                "capabilities": {"drop": ["ALL"]}, **security}}


COMPLIANT = {"securityContext": {"runAsNonRoot": True, "runAsUser": 1000,
                                 "seccompProfile": {"type": "RuntimeDefault"}},
             "containers": [_container()]}


def _with(**changes) -> dict:
    spec = copy.deepcopy(COMPLIANT)
    spec.update(changes)
    return spec


GPU_POD = _with(runtimeClassName="nvidia", containers=[{
    **_container(), "resources": {"limits": {"nvidia.com/gpu": 1}}}])
TEAM_PODS = [
    ("restricted-compliant", COMPLIANT, True, True),
    ("gpu", GPU_POD, True, True),
    ("privileged", _with(containers=[_container(privileged=True)]), False, False),
    ("hostPath", _with(volumes=[{"name": "root", "hostPath": {"path": "/"}}]), False, False),
    ("hostNetwork", _with(hostNetwork=True), False, False),
    ("hostPID", _with(hostPID=True), False, False),
    # Baseline admits an inline nfs volume: the team policy refuses it (test_team_pod_policy).
    ("inline-nfs", _with(volumes=[{"name": "export", "nfs": {"server": "192.168.2.1",
                                                            "path": "/srv/nfs"}}]), False, True),
    ("root", _with(securityContext={"seccompProfile": {"type": "RuntimeDefault"}}), False, True),
    ("SYS_ADMIN", _with(containers=[{**_container(), "securityContext": {
        "allowPrivilegeEscalation": False,
        "capabilities": {"drop": ["ALL"], "add": ["SYS_ADMIN"]}}}]), False, False),
    ("no-seccomp", _with(securityContext={"runAsNonRoot": True}), False, True),
]


@pytest.mark.parametrize("pod,spec,restricted,baseline", TEAM_PODS,
                         ids=[p[0] for p in TEAM_PODS])
def test_a_team_user_s_pods_are_admitted_or_refused_as_intended(stack, pod, spec, restricted,
                                                               baseline):
    name, settings, directory, objects = stack
    if not settings.access.teams:
        pytest.skip(f"{name} has no team")
    found = levels(cluster.admission_configuration(directory), objects)
    level = found[settings.access.teams[0].name]
    assert (not pss.violations(spec, level)) == restricted, (
        f"{name}: a team's {pod} pod at level {level}: {pss.violations(spec, level)}")
    assert (not pss.violations(spec, "baseline")) == baseline


def test_the_acceptance_mpijob_runs_in_its_own_namespace_beside_no_team(stack):
    """The acceptance benchmark runs as root on the host network: in gpu-acceptance, which
    the admin applies and which states privileged; a team's restricted namespace refuses
    it, as it refuses the same pod from a team user."""
    name, settings, _, objects = stack
    jobs = [o for o in objects if o["kind"] == "MPIJob"]
    if not jobs:
        pytest.skip(f"{name} renders no acceptance MPIJob")
    found = levels(cluster.admission_configuration(stack[2]), objects)
    for job in jobs:
        namespace = job["metadata"]["namespace"]
        assert namespace not in {team.name for team in settings.access.teams}
        for pod, spec in pss.pod_specs(job):
            assert pss.violations(spec, found[namespace]) == [], pod
        worker = job["spec"]["mpiReplicaSpecs"]["Worker"]["template"]["spec"]
        assert "hostNetwork=true" in pss.violations(worker, "restricted")


VALIDATE_PODS = {
    "cuda-smoke": vm.cuda_smoke("a", "ns", "r", None, 1, 60),
    "dcgm-diag": vm.dcgm_diag("a", "ns", "r", None, 1, 1, 60),
    "nccl-node": vm.nccl_node("a", "ns", "r", None, 1, 60),
    "iperf3-server": vm.iperf3_server("a", "ns", "r", None, 60),
    "rwx": vm.rwx_pod("a", "ns", "r", "me", "peer", "claim", None, 60),
    "fio": vm.fio_pod("a", "ns", "r", "claim", 64, None, 60),
}


@pytest.mark.parametrize("pod", sorted(VALIDATE_PODS))
def test_validate_s_pods_are_admitted_in_validate_s_namespace(pod):
    namespace = cluster.validate_namespace()
    level = pss.effective_level(namespace, namespace["metadata"]["name"], "restricted")
    assert level == "privileged"
    assert pss.violations(VALIDATE_PODS[pod]["spec"], level) == []


def test_validate_s_namespace_needs_privileged_for_its_host_network_and_sys_admin_pods():
    """Why validate's namespace states privileged: baseline would refuse these."""
    assert pss.lowest_level(VALIDATE_PODS["iperf3-server"]["spec"]) == "privileged"
    assert pss.lowest_level(VALIDATE_PODS["dcgm-diag"]["spec"]) == "privileged"
    assert pss.lowest_level(VALIDATE_PODS["rwx"]["spec"]) == "restricted"


def test_a_team_set_to_baseline_is_labelled_so_and_the_preview_warns_naming_the_key():
    values = bare_metal_config(workers=1)
    values["access"] = {"teams": [{"name": "vision"},
                                  {"name": "nlp", "podSecurity": "baseline"}]}
    plan = preview(values)
    namespaces = {r.inputs["metadata"]["name"]: r.inputs["metadata"].get("labels", {})
                  for r in plan.resources if r.type == "kubernetes:core/v1:Namespace"}
    assert namespaces["nlp"]["pod-security.kubernetes.io/enforce"] == "baseline"
    assert namespaces["vision"]["pod-security.kubernetes.io/enforce"] == "restricted"
    warnings = [w for w in plan.warnings if "podSecurity" in w]
    assert len(warnings) == 1 and "access.teams[nlp].podSecurity is baseline" in warnings[0]


def test_a_controller_that_runs_workloads_beside_teams_is_warned_about():
    values = bare_metal_config(workers=1)
    values["hosts"][0]["role"] = "controller+worker"
    values["access"] = {"teams": [{"name": "vision"}]}
    warnings = preview(values).warnings
    assert any("hosts[0] (controller).role is controller+worker" in w for w in warnings), warnings
