"""The shell and Python scripts inside the acceptance workloads pass and fail when they
should (run here with stand-ins for the GPUs and the cluster)."""

import os
import re
import resource
import subprocess
from pathlib import Path

import pytest

from acceptance import nccl_results
from tests.acceptance.rendering import mpijob_parts, only, rendered, smoke_jobs_by_node
from tests.builders import require_tool


def rwx_script() -> str:
    (container,) = only(rendered("lab")["rwx-check.yaml"], "Job")["spec"]["template"]["spec"][
        "containers"]
    assert container["command"][:2] == ["sh", "-c"]
    return container["command"][2]


def run_rwx_pods(tmp_path: Path, nodes: list[str], require_other: str, wait: int = 20):
    base = {**os.environ, "DATA_DIR": str(tmp_path), "JOB_UID": "job-uid-1",
            "PEER_WAIT_SECONDS": str(wait), "REQUIRE_OTHER_NODE": require_other}
    pods = [subprocess.Popen(["sh", "-c", rwx_script()], text=True, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE,
                             env={**base, "JOB_COMPLETION_INDEX": str(index), "NODE_NAME": node})
            for index, node in enumerate(nodes)]
    return [(pod.wait(timeout=60), *pod.communicate()) for pod in pods]


def test_rwx_script_passes_when_pods_on_two_nodes_share_the_volume(tmp_path):
    results = run_rwx_pods(tmp_path, ["node-a", "node-b"], require_other="true")
    assert [rc for rc, _, _ in results] == [0, 0], results
    assert "written on node node-b" in results[0][1]
    assert "written on node node-a" in results[1][1]
    assert all("PASS" in out for _, out, _ in results)


@pytest.mark.parametrize("require_other, expected_rc", [("true", 1), ("false", 0)])
def test_rwx_script_on_one_node_fails_only_when_two_nodes_are_required(
        tmp_path, require_other, expected_rc):
    results = run_rwx_pods(tmp_path, ["node-a", "node-a"], require_other=require_other)
    assert [rc for rc, _, _ in results] == [expected_rc] * 2, results
    if expected_rc:
        assert all("both pods ran on node node-a" in err for _, _, err in results)


def test_rwx_script_fails_when_the_other_pod_never_writes(tmp_path):
    # A file left by an earlier run (another Job UID) must not count.
    (tmp_path / "job-uid-0").mkdir()
    (tmp_path / "job-uid-0" / "from-1").write_text("node-b\n")
    ((rc, out, err),) = run_rwx_pods(tmp_path, ["node-a"], require_other="true", wait=1)
    assert rc == 1
    assert "did not appear in 1s" in err
    assert "PASS" not in out


FAKE_NVIDIA_SMI = """#!/bin/sh
if [ "$1" = "--list-gpus" ]; then
  i=0
  while [ "$i" -lt "$FAKE_GPUS" ]; do
    echo "GPU $i: NVIDIA GeForce RTX 3090 (UUID: GPU-$i)"
    i=$((i + 1))
  done
else
  echo "+-- fake nvidia-smi table --+"
fi
exit "$FAKE_RC"
"""


@pytest.mark.parametrize("gpus, expected, smi_rc, passes", [
    (4, "4", 0, True),
    (3, "4", 0, False),  # a GPU went missing
    (2, "", 0, True),  # shared GPUs: the count is not checked
    (4, "4", 9, False),  # nvidia-smi cannot talk to the driver
])
def test_smoke_init_script_checks_nvidia_smi_and_the_gpu_count(tmp_path, gpus, expected,
                                                               smi_rc, passes):
    fake = tmp_path / "nvidia-smi"
    fake.write_text(FAKE_NVIDIA_SMI)
    fake.chmod(0o755)
    job = smoke_jobs_by_node("lab")["moscow"]
    (init,) = job["spec"]["template"]["spec"]["initContainers"]
    env = {**os.environ, "PATH": f"{tmp_path}:{os.environ['PATH']}", "FAKE_GPUS": str(gpus),
           "FAKE_RC": str(smi_rc), "EXPECTED_GPUS": expected}
    result = subprocess.run(init["command"], env=env, capture_output=True, text=True)
    assert (result.returncode == 0) == passes, result.stdout + result.stderr
    if not passes and smi_rc == 0:
        assert f"lists {gpus} GPU(s) but the pod was given {expected}" in result.stderr


# --- the MPIJob's launcher and workers -------------------------------------------------------

DATA = Path(__file__).parent / "data"
# An mpirun that prints a recorded log and exits with FAKE_MPIRUN_RC.
FAKE_MPIRUN = """#!/bin/sh
cat "$FAKE_LOG"
exit "${FAKE_MPIRUN_RC:-0}"
"""


def run_launcher(tmp_path: Path, log: str, network: str, nodes: int, mpirun_rc: int = 0,
                 case: str = "lab"):
    """The rendered launcher container's command and args, with a stand-in mpirun."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    fake = bin_dir / "mpirun"
    fake.write_text(FAKE_MPIRUN)
    fake.chmod(0o755)
    (tmp_path / "recorded.log").write_text(log)
    _, _, _, launcher_container, _ = mpijob_parts(case)
    env = {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}",
           "FAKE_LOG": str(tmp_path / "recorded.log"), "FAKE_MPIRUN_RC": str(mpirun_rc),
           "CHECK_NETWORK": network, "CHECK_NODES": str(nodes),
           # Its log in the test's own folder (in the pod: /tmp).
           "TMPDIR": str(tmp_path)}
    return subprocess.run([*launcher_container["command"], *launcher_container["args"]],
                          env=env, capture_output=True, text=True, timeout=60)


def _drop(pattern: str):
    return lambda text: re.sub(pattern, "", text, flags=re.MULTILINE)


# Ways a run goes wrong, applied to the recorded logs.
MUTATIONS = {
    "as recorded": lambda text: text,
    "no average line": _drop(r"^# Avg bus bandwidth.*\n"),
    "out of bounds": lambda text: text.replace("Out of bounds values : 0 OK",
                                               "Out of bounds values : 2 FAILED"),
    "no connection lines": _drop(r"^.*NCCL INFO Channel .* via NET/.*\n"),
    "one rank on sockets": lambda text: text.replace("NCCL INFO Using network IB",
                                                     "NCCL INFO Using network Socket", 1),
}
LOGS = sorted(path.name for path in DATA.glob("*.log"))


@pytest.mark.parametrize("log_name", LOGS)
@pytest.mark.parametrize("mutation", MUTATIONS)
@pytest.mark.parametrize("network, nodes", [("IB", 2), ("IB", 1), ("", 2)])
def test_launcher_check_and_python_parser_agree_on_recorded_logs(tmp_path, log_name, mutation,
                                                                   network, nodes):
    text = MUTATIONS[mutation]((DATA / log_name).read_text())
    result = run_launcher(tmp_path, text, network, nodes)
    parsed = nccl_results.parse(text)
    problems = nccl_results.problems(parsed, network or None, nodes)
    assert (result.returncode == 0) == (not problems), (problems, result.stderr)
    # The log reaches the pod's output unchanged.
    assert result.stdout.startswith(text)
    if problems:
        assert "FAIL: " in result.stderr and "PASS" not in result.stdout
    else:
        largest = parsed.largest
        assert (f"largest message {largest.size_bytes} B: out-of-place algbw "
                f"{largest.out_of_place.algbw_gbps:.2f} GB/s busbw "
                f"{largest.out_of_place.busbw_gbps:.2f} GB/s") in result.stdout
        assert f"average bus bandwidth {parsed.avg_bus_bandwidth:g} GB/s" in result.stdout
        assert result.stdout.endswith("PASS\n")


def test_launcher_fails_on_the_silent_socket_fallback_only_when_infiniband_is_required(
        tmp_path):
    log = (DATA / "constructed-socket-fallback-2x4.log").read_text()
    required = run_launcher(tmp_path, log, "IB", 2)
    assert required.returncode == 1
    assert "FAIL: NCCL did not use only network IB (saw: Socket)" in required.stderr
    sockets = run_launcher(tmp_path, log, "", 2)
    assert sockets.returncode == 0, sockets.stderr
    assert "NCCL transport: Socket; between nodes: Socket; GPUDirect RDMA: not used" in (
        sockets.stdout)


def test_launcher_reports_ib_with_gpudirect_rdma(tmp_path):
    result = run_launcher(tmp_path, (DATA / "constructed-ib-2x4.log").read_text(), "IB", 2)
    assert result.returncode == 0, result.stderr
    assert "NCCL transport: IB; between nodes: IB; GPUDirect RDMA: used" in result.stdout
    assert ("largest message 8589934592 B: out-of-place algbw 26.28 GB/s busbw 46.00 GB/s, "
            "in-place algbw 26.18 GB/s busbw 45.81 GB/s") in result.stdout
    assert "average bus bandwidth 21.078 GB/s" in result.stdout


def test_launcher_fails_when_mpirun_fails_even_with_a_complete_log(tmp_path):
    # all_reduce_perf exits non-zero on wrong results (nccl-tests src/common.cu, end of main).
    result = run_launcher(tmp_path, (DATA / "constructed-ib-2x4.log").read_text(), "IB", 2,
                          mpirun_rc=3)
    assert result.returncode == 1
    assert "all_reduce_perf exited with status 3" in result.stderr


def worker_script() -> str:
    _, _, _, _, worker_container = mpijob_parts("infiniband")
    command = worker_container["command"]
    assert command[:2] == ["bash", "-c"]
    return command[2]


def run_worker(tmp_path: Path, rdma: str, devices: list[str]):
    """The worker script with its three host paths moved into tmp_path, and stand-ins for
    sshd and ssh-keygen (which would write the host's /etc/ssh)."""
    dev = tmp_path / "dev-infiniband"
    dev.mkdir()
    for name in devices:
        (dev / name).write_text("")
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for name, body in (("sshd", 'echo "sshd $*"'), ("ssh-keygen", "exit 0")):
        (bin_dir / name).write_text(f"#!/bin/sh\n{body}\n")
        (bin_dir / name).chmod(0o755)
    script = worker_script()
    for path, stand_in in (("/dev/infiniband", dev), ("/usr/sbin/sshd", bin_dir / "sshd"),
                           ("/run/sshd", tmp_path / "run-sshd")):
        assert path in script
        script = script.replace(path, str(stand_in))
    env = {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}", "RDMA": rdma,
           "RDMA_RESOURCE": "rdma/rdma_shared_device_a", "NODE_NAME": "gpu000",
           "SSH_PORT": "2222", "POD_IP": "192.168.2.2"}
    soft, hard = resource.getrlimit(resource.RLIMIT_MEMLOCK)
    lowered = 64 * 1024 if hard == resource.RLIM_INFINITY else min(64 * 1024, hard)

    def low_memlock():
        resource.setrlimit(resource.RLIMIT_MEMLOCK, (lowered, hard))

    return subprocess.run(["bash", "-c", script], env=env, capture_output=True, text=True,
                          preexec_fn=low_memlock, timeout=60), hard


def test_infiniband_worker_refuses_to_start_without_rdma_devices(tmp_path):
    result, _ = run_worker(tmp_path, "true", [])
    assert result.returncode == 1
    assert ("FAIL: node gpu000: no /dev/infiniband/uverbs* in the worker; "
            "rdma/rdma_shared_device_a did not provide an RDMA device") in result.stderr.replace(
                str(tmp_path / "dev-infiniband"), "/dev/infiniband")
    assert "sshd" not in result.stdout


@pytest.mark.parametrize("rdma, devices", [("true", ["rdma_cm", "uverbs0", "uverbs1"]),
                                           ("false", [])])
def test_worker_raises_memlock_to_the_hard_limit_and_starts_sshd(tmp_path, rdma, devices):
    result, hard = run_worker(tmp_path, rdma, devices)
    assert result.returncode == 0, result.stderr
    expected = "unlimited" if hard == resource.RLIM_INFINITY else str(hard // 1024)
    assert f"memlock limit (KiB): soft {expected}, hard {expected}" in result.stdout
    assert ("RDMA devices: rdma_cm uverbs0 uverbs1" in result.stdout) == (rdma == "true")
    assert ("sshd -De -p 2222 -o ListenAddress=192.168.2.2 -o StrictModes=no"
            in result.stdout)


def test_launcher_and_worker_scripts_are_shellcheck_clean(tmp_path):
    shellcheck = require_tool("shellcheck")
    _, _, _, launcher_container, _ = mpijob_parts("infiniband")
    for name, script in (("launcher", launcher_container["command"][2]),
                         ("worker", worker_script())):
        path = tmp_path / f"{name}.sh"
        path.write_text(f"#!/bin/bash\n{script}")
        result = subprocess.run([shellcheck, str(path)], capture_output=True, text=True)
        assert result.returncode == 0, (name, result.stdout)
