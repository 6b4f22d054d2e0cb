"""Pod Security: the effective level of every namespace the example stacks create (their
labels over the API server's default, as the controller's install step configures it), every
pod the program runs there admitted at that level, and representative pods a team user could
submit admitted or refused as intended. Judged by tests/security/pss.py, which follows
k8s.io/pod-security-admission's checks."""

import copy
import json

import pytest

from acceptance.common import gpu_hosts
from components.access.queues import TEAM_LABEL
from components.common import pod_security
from preview.stack_file import EXAMPLE_STACKS, read_stack
from tests.builders import PROJECT_DIR, bare_metal_config, preview
from tests.security import cluster, pss
from validate import manifests as vm

# bash reads the rendered steps.
pytestmark = pytest.mark.tools


def _example(stack: str, key: str):
    return json.loads(read_stack(PROJECT_DIR, stack).config.get(f"gpu-cluster:{key}", "null"))


# The example stacks each test applies to, read from their files, so that none skips: teams
# under access.teams; the fabric benchmark where hosts have GPUs and the MPI operator is on
# (acceptance/__init__.py says when each file is written).
TEAM_STACKS = [s for s in EXAMPLE_STACKS if (_example(s, "access") or {}).get("teams")]
GPU_HOST_STACKS = [s for s in EXAMPLE_STACKS
                   if any(host.get("gpus") for host in _example(s, "hosts") or [])
                   and (_example(s, "mpi") or {}).get("operator", True)]


@pytest.fixture(scope="module", params=EXAMPLE_STACKS)
def stack(request, tmp_path_factory):
    directory = tmp_path_factory.mktemp("build") / request.param
    plan, settings = cluster.build(request.param, directory)
    objects = cluster.program_objects(plan, directory)
    objects += cluster.validate_namespaces()
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
                     "gpu-acceptance": "privileged", cluster.VALIDATE_NAMESPACE: "restricted",
                     cluster.VALIDATE_HOST_NAMESPACE: "privileged"})
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


@pytest.mark.parametrize("stack", TEAM_STACKS, indirect=True)
@pytest.mark.parametrize("pod,spec,restricted,baseline", TEAM_PODS,
                         ids=[p[0] for p in TEAM_PODS])
def test_a_team_user_s_pods_are_admitted_or_refused_as_intended(stack, pod, spec, restricted,
                                                               baseline):
    name, settings, directory, objects = stack
    found = levels(cluster.admission_configuration(directory), objects)
    level = found[settings.access.teams[0].name]
    assert (not pss.violations(spec, level)) == restricted, (
        f"{name}: a team's {pod} pod at level {level}: {pss.violations(spec, level)}")
    assert (not pss.violations(spec, "baseline")) == baseline


@pytest.mark.parametrize("stack", GPU_HOST_STACKS, indirect=True)
def test_the_fabric_benchmark_runs_in_its_own_namespace_beside_no_team(stack):
    """The fabric benchmark (the hosts' NICs: host network; IPC_LOCK with InfiniBand) runs
    in gpu-acceptance, which the admin applies and which states privileged; a team's
    restricted namespace refuses it, as it refuses the same pod from a team user."""
    name, settings, _, objects = stack
    jobs = [o for o in objects if o["kind"] == "MPIJob"
            and o["metadata"]["namespace"] == "gpu-acceptance"]
    assert jobs, f"{name} renders no fabric benchmark"
    found = levels(cluster.admission_configuration(stack[2]), objects)
    for job in jobs:
        assert job["metadata"]["namespace"] not in {team.name for team in settings.access.teams}
        for pod, spec in pss.pod_specs(job):
            assert pss.violations(spec, found[job["metadata"]["namespace"]]) == [], pod
        worker = job["spec"]["mpiReplicaSpecs"]["Worker"]["template"]["spec"]
        assert "hostNetwork=true" in pss.violations(worker, "baseline")


def with_operator_additions(job: dict, role: str) -> dict:
    """A replica's pod spec as the MPI operator v0.8.0 creates it: the SSH Secret at
    sshAuthMountPath (pkg/controller/mpi_job_controller.go setupSSHOnPod), the launcher's
    ConfigMap of the hostfile (newLauncherPodTemplate), their env; nothing else."""
    spec = copy.deepcopy(job["spec"]["mpiReplicaSpecs"][role]["template"]["spec"])
    spec.setdefault("volumes", []).append(
        {"name": "ssh-auth", "secret": {"secretName": f"{job['metadata']['name']}-ssh"}})
    main = spec["containers"][0]
    main.setdefault("volumeMounts", []).append(
        {"name": "ssh-auth", "mountPath": job["spec"].get("sshAuthMountPath", "/root/.ssh")})
    if role == "Launcher":
        spec["volumes"].append({"name": "mpi-job-config", "configMap": {
            "name": f"{job['metadata']['name']}-config"}})
        main["env"] = [*main.get("env", []), {"name": "NVIDIA_VISIBLE_DEVICES"},
                       {"name": "OMPI_MCA_orte_default_hostfile", "value": "/etc/mpi/hostfile"}]
    return spec


@pytest.mark.parametrize("stack", sorted(set(TEAM_STACKS) & set(GPU_HOST_STACKS)), indirect=True)
def test_every_team_runs_the_acceptance_mpijob_in_its_own_namespace_under_its_level(stack):
    """A researcher's multi-node GPU job: each team's MPIJob, in the team's namespace, is
    admitted there as the operator creates its pods, and would be under restricted whatever
    the team's level."""
    name, settings, directory, objects = stack
    teams = {team.name for team in settings.access.teams}
    assert teams and settings.mpi.operator and gpu_hosts(settings), name
    found = levels(cluster.admission_configuration(directory), objects)
    jobs = {o["metadata"]["namespace"]: o for o in objects if o["kind"] == "MPIJob"
            and o["metadata"]["namespace"] in teams}
    assert set(jobs) == teams, f"{name}: teams without their acceptance MPIJob"
    for team, job in jobs.items():
        assert found[team] in ("restricted", "baseline"), (name, team)
        for role in ("Launcher", "Worker"):
            spec = with_operator_additions(job, role)
            assert pss.violations(spec, "restricted") == [], (name, team, role)
            assert pss.violations(spec, found[team]) == [], (name, team, role)
        worker = job["spec"]["mpiReplicaSpecs"]["Worker"]["template"]["spec"]
        assert worker["containers"][0]["resources"]["limits"]["nvidia.com/gpu"] == 1
        assert "hostNetwork" not in worker


# validate's pods: name -> (pod, the namespace it runs in).
RESTRICTED_NS, HOST_NS = cluster.VALIDATE_NAMESPACE, cluster.VALIDATE_HOST_NAMESPACE
VALIDATE_PODS = {
    "cuda-smoke": vm.cuda_smoke("a", RESTRICTED_NS, "r", None, 1, 60),
    "nccl-node": vm.nccl_node("a", RESTRICTED_NS, "r", None, 1, 60),
    "rwx": vm.rwx_pod("a", RESTRICTED_NS, "r", "me", "peer", "claim", None, 60),
    "fio": vm.fio_pod("a", RESTRICTED_NS, "r", "claim", 64, None, 60),
    "dcgm-diag": vm.dcgm_diag("a", HOST_NS, "r", None, 1, 1, 60),
    "iperf3-server": vm.iperf3_server("a", HOST_NS, "r", None, 60),
    "iperf3-client": vm.iperf3_client("a", HOST_NS, "r", None, "192.168.2.1", 60),
}


@pytest.mark.parametrize("pod", sorted(VALIDATE_PODS))
def test_validate_s_pods_are_admitted_in_their_namespace(pod):
    namespaces = {n["metadata"]["name"]: n for n in cluster.validate_namespaces()}
    manifest = VALIDATE_PODS[pod]
    ns = manifest["metadata"]["namespace"]
    level = pss.effective_level(namespaces[ns], ns, "restricted")
    assert pss.violations(manifest["spec"], level) == []


def test_only_the_checks_that_need_the_host_leave_restricted():
    """dcgmi's SYS_ADMIN and iperf3's host network: privileged is the only level that
    admits them; every other pod of validate passes restricted."""
    levels_of = {pod: pss.lowest_level(m["spec"]) for pod, m in VALIDATE_PODS.items()}
    assert levels_of == {"cuda-smoke": "restricted", "nccl-node": "restricted",
                         "rwx": "restricted", "fio": "restricted", "dcgm-diag": "privileged",
                         "iperf3-server": "privileged", "iperf3-client": "privileged"}


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
