"""The shell and Python scripts inside the acceptance workloads pass and fail when they
should (run here with stand-ins for the GPUs and the cluster)."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.acceptance.rendering import mpijob_parts, only, rendered, smoke_jobs_by_node


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


@pytest.mark.parametrize("devices, local_ranks, passes", [
    (4, 4, True), (8, 4, True), (0, 4, False), (3, 4, False)])
def test_each_rank_refuses_to_benchmark_without_its_gpus(tmp_path, devices, local_ranks,
                                                         passes):
    # Stand-ins: a torch module that reports `devices`, and a `python` that runs real Python
    # for -c and records the benchmark's command line otherwise.
    (tmp_path / "torch").mkdir()
    (tmp_path / "torch" / "__init__.py").write_text(
        "import os\n\nclass cuda:\n    @staticmethod\n    def device_count():\n"
        "        return int(os.environ['FAKE_CUDA_DEVICES'])\n")
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    python = bin_dir / "python"
    python.write_text(f'#!/bin/sh\nif [ "$1" = "-c" ]; then exec {sys.executable} "$@"; fi\n'
                      'echo "benchmark: $*"\n')
    python.chmod(0o755)
    _, _, _, launcher_container, _ = mpijob_parts("lab")
    rank_command = launcher_container["args"][-3:]
    assert rank_command[:2] == ["bash", "-c"]
    env = {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}", "PYTHONPATH": str(tmp_path),
           "FAKE_CUDA_DEVICES": str(devices), "OMPI_COMM_WORLD_LOCAL_SIZE": str(local_ranks)}
    result = subprocess.run(rank_command, env=env, capture_output=True, text=True)
    assert (result.returncode == 0) == passes, result.stdout + result.stderr
    ran = "benchmark: /horovod/examples/pytorch/pytorch_synthetic_benchmark.py --model resnet50"
    assert (ran in result.stdout) == passes
    if not passes:
        assert f"sees {devices} CUDA device(s) for {local_ranks} local rank(s)" in result.stderr
