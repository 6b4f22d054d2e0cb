"""`python -m validate --outputs FILE` as users run it, against a loopback API that requires
the admin's client certificate: a healthy cluster, each kind of failure, could-not-check,
and that every object the run created is gone afterwards."""

import json
import os
import subprocess
import sys
import xml.etree.ElementTree as ET

import pytest

from tests.builders import PROJECT_DIR
from tests.validate import cluster
from tests.validate.apiserver import ApiServer


def run_validate(tmp_path, url, authority, *args: str, acceptance=True):
    outputs = tmp_path / "outputs.json"
    outputs.write_text(json.dumps(cluster.outputs(url, authority)))
    folder = cluster.write_acceptance(tmp_path / "acceptance") if acceptance else tmp_path / "none"
    env = {k: v for k, v in os.environ.items() if not k.startswith("VALIDATE_")}
    done = subprocess.run(
        [sys.executable, "-m", "validate", "--outputs", str(outputs), "--acceptance", str(folder),
         "--json", str(tmp_path / "report.json"), "--junit", str(tmp_path / "junit.xml"), *args],
        cwd=PROJECT_DIR, env=env, capture_output=True, text=True, timeout=180)
    report = (json.loads((tmp_path / "report.json").read_text())
              if (tmp_path / "report.json").exists() else None)
    return done, report


def statuses(report) -> dict:
    return {(v["check"], v["subject"]): v["status"] for v in report["verdicts"]}


def failing(report) -> dict:
    return {key: status for key, status in statuses(report).items() if status != "pass"}


@pytest.fixture
def serve(authority):
    servers = []

    def start(scenario=cluster.healthy, nodes=None):
        server = ApiServer(authority, nodes or cluster.nodes(), scenario)
        servers.append(server.__enter__())
        return server

    yield start
    for server in servers:
        server.__exit__()


def test_healthy_cluster_passes_and_leaves_nothing(serve, authority, tmp_path):
    server = serve()
    done, report = run_validate(tmp_path, server.url, authority)
    assert done.returncode == 0, done.stdout + done.stderr
    assert failing(report) == {}
    assert set(statuses(report)) == {
        ("gpu-allocatable", "gpu000"), ("gpu-allocatable", "gpu001"),
        ("cuda-smoke", "gpu000"), ("cuda-smoke", "gpu001"),
        ("dcgm-diag", "gpu000"), ("dcgm-diag", "gpu001"),
        ("nccl-node", "gpu000"), ("nccl-node", "gpu001"),
        ("link-baseline", "gpu001 -> gpu000"), ("nccl-cluster", "2 GPU nodes"),
        ("storage-rwx", "class nfs, nodes gpu000 and gpu001"), ("storage-fio", "class nfs")}
    by_check = {(v["check"], v["subject"]): v for v in report["verdicts"]}
    # The A100 floor of validate/thresholds.yaml, with its source, judged on the 8 GiB row.
    node_run = by_check[("nccl-node", "gpu000")]
    assert node_run["threshold"]["minBusbwGBps"] == 230
    assert "alayanew" in node_run["threshold"]["source"]
    assert node_run["measured"]["largestBusbwGBps"] == 237.89
    assert node_run["measured"]["largestBytes"] == 8589934592
    # Over sockets: 0.7 x the 9.41 Gbit/s iperf3 measured.
    across = by_check[("nccl-cluster", "2 GPU nodes")]
    assert across["threshold"]["minBusbwGBps"] == pytest.approx(0.7 * 9406319812.1 / 8e9,
                                                                abs=1e-3)
    assert "Test PASSED" in by_check[("cuda-smoke", "gpu000")]["output"]
    # Table on stdout, progress on stderr.
    assert "pass             dcgm-diag" in done.stdout
    assert "12 pass, 0 fail, 0 could-not-check, 0 skipped" in done.stdout
    assert "cleanup: deleting what run" in done.stderr
    # Everything it created carried the run's label and is gone.
    assert server.remaining() == []
    run_labels = {obj["metadata"]["labels"]["gpu-cluster/validate-run"] for obj in server.created}
    assert len(run_labels) == 1
    kinds = sorted({obj["kind"] for obj in server.created})
    assert kinds == ["MPIJob", "Namespace", "PersistentVolumeClaim", "Pod"]
    # The MPIJob is the rendered acceptance one, moved into the run's namespace.
    (mpijob,) = [o for o in server.created if o["kind"] == "MPIJob"]
    assert mpijob["metadata"]["name"] == "nccl-tests"
    assert mpijob["metadata"]["namespace"].startswith("gpu-validate-")
    # GPU pods tolerate the GPU nodes' taint they read from the Node.
    smoke = next(o for o in server.created if o["metadata"]["name"] == "cuda-smoke-gpu000")
    assert smoke["spec"]["tolerations"] == [{"key": "nvidia.com/gpu", "effect": "NoSchedule",
                                            "operator": "Equal", "value": "present"}]
    assert smoke["spec"]["containers"][0]["resources"]["limits"] == {"nvidia.com/gpu": 8}


def _with(component: str, outcome: dict, node_name: str = "gpu001"):
    def scenario(obj):
        labels = obj["metadata"].get("labels") or {}
        selector = (obj["spec"].get("nodeSelector") or {}).get("kubernetes.io/hostname")
        kind_matches = (obj["kind"] == "MPIJob" and component == "MPIJob") or \
            labels.get("app.kubernetes.io/component") == component
        if kind_matches and (selector in (None, node_name)):
            return outcome
        return cluster.healthy(obj)
    return scenario


def read(name: str) -> str:
    return (cluster.DATA / name).read_text()


FAILURES = {
    "gpu count short": (dict(nodes=[cluster.node("controller", 0), cluster.node("gpu000", 8),
                                    cluster.node("gpu001", 7)]), (),
                        {("gpu-allocatable", "gpu001")}),
    "cuda smoke failing": (dict(scenario=_with("cuda-smoke", {
        "phase": "Failed", "exitCode": 1, "log": cluster.VECTOR_ADD_NO_GPU})), (),
        {("cuda-smoke", "gpu001")}),
    "dcgmi failing": (dict(scenario=_with("dcgm-diag", {
        "phase": "Failed", "exitCode": 1, "log": read("dcgmi-diag-r1-fail.txt")})), (),
        {("dcgm-diag", "gpu001")}),
    "nccl under the node floor": (dict(scenario=_with("nccl-node", {
        "phase": "Succeeded", "log": read("constructed-a100-1x8-degraded.log")})), (),
        {("nccl-node", "gpu001")}),
    "nccl under the link baseline": (dict(scenario=_with("iperf3-client", {
        "phase": "Succeeded", "log": read("iperf3-client.json")}, node_name="gpu001")), (),
        {("nccl-cluster", "2 GPU nodes")}),
    "storage not shared": (dict(scenario=_with("storage-rwx", {
        "phase": "Failed", "exitCode": 1, "log": "FAIL: /data/from-a did not appear\n"})), (),
        {("storage-rwx", "class nfs, nodes gpu000 and gpu001")}),
    "storage too slow": (dict(scenario=_with("storage-fio", {
        "phase": "Succeeded", "log": cluster.fio_scaled(0.25)}, node_name="gpu000")),
        ("--fio-min-mib-s", "200"), {("storage-fio", "class nfs")}),
}


@pytest.mark.parametrize("case", FAILURES.values(), ids=FAILURES.keys())
def test_each_kind_of_failure(serve, authority, tmp_path, case):
    served, args, expected = case
    server = serve(**served)
    done, report = run_validate(tmp_path, server.url, authority, *args)
    assert done.returncode == 1, done.stdout + done.stderr
    assert failing(report) == {key: "fail" for key in expected}
    assert report["exitCode"] == 1
    assert server.remaining() == []


def test_failure_details(serve, authority, tmp_path):
    server = serve(scenario=_with("dcgm-diag", {
        "phase": "Failed", "exitCode": 1, "log": read("dcgmi-diag-r1-fail.txt")}))
    done, report = run_validate(tmp_path, server.url, authority, "--skip", "nccl-node",
                                "--skip", "nccl-cluster", "--skip", "storage-fio")
    (diag,) = [v for v in report["verdicts"] if v["status"] == "fail"]
    assert diag["detail"].splitlines()[0] == "Deployment / Page Retirement/Row Remap: Fail"
    assert "GPU 3 had uncorrectable memory errors and row" in diag["detail"]
    # The healthy node's warning is reported, not failed.
    passing = next(v for v in report["verdicts"]
                   if v["check"] == "dcgm-diag" and v["subject"] == "gpu000")
    assert passing["detail"] == "dcgmi diag -r 1: 9 passed, 0 skipped"


def test_a_gpu_failing_where_the_others_pass_is_named(serve, authority, tmp_path):
    server = serve(scenario=_with("dcgm-diag", {
        "phase": "Failed", "exitCode": 1, "log": read("dcgmi-diag-r3-partial.txt")}))
    done, report = run_validate(tmp_path, server.url, authority, "--dcgm-level", "3",
                                *[f"--skip={c}" for c in ("nccl-node", "nccl-cluster",
                                                          "storage-fio")])
    assert done.returncode == 1, done.stdout + done.stderr
    (diag,) = [v for v in report["verdicts"] if v["status"] == "fail"]
    assert diag["subject"] == "gpu001"
    assert diag["detail"].splitlines() == [
        "Hardware / GPU Memory: Fail - GPU: 3",
        "Warning: Found 12 faulty memory elements on GPU 3"]
    assert "    Hardware / GPU Memory: Fail - GPU: 3\n" in done.stdout


def test_a_pod_that_never_runs_is_could_not_check(serve, authority, tmp_path):
    server = serve(scenario=_with("cuda-smoke", {"phase": "Pending",
                                                 "message": "0/3 nodes are available: "
                                                 "3 Insufficient nvidia.com/gpu."}))
    done, report = run_validate(tmp_path, server.url, authority, "--timeout", "1",
                                *[f"--skip={c}" for c in ("dcgm-diag", "nccl-node",
                                                          "nccl-cluster", "storage-rwx",
                                                          "storage-fio")])
    assert done.returncode == 2, done.stdout + done.stderr
    assert failing(report) == {("cuda-smoke", "gpu001"): "could-not-check"}
    (stuck,) = [v for v in report["verdicts"] if v["status"] == "could-not-check"]
    assert "Insufficient nvidia.com/gpu" in stuck["detail"]
    assert server.remaining() == []


def test_without_the_rendered_mpijob_the_cluster_run_is_could_not_check(serve, authority,
                                                                        tmp_path):
    server = serve()
    done, report = run_validate(tmp_path, server.url, authority, acceptance=False)
    assert done.returncode == 2
    assert failing(report) == {("nccl-cluster", "2 GPU nodes"): "could-not-check"}


def test_api_unreachable_is_could_not_check(authority, tmp_path):
    server = ApiServer(authority, cluster.nodes(), cluster.healthy)
    url = server.url
    server.httpd.server_close()  # the port is closed: nothing listens
    server._folder.cleanup()
    done, report = run_validate(tmp_path, url, authority)
    assert done.returncode == 2, done.stdout + done.stderr
    assert "cannot reach https://127.0.0.1:" in done.stderr
    assert "Traceback" not in done.stderr
    # The reports CI reads are written all the same, saying why nothing was checked.
    assert (report["exitCode"], report["server"]) == (2, url)
    assert report["counts"] == {"pass": 0, "fail": 0, "could-not-check": 1, "skipped": 0}
    (verdict,) = report["verdicts"]
    assert (verdict["check"], verdict["subject"], verdict["status"]) == (
        "setup", "cluster", "could-not-check")
    assert verdict["detail"].startswith(f"the cluster's API: cannot reach {url}")
    assert_junit_error(tmp_path / "junit.xml", "validate.setup", "cluster",
                       f"the cluster's API: cannot reach {url}")
    assert "1 could-not-check" in done.stdout


def test_unreadable_outputs_still_write_the_reports(tmp_path):
    missing = tmp_path / "nothing.json"
    env = {k: v for k, v in os.environ.items() if not k.startswith("VALIDATE_")}
    done = subprocess.run(
        [sys.executable, "-m", "validate", "--outputs", str(missing),
         "--json", str(tmp_path / "report.json"), "--junit", str(tmp_path / "junit.xml")],
        cwd=PROJECT_DIR, env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 2
    assert done.stderr == f"error: outputs file '{missing}' does not exist\n"
    report = json.loads((tmp_path / "report.json").read_text())
    assert report["source"] == f"outputs file '{missing}'" and report["exitCode"] == 2
    assert [(v["check"], v["subject"], v["status"]) for v in report["verdicts"]] == [
        ("setup", "stack outputs", "could-not-check")]
    assert_junit_error(tmp_path / "junit.xml", "validate.setup", "stack outputs",
                       f"outputs file '{missing}' does not exist")


def assert_junit_error(path, classname: str, name: str, message: str) -> None:
    """As a JUnit consumer reads it (junitparser): one test case, an <error>, no failure."""
    junitparser = pytest.importorskip("junitparser")
    xml = junitparser.JUnitXml.fromfile(str(path))
    (suite,) = list(xml)
    assert (suite.tests, suite.failures, suite.errors, suite.skipped) == (1, 0, 1, 0)
    (case,) = list(suite)
    assert (case.classname, case.name) == (classname, name)
    (error,) = case.result
    assert isinstance(error, junitparser.Error)
    assert error.type == "could-not-check" and error.message.startswith(message)
    ET.parse(path)


def test_junit_is_read_by_a_junit_consumer(serve, authority, tmp_path):
    server = serve(scenario=_with("cuda-smoke", {
        "phase": "Failed", "exitCode": 1, "log": cluster.VECTOR_ADD_NO_GPU}))
    done, _ = run_validate(tmp_path, server.url, authority, "--timeout", "5")
    assert done.returncode == 1
    junitparser = pytest.importorskip("junitparser")
    xml = junitparser.JUnitXml.fromfile(str(tmp_path / "junit.xml"))
    (suite,) = list(xml)
    assert (suite.tests, suite.failures, suite.errors, suite.skipped) == (12, 1, 0, 0)
    failed = [case for case in suite if case.result and
              isinstance(case.result[0], junitparser.Failure)]
    assert [(c.classname, c.name) for c in failed] == [("validate.cuda-smoke", "gpu001")]
    assert "vectorAdd did not print 'Test PASSED'" in failed[0].result[0].text
    assert "no CUDA-capable device" in failed[0].system_out
    ET.parse(tmp_path / "junit.xml")  # well-formed for any other reader


def test_every_pod_runs_under_restricted_but_those_that_need_the_host(serve, authority,
                                                                       tmp_path):
    """The run's pods as it creates them, each judged at its namespace's Pod Security level
    (tests/security/pss.py, after k8s.io/pod-security-admission): the CUDA sample, NCCL on
    one node and the storage pods in the run's restricted namespace; dcgmi (SYS_ADMIN),
    iperf3 and the fabric MPIJob (host network) in its privileged one."""
    from tests.security import pss

    server = serve()
    done, _ = run_validate(tmp_path, server.url, authority)
    assert done.returncode == 0, done.stdout + done.stderr
    namespaces = {o["metadata"]["name"]: o for o in server.created if o["kind"] == "Namespace"}
    levels = {name: pss.effective_level(ns, name, "restricted")
              for name, ns in namespaces.items()}
    by_level: dict[str, set] = {}
    for obj in server.created:
        for pod, spec in pss.pod_specs(obj):
            level = levels[obj["metadata"]["namespace"]]
            assert pss.violations(spec, level) == [], (pod, level)
            component = obj["metadata"]["labels"]["app.kubernetes.io/component"]
            by_level.setdefault(level, set()).add(component)
    assert sorted(levels.values()) == ["privileged", "restricted"]
    assert by_level == {
        "restricted": {"cuda-smoke", "nccl-node", "storage-rwx", "storage-fio"},
        "privileged": {"dcgm-diag", "iperf3-server", "iperf3-client", "mpi-benchmark"}}
