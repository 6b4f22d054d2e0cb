"""The teams' acceptance MPIJob (acceptance/mpi_team.py): one file per team, in the team's
namespace; the pinned MPI operator's CRD schema and its own validation rules; kubernetes-
validate --strict on its pod templates; and its non-root sshd, run by the real OpenSSH as an
unprivileged user with the key files laid out as the operator mounts them, accepting the
launcher's ssh. Pod Security itself: tests/security/test_pod_security.py."""

import os
import re
import shutil
import subprocess

import pytest
import yaml
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec
from jsonschema import Draft7Validator
from jsonschema.validators import validator_for

from acceptance import render
from acceptance.mpi_team import MPI_HOME, SSH_PORT, TEAM_JOB_NAME
from config import versions
from tests.acceptance.cases import CASES, as_cli_config, objects_of_kind, settings_of
from tests.acceptance.test_validation import closed, errors_of, pod_templates
from tests.builders import PROJECT_DIR, bare_metal_config
from tests.k8s_tools import validate_strict

LAB_TEAMS = {"vision": "mpijob-team-vision.yaml", "nlp": "mpijob-team-nlp.yaml"}


def team_jobs(values_or_case) -> dict[str, dict]:
    settings = (settings_of(CASES[values_or_case]) if isinstance(values_or_case, str)
                else _settings(values_or_case))
    return {file: job for file, objects in render(settings).items()
            if file.startswith("mpijob-team-") for job in objects_of_kind(objects, "MPIJob")}


def _settings(values: dict):
    from config import load

    cli = as_cli_config(values)
    return load(cli.config, cli.secret_keys, stack="test")


def test_each_team_gets_its_own_file_with_one_mpijob_in_its_namespace():
    files = render(settings_of(CASES["lab"]))
    for team, file in LAB_TEAMS.items():
        objects = files[file]
        assert [o["kind"] for o in objects] == ["MPIJob"], file  # the team's namespace exists
        job = objects[0]
        assert (job["metadata"]["name"], job["metadata"]["namespace"]) == (TEAM_JOB_NAME, team)
        assert job["metadata"]["labels"]["kueue.x-k8s.io/queue-name"] == team
        worker = job["spec"]["mpiReplicaSpecs"]["Worker"]
        assert worker["replicas"] == 2 and job["spec"]["slotsPerWorker"] == 1
        assert worker["template"]["spec"]["containers"][0]["resources"]["limits"][
            "nvidia.com/gpu"] == 1
        assert job["spec"]["sshAuthMountPath"] == f"{MPI_HOME}/.ssh"
        for replica in job["spec"]["mpiReplicaSpecs"].values():
            # Kubeflow's profiles inject Istio's sidecar; the ranks opt out.
            assert replica["template"]["metadata"]["labels"]["sidecar.istio.io/inject"] == "false"


def _with_teams(teams: list[dict], workers: int = 2, **changes) -> dict:
    values = bare_metal_config(workers=workers, gpus=4)
    values["access"] = {"teams": teams}
    values.update(changes)
    return values


@pytest.mark.parametrize("values, expected", [
    # A quota of one GPU: one worker; none: no file for that team.
    (_with_teams([{"name": "a", "quota": {"gpus": 1}}, {"name": "b", "quota": {"gpus": 0}}]),
     {"mpijob-team-a.yaml": 1}),
    (_with_teams([{"name": "a", "quota": {"gpus": 0, "borrowGpus": 0}}]), {}),
    # One GPU node: one worker.
    (_with_teams([{"name": "a"}], workers=1), {"mpijob-team-a.yaml": 1}),
    (_with_teams([{"name": "a"}], mpi={"operator": False}), {}),
    (_with_teams([]), {}),
])
def test_workers_follow_the_gpu_nodes_and_the_team_s_quota(values, expected):
    found = {file: job["spec"]["mpiReplicaSpecs"]["Worker"]["replicas"]
             for file, job in team_jobs(values).items()}
    assert found == expected


@pytest.fixture(scope="module")
def mpijob_crd() -> dict:
    """mpijobs.kubeflow.org from the vendored operator manifest (config/versions.py, checked
    against vendor/SHA256SUMS at every run)."""
    text = (PROJECT_DIR / versions.MPI_OPERATOR_MANIFEST).read_text()
    (crd,) = [o for o in yaml.safe_load_all(text) if o and o["kind"] == "CustomResourceDefinition"
              and o["metadata"]["name"] == "mpijobs.kubeflow.org"]
    return crd


def test_team_mpijobs_satisfy_the_pinned_crd_schema_and_kubernetes_validate(mpijob_crd,
                                                                            tmp_path):
    (version,) = [v for v in mpijob_crd["spec"]["versions"] if v["name"] == "v2beta1"]
    schema = closed(version["schema"]["openAPIV3Schema"])
    validator = validator_for(schema, default=Draft7Validator)(schema)
    jobs = {**team_jobs("lab"), **team_jobs("prod")}
    assert len(jobs) == 3
    templates = []
    for file, job in jobs.items():
        assert errors_of(validator, job) == [], file
        templates += pod_templates(job)
    report = validate_strict(templates, tmp_path / "team-pod-templates.yaml")
    assert report.count(" passed for resource ") == len(templates) == 6, report


def operator_validation(job: dict) -> list[str]:
    """kubeflow/mpi-operator v0.8.0 pkg/apis/kubeflow/validation/validation.go ValidateMPIJob
    after v2beta1/default.go SetDefaults_MPIJob, the rules the operator's webhook-less
    controller applies before it creates anything (no Go toolchain here: a line-by-line port)."""
    spec, errors = job["spec"], []
    replicas = spec["mpiReplicaSpecs"]
    launcher, worker = replicas.get("Launcher"), replicas.get("Worker")
    # validation.go:55-68: the last worker's hostname must be a DNS-1035 label.
    count = (worker or {}).get("replicas") or 1
    hostname = f"{job['metadata']['name']}-worker-{count - 1}"
    if len(hostname) > 63 or not re.fullmatch(r"[a-z]([-a-z0-9]*[a-z0-9])?", hostname):
        errors.append(f"metadata.name: invalid DNS label {hostname!r}")
    # :70-85, defaults from default.go:60-74.
    if spec.get("slotsPerWorker", 1) < 0:
        errors.append("spec.slotsPerWorker: must be non-negative")
    if not spec.get("sshAuthMountPath", "/root/.ssh"):
        errors.append("spec.sshAuthMountPath: required")
    if spec.get("mpiImplementation", "OpenMPI") not in ("OpenMPI", "Intel", "MPICH"):
        errors.append("spec.mpiImplementation: not supported")
    # :87-110
    policy = spec.get("runPolicy") or {}
    if policy.get("cleanPodPolicy", "None") not in ("None", "Running", "All"):
        errors.append("spec.runPolicy.cleanPodPolicy: not supported")
    for key in ("ttlSecondsAfterFinished", "activeDeadlineSeconds", "backoffLimit"):
        if policy.get(key, 0) < 0:
            errors.append(f"spec.runPolicy.{key}: must be non-negative")
    # :123-160, with default.go:26-49's restart policies and replicas.
    if launcher is None:
        errors.append("spec.mpiReplicaSpecs[Launcher]: required")
    for role, replica, default in (("Launcher", launcher, 1), ("Worker", worker, 0)):
        if replica is None:
            continue
        if replica.get("restartPolicy", "OnFailure" if role == "Launcher" else "Never") not in (
                "Never", "OnFailure"):
            errors.append(f"spec.mpiReplicaSpecs[{role}].restartPolicy: not supported")
        if not replica["template"]["spec"].get("containers"):
            errors.append(f"spec.mpiReplicaSpecs[{role}].template.spec.containers: required")
        count = replica.get("replicas", default)
        if role == "Launcher" and count != 1:
            errors.append("spec.mpiReplicaSpecs[Launcher].replicas: must be 1")
        if role == "Worker" and count <= 0:
            errors.append("spec.mpiReplicaSpecs[Worker].replicas: must be >= 1")
    return errors


def test_team_mpijobs_pass_the_operator_s_own_validation():
    jobs = {**team_jobs("lab"), **team_jobs("prod")}
    assert jobs and {file: operator_validation(job) for file, job in jobs.items()} == {
        file: [] for file in jobs}
    # The port refuses what the operator refuses.
    broken = next(iter(jobs.values()))
    broken = {**broken, "spec": {**broken["spec"], "mpiReplicaSpecs": {
        **broken["spec"]["mpiReplicaSpecs"],
        "Launcher": {**broken["spec"]["mpiReplicaSpecs"]["Launcher"], "replicas": 2}}}}
    assert operator_validation(broken) == ["spec.mpiReplicaSpecs[Launcher].replicas: must be 1"]


# --- the non-root sshd, for real -------------------------------------------------------------

HARNESS = r"""
set -eu
mount --make-rprivate /
# The user's home as the pod sees it: the operator's Secret at ~/.ssh, root-owned, 0644.
mount --bind "$FAKE_HOME" "$USER_HOME"
mount -t tmpfs tmpfs /tmp
ip link set lo up
as_user() {
  setpriv --reuid="$USER_UID" --regid="$USER_GID" --clear-groups --inh-caps=-all \
    env -i PATH=/usr/sbin:/usr/bin:/bin HOME="$USER_HOME" "$@"
}
as_user MPI_HOME="$USER_HOME" SSH_PORT="$SSH_PORT" POD_IP=127.0.0.1 NODE_NAME=loopback \
  bash -c "$WORKER_SCRIPT" >/tmp/worker.log 2>&1 &
worker=$!
for _ in $(seq 100); do
  if (: >"/dev/tcp/127.0.0.1/$SSH_PORT") 2>/dev/null; then break; fi
  kill -0 "$worker" 2>/dev/null || break
  sleep 0.1
done
# OpenMPI splits plm_rsh_args on spaces too; the command runs on the far side.
# shellcheck disable=SC2086,SC2016
as_user ssh -o BatchMode=yes $RSH_ARGS 127.0.0.1 'echo "rank host as uid $(id -u)"' \
  || { echo "ssh failed; the worker's log:"; cat /tmp/worker.log; exit 1; }
cat /tmp/worker.log
"""


def _sshd_skip() -> str:
    if os.geteuid() != 0:
        return "needs root to make namespaces and run sshd as another user"
    missing = [t for t in ("unshare", "setpriv", "ip", "ssh", "mount") if not shutil.which(t)]
    if missing or not os.path.exists("/usr/sbin/sshd"):
        return f"{', '.join(missing) or 'sshd'} not installed"
    return ""


@pytest.mark.skipif(bool(_sshd_skip()), reason=_sshd_skip() or "ok")
def test_the_worker_s_non_root_sshd_accepts_the_launcher_s_ssh(tmp_path):
    from tests.hosts import loopback

    job = team_jobs("lab")["mpijob-team-vision.yaml"]
    replicas = job["spec"]["mpiReplicaSpecs"]
    worker_script = replicas["Worker"]["template"]["spec"]["containers"][0]["command"][2]
    args = replicas["Launcher"]["template"]["spec"]["containers"][0]["args"]
    rsh_args = args[args.index("plm_rsh_args") + 1]
    with loopback._locked():
        home = loopback._ensure_user()
    uid, gid = (int(x) for x in subprocess.run(
        ["getent", "passwd", loopback.USER], capture_output=True, text=True,
        check=True).stdout.split(":")[2:4])
    # The operator's Secret: an ECDSA P-521 key in PEM as "id_rsa", its public key as
    # id_rsa.pub and authorized_keys (mpi_job_controller.go:142-155, :1417-1448), 0644.
    key = ec.generate_private_key(ec.SECP521R1())
    fake_home = tmp_path / "home"
    ssh_dir = fake_home / ".ssh"
    ssh_dir.mkdir(parents=True)
    public = key.public_key().public_bytes(serialization.Encoding.OpenSSH,
                                           serialization.PublicFormat.OpenSSH) + b"\n"
    files = {"id_rsa": key.private_bytes(serialization.Encoding.PEM,
                                         serialization.PrivateFormat.TraditionalOpenSSL,
                                         serialization.NoEncryption()),
             "id_rsa.pub": public, "authorized_keys": public}
    for name, data in files.items():
        (ssh_dir / name).write_bytes(data)
        (ssh_dir / name).chmod(0o644)
    for folder in (fake_home, ssh_dir):
        folder.chmod(0o755)
    env = {"FAKE_HOME": str(fake_home), "USER_HOME": str(home), "USER_UID": str(uid),
           "USER_GID": str(gid), "SSH_PORT": str(SSH_PORT), "WORKER_SCRIPT": worker_script,
           "RSH_ARGS": rsh_args, "PATH": os.environ["PATH"]}
    done = subprocess.run(["unshare", "--mount", "--net", "--pid", "--fork", "--kill-child",
                           "bash", "-c", HARNESS], env=env, capture_output=True, text=True,
                          timeout=60)
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"rank host as uid {uid}" in done.stdout
    assert f"sshd as {loopback.USER} (uid {uid}) on 127.0.0.1:{SSH_PORT}" in done.stdout


def test_the_team_worker_script_and_the_test_harness_are_shellcheck_clean(tmp_path):
    from tests.builders import require_tool

    shellcheck = require_tool("shellcheck")
    job = team_jobs("lab")["mpijob-team-vision.yaml"]
    worker = job["spec"]["mpiReplicaSpecs"]["Worker"]["template"]["spec"]["containers"][0]
    for name, script in (("worker", worker["command"][2]), ("harness", HARNESS)):
        path = tmp_path / f"{name}.sh"
        path.write_text(f"#!/bin/bash\n{script}")
        result = subprocess.run([shellcheck, str(path)], capture_output=True, text=True)
        assert result.returncode == 0, (name, result.stdout)


@pytest.mark.parametrize("log_name, passes", [
    ("constructed-socket-fallback-2x4.log", True),  # every rank and link on sockets
    ("constructed-ib-2x4.log", False),  # NCCL took another network
])
def test_the_team_launcher_passes_only_when_nccl_used_sockets_between_nodes(tmp_path, log_name,
                                                                            passes):
    """The rendered launcher, its own environment (CHECK_NETWORK, CHECK_NODES) and a stand-in
    mpirun printing a recorded log (tests/acceptance/data)."""
    from tests.acceptance.test_scripts import DATA, FAKE_MPIRUN

    job = team_jobs("lab")["mpijob-team-vision.yaml"]
    launcher = job["spec"]["mpiReplicaSpecs"]["Launcher"]["template"]["spec"]["containers"][0]
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "mpirun").write_text(FAKE_MPIRUN)
    (bin_dir / "mpirun").chmod(0o755)
    env = {**os.environ, **{e["name"]: e["value"] for e in launcher["env"]},
           "PATH": f"{bin_dir}:{os.environ['PATH']}", "FAKE_LOG": str(DATA / log_name),
           "TMPDIR": str(tmp_path)}
    done = subprocess.run([*launcher["command"], *launcher["args"]], env=env,
                          capture_output=True, text=True, timeout=60)
    assert (done.returncode == 0) == passes, done.stdout + done.stderr
    assert ("PASS" in done.stdout.splitlines()) == passes
    if not passes:
        assert "NCCL did not use only network Socket" in done.stderr
