"""Acceptance workloads: what each file checks follows from the stack config, and the scripts
inside them pass and fail when they should."""

import re

import pytest
import yaml

from acceptance import NAMESPACE, dump, render
from config import load, versions
from tests.acceptance.cases import (
    CASES,
    MPI_CASES,
    objects_of_kind,
    untolerated,
)
from tests.acceptance.rendering import HOSTNAME, mpijob_parts, only, rendered, smoke_jobs_by_node
from tests.builders import as_cli_config, bare_metal_config

SMOKE_CASES = [name for name, case in CASES.items() if "gpu-smoke.yaml" in case.files]
DNS_LABEL = re.compile(r"^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$")






def all_taints(case) -> list[dict]:
    return [taint for taints in case.taints.values() for taint in taints]


def gpu_taints(case) -> list[dict]:
    return [taint for host in case.gpu_hosts for taint in case.taints.get(host, [])]


def env_of(container: dict) -> dict[str, str]:
    return {e["name"]: e["value"] for e in container.get("env", []) if "value" in e}


def exported(args: list[str]) -> set[str]:
    return {args[i + 1] for i, arg in enumerate(args) if arg == "-x"}


def contains_run(args: list[str], run: list[str]) -> bool:
    return any(args[i:i + len(run)] == run for i in range(len(args)))


# --- files -----------------------------------------------------------------------------------


@pytest.mark.parametrize("name", CASES)
def test_rendered_files_match_what_the_stack_has(name):
    assert set(rendered(name)) == set(CASES[name].files)


@pytest.mark.parametrize("name", CASES)
def test_every_file_applies_on_its_own_in_the_acceptance_namespace(name):
    for file, objects in rendered(name).items():
        if file.startswith("mpijob-team-"):
            continue  # in the team's own namespace (tests/acceptance/test_team_mpijob.py)
        first, *rest = objects
        assert (first["kind"], first["metadata"]["name"]) == ("Namespace", NAMESPACE), file
        assert rest, f"{file} holds nothing but the Namespace"
        for obj in rest:
            assert obj["kind"] != "Namespace", file
            assert obj["metadata"]["namespace"] == NAMESPACE, (file, obj["metadata"]["name"])


@pytest.mark.parametrize("name", CASES)
def test_files_dump_to_plain_yaml_that_reads_back_the_same(name):
    for file, objects in rendered(name).items():
        text = dump(objects)
        assert list(yaml.safe_load_all(text)) == objects, file
        # Shared dicts would come out as YAML anchors and aliases.
        assert "&id" not in yaml.safe_dump_all(objects), file
        assert "&id" not in text and "*id" not in text, file


def test_scripts_are_readable_literal_blocks_in_the_files():
    text = dump(rendered("lab")["rwx-check.yaml"])
    lines = [line.strip() for line in text.splitlines()]
    assert "set -eu" in lines
    assert 'echo "PASS"' in lines


# --- gpu-smoke.yaml --------------------------------------------------------------------------




@pytest.mark.parametrize("name", SMOKE_CASES)
def test_one_smoke_job_per_gpu_host_asks_for_all_its_gpus(name):
    case = CASES[name]
    by_node = smoke_jobs_by_node(name)
    assert set(by_node) == set(case.gpu_hosts)
    for node, job in by_node.items():
        pod = job["spec"]["template"]["spec"]
        (init,), (main,) = pod["initContainers"], pod["containers"]
        assert init["resources"]["limits"]["nvidia.com/gpu"] == case.gpu_hosts[node]
        assert main["resources"]["limits"]["nvidia.com/gpu"] == case.gpu_hosts[node]
        assert pod["runtimeClassName"] == "nvidia"
        assert init["image"] == versions.CUDA_BASE_IMAGE
        assert "nvidia-smi\n" in init["command"][-1]
        assert main["image"] == versions.CUDA_SAMPLE_IMAGE
        expected = str(case.gpu_hosts[node]) if case.gpu_count_checked else ""
        assert env_of(init)["EXPECTED_GPUS"] == expected


@pytest.mark.parametrize("name", SMOKE_CASES)
def test_smoke_jobs_run_once_within_bounds_without_privileges(name):
    for node, job in smoke_jobs_by_node(name).items():
        spec = job["spec"]
        pod = spec["template"]["spec"]
        assert spec["backoffLimit"] == 0
        assert spec["ttlSecondsAfterFinished"] > 0
        assert 0 < spec["activeDeadlineSeconds"] <= 3600
        assert pod["restartPolicy"] == "Never"
        assert pod["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
        assert "runAsNonRoot" not in pod["securityContext"]
        for container in pod["initContainers"] + pod["containers"]:
            context = container["securityContext"]
            assert context["allowPrivilegeEscalation"] is False, (node, container["name"])
            assert context["capabilities"]["drop"] == ["ALL"], (node, container["name"])
            assert "runAsNonRoot" not in context


@pytest.mark.parametrize("name", SMOKE_CASES)
def test_smoke_jobs_tolerate_exactly_their_own_hosts_taints(name):
    case = CASES[name]
    for node, job in smoke_jobs_by_node(name).items():
        tolerations = job["spec"]["template"]["spec"].get("tolerations", [])
        taints = case.taints.get(node, [])
        assert untolerated(tolerations, taints) == [], node
        assert len(tolerations) == len(taints), node


def test_the_tainted_case_really_has_tainted_gpu_hosts():
    by_node = smoke_jobs_by_node("tainted-gpus")
    assert all(job["spec"]["template"]["spec"]["tolerations"] for job in by_node.values())
    # Another host's taint is not tolerated: the Job stays on its node.
    tolerations = by_node["gpu000"]["spec"]["template"]["spec"]["tolerations"]
    assert untolerated(tolerations, CASES["tainted-gpus"].taints["cpu000"])


def test_long_host_names_give_distinct_valid_job_names():
    values = bare_metal_config(workers=2, gpus=1)
    long_names = ["rack7-" + "g" * 52 + "-0001", "rack7-" + "g" * 52 + "-0002"]
    for host, long_name in zip(values["hosts"][1:], long_names):
        assert len(long_name) == 63
        host["name"] = long_name
    cli = as_cli_config(values)
    files = render(load(cli.config, cli.secret_keys, stack="test"))
    jobs = objects_of_kind(files["gpu-smoke.yaml"], "Job")
    names = [job["metadata"]["name"] for job in jobs]
    assert len(set(names)) == 2
    assert all(DNS_LABEL.match(job_name) for job_name in names), names
    nodes = [job["spec"]["template"]["spec"]["nodeSelector"][HOSTNAME] for job in jobs]
    assert nodes == long_names


# --- rwx-check.yaml --------------------------------------------------------------------------


@pytest.mark.parametrize("name", CASES)
def test_rwx_check_uses_the_default_storage_class(name):
    case = CASES[name]
    objects = rendered(name)["rwx-check.yaml"]
    claim, job = only(objects, "PersistentVolumeClaim"), only(objects, "Job")
    access = "ReadWriteOnce" if case.rwx_mode == "node-local" else "ReadWriteMany"
    assert claim["spec"]["storageClassName"] == case.storage_class
    assert claim["spec"]["accessModes"] == [access]
    assert claim["spec"]["resources"]["requests"]["storage"] == "1Gi"
    pod = job["spec"]["template"]["spec"]
    (volume,) = pod["volumes"]
    assert volume["persistentVolumeClaim"]["claimName"] == claim["metadata"]["name"]
    assert job["metadata"]["annotations"]["gpu-cluster/rwx-check-mode"] == case.rwx_mode
    assert claim["metadata"]["annotations"]["gpu-cluster/rwx-check-mode"] == case.rwx_mode
    # Two pods at once, each must succeed.
    assert (job["spec"]["completionMode"], job["spec"]["completions"],
            job["spec"]["parallelism"], job["spec"]["backoffLimit"]) == ("Indexed", 2, 2, 0)


@pytest.mark.parametrize("name", CASES)
def test_rwx_check_places_its_two_pods_as_the_mode_requires(name):
    case = CASES[name]
    job = only(rendered(name)["rwx-check.yaml"], "Job")
    template = job["spec"]["template"]
    pod = template["spec"]
    cross = case.rwx_mode == "cross-node"
    required, forbidden = ("podAntiAffinity", "podAffinity") if cross else (
        "podAffinity", "podAntiAffinity")
    assert forbidden not in pod["affinity"]
    (term,) = pod["affinity"][required]["requiredDuringSchedulingIgnoredDuringExecution"]
    assert term["topologyKey"] == HOSTNAME
    # The selector picks the check's own pods.
    selector = term["labelSelector"]["matchLabels"]
    assert selector and selector.items() <= template["metadata"]["labels"].items()
    (container,) = pod["containers"]
    assert env_of(container)["REQUIRE_OTHER_NODE"] == ("true" if cross else "false")
    # It may land on any node that runs workloads.
    assert untolerated(pod.get("tolerations", []), all_taints(case)) == []


def test_node_local_default_says_why_it_does_not_check_sharing():
    job = only(rendered("local-path")["rwx-check.yaml"], "Job")
    note = job["metadata"]["annotations"]["gpu-cluster/check"]
    assert "ReadWriteMany is impossible" in note and "ReadWriteOnce" in note


def test_rwx_pods_run_unprivileged_with_a_read_only_root():
    pod = only(rendered("lab")["rwx-check.yaml"], "Job")["spec"]["template"]["spec"]
    assert pod["securityContext"]["runAsNonRoot"] is True
    (container,) = pod["containers"]
    assert container["securityContext"]["readOnlyRootFilesystem"] is True
    assert container["securityContext"]["allowPrivilegeEscalation"] is False


# --- mpijob-benchmark.yaml -------------------------------------------------------------------




@pytest.mark.parametrize("name", MPI_CASES)
def test_mpijob_runs_one_worker_per_gpu_host_with_the_smallest_gpu_count(name):
    case = CASES[name]
    mpijob, launcher, worker, launcher_container, worker_container = mpijob_parts(name)
    workers, slots = len(case.gpu_hosts), min(case.gpu_hosts.values())
    assert mpijob["apiVersion"] == "kubeflow.org/v2beta1"
    assert mpijob["spec"]["slotsPerWorker"] == slots
    assert worker["replicas"] == workers
    assert launcher["replicas"] == 1
    assert worker_container["resources"]["limits"]["nvidia.com/gpu"] == slots
    args = launcher_container["args"]
    assert args[0] == "mpirun"
    assert args[args.index("-np") + 1] == str(workers * slots)
    worker_pod = worker["template"]["spec"]
    assert worker_pod["runtimeClassName"] == "nvidia"
    node_terms = worker_pod["affinity"]["nodeAffinity"][
        "requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]
    (term,) = node_terms
    (expression,) = term["matchExpressions"]
    assert (expression["key"], expression["operator"]) == (HOSTNAME, "In")
    assert sorted(expression["values"]) == sorted(case.gpu_hosts)
    (spread,) = worker_pod["affinity"]["podAntiAffinity"][
        "requiredDuringSchedulingIgnoredDuringExecution"]
    assert spread["topologyKey"] == HOSTNAME
    assert spread["labelSelector"]["matchLabels"].items() <= (
        worker["template"]["metadata"]["labels"].items())
    assert untolerated(worker_pod.get("tolerations", []), gpu_taints(case)) == []


@pytest.mark.parametrize("name", MPI_CASES)
def test_mpijob_launcher_needs_no_gpu_and_may_run_on_any_node(name):
    case = CASES[name]
    _, launcher, _, launcher_container, _ = mpijob_parts(name)
    pod = launcher["template"]["spec"]
    resources = launcher_container["resources"]
    assert "nvidia.com/gpu" not in {**resources.get("limits", {}), **resources.get("requests", {})}
    assert "runtimeClassName" not in pod
    assert untolerated(pod.get("tolerations", []), all_taints(case)) == []


@pytest.mark.parametrize("name", MPI_CASES)
def test_mpirun_runs_nccl_tests_all_reduce_perf_with_the_usual_flags(name):
    mpijob, _, _, launcher_container, worker_container = mpijob_parts(name)
    args = launcher_container["args"]
    # The launcher script runs its arguments: mpirun ... all_reduce_perf ...
    assert launcher_container["command"][:2] == ["bash", "-c"]
    assert args[0] == "mpirun"
    assert args[-9:] == ["/opt/nccl-tests/build/all_reduce_perf",
                         "-b", "8", "-e", "8G", "-f", "2", "-g", "1"]
    for run in (["-bind-to", "none"], ["-map-by", "slot"], ["-mca", "pml", "ob1"],
                ["-mca", "btl", "self,vader,tcp"], ["-mca", "coll_hcoll_enable", "0"],
                ["-mca", "mca_base_param_files", "none"], ["--allow-run-as-root"]):
        assert contains_run(args, run), run
    assert {"LD_LIBRARY_PATH", "PATH"} <= exported(args)
    image = launcher_container["image"]
    assert image == worker_container["image"] == versions.NCCL_TESTS_IMAGE
    run_policy = mpijob["spec"]["runPolicy"]
    assert run_policy["cleanPodPolicy"] == "Running"
    assert run_policy["activeDeadlineSeconds"] > 0 and run_policy["ttlSecondsAfterFinished"] > 0


def test_the_benchmark_image_is_current_nccl_tests():
    # Hopper (sm_90) needs CUDA 11.8 or later; the Horovod 0.28.1 image had CUDA 11.3.
    match = re.fullmatch(r"ghcr\.io/coreweave/nccl-tests:(\d+)\.(\d+)\.\d+-devel-ubuntu\d+\.\d+"
                         r"-nccl(\d+)\.(\d+)\.\d+-\d+-[0-9a-f]{7}(@sha256:[0-9a-f]{64})?",
                         versions.NCCL_TESTS_IMAGE)
    assert match, versions.NCCL_TESTS_IMAGE
    cuda, nccl = (int(match[1]), int(match[2])), (int(match[3]), int(match[4]))
    assert cuda >= (12, 0) and nccl >= (2, 30)
    assert not hasattr(versions, "HOROVOD_IMAGE")


@pytest.mark.parametrize("name", MPI_CASES)
def test_infiniband_workers_get_rdma_devices_ipc_lock_and_a_transport_check(name):
    case = CASES[name]
    mpijob, _, worker, launcher_container, worker_container = mpijob_parts(name)
    limits = worker_container["resources"]["limits"]
    launcher_env, worker_env = env_of(launcher_container), env_of(worker_container)
    note = mpijob["metadata"]["annotations"]["gpu-cluster/check"]
    assert launcher_env["CHECK_NODES"] == str(len(case.gpu_hosts))
    if case.rdma_resource:
        assert limits == {"nvidia.com/gpu": min(case.gpu_hosts.values()), case.rdma_resource: 1}
        assert worker_container["securityContext"] == {"capabilities": {"add": ["IPC_LOCK"]}}
        assert (worker_env["RDMA"], worker_env["RDMA_RESOURCE"]) == ("true", case.rdma_resource)
        assert launcher_env["CHECK_NETWORK"] == "IB"
        assert "InfiniBand" in note and case.rdma_resource in note
    else:
        assert set(limits) == {"nvidia.com/gpu"}
        assert "securityContext" not in worker_container
        assert worker_env["RDMA"] == "false"
        assert launcher_env["CHECK_NETWORK"] == ""
        assert "InfiniBand" not in note and " IB" not in note
    # The RDMA devices come from the device plugin, not from privileges or host paths.
    pod = worker["template"]["spec"]
    assert "privileged" not in str(pod)
    assert all("hostPath" not in volume for volume in pod["volumes"])


@pytest.mark.parametrize("name", MPI_CASES)
def test_nccl_settings_reach_every_rank(name):
    expected = CASES[name].nccl
    _, _, _, launcher_container, worker_container = mpijob_parts(name)

    def nccl(container):
        return {k: v for k, v in env_of(container).items() if k.startswith("NCCL_")}

    assert nccl(worker_container) == expected
    # mpirun -x NAME passes the launcher's value to the ranks (ssh sessions on the workers).
    assert nccl(launcher_container) == expected
    assert {n for n in exported(launcher_container["args"]) if n.startswith("NCCL_")} == (
        set(expected))


@pytest.mark.parametrize("name", MPI_CASES)
def test_workers_sshd_port_is_the_one_mpirun_connects_to(name):
    _, _, worker, launcher_container, worker_container = mpijob_parts(name)
    args = launcher_container["args"]
    rsh_args = args[args.index("plm_rsh_args") + 1]
    port = int(re.search(r"-p (\d+)", rsh_args).group(1))
    assert port != 22  # the host's own sshd has it: workers use the host network
    assert worker["template"]["spec"]["hostNetwork"] is True
    assert '-p "$SSH_PORT" ' in worker_container["command"][-1]
    assert env_of(worker_container)["SSH_PORT"] == str(port)
    assert [p["containerPort"] for p in worker_container["ports"]] == [port]
    assert worker_container["readinessProbe"]["tcpSocket"]["port"] == port
